/**
 * Drift: whether the table read back (`nft -j list table inet flowhint`) has exactly the
 * objects the desired state needs. A full sync repairs the table either way; this decides
 * whether it counts as a drift repair (flowhint_agent_drift_repairs_total).
 */
import type { DesiredState } from './desired.ts';
import type { ReadTable } from './nft.ts';
import { BASE_CHAIN, FLOWTABLE, MAP, SEEN, SHORT_BASES, SHORT_MAP } from './render.ts';

/** Whether the table read back has exactly the objects the desired state needs. */
export function matches(current: ReadTable | undefined, target: DesiredState, flowtable: boolean, ctTimeout = false): boolean {
  if (!current) return false;
  const chains = new Set<string>([BASE_CHAIN, ...SHORT_BASES, ...target.chains.keys(), ...target.shortChains.keys()]);
  const sameSet = (a: ReadonlySet<string>, b: ReadonlySet<string>) => a.size === b.size && [...a].every((x) => b.has(x));
  if (!sameSet(current.chains, chains) || current.counters.size > 0) return false;
  if (!current.sets.has(SEEN.ip) || !current.sets.has(SEEN.ip6)) return false;
  if ((current.ruleCounts.get(BASE_CHAIN) ?? 0) !== 2) return false;
  for (const c of SHORT_BASES) if ((current.ruleCounts.get(c) ?? 0) !== 2) return false;
  for (const name of target.shortChains.keys()) if ((current.ruleCounts.get(name) ?? 0) !== (ctTimeout ? 1 : 0)) return false;
  const short = [...target.shortOf.keys()];
  const short4 = short.filter((k) => k.startsWith('ip ')).length;
  if ((current.elementCounts.get(SHORT_MAP.ip) ?? 0) !== short4 || (current.elementCounts.get(SHORT_MAP.ip6) ?? 0) !== short.length - short4) return false;
  if ((current.ctTimeouts?.size ?? 0) !== (ctTimeout ? target.shortChains.size : 0)) return false;
  for (const [name, spec] of target.chains) if ((current.ruleCounts.get(name) ?? 0) !== spec.rules.length) return false;
  const keys = [...target.chainOf.keys()];
  const v4 = keys.filter((k) => k.startsWith('ip ')).length;
  if ((current.elementCounts.get(MAP.ip) ?? 0) !== v4 || (current.elementCounts.get(MAP.ip6) ?? 0) !== keys.length - v4) return false;
  return current.flowtables.has(FLOWTABLE) === flowtable;
}
