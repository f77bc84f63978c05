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

/** Which Services a counter counts and which of their entries (pure). */
interface CounterKind {
  /** The Services counted (0 included). */
  readonly include: (e: ServiceEntry) => boolean;
  /** The entries counted. */
  readonly match: (d: Destination) => boolean;
}

/** Offloaded connections of LongLived Services. */
const OFFLOADED: CounterKind = { include: offloads, match: (d) => d.offloaded };
/** Conntrack entries of ShortLived Services. */
const ENTRIES: CounterKind = { include: (e) => e.timeout !== undefined, match: () => true };

/** A state's "address|proto|port" -> Service key, and the keys counted, for one kind. */
interface ServiceIndex {
  readonly keys: readonly string[];
  readonly byDestination: ReadonlyMap<string, string>;
}

/**
 * The indexes of each programmed state, built once per state rather than once per poll:
 * states are persistent and never change (state/desired.ts), and at 10,000 Services the
 * index is 40,000 entries. Held weakly, so a replaced state's go with it.
 */
const indexes = new WeakMap<DesiredState, Map<CounterKind, ServiceIndex>>();

function serviceIndex(state: DesiredState, kind: CounterKind): ServiceIndex {
  let perKind = indexes.get(state);
  if (!perKind) indexes.set(state, (perKind = new Map<CounterKind, ServiceIndex>()));
  let index = perKind.get(kind);
  if (index) return index;
  const keys: string[] = [];
  const byDestination = new Map<string, string>();
  for (const e of state.services.values()) {
    if (!kind.include(e)) continue;
    keys.push(e.key);
    for (const v of e.vips) for (const p of e.ports) byDestination.set(`${addressKey(v)}|${p.proto}|${p.port}`, e.key);
    for (const n of state.nodeAddresses)
      for (const p of e.nodePorts) byDestination.set(`${addressKey(n)}|${p.proto}|${p.port}`, e.key);
  }
  index = { keys, byDestination };
  perKind.set(kind, index);
  return index;
}

/** Counting entries into Services, by original destination: fresh counts over a state's index. */
export class ServiceCounter {
  readonly counts = new Map<string, number>();
  private readonly index: ServiceIndex;
  private readonly match: (d: Destination) => boolean;

  constructor(state: DesiredState, kind: CounterKind) {
    this.index = serviceIndex(state, kind);
    this.match = kind.match;
    for (const k of this.index.keys) this.counts.set(k, 0);
  }

  get empty(): boolean {
    return this.counts.size === 0;
  }

  add(d: Destination): void {
    if (!this.match(d)) return;
    const key = this.index.byDestination.get(`${d.addr}|${d.proto}|${d.port}`);
    if (key !== undefined) this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
}

/** Offloaded connections of LongLived Services. */
export const offloadedCounter = (state: DesiredState) => new ServiceCounter(state, OFFLOADED);
/** Conntrack entries of ShortLived Services. */
export const entriesCounter = (state: DesiredState) => new ServiceCounter(state, ENTRIES);

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
