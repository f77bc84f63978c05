/**
 * Conntrack accounting (`net.netfilter.nf_conntrack_acct`), which `ct packets` thresholds
 * need. The agent never has to write it, so it needs no writable `/proc/sys` (container
 * runtimes mount it read-only, and runc refuses any mount inside `/proc`): loading a rule
 * that uses `ct packets` turns accounting on in the kernel by itself (nft_ct does so for its
 * packets and bytes keys; checked in a fresh namespace, 0 before the rule, 1 after).
 *
 * - Before its first ruleset the agent records the value it found, in the state directory
 *   (`conntrack-acct-found`), once: a restart must not take the kernel's 1 for the node's.
 *   `/run/flowhint` is a tmpfs on the node, so the record lives exactly as long as the
 *   sysctl does (until the node reboots).
 * - After a sync that programmed LongLived ports it reads the value. Still 0 (a kernel that
 *   does not turn it on) and it tries `sysctl -w` once; where that fails it says so in
 *   status and metrics and keeps programming.
 * - Cleanup puts the value found back (`flowhint cleanup`, `--cleanup-on-exit`), and says so.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Runner } from '../../lib/exec.ts';

export const ACCT = 'net.netfilter.nf_conntrack_acct';
/** The file in the state directory that holds the value found before the first ruleset. */
export const ACCT_FOUND_FILE = 'conntrack-acct-found';

export interface AcctResult {
  enabled: boolean;
  /** What the agent saw or did, or why it could not. */
  detail: string;
}

/** The sysctl's value (0 or 1), or the reason it cannot be read. */
export async function readAcct(run: Runner): Promise<{ value: number } | { error: string }> {
  const r = await run(['sysctl', '-n', ACCT]);
  const text = r.stdout.trim();
  if (r.code !== 0 || (text !== '0' && text !== '1'))
    return { error: `cannot read ${ACCT}: ${r.stderr.trim() || `exit ${r.code}`} (is nf_conntrack loaded?)` };
  return { value: Number(text) };
}

/** The value recorded before flowhint's first ruleset on this node boot, if any. */
export async function foundAcct(dir: string | undefined): Promise<number | undefined> {
  if (!dir) return undefined;
  const text = await readFile(join(dir, ACCT_FOUND_FILE), 'utf8').catch(() => '');
  return text.trim() === '0' || text.trim() === '1' ? Number(text.trim()) : undefined;
}

/** Record `value` as found, unless a value is recorded already (an earlier agent found it). */
export async function recordAcct(dir: string | undefined, value: number): Promise<number> {
  const before = await foundAcct(dir);
  if (before !== undefined || !dir) return before ?? value;
  await writeFile(join(dir, ACCT_FOUND_FILE), `${value}\n`).catch(() => undefined);
  return value;
}

/**
 * Accounting now, for status. `needed`: LongLived ports are programmed (their `ct packets`
 * rules should have turned it on). Writes the sysctl only when it is needed and still 0.
 */
export async function checkAccounting(run: Runner, found: number | undefined, needed: boolean): Promise<AcctResult> {
  const now = await readAcct(run);
  if ('error' in now) return { enabled: false, detail: now.error };
  if (now.value === 1) {
    const why = found === 0 ? " (turned on by the kernel for the ruleset's ct packets rules; was 0)" : '';
    return { enabled: true, detail: `${ACCT} is 1${why}` };
  }
  if (!needed) return { enabled: false, detail: `${ACCT} is 0; no LongLived port needs it yet` };
  const write = await run(['sysctl', '-w', `${ACCT}=1`]);
  if (write.code === 0) return { enabled: true, detail: `set ${ACCT}=1 (the kernel left it 0)` };
  return {
    enabled: false,
    detail: `${ACCT} is 0 and could not be set (${write.stderr.trim() || `exit ${write.code}`}); offload-after-packets thresholds never pass, so nothing is offloaded: set it on the node (sysctl -w ${ACCT}=1)`,
  };
}

/**
 * Cleanup: put back the value found before flowhint's first ruleset, and forget it. Returns
 * one line for the operator (what was done, or what to do by hand).
 */
export async function restoreAccounting(run: Runner, dir: string | undefined): Promise<string> {
  const found = await foundAcct(dir);
  if (found === undefined || !dir) return `${ACCT}: no value recorded before flowhint; left as it is`;
  const now = await readAcct(run);
  let line: string;
  if ('error' in now) line = now.error;
  else if (now.value === found) line = `${ACCT} is ${found}, as flowhint found it`;
  else {
    const write = await run(['sysctl', '-w', `${ACCT}=${found}`]);
    line =
      write.code === 0
        ? `put ${ACCT} back to ${found}, as flowhint found it`
        : `cannot put ${ACCT} back to ${found} (${write.stderr.trim() || `exit ${write.code}`}); set it on the node: sysctl -w ${ACCT}=${found}`;
    if (write.code !== 0) return line;
  }
  await rm(join(dir, ACCT_FOUND_FILE), { force: true });
  return line;
}
