/**
 * What a table does for each Service address, read from a table model by following its
 * verdict maps to chains, and what it should do, written out here from a test's inputs, in
 * nft's own words, without render.ts. Tests compare the two, so the agent is not graded
 * against its own state or its own renderer.
 */
import type { TableModel } from '../../agent/nft/table-model.ts';

const byPort = (a: string, b: string) => {
  const [pa, na] = a.split(' ').slice(1);
  const [pb, nb] = b.split(' ').slice(1);
  return pa!.localeCompare(pb!) || Number(na) - Number(nb);
};

/**
 * address -> the rules its established connections meet (vips4/vips6 -> chain), then the
 * ports whose new connections get the mark bit (long4/long6 elements `addr . proto . port`),
 * as `marked <proto> <port>`.
 */
export function offloads(model: TableModel | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const map of ['vips4', 'vips6']) {
    for (const [addr, chain] of model?.maps.get(map)?.elements ?? [])
      out[addr] = [...(model?.chains.get(chain)?.rules ?? ['(missing chain)'])];
  }
  const marks: Record<string, string[]> = {};
  for (const set of ['long4', 'long6']) {
    for (const key of model?.sets.get(set)?.elements.keys() ?? []) {
      const [addr, proto, port] = key.split(' . ');
      (marks[addr!] ??= []).push(`marked ${proto} ${port}`);
    }
  }
  for (const [addr, m] of Object.entries(marks)) out[addr] = [...(out[addr] ?? ['(no chain)']), ...m.sort(byPort)];
  return out;
}

export interface PortSpec {
  proto?: 'tcp' | 'udp';
  port: number;
  threshold?: number;
}

/** The rule a LongLived port needs, as `nft list` prints it (docs/architecture.md, "The ruleset"). */
export function offloadRule(addr: string, p: PortSpec, flowtable = true): string {
  const v6 = addr.includes(':');
  const head = `meta l4proto ${p.proto ?? 'tcp'} ct original proto-dst ${p.port} ct packets > ${p.threshold ?? 20}`;
  const count = `update @seen${v6 ? 6 : 4} { ct original ${v6 ? 'ip6' : 'ip'} daddr }`;
  // Offloaded only where the route back to the sender leaves the interface it came in on.
  return flowtable ? `${head} fib saddr . iif oif exists ${count} flow add @fastpath` : `${head} ${count}`;
}

/** The expected view: each address with its ports' rules. */
export function expectOffloads(
  services: ReadonlyArray<{ addrs: readonly string[]; ports: readonly PortSpec[] }>,
  flowtable = true,
): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const s of services) {
    const marks = s.ports.map((p) => `marked ${p.proto ?? 'tcp'} ${p.port}`).sort(byPort);
    for (const a of s.addrs) out[a] = [...s.ports.map((p) => offloadRule(a, p, flowtable)), ...marks];
  }
  return out;
}

/** A view as one comparable string, addresses sorted. */
export function viewText(view: Record<string, string[]>): string {
  return Object.keys(view)
    .sort()
    .map((a) => `${a}: ${view[a]!.join('; ')}`)
    .join('\n');
}
