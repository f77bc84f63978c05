/**
 * Connections per programmed Service, from conntrack, matched on their original destination
 * (address, protocol, port): for LongLived Services the entries marked `[OFFLOAD]`
 * (offloaded now), for ShortLived Services every entry (what their timeout keeps small).
 *
 * The agent's cost must not grow with the node's conntrack table, which on a busy node holds
 * hundreds of thousands of entries that are not flowhint's (a full 262,144-entry table
 * prints 28 MB). So it reads only its own connections, filtered in the kernel: every hinted
 * connection carries flowhint's mark bit from its first packet (ShortLived ones the
 * ShortLived bit besides; nft/render.ts), and one dump per poll asks for that bit
 * (`conntrack -L --mark BIT/BIT`). The kernel still walks its whole table for a dump (about
 * 50-90 ms of system time at 262,144 entries here, bench/agent-conntrack.ts), so there is
 * one dump, not one per hint. Output is read as a stream of lines and counted as it comes;
 * only the counts are kept (O(Services), never O(connections)).
 */
import type { Runner } from '../../lib/exec.ts';
import { addressKey, parseAddress } from '../state/address.ts';
import { offloads, type DesiredState, type ServiceEntry } from '../state/desired.ts';
import { DEFAULT_CT_MARK, DEFAULT_SHORT_MARK } from '../nft/names.ts';

export interface Destination {
  readonly proto: string;
  readonly addr: string;
  readonly port: number;
  readonly offloaded: boolean;
}

/** The conntrack mark bits the ruleset sets (`--ct-mark-bit`, `--short-lived-mark-bit`). */
export interface MarkBits {
  readonly long: number;
  readonly short: number;
}

export const DEFAULT_MARKS: MarkBits = { long: DEFAULT_CT_MARK, short: DEFAULT_SHORT_MARK };

const PROTO = /^\s*(?:ipv[46]\s+\d+\s+)?(tcp|udp)\b/;
const DST = /\bdst=(\S+)/;
const DPORT = /\bdport=(\d+)/;

/** The original-direction destination of one `conntrack -L` line, if it is TCP or UDP (pure). */
export function conntrackLine(line: string): Destination | undefined {
  const proto = PROTO.exec(line)?.[1];
  if (!proto) return undefined;
  const dst = DST.exec(line)?.[1];
  const dport = DPORT.exec(line)?.[1];
  if (!dst || !dport) return undefined;
  const a = parseAddress(dst);
  return a && { proto, addr: addressKey(a), port: Number(dport), offloaded: line.includes('[OFFLOAD]') };
}

/** The original-direction destination of every TCP and UDP entry (pure). */
export function conntrackDestinations(conntrackOutput: string): Destination[] {
  return conntrackOutput.split('\n').flatMap((line) => conntrackLine(line) ?? []);
}

/** Counting entries into Services, by original destination (pure). */
export class ServiceCounter {
  readonly counts = new Map<string, number>();
  private readonly index = new Map<string, string>();
  private readonly match: (d: Destination) => boolean;

  /** Counts for the Services `include` selects (0 included); `match` picks the entries counted. */
  constructor(state: DesiredState, include: (e: ServiceEntry) => boolean, match: (d: Destination) => boolean) {
    this.match = match;
    for (const e of state.services.values()) {
      if (!include(e)) continue;
      this.counts.set(e.key, 0);
      for (const v of e.vips) for (const p of e.ports) this.index.set(`${addressKey(v)}|${p.proto}|${p.port}`, e.key);
      for (const n of state.nodeAddresses)
        for (const p of e.nodePorts) this.index.set(`${addressKey(n)}|${p.proto}|${p.port}`, e.key);
    }
  }

  get empty(): boolean {
    return this.counts.size === 0;
  }

  add(d: Destination): void {
    if (!this.match(d)) return;
    const key = this.index.get(`${d.addr}|${d.proto}|${d.port}`);
    if (key !== undefined) this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
}

/** Offloaded connections of LongLived Services. */
export const offloadedCounter = (state: DesiredState) => new ServiceCounter(state, offloads, (d) => d.offloaded);
/** Conntrack entries of ShortLived Services. */
export const entriesCounter = (state: DesiredState) =>
  new ServiceCounter(
    state,
    (e) => e.timeout !== undefined,
    () => true,
  );

/** LongLived Service key -> offloaded connections now. */
export function countByService(state: DesiredState, dests: readonly Destination[]): Map<string, number> {
  const c = offloadedCounter(state);
  for (const d of dests) c.add(d);
  return c.counts;
}

/** ShortLived Service key -> conntrack entries now. */
export function entriesByService(state: DesiredState, dests: readonly Destination[]): Map<string, number> {
  const c = entriesCounter(state);
  for (const d of dests) c.add(d);
  return c.counts;
}

/** The dump of one mark bit, filtered in the kernel. */
export function conntrackArgv(bit: number): string[] {
  const hex = `0x${bit.toString(16)}`;
  return ['conntrack', '-L', '--mark', `${hex}/${hex}`];
}

/** One conntrack dump, each line to `onLine`, streamed where the runner can; false if conntrack failed. */
export async function eachLine(
  run: Runner,
  argv: string[],
  onLine: (line: string) => void,
  timeoutMs: number,
): Promise<boolean> {
  if (run.lines) return (await run.lines(argv, onLine, { timeoutMs })).code === 0;
  const r = await run(argv, { timeoutMs });
  for (const line of r.stdout.split('\n')) onLine(line);
  return r.code === 0;
}

/** The one filtered dump into the counters; false if conntrack failed. */
async function dump(run: Runner, bit: number, counters: readonly ServiceCounter[]): Promise<boolean> {
  return eachLine(
    run,
    conntrackArgv(bit),
    (line) => {
      const d = conntrackLine(line);
      if (d) for (const c of counters) c.add(d);
    },
    10_000,
  );
}

export interface ConntrackCounts {
  /** LongLived Service key -> offloaded connections now. */
  offloaded: Map<string, number>;
  /** ShortLived Service key -> conntrack entries now. */
  entries: Map<string, number>;
}

/**
 * Both counts for the programmed state, from one kernel-filtered dump of flowhint's mark
 * bit (none when no Service is hinted); undefined if conntrack could not be read.
 */
export async function readConntrackCounts(
  run: Runner,
  state: DesiredState,
  marks: MarkBits = DEFAULT_MARKS,
): Promise<ConntrackCounts | undefined> {
  const offloaded = offloadedCounter(state);
  const entries = entriesCounter(state);
  const used = [offloaded, entries].filter((c) => !c.empty);
  if (used.length > 0 && !(await dump(run, marks.long, used))) return undefined;
  return { offloaded: offloaded.counts, entries: entries.counts };
}
