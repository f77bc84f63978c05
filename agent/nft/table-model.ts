/**
 * The tables as data (pure): what `inet`, `ip` and `ip6 flowhint` hold, in one model that
 * two things produce and one comparison reads. Names are unique across the three tables (an
 * object's family is in its name: transaction.ts familyOfName), so one map per kind holds
 * them all; `tables` says which of the three exist.
 *
 * - `nft -j list table <family> flowhint`, for each (agent/nft/nft.ts parses the listings into it);
 * - `applyTransaction`, which applies a transaction (agent/nft/transaction.ts) with the nft
 *   semantics that matter to us, as knftables' Fake does: a failed transaction changes
 *   nothing; a missing object, a `goto` to a missing chain, a missing device, a rule naming
 *   a missing set, map, flowtable or timeout fail it; deleting something still referenced
 *   fails it (a chain's own rules go with it); an element re-added with another verdict
 *   fails it ("File exists"); an object in a table that does not exist, or a reference to
 *   an object of another table, fails it. drift.ts applies the full rendering of what the agent last
 *   programmed to an empty table, to know what the kernel should hold; the tests' fake nft
 *   (test/helpers/fake-nft.ts) is this and a failure switch.
 *
 * Rules are held as nft text: render.ts writes them, and nft.ts turns the listing's JSON
 * expressions back into the same words, so a changed port, protocol or threshold is a
 * different rule.
 */
import type { Hook, Op, TableFamily, TimeoutSpec, Transaction } from './transaction.ts';
import { familyOfName } from './names.ts';
import { familyOf, keyText } from './transaction.ts';

export interface ChainModel {
  readonly base?: Hook | undefined;
  readonly rules: readonly string[];
}

export interface FlowtableModel {
  readonly devices: ReadonlySet<string>;
  /** Assigned when created; a recreated flowtable (every offloaded flow dropped) has a new one. */
  readonly handle: number;
}

export interface MapModel {
  readonly key: string;
  /** Element key -> the chain it jumps to (`goto`). */
  readonly elements: ReadonlyMap<string, string>;
}

export interface SetModel {
  readonly key: string;
  /** A counting set (dynamic, elements added by packets): its elements are not content. */
  readonly dynamic: boolean;
  /** Element -> packets its counter has seen. */
  readonly elements: ReadonlyMap<string, number>;
}

export interface TableModel {
  /** Which of the three tables exist (never empty: no table at all is `undefined`). */
  readonly tables: ReadonlySet<TableFamily>;
  /**
   * Objects a listing found in a table other than the one their name belongs in (a table
   * laid out by an older flowhint, which had one `inet` table): render.ts starts afresh.
   */
  readonly misplaced?: readonly string[];
  readonly flowtables: ReadonlyMap<string, FlowtableModel>;
  readonly chains: ReadonlyMap<string, ChainModel>;
  readonly maps: ReadonlyMap<string, MapModel>;
  readonly sets: ReadonlyMap<string, SetModel>;
  readonly ctTimeouts: ReadonlyMap<string, TimeoutSpec>;
  readonly counters: ReadonlySet<string>;
  /** The next handle the "kernel" gives. */
  readonly nextHandle: number;
}

export function emptyModel(): TableModel {
  return {
    tables: new Set(),
    flowtables: new Map(),
    chains: new Map(),
    maps: new Map(),
    sets: new Map(),
    ctTimeouts: new Map(),
    counters: new Set(),
    nextHandle: 1,
  };
}

/** What nft says when the kernel refuses; the fake prints the same words. */
export class TransactionError extends Error {
  constructor(op: Op, reason: 'No such file or directory' | 'Device or resource busy' | 'File exists', detail: string) {
    super(
      `Error: Could not process rule: ${reason} (${detail}: ${op.verb} ${op.obj.type}${'name' in op.obj ? ` ${op.obj.name}` : ''})`,
    );
    this.name = 'TransactionError';
  }
}

/** Host facts a transaction depends on: the network devices that exist. */
export interface ApplyEnv {
  /** Devices that exist; undefined: any. */
  readonly devices?: ReadonlySet<string> | undefined;
}

