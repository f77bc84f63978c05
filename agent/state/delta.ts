/**
 * What changes between two desired states (pure): chains to create and delete, map and set
 * elements to add and remove, ShortLived's part (short-lived.ts). Given the Services that
 * changed it looks only at their addresses, so the cost of a sync follows the change, not
 * the number of Services.
 */
import { addressKey, keyToAddress, type Address } from './address.ts';
import type { ChainSpec, DesiredState, LongElement, ServiceEntry } from './desired.ts';
import { diffRefs } from './pmap.ts';
import { diffShort, shortElements, type ShortDelta } from './short-lived.ts';

export interface Delta extends ShortDelta {
  /** Chains no address used before: create them first. */
  readonly addChains: Array<{ name: string; spec: ChainSpec }>;
  /** Map elements to delete (the address left, or moves to another chain). */
  readonly removeElements: Address[];
  /** Map elements to add: address -> chain. */
  readonly addElements: Array<{ address: Address; chain: string }>;
  /** Chains no address uses any more: delete them last. */
  readonly removeChains: string[];
  /** LongLived (address, protocol, port) elements that go, and that come (none in both). */
  readonly removeLong: LongElement[];
  readonly addLong: LongElement[];
}

/** The LongLived elements of the addresses `keys` in `state`: each (protocol, port) of its chain's rules. */
export function longOf(state: DesiredState, keys: Iterable<string>): Map<string, LongElement> {
  const out = new Map<string, LongElement>();
  for (const key of keys) {
    const chain = state.chainOf.get(key);
    for (const r of (chain ? state.chains.get(chain)?.rules : undefined) ?? [])
      out.set(`${key}|${r.proto}|${r.port}`, { address: keyToAddress(key), proto: r.proto, port: r.port });
  }
  return out;
}

/** The LongLived elements `after` has and `before` had not (every one without `before`). */
export function addedLong(before: DesiredState | undefined, after: DesiredState): LongElement[] {
  const had = before ? longOf(before, before.chainOf.keys()) : new Map<string, LongElement>();
  return [...longOf(after, after.chainOf.keys())].filter(([k]) => !had.has(k)).map(([, e]) => e);
}

function sameEntry(a: ServiceEntry | undefined, b: ServiceEntry | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * What changes between two states. With `changed` (ids the caller knows may differ) only
 * those Services' addresses are compared; without it every address is.
 */
export function diff(prev: DesiredState, next: DesiredState, changed?: Iterable<string>): Delta {
  let affected: Set<string>;
  let shortKeys: string[];
  if (changed) {
    affected = new Set<string>();
    shortKeys = [];
    let nodePortsChanged = false;
    for (const id of changed) {
      const a = prev.services.get(id);
      const b = next.services.get(id);
      if (sameEntry(a, b)) continue;
      shortKeys.push(...shortElements(a, prev.nodeAddresses), ...shortElements(b, next.nodeAddresses));
      for (const e of [a, b]) {
        if (!e) continue;
        for (const v of e.vips) affected.add(addressKey(v));
        if (e.nodePorts.length > 0) nodePortsChanged = true;
      }
    }
    const nodeAddressesChanged =
      prev.nodeAddresses.map(addressKey).join(',') !== next.nodeAddresses.map(addressKey).join(',');
    if (nodePortsChanged || nodeAddressesChanged) {
      for (const a of [...prev.nodeAddresses, ...next.nodeAddresses]) affected.add(addressKey(a));
    }
    if (nodeAddressesChanged) {
      for (const e of [...prev.services.values(), ...next.services.values()]) {
        if (e.timeout !== undefined && e.nodePorts.length > 0)
          shortKeys.push(
            ...shortElements({ ...e, vips: [] }, prev.nodeAddresses),
            ...shortElements({ ...e, vips: [] }, next.nodeAddresses),
          );
      }
    }
  } else {
    affected = new Set([...prev.chainOf.keys(), ...next.chainOf.keys()]);
    shortKeys = [...prev.shortOf.keys(), ...next.shortOf.keys()];
  }
  const d = diffRefs({ of: prev.chainOf, chains: prev.chains }, { of: next.chainOf, chains: next.chains }, affected);
  const removeElements = d.removeKeys.map(keyToAddress);
  const addElements = d.addKeys.map(({ key, chain }) => ({ address: keyToAddress(key), chain }));
  const before = longOf(prev, d.removeKeys);
  const after = longOf(
    next,
    d.addKeys.map((a) => a.key),
  );
  const removeLong = [...before].filter(([k]) => !after.has(k)).map(([, e]) => e);
  const addLong = [...after].filter(([k]) => !before.has(k)).map(([, e]) => e);
  return {
    addChains: d.addChains,
    removeElements,
    addElements,
    removeChains: d.removeChains,
    removeLong,
    addLong,
    ...diffShort(prev, next, shortKeys),
  };
}

export function isEmptyDelta(d: Delta): boolean {
  return Object.values(d).every((xs: unknown[]) => xs.length === 0);
}
