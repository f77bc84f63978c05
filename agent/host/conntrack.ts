/**
 * Connections per programmed Service, from `conntrack -L`, matched on their original
 * destination (address, protocol, port): for LongLived Services the entries marked
 * `[OFFLOAD]` (offloaded now), for ShortLived Services every entry (what their timeout keeps
 * small).
 */
import type { Runner } from '../../lib/exec.ts';
import { addressKey, parseAddress } from '../state/address.ts';
import { offloads, type DesiredState, type ServiceEntry } from '../state/desired.ts';

export interface Destination {
  readonly proto: string;
  readonly addr: string;
  readonly port: number;
  readonly offloaded: boolean;
}

/** The original-direction destination of every TCP and UDP entry (pure). */
export function conntrackDestinations(conntrackOutput: string): Destination[] {
  const out: Destination[] = [];
  for (const line of conntrackOutput.split('\n')) {
    const proto = /^\s*(?:ipv[46]\s+\d+\s+)?(tcp|udp)\b/.exec(line)?.[1];
    const dst = /\bdst=(\S+)/.exec(line)?.[1];
    const dport = /\bdport=(\d+)/.exec(line)?.[1];
    if (!proto || !dst || !dport) continue;
    const a = parseAddress(dst);
    if (a) out.push({ proto, addr: addressKey(a), port: Number(dport), offloaded: line.includes('[OFFLOAD]') });
  }
  return out;
}

/** Service key -> matching entries, for the Services `include` selects (0 included). */
function count(
  state: DesiredState,
  dests: readonly Destination[],
  include: (e: ServiceEntry) => boolean,
  match: (d: Destination) => boolean,
): Map<string, number> {
  const counts = new Map<string, number>();
  const index = new Map<string, string>();
  for (const e of state.services.values()) {
    if (!include(e)) continue;
    counts.set(e.key, 0);
    for (const v of e.vips) for (const p of e.ports) index.set(`${addressKey(v)}|${p.proto}|${p.port}`, e.key);
    for (const n of state.nodeAddresses)
      for (const p of e.nodePorts) index.set(`${addressKey(n)}|${p.proto}|${p.port}`, e.key);
  }
  for (const d of dests) {
    if (!match(d)) continue;
    const key = index.get(`${d.addr}|${d.proto}|${d.port}`);
    if (key !== undefined) counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** LongLived Service key -> offloaded connections now. */
export function countByService(state: DesiredState, dests: readonly Destination[]): Map<string, number> {
  return count(state, dests, offloads, (d) => d.offloaded);
}

/** ShortLived Service key -> conntrack entries now. */
export function entriesByService(state: DesiredState, dests: readonly Destination[]): Map<string, number> {
  return count(
    state,
    dests,
    (e) => e.timeout !== undefined,
    () => true,
  );
}

export async function readConntrack(run: Runner): Promise<Destination[] | undefined> {
  const r = await run(['conntrack', '-L'], { timeoutMs: 10_000 });
  if (r.code !== 0) return undefined;
  return conntrackDestinations(r.stdout);
}
