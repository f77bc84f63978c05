/**
 * Conntrack accounting on this machine's kernel, in scratch namespaces (each starts with
 * nf_conntrack_acct=0): the agent never writes it when its ruleset turns it on, records what
 * it found, and cleanup puts that back; where the sysctl cannot be written (a container's
 * read-only /proc/sys, stood in for by a runner whose `sysctl -w` fails as there) it says so
 * and keeps programming.
 */
import t from 'tap';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { ACCT_FOUND_FILE, checkAccounting, restoreAccounting } from '../../../agent/host/accounting.ts';
import type { Runner } from '../../../lib/exec.ts';
import { setup, yaml } from '../../helpers/netns-agent.ts';

const ACCT = 'net.netfilter.nf_conntrack_acct';

/** The same runner, with every `sysctl -w` failing as on a read-only /proc/sys; the writes tried. */
function readOnlySysctl(run: Runner): { run: Runner; writes: string[][] } {
  const writes: string[][] = [];
  const ro: Runner = async (argv, o) => {
    if (argv[0] === 'sysctl' && argv.includes('-w')) {
      writes.push([...argv]);
      return { code: 255, stdout: '', stderr: `sysctl: setting key "${ACCT}": Read-only file system\n` };
    }
    return run(argv, o);
  };
  return { run: ro, writes };
}

t.test('the LongLived ruleset turns accounting on; the agent records 0 and cleanup puts it back', async (t) => {
  const { ns, dir, state, make } = setup(t);
  t.equal(ns.sh('sysctl', '-n', ACCT).trim(), '0', 'a fresh namespace starts with accounting off');
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  const { agent } = make();
  await agent.prepare();
  t.equal(readFileSync(join(state, ACCT_FOUND_FILE), 'utf8').trim(), '0', 'the value found is recorded');
  t.ok((await agent.sync()).ok);
  t.equal(ns.sh('sysctl', '-n', ACCT).trim(), '1');
  const acct = agent.statusDoc().node.conntrackAccounting;
  t.equal(acct.enabled, true);
  t.match(acct.detail, /turned on by the kernel/);
  await agent.stop();

  // A restart finds 1 (the kernel's) but keeps the record of the node's 0.
  const again = make().agent;
  await again.prepare();
  t.equal(readFileSync(join(state, ACCT_FOUND_FILE), 'utf8').trim(), '0', 'a restart keeps the first record');
  await again.stop({ cleanup: true });
  t.equal(ns.sh('sysctl', '-n', ACCT).trim(), '0', '--cleanup-on-exit put the value found back');
  t.notOk(existsSync(join(state, ACCT_FOUND_FILE)), 'and forgot it');
});

t.test('flowhint cleanup puts the recorded value back and says so', async (t) => {
  const { ns, dir, state, make } = setup(t);
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  const { agent } = make();
  await agent.prepare();
  await agent.sync();
  await agent.stop();
  t.equal(ns.sh('sysctl', '-n', ACCT).trim(), '1');
  const r = spawnSync(process.execPath, ['bin/flowhint.ts', 'cleanup', '--netns', ns.name, '--state-dir', state], {
    encoding: 'utf8',
  });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stderr, /deleted the tables inet, ip and ip6 flowhint/);
  t.match(r.stderr, /put net\.netfilter\.nf_conntrack_acct back to 0, as flowhint found it/);
  t.equal(ns.sh('sysctl', '-n', ACCT).trim(), '0');
});

t.test('a ruleset without thresholds (ShortLived only) leaves accounting off, and nothing is said', async (t) => {
  const { ns, dir, make } = setup(t);
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10').replace('LongLived', 'ShortLived'));
  const { agent } = make();
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  t.equal(ns.sh('sysctl', '-n', ACCT).trim(), '0', 'not needed, not written');
  t.match(agent.statusDoc().node.conntrackAccounting.detail, /no LongLived port needs it yet/);
  await agent.stop();
});

t.test('read-only /proc/sys: the kernel turned it on, so no write is even tried', async (t) => {
  const { ns, dir, make } = setup(t);
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  const { agent } = make();
  await agent.prepare();
  await agent.sync();
  await agent.stop();
  const { run, writes } = readOnlySysctl(ns.run);
  const r = await checkAccounting(run, 0, true);
  t.equal(r.enabled, true);
  t.same(writes, []);
});

t.test('read-only /proc/sys and a kernel that left it 0: said plainly, the command to run given', async (t) => {
  const { ns, state } = setup(t);
  const { run, writes } = readOnlySysctl(ns.run);
  const r = await checkAccounting(run, 0, true);
  t.equal(r.enabled, false);
  t.match(r.detail, /could not be set \(sysctl: setting key .* Read-only file system\)/);
  t.match(r.detail, /sysctl -w net\.netfilter\.nf_conntrack_acct=1/);
  t.equal(writes.length, 1, 'tried once');

  // Cleanup that cannot write says what to do by hand, and keeps the record for a later try.
  ns.sh('sysctl', '-qw', `${ACCT}=1`);
  writeFileSync(join(state, ACCT_FOUND_FILE), '0\n');
  t.match(await restoreAccounting(run, state), /cannot put .* back to 0 .*; set it on the node: sysctl -w .*=0/);
  t.ok(existsSync(join(state, ACCT_FOUND_FILE)));
  t.match(await restoreAccounting(ns.run, state), /put .* back to 0/);
  t.match(await restoreAccounting(ns.run, state), /no value recorded/);
});
