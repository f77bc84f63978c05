/**
 * A persistent (immutable) map: `with(updates)` returns a new version in O(updates) that
 * shares everything else with the old one, so desired states stay plain data while a
 * change to one Service among 10,000 costs as much as the change.
 *
 * A version is a frozen base Map plus an overlay of changes (a value, or REMOVED). Reads
 * look in the overlay first. When the overlay grows past an eighth of the base, or versions
 * pile up, it is flattened into a new base: O(n), but amortised over many updates.
 */
const REMOVED: unique symbol = Symbol('removed');
type Slot<V> = V | typeof REMOVED;

export class PMap<K, V> implements ReadonlyMap<K, V> {
  private readonly base: ReadonlyMap<K, V>;
  private readonly over: ReadonlyMap<K, Slot<V>>;
  private readonly depth: number;
  readonly size: number;

  private constructor(base: ReadonlyMap<K, V>, over: ReadonlyMap<K, Slot<V>>, size: number, depth: number) {
    this.base = base;
    this.over = over;
    this.size = size;
    this.depth = depth;
  }

  static of<K, V>(entries: Iterable<readonly [K, V]> = []): PMap<K, V> {
    const base = new Map(entries);
    return new PMap<K, V>(base, new Map(), base.size, 0);
  }

  get(key: K): V | undefined {
    if (!this.over.has(key)) return this.base.get(key);
    const o = this.over.get(key);
    return o === REMOVED ? undefined : o;
  }

  has(key: K): boolean {
    if (this.over.has(key)) return this.over.get(key) !== REMOVED;
    return this.base.has(key);
  }

  /** A new version with these keys set, or removed where the value is `undefined`. */
  with(updates: Iterable<readonly [K, V | undefined]>): PMap<K, V> {
    const over = new Map<K, Slot<V>>(this.over);
    let size = this.size;
    for (const [k, v] of updates) {
      const had = this.hasIn(over, k);
      if (v === undefined) {
        if (!had) continue;
        over.set(k, REMOVED);
        size -= 1;
      } else {
        if (!had) size += 1;
        over.set(k, v);
      }
    }
    if (over.size > 64 && (over.size > this.base.size / 8 || this.depth > 32)) {
      const flat = new Map<K, V>();
      for (const [k, v] of this.base) if (!over.has(k)) flat.set(k, v);
      for (const [k, v] of over) if (v !== REMOVED) flat.set(k, v);
      return new PMap<K, V>(flat, new Map(), flat.size, 0);
    }
    return new PMap(this.base, over, size, this.depth + 1);
  }

  private hasIn(over: ReadonlyMap<K, Slot<V>>, k: K): boolean {
    if (over.has(k)) return over.get(k) !== REMOVED;
    return this.base.has(k);
  }

  *entries(): MapIterator<[K, V]> {
    for (const [k, v] of this.base) if (!this.over.has(k)) yield [k, v];
    for (const [k, v] of this.over) if (v !== REMOVED) yield [k, v];
  }

  *keys(): MapIterator<K> {
    for (const [k] of this.entries()) yield k;
  }

  *values(): MapIterator<V> {
    for (const [, v] of this.entries()) yield v;
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }

  forEach(fn: (value: V, key: K, map: ReadonlyMap<K, V>) => void): void {
    for (const [k, v] of this.entries()) fn(v, k, this);
  }
}

/**
 * Batched edits of a PMap of sets: the set at `key`, copied from `base` on first use, to be
 * edited in place and written back with one `base.with(pending)`.
 */
export function pendingSet<K, T>(pending: Map<K, Set<T>>, base: ReadonlyMap<K, ReadonlySet<T>>, key: K): Set<T> {
  let s = pending.get(key);
  if (!s) {
    s = new Set(base.get(key) ?? []);
    pending.set(key, s);
  }
  return s;
}

/**
 * Move one reference from chain `from` to chain `to` in a batch of edits over `base` (chain
 * name -> spec with a reference count): a chain whose count drops to 0 is removed (`undefined`),
 * one that gains its first reference is made by `make`.
 */
export function moveRef<C extends { readonly refs: number }>(
  edits: Map<string, C | undefined>,
  base: ReadonlyMap<string, C>,
  from: string | undefined,
  to: string | undefined,
  make: () => C,
): void {
  const get = (name: string) => (edits.has(name) ? edits.get(name) : base.get(name));
  if (from !== undefined) {
    const c = get(from);
    if (c === undefined) throw new Error(`moveRef: no chain ${from} to move a reference from`);
    edits.set(from, c.refs <= 1 ? undefined : { ...c, refs: c.refs - 1 });
  }
  if (to !== undefined) {
    const c = get(to);
    edits.set(to, c ? { ...c, refs: c.refs + 1 } : make());
  }
}

/** One side of `diffRefs`: element key -> chain name, and the chains by name. */
export interface RefView<C> {
  readonly of: ReadonlyMap<string, string>;
  readonly chains: ReadonlyMap<string, C>;
}

/**
 * What changes between two versions of elements pointing at reference-counted chains, on the
 * element `keys` that may have changed (pure): the elements to remove and to add, and the
 * chains the elements seen there make appear or go. Sorted, so transactions are stable.
 */
export function diffRefs<C>(
  prev: RefView<C>,
  next: RefView<C>,
  keys: Iterable<string>,
): {
  addChains: Array<{ name: string; spec: C }>;
  removeKeys: string[];
  addKeys: Array<{ key: string; chain: string }>;
  removeChains: string[];
} {
  const removeKeys: string[] = [];
  const addKeys: Array<{ key: string; chain: string }> = [];
  const seen = new Set<string>();
  for (const key of [...new Set(keys)].sort()) {
    const a = prev.of.get(key);
    const b = next.of.get(key);
    if (a) seen.add(a);
    if (b) seen.add(b);
    if (a === b) continue;
    if (a) removeKeys.push(key);
    if (b) addKeys.push({ key, chain: b });
  }
  const addChains: Array<{ name: string; spec: C }> = [];
  const removeChains: string[] = [];
  for (const name of [...seen].sort()) {
    const before = prev.chains.has(name);
    const after = next.chains.get(name);
    if (!before && after) addChains.push({ name, spec: after });
    if (before && !after) removeChains.push(name);
  }
  return { addChains, removeKeys, addKeys, removeChains };
}
