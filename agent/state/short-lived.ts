/**
 * The `ShortLived` part of the desired state (pure): which new connections get a shorter
 * conntrack timeout policy, and how many seconds it holds.
 *
 * A ShortLived Service contributes one element per (address, protocol, port): each of its
 * Service addresses with each port, and each node address with each NodePort. An element
 * points at the chain for (family, protocol, seconds), which sets the shared `ct timeout`
 * object of the same key; chains and objects are named by a hash of that key, so a cluster
 * needs one per distinct timeout, not one per Service.
 *
 * What the timeout policy holds (timeout-policy.ts; docs/api.md, "ShortLived"): the node's
 * own timeouts, with only the states in which no side may still send shortened (UDP both,
 * TCP last_ack, time_wait and close), never beyond the node's value.
 *
 * Like the offload chains (desired.ts), everything is updated for the elements a change
 * touches only, so a sync costs O(change).
 */
import { addressKey, keyToAddress, shortHash, type Address, type Proto } from './address.ts';
import { PMap, diffRefs, moveRef, pendingSet } from './pmap.ts';

export interface ShortChain {
  readonly family: Address['family'];
  readonly proto: Proto;
  readonly seconds: number;
  /** How many elements jump to this chain. */
  readonly refs: number;
}

/** What of a ServiceEntry this needs (desired.ts's ServiceEntry has these fields). */
export interface ShortSource {
  readonly key: string;
  readonly vips: readonly Address[];
  readonly ports: readonly { proto: Proto; port: number }[];
  readonly nodePorts: readonly { proto: Proto; port: number }[];
  /** Present only for ShortLived entries. */
  readonly timeout?: number | undefined;
}

export interface ShortState {
  /** element key (`family addr|proto|port`) -> ids of the ShortLived Services that target it. */
  readonly shortBy: PMap<string, ReadonlySet<string>>;
  /** element key -> its chain. Derived. */
  readonly shortOf: PMap<string, string>;
  /** chain name -> its key and reference count. Derived. */
  readonly shortChains: PMap<string, ShortChain>;
}

export function emptyShort(): ShortState {
  return { shortBy: PMap.of(), shortOf: PMap.of(), shortChains: PMap.of() };
}

export function elementKey(a: Address, proto: Proto, port: number): string {
  return `${addressKey(a)}|${proto}|${port}`;
}

export function parseElementKey(key: string): { address: Address; proto: Proto; port: number } {
  const [addr, proto, port] = key.split('|') as [string, Proto, string];
  return { address: keyToAddress(addr), proto, port: Number(port) };
}

/** The elements a ShortLived entry targets with these node addresses (none for other hints). */
export function shortElements(e: ShortSource | undefined, nodeAddresses: readonly Address[]): string[] {
  if (!e || e.timeout === undefined) return [];
  const out: string[] = [];
  for (const v of e.vips) for (const p of e.ports) out.push(elementKey(v, p.proto, p.port));
  for (const n of nodeAddresses) for (const p of e.nodePorts) out.push(elementKey(n, p.proto, p.port));
  return out;
}

/** `s4_`/`s6_` + a hash of (family, protocol, seconds); its ct timeout object: timeout-policy.ts. */
export function shortChainName(family: Address['family'], proto: Proto, seconds: number): string {
  return `s${family === 'ip' ? '4' : '6'}_${shortHash(`${family}|${proto}|${seconds}`)}`;
}

/**
 * Re-derive shortOf/shortChains for the touched element keys. Several Services on one
 * element (possible only in manifests the API server would refuse) get the shortest timeout.
 */
export function relinkShort(
  st: ShortState,
  byUpdates: ReadonlyMap<string, ReadonlySet<string> | undefined>,
  timeoutOf: (id: string) => number | undefined,
): ShortState {
  const shortBy = st.shortBy.with(byUpdates);
  const of = new Map<string, string | undefined>();
  const chains = new Map<string, ShortChain | undefined>();
  for (const key of byUpdates.keys()) {
    const old = st.shortOf.get(key);
    const { address, proto } = parseElementKey(key);
    const seconds = Math.min(...[...(shortBy.get(key) ?? [])].map((id) => timeoutOf(id) ?? Infinity));
    const name = Number.isFinite(seconds) ? shortChainName(address.family, proto, seconds) : undefined;
    if (old === name) continue;
    moveRef(chains, st.shortChains, old, name, () => ({ family: address.family, proto, seconds, refs: 1 }));
    of.set(key, name);
  }
  return { shortBy, shortOf: st.shortOf.with(of), shortChains: st.shortChains.with(chains) };
}

/** shortBy updates for moving `id` from the `before` elements to the `after` elements. */
export function moveElements(
  st: ShortState,
  pending: Map<string, Set<string>>,
  id: string,
  before: readonly string[],
  after: readonly string[],
): void {
  for (const k of before) pendingSet(pending, st.shortBy, k).delete(id);
  for (const k of after) pendingSet(pending, st.shortBy, k).add(id);
}

export function asUpdates(pending: Map<string, Set<string>>): Map<string, ReadonlySet<string> | undefined> {
  return new Map([...pending].map(([k, s]) => [k, s.size === 0 ? undefined : s] as const));
}

export interface ShortDelta {
  readonly addShortChains: Array<{ name: string; spec: ShortChain }>;
  readonly removeShortElements: string[];
  readonly addShortElements: Array<{ key: string; chain: string }>;
  readonly removeShortChains: string[];
}

/** What changes between two ShortStates on these element keys. */
export function diffShort(prev: ShortState, next: ShortState, keys: Iterable<string>): ShortDelta {
  const d = diffRefs(
    { of: prev.shortOf, chains: prev.shortChains },
    { of: next.shortOf, chains: next.shortChains },
    keys,
  );
  return {
    addShortChains: d.addChains,
    removeShortElements: d.removeKeys,
    addShortElements: d.addKeys,
    removeShortChains: d.removeChains,
  };
}
