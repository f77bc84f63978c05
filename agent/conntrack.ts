/**
 * How many connections of each programmed Service are offloaded now: `conntrack -L` lines
 * marked `[OFFLOAD]`, matched on their original destination (address, protocol, port).
 */
import type { Runner } from '../lib/exec.ts';
import { addressKey, parseAddress } from './address.ts';
import type { DesiredState } from './desired.ts';

export interface Destination {
  readonly proto: string;
  readonly addr: string;
  readonly port: number;
}

/** The original-direction destination of each offloaded entry (pure). */
export function offloadedDestinations(conntrackOutput: string): Destination[] {
  const out: Destination[] = [];
  for (const line of conntrackOutput.split('\n')) {
    if (!line.includes('[OFFLOAD]')) continue;
    const proto = /^\s*(?:ipv[46]\s+\d+\s+)?(tcp|udp)\b/.exec(line)?.[1];
    const dst = /\bdst=(\S+)/.exec(line)?.[1];
    const dport = /\bdport=(\d+)/.exec(line)?.[1];
    if (!proto || !dst || !dport) continue;
    const a = parseAddress(dst);
    if (a) out.push({ proto, addr: addressKey(a), port: Number(dport) });
  }
  return out;
}

/** Service key -> offloaded connections, for every programmed Service (0 included). */
export function countByService(state: DesiredState, dests: readonly Destination[]): Map<string, number> {
  const counts = new Map<string, number>();
  const index = new Map<string, string>();
  for (const e of state.services.values()) {
    counts.set(e.key, 0);
    for (const v of e.vips) for (const p of e.ports) index.set(`${addressKey(v)}|${p.proto}|${p.port}`, e.key);
    for (const n of state.nodeAddresses) for (const p of e.nodePorts) index.set(`${addressKey(n)}|${p.proto}|${p.port}`, e.key);
  }
  for (const d of dests) {
    const key = index.get(`${d.addr}|${d.proto}|${d.port}`);
    if (key !== undefined) counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

export async function readOffloaded(run: Runner): Promise<Destination[] | undefined> {
  const r = await run(['conntrack', '-L'], { timeoutMs: 10_000 });
  if (r.code !== 0) return undefined;
  return offloadedDestinations(r.stdout);
}
