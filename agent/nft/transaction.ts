/**
 * A transaction as data (pure), after sigs.k8s.io/knftables: a list of operations on the
 * objects of the agent's tables. `toText` turns it into the
 * input of `nft -f -` (agent/nft/nft.ts, the only side effect); agent/nft/table-model.ts applies it
 * to an in-memory table with nft's semantics, for drift and for the tests' fake.
 *
 * Every string here has been validated by render.ts (names are hashes or constants, rule
 * bodies are built from validated ports, protocols and thresholds); `toText` only joins.
 */
import { familyOfName } from './names.ts';

/** A base chain's hook: `type <type> hook <hook> priority <priority>; policy accept;`. */
export interface Hook {
  /** filter (absent: filter) or nat: a nat chain sees only a connection's first packet. */
  readonly type?: 'filter' | 'nat';
  /** forward, prerouting, output (a listing may show others: drift). */
  readonly hook: string;
  readonly priority: number;
}

export interface TimeoutSpec {
  readonly protocol: 'tcp' | 'udp';
  readonly l3proto: 'ip' | 'ip6';
  /** state -> seconds, in nft's order. */
  readonly policy: Readonly<Record<string, number>>;
}

/**
 * The agent's three tables, all named `flowhint`: `inet` holds the flowtable and the forward
 * path (filter hooks, which change nothing for a family without hints); `ip` and `ip6` each
 * hold their family's first-packet NAT chains and what those look up. A NAT chain in an
 * `inet` table registers the NAT hooks of both families, and a registered NAT hook gives
 * every connection of its family a NAT binding (null bindings, source port clash remapping):
 * an IPv4-only node must get no IPv6 NAT hook from flowhint (issue 32).
 */
export type TableFamily = 'inet' | 'ip' | 'ip6';
export const FAMILIES: readonly TableFamily[] = ['inet', 'ip', 'ip6'];

export type Obj =
  | { readonly type: 'table'; readonly family?: TableFamily }
  /**
   * `add`: create it (`hook ingress priority filter`), or add `devices` to it. `delete`
   * with devices: remove those devices only; without: the flowtable itself.
   */
  | {
      readonly type: 'flowtable';
      readonly name: string;
      readonly devices?: readonly string[];
      readonly counter?: boolean;
    }
  | { readonly type: 'chain'; readonly name: string; readonly base?: Hook }
  /** A verdict map: key type (nft's names, concatenated with ` . `) to a `goto`. `key` only to add. */
  | { readonly type: 'map'; readonly name: string; readonly key?: string }
  /** A set: with `size`, dynamic with a per-element counter and that bound (the counting sets); without, a plain set. */
  | { readonly type: 'set'; readonly name: string; readonly key?: string; readonly size?: number }
  /** One rule appended to a chain. `rule` is nft rule syntax, as knftables' Rule.Rule. */
  | { readonly type: 'rule'; readonly chain: string; readonly rule: string }
  /** One element of a map (with `goto`) or set (without). `key` parts are concatenated. */
  | { readonly type: 'element'; readonly set: string; readonly key: readonly string[]; readonly goto?: string }
  /** A conntrack timeout policy. `spec` only to add. */
  | { readonly type: 'ct timeout'; readonly name: string; readonly spec?: TimeoutSpec }
  | { readonly type: 'counter'; readonly name: string };

export type Verb = 'add' | 'flush' | 'delete';

export interface Op {
  readonly verb: Verb;
  readonly obj: Obj;
}

export type Transaction = readonly Op[];

export const FAMILY = 'inet';
export const TABLE = 'flowhint';

/** The table an operation's object is in. */
export function familyOf(o: Obj): TableFamily {
  switch (o.type) {
    case 'table':
      return o.family ?? 'inet';
    case 'rule':
      return familyOfName(o.chain);
    case 'element':
      return familyOfName(o.set);
    default:
      return familyOfName(o.name);
  }
}

export const add = (obj: Obj): Op => ({ verb: 'add', obj });
export const flush = (obj: Obj): Op => ({ verb: 'flush', obj });
export const del = (obj: Obj): Op => ({ verb: 'delete', obj });

/** nft's priority spelling: `filter + 10` for positive offsets from filter, the number otherwise. */
function priority(p: number): string {
  return p > 0 ? `filter + ${p}` : p === 0 ? 'filter' : String(p);
}

function devicesClause(devices: readonly string[]): string {
  return devices.length === 0 ? '' : ` devices = { ${devices.map((d) => `"${d}"`).join(', ')} };`;
}

/** The key as nft writes it: concatenated parts joined by ` . `. */
export function keyText(key: readonly string[]): string {
  return key.join(' . ');
}

/** What `add` of a map, set or ct timeout cannot do without. */
function need<V>(v: V | undefined, o: Obj): V {
  if (v === undefined) throw new Error(`cannot add ${o.type} ${'name' in o ? o.name : ''} without its type`);
  return v;
}

function objText(op: Op, table: string): string {
  const T = `${familyOf(op.obj)} ${table}`;
  const o = op.obj;
  switch (o.type) {
    case 'table':
      return `table ${T}`;
    case 'flowtable':
      if (op.verb === 'delete')
        return o.devices ? `flowtable ${T} ${o.name} {${devicesClause(o.devices)} }` : `flowtable ${T} ${o.name}`;
      return `flowtable ${T} ${o.name} { hook ingress priority filter;${devicesClause(o.devices ?? [])}${o.counter ? ' counter;' : ''} }`;
    case 'chain':
      return o.base && op.verb === 'add'
        ? `chain ${T} ${o.name} { type ${o.base.type ?? 'filter'} hook ${o.base.hook} priority ${priority(o.base.priority)}; policy accept; }`
        : `chain ${T} ${o.name}`;
    case 'map':
      return op.verb === 'add' ? `map ${T} ${o.name} { type ${need(o.key, o)} : verdict; }` : `map ${T} ${o.name}`;
    case 'set':
      if (op.verb !== 'add') return `set ${T} ${o.name}`;
      return o.size === undefined
        ? `set ${T} ${o.name} { type ${need(o.key, o)}; }`
        : `set ${T} ${o.name} { type ${need(o.key, o)}; size ${o.size}; flags dynamic; counter; }`;
    case 'rule':
      return `rule ${T} ${o.chain} ${o.rule}`;
    case 'element':
      return `element ${T} ${o.set} { ${keyText(o.key)}${o.goto && op.verb === 'add' ? ` : goto ${o.goto}` : ''} }`;
    case 'ct timeout': {
      if (op.verb !== 'add') return `ct timeout ${T} ${o.name}`;
      const spec = need(o.spec, o);
      const policy = Object.entries(spec.policy)
        .map(([state, secs]) => `${state} : ${secs}`)
        .join(', ');
      return `ct timeout ${T} ${o.name} { protocol ${spec.protocol}; l3proto ${spec.l3proto}; policy = { ${policy} }; }`;
    }
    case 'counter':
      return `counter ${T} ${o.name}`;
  }
}

/** One operation as one line of `nft -f` input. */
export function opText(op: Op, table: string = TABLE): string {
  return `${op.verb} ${objText(op, table)}`;
}

/**
 * The transaction as `nft -f -` input: one line per operation; empty for no operations.
 * `table` other than ours is for the kernel probes only (`nft -c` of a throwaway table).
 */
export function toText(tx: Transaction, table: string = TABLE): string {
  return tx.length === 0 ? '' : `${tx.map((op) => opText(op, table)).join('\n')}\n`;
}