interface Mutable {
  tables: Set<TableFamily>;
  flowtables: Map<string, { devices: Set<string>; handle: number }>;
  chains: Map<string, { base?: Hook | undefined; rules: string[] }>;
  maps: Map<string, { key: string; elements: Map<string, string> }>;
  sets: Map<string, { key: string; dynamic: boolean; elements: Map<string, number> }>;
  ctTimeouts: Map<string, TimeoutSpec>;
  counters: Set<string>;
  nextHandle: number;
}

function thaw(m: TableModel | undefined): Mutable {
  const copy = <V>(x: ReadonlyMap<string, { key: string; elements: ReadonlyMap<string, V> }>) =>
    new Map([...x].map(([k, v]) => [k, { key: v.key, elements: new Map(v.elements) }]));
  const s = m ?? emptyModel();
  return {
    tables: new Set(s.tables),
    flowtables: new Map([...s.flowtables].map(([k, v]) => [k, { devices: new Set(v.devices), handle: v.handle }])),
    chains: new Map([...s.chains].map(([k, v]) => [k, { base: v.base, rules: [...v.rules] }])),
    maps: copy(s.maps),
    sets: new Map([...s.sets].map(([k, v]) => [k, { key: v.key, dynamic: v.dynamic, elements: new Map(v.elements) }])),
    ctTimeouts: new Map(s.ctTimeouts),
    counters: new Set(s.counters),
    nextHandle: s.nextHandle,
  };
}

/** Everything of table `family` gone (`delete table`), the other tables untouched. */
function dropTable(m: Mutable, family: TableFamily): void {
  m.tables.delete(family);
  const mine = (name: string) => familyOfName(name) === family;
  for (const all of [m.flowtables, m.chains, m.maps, m.sets, m.ctTimeouts])
    for (const name of [...all.keys()]) if (mine(name)) all.delete(name);
  for (const name of [...m.counters]) if (mine(name)) m.counters.delete(name);
}

/** `@name` references, quoted timeout names and `goto` targets in a rule. */
function references(rule: string): { objects: string[]; timeouts: string[]; chains: string[] } {
  const all = (re: RegExp) => [...rule.matchAll(re)].map((x) => x[1] ?? '');
  return {
    objects: all(/@([A-Za-z0-9_]+)/g),
    timeouts: all(/ct timeout set "([^"]+)"/g),
    chains: all(/\bgoto ([A-Za-z0-9_]+)/g),
  };
}

function referenced(m: Mutable, test: (rule: string) => boolean): boolean {
  return [...m.chains.values()].some((c) => c.rules.some(test));
}

function applyOp(m: Mutable, op: Op, env: ApplyEnv): void {
  const o = op.obj;
  const enoent = (detail: string) => new TransactionError(op, 'No such file or directory', detail);
  const ebusy = (detail: string) => new TransactionError(op, 'Device or resource busy', detail);
  const family = familyOf(o);
  if (o.type === 'table') {
    if (op.verb === 'add') m.tables.add(family);
    else if (!m.tables.has(family)) throw enoent('no such table');
    else if (op.verb === 'delete') dropTable(m, family);
    else for (const [name, c] of m.chains) if (familyOfName(name) === family) c.rules = [];
    return;
  }
  if (!m.tables.has(family)) throw enoent('no such table');
  // Each table is its own namespace: a rule or element names objects of its own table only.
  const here = (name: string) => familyOfName(name) === family;
  switch (o.type) {
    case 'flowtable': {
      const ft = m.flowtables.get(o.name);
      if (op.verb === 'add') {
        const missing = (o.devices ?? []).filter((d) => env.devices && !env.devices.has(d));
        if (missing.length > 0) throw enoent(`no device ${missing.join(', ')}`);
        if (ft) for (const d of o.devices ?? []) ft.devices.add(d);
        else m.flowtables.set(o.name, { devices: new Set(o.devices ?? []), handle: m.nextHandle++ });
      } else if (!ft) {
        throw enoent('no such flowtable');
      } else if (o.devices) {
        for (const d of o.devices) if (!ft.devices.delete(d)) throw enoent(`device ${d} not in the flowtable`);
      } else if (op.verb === 'delete') {
        if (referenced(m, (r) => references(r).objects.includes(o.name))) throw ebusy('a rule uses it');
        m.flowtables.delete(o.name);
      }
      return;
    }
    case 'chain': {
      const c = m.chains.get(o.name);
      if (op.verb === 'add') {
        if (!c) m.chains.set(o.name, { base: o.base, rules: [] });
      } else if (!c) {
        throw enoent('no such chain');
      } else if (op.verb === 'flush') {
        c.rules = [];
      } else {
        // The kernel deletes the chain's rules with it; a jump or goto to it holds it.
        if ([...m.maps.values()].some((s) => [...s.elements.values()].includes(o.name)))
          throw ebusy('an element jumps to it');
        if (referenced(m, (r) => references(r).chains.includes(o.name))) throw ebusy('a rule jumps to it');
        m.chains.delete(o.name);
      }
      return;
    }
    case 'map':
    case 'set': {
      const all: Map<string, { key: string; elements: Map<string, unknown> }> = o.type === 'map' ? m.maps : m.sets;
      const s = all.get(o.name);
      if (op.verb === 'add') {
        if (s) return;
        if (o.type === 'map') m.maps.set(o.name, { key: o.key ?? '', elements: new Map() });
        else m.sets.set(o.name, { key: o.key ?? '', dynamic: o.size !== undefined, elements: new Map() });
      } else if (!s) {
        throw enoent(`no such ${o.type}`);
      } else if (op.verb === 'flush') {
        s.elements.clear();
      } else {
        if (referenced(m, (r) => references(r).objects.includes(o.name))) throw ebusy('a rule uses it');
        all.delete(o.name);
      }
      return;
    }
    case 'rule': {
      const c = m.chains.get(o.chain);
      if (!c) throw enoent('no such chain');
      const refs = references(o.rule);
      for (const name of refs.objects)
        if (!here(name) || (!m.maps.has(name) && !m.sets.has(name) && !m.flowtables.has(name)))
          throw enoent(`no set, map or flowtable ${name}`);
      for (const name of refs.timeouts)
        if (!here(name) || !m.ctTimeouts.has(name)) throw enoent(`no ct timeout ${name}`);
      for (const name of refs.chains) if (!here(name) || !m.chains.has(name)) throw enoent(`no chain ${name}`);
      if (op.verb !== 'add') throw enoent('rules are deleted by handle, which this model does not use');
      c.rules.push(o.rule);
      return;
    }
    case 'element': {
      const map = m.maps.get(o.set);
      const s = map ?? m.sets.get(o.set);
      if (!s) throw enoent('no such set or map');
      const key = keyText(o.key);
      if (s.key && s.key.split(' . ').length !== o.key.length) throw enoent(`key ${key} does not fit ${s.key}`);
      if (op.verb === 'delete') {
        if (!s.elements.delete(key)) throw enoent(`no element ${key}`);
        return;
      }
      if (!map) {
        const set = m.sets.get(o.set);
        if (set && !set.elements.has(key)) set.elements.set(key, 0);
        return;
      }
      if (!o.goto || !here(o.goto) || !m.chains.has(o.goto)) throw enoent(`no chain ${o.goto ?? '(none)'}`);
      const have = map.elements.get(key);
      if (have !== undefined && have !== o.goto)
        throw new TransactionError(op, 'File exists', `element ${key} goes to ${have}`);
      map.elements.set(key, o.goto);
      return;
    }
    case 'ct timeout': {
      if (op.verb === 'add') {
        if (!m.ctTimeouts.has(o.name) && o.spec) m.ctTimeouts.set(o.name, o.spec);
      } else if (!m.ctTimeouts.has(o.name)) {
        throw enoent('no such ct timeout');
      } else {
        if (referenced(m, (r) => references(r).timeouts.includes(o.name))) throw ebusy('a rule uses it');
        m.ctTimeouts.delete(o.name);
      }
      return;
    }
    case 'counter': {
      if (op.verb === 'add') m.counters.add(o.name);
      else if (!m.counters.delete(o.name)) throw enoent('no such counter');
      return;
    }
  }
}

/**
 * Apply one transaction to the table (undefined: the table does not exist). All or
 * nothing: it returns the new table, or throws a TransactionError and `table` is untouched.
 */
export function applyTransaction(
  table: TableModel | undefined,
  tx: Transaction,
  env: ApplyEnv = {},
): TableModel | undefined {
  const m = thaw(table);
  for (const op of tx) applyOp(m, op, env);
  return m.tables.size > 0 ? m : undefined;
}
