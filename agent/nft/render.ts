/**
 * The agent's ruleset as a transaction (pure; agent/nft/transaction.ts turns it into nft
 * text). The agent owns three tables, `inet`, `ip` and `ip6 flowhint`, and nothing outside
 * them: the NAT chains are in their family's own table (transaction.ts, TableFamily).
 *
 * Its objects (docs/architecture.md shows a listing): the flowtable `fastpath`; verdict maps
 * `vips4`/`vips6` (Service address -> the shared chain for its ports); counting sets
 * `seen4`/`seen6`; the forward chain `classify` and its `hinted` (all in `inet`); per family,
 * in `ip` (4) and `ip6` (6): the set `long4` (LongLived address . protocol . port), the
 * verdict map `short4` (ShortLived, to a chain that sets a `ct timeout`), and the first-packet
 * NAT chains `new_pre4` and `new_out4`, which exist only while the family has a hint.
 *
 * Why it is shaped so (docs/architecture.md, "The ruleset", has the whole reasoning):
 * - decisions at a connection's first packet, in `type nat` chains at -110 (before
 *   kube-proxy's DNAT), which established packets never meet; a hinted connection gets
 *   flowhint's conntrack mark bit (so the agent reads its own connections from one
 *   kernel-filtered dump), a ShortLived one also the ShortLived bit and its timeout policy;
 * - one rule per forwarded packet (`classify`: the flowhint bit without the ShortLived
 *   bit); LongLived connections go on to `hinted` once past the lowest threshold in use,
 *   which matches the conntrack original tuple of DNAT'd connections only (`ct status dnat`:
 *   IPVS connections must never be offloaded);
 * - only what the hints in use need: no hint, no base chain and no flowtable; no hint of a
 *   family, no NAT hook of that family (an `inet` NAT chain would register both: issue 32);
 * - chains shared per rule list, because nft fetches every chain before each command.
 *
 * Nothing user-controlled is rendered: only validated addresses, ports and protocols,
 * validated device names, the mark bits (powers of two), and hex hashes.
 */
import type { Address } from '../state/address.ts';
import type { ChainSpec, DesiredState, LongElement, Rule } from '../state/desired.ts';
import type { Delta } from '../state/delta.ts';
import { longOf } from '../state/delta.ts';
import { keyToAddress } from '../state/address.ts';
import { parseElementKey, type ShortChain } from '../state/short-lived.ts';
import { KERNEL_TIMEOUTS, shortPolicy, timeoutObjectName } from '../state/timeout-policy.ts';
import type { TableModel } from './table-model.ts';
import { flowtableOps, recreateOps } from './flowtable.ts';
import { FAMILIES, add, del, flush, keyText, toText, type Hook, type Op, type Transaction } from './transaction.ts';
import {
  BASE_CHAIN,
  DEFAULT_CT_MARK,
  DEFAULT_SHORT_MARK,
  FLOWTABLE,
  HINTED_CHAIN,
  LONG_SET,
  MAP,
  NEW_OUT,
  NEW_PRE,
  NEW_PRIORITY,
  SEEN,
  SEEN_SIZE,
  SHORT_MAP,
  isMarkBit,
  shapeOf,
  type RenderOptions,
  type Shape,
} from './names.ts';

function markBit(o: RenderOptions, which: 'long' | 'short' = 'long'): string {
  const m = which === 'long' ? (o.ctMark ?? DEFAULT_CT_MARK) : (o.shortMark ?? DEFAULT_SHORT_MARK);
  if (!isMarkBit(m)) throw new Error(`refusing to render conntrack mark ${m}: not a single bit`);
  return String(m);
}

function chainId(name: string): string {
  if (!/^[vs][46]_[0-9a-f]{16}$/.test(name)) throw new Error(`refusing to render chain name ${JSON.stringify(name)}`);
  return name;
}

/** The route back to the packet's sender leaves the interface it came in on (strict reverse path). */
export const ROUTE_BACK = 'fib saddr . iif oif exists';

function int(n: number, min: number, max: number): string {
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`refusing to render ${n}: outside ${min}..${max}`);
  return String(n);
}

function addr(a: Address): string {
  // Addresses come from parseAddress; re-check the alphabet as a last line of defence.
  if (!/^[0-9a-f:.]+$/.test(a.addr)) throw new Error(`refusing to render address ${JSON.stringify(a.addr)}`);
  return a.addr;
}

export function ruleText(family: Address['family'], r: Rule, o: RenderOptions): string {
  const proto = r.proto === 'tcp' ? 'tcp' : 'udp';
  const ip = family === 'ip' ? 'ip' : 'ip6';
  const head = `meta l4proto ${proto} ct original proto-dst ${int(r.port, 1, 65535)} ct packets > ${int(r.threshold, 0, 1_000_000)}`;
  const count = `update @${SEEN[family]} { ct original ${ip} daddr }`;
  // A flow's reply direction leaves the interface its offloading packet came in on (the
  // kernel's reverse route lookup is bound to it): offload only where the route back to the
  // sender leaves that interface too, so asymmetric paths stay on the slow path (ROUTE_BACK).
  return o.flowtable ? `${head} ${ROUTE_BACK} ${count} flow add @${FLOWTABLE}` : `${head} ${count}`;
}

function chainOps(name: string, c: ChainSpec, o: RenderOptions): Op[] {
  const chain = { type: 'chain', name: chainId(name) } as const;
  return [
    add(chain),
    flush(chain),
    ...c.rules.map((rule) => add({ type: 'rule', chain: chain.name, rule: ruleText(c.family, rule, o) })),
  ];
}

/** The ct timeout object and the chain that sets it, for one (family, protocol, seconds). */
function shortChainOps(name: string, c: ShortChain, o: RenderOptions): Op[] {
  const chain = { type: 'chain', name: chainId(name) } as const;
  const node = o.nodeTimeouts ?? KERNEL_TIMEOUTS;
  const obj = timeoutObjectName(chain.name, node);
  const policy = shortPolicy(c.proto, Number(int(c.seconds, 1, 600)), node);
  for (const v of Object.values(policy)) int(v, 1, 2 ** 31 - 1);
  const ops = [add(chain), flush(chain)];
  // Both bits: the flowhint bit makes it one of the agent's connections (the one kernel-filtered
  // conntrack dump it reads), the ShortLived bit keeps it out of `classify`'s goto.
  const mark = `ct mark set ct mark | ${Number(markBit(o)) | Number(markBit(o, 'short'))}`;
  if (o.ctTimeout === false) return [...ops, add({ type: 'rule', chain: chain.name, rule: mark })];
  const timeout = add({
    type: 'ct timeout',
    name: obj,
    spec: { protocol: c.proto, l3proto: c.family, policy },
  });
  return [timeout, ...ops, add({ type: 'rule', chain: chain.name, rule: `${mark} ct timeout set "${obj}"` })];
}

function shortElement(key: string, goto?: string): Op['obj'] {
  const e = parseElementKey(key);
  return {
    type: 'element',
    set: SHORT_MAP[e.address.family],
    key: [addr(e.address), e.proto === 'tcp' ? 'tcp' : 'udp', int(e.port, 1, 65535)],
    ...(goto ? { goto: chainId(goto) } : {}),
  };
}

function vipElement(a: Address, goto?: string): Op['obj'] {
  return { type: 'element', set: MAP[a.family], key: [addr(a)], ...(goto ? { goto: chainId(goto) } : {}) };
}

const longKey = (e: LongElement) => [addr(e.address), e.proto === 'tcp' ? 'tcp' : 'udp', int(e.port, 1, 65535)];

/** Whether the table `current` marks new connections to `e` already (its long4/long6 set holds it). */
export function marksAlready(current: TableModel | undefined, e: LongElement): boolean {
  return current?.sets.get(LONG_SET[e.address.family])?.elements.has(keyText(longKey(e))) ?? false;
}

function longElement(e: LongElement): Op['obj'] {
  return { type: 'element', set: LONG_SET[e.address.family], key: longKey(e) };
}

const rule = (chain: string, text: string): Op => add({ type: 'rule', chain, rule: text });
const TUPLE = { ip: 'ip daddr . meta l4proto . th dport', ip6: 'ip6 daddr . meta l4proto . th dport' } as const;
const NEW_KEY = { ip: 'ipv4_addr . inet_proto . inet_service', ip6: 'ipv6_addr . inet_proto . inet_service' } as const;

interface FixedChain {
  readonly name: string;
  readonly base?: Hook;
  readonly rules: readonly string[];
}

/** One family's first-packet NAT chains (in its own table), as its hints in use need them. */
function natChains(family: 'ip' | 'ip6', shape: Shape, o: RenderOptions): FixedChain[] {
  const { long, short } = shape[family];
  const nat = (hook: string): Hook => ({ type: 'nat', hook, priority: NEW_PRIORITY });
  const vmap = `${TUPLE[family]} vmap @${SHORT_MAP[family]}`;
  if (!long && !short) return [];
  return [
    {
      name: NEW_PRE[family],
      base: nat('prerouting'),
      // Every new connection of the family meets these: only the lookups a hint in use needs.
      rules: [
        ...(long ? [`${TUPLE[family]} @${LONG_SET[family]} ct mark set ct mark | ${markBit(o)}`] : []),
        ...(short ? [vmap] : []),
      ],
    },
    ...(short ? [{ name: NEW_OUT[family], base: nat('output'), rules: [vmap] }] : []),
  ];
}

/** The base chains (and `hinted`) a shape needs, each with its hook and rules, in the order they are written. */
function fixedChains(shape: Shape, o: RenderOptions): FixedChain[] {
  const bit = markBit(o);
  const both = Number(bit) | Number(markBit(o, 'short'));
  return [
    ...(shape.long
      ? [
          {
            name: HINTED_CHAIN,
            rules: [
              `ct state established ct status dnat ct original ip daddr vmap @${MAP.ip}`,
              `ct state established ct status dnat ct original ip6 daddr vmap @${MAP.ip6}`,
            ],
          },
          {
            name: BASE_CHAIN,
            base: { type: 'filter' as const, hook: 'forward', priority: 10 },
            // LongLived connections only (flowhint bit set, ShortLived bit not), and only past
            // the lowest threshold in use (Shape.floor): still one rule for every packet before.
            rules: [
              `ct mark & ${both} == ${bit}${shape.floor > 0 ? ` ct packets > ${int(shape.floor, 0, 1_000_000)}` : ''} goto ${HINTED_CHAIN}`,
            ],
          },
        ]
      : []),
    ...natChains('ip', shape, o),
    ...natChains('ip6', shape, o),
  ];
}

/**
 * The three tables, and the maps and sets every ruleset has: they cost no packet anything
 * until a rule looks them up, and a table without base chains registers no hook.
 */
function skeleton(): Op[] {
  return [
    ...FAMILIES.map((family) => add({ type: 'table', family })),
    add({ type: 'map', name: MAP.ip, key: 'ipv4_addr' }),
    add({ type: 'map', name: MAP.ip6, key: 'ipv6_addr' }),
    add({ type: 'set', name: SEEN.ip, key: 'ipv4_addr', size: SEEN_SIZE }),
    add({ type: 'set', name: SEEN.ip6, key: 'ipv6_addr', size: SEEN_SIZE }),
    add({ type: 'set', name: LONG_SET.ip, key: NEW_KEY.ip }),
    add({ type: 'set', name: LONG_SET.ip6, key: NEW_KEY.ip6 }),
    add({ type: 'map', name: SHORT_MAP.ip, key: NEW_KEY.ip }),
    add({ type: 'map', name: SHORT_MAP.ip6, key: NEW_KEY.ip6 }),
  ];
}

/** Delete every table of ours that exists, and only those (`add` first: deleting a missing table fails). */
const DELETE_ALL: Op[] = FAMILIES.flatMap((family) => [add({ type: 'table', family }), del({ type: 'table', family })]);

const byName = <V>(m: ReadonlyMap<string, V>) => [...m].sort(([a], [b]) => a.localeCompare(b));

/**
 * One atomic transaction that makes the table exactly the desired state, whatever is there
 * now (`current`, as read back; undefined: no table). It flushes and refills, keeping the flowtable (so offloaded flows stay offloaded)
 * and the counting sets' elements for addresses that remain.
 */
export function fullTransaction(state: DesiredState, o: RenderOptions, found?: TableModel): Transaction {
  // A table laid out by an older flowhint (every object in `inet flowhint`, so its names are
  // in the wrong table: TableModel.misplaced) is deleted and made again in one transaction.
  // Its offloaded flows return to the slow path and are offloaded again at their next packet.
  const reset = (found?.misplaced?.length ?? 0) > 0;
  const current = reset ? undefined : found;
  const shape = shapeOf(state);
  const ft = flowtableOps({ ...o, flowtable: o.flowtable && shape.long }, current);
  const fixed = fixedChains(shape, o);
  const wantedChains = new Set<string>([
    ...fixed.map((c) => c.name),
    ...state.chains.keys(),
    ...state.shortChains.keys(),
  ]);
  const ownMaps = new Set<string>([MAP.ip, MAP.ip6, SHORT_MAP.ip, SHORT_MAP.ip6]);
  const ownSets = new Set<string>([SEEN.ip, SEEN.ip6, LONG_SET.ip, LONG_SET.ip6]);
  const objectOf = (chain: string) => timeoutObjectName(chain, o.nodeTimeouts ?? KERNEL_TIMEOUTS);
  const wantedTimeouts = new Set(o.ctTimeout === false ? [] : [...state.shortChains.keys()].map(objectOf));
  const stale = (names: Iterable<string>, keep: ReadonlySet<string>) => [...names].sort().filter((n) => !keep.has(n));
  const ops: Op[] = [...(reset ? DELETE_ALL : []), ...skeleton(), ...ft.before];
  ops.push(...fixed.map((c) => add({ type: 'chain', name: c.name, ...(c.base ? { base: c.base } : {}) })));
  ops.push(
    ...fixed.map((c) => flush({ type: 'chain', name: c.name })),
    ...[...ownMaps].map((name) => flush({ type: 'map', name })),
  );
  ops.push(...[LONG_SET.ip, LONG_SET.ip6].map((name) => flush({ type: 'set', name })));
  const chains = stale(current?.chains.keys() ?? [], wantedChains);
  const maps = stale(current?.maps.keys() ?? [], ownMaps);
  for (const name of chains) ops.push(flush({ type: 'chain', name }));
  for (const name of maps) ops.push(flush({ type: 'map', name }));
  // A LongLived (address, protocol, port) the table has and the state does not: its flows
  // must leave the flowtable (recreateOps). The offload chains are refilled just below.
  const long = [...longOf(state, [...state.chainOf.keys()].sort()).values()];
  const wantedLong = new Set(long.map((e) => keyText(longKey(e))));
  const goneLong = [LONG_SET.ip, LONG_SET.ip6].some((set) =>
    [...(current?.sets.get(set)?.elements.keys() ?? [])].some((k) => !wantedLong.has(k)),
  );
  if (goneLong && o.flowtable && shape.long && current?.flowtables.has(FLOWTABLE))
    ops.push(...recreateOps(o, [...current.chains.keys()].filter((n) => /^v[46]_/.test(n)).sort()));
  for (const [name, spec] of byName(state.chains)) ops.push(...chainOps(name, spec, o));
  for (const [name, spec] of byName(state.shortChains)) ops.push(...shortChainOps(name, spec, o));
  for (const [key, chain] of byName(state.chainOf)) ops.push(add(vipElement(keyToAddress(key), chain)));
  for (const e of long) ops.push(add(longElement(e)));
  for (const [key, chain] of byName(state.shortOf)) ops.push(add(shortElement(key, chain)));
  ops.push(...fixed.flatMap((c) => c.rules.map((text) => rule(c.name, text))));
  for (const name of chains) ops.push(del({ type: 'chain', name }));
  for (const name of maps) ops.push(del({ type: 'map', name }));
  for (const name of stale(current?.ctTimeouts.keys() ?? [], wantedTimeouts))
    ops.push(del({ type: 'ct timeout', name }));
  for (const name of stale(current?.sets.keys() ?? [], ownSets)) ops.push(del({ type: 'set', name }));
  for (const name of [...(current?.counters ?? [])].sort()) ops.push(del({ type: 'counter', name }));
  for (const family of ['ip', 'ip6'] as const) {
    for (const a of current?.sets.get(SEEN[family])?.elements.keys() ?? []) {
      if (!state.chainOf.has(`${family} ${a}`))
        ops.push(del({ type: 'element', set: SEEN[family], key: [addr({ family, addr: a })] }));
    }
  }
  ops.push(...ft.after);
  return ops;
}

/**
 * An incremental transaction: only the chains and elements that changed. When it removes a
 * LongLived (address, protocol, port) and `chains` (the offload chains the state keeps) is
 * given, it also recreates the flowtable and refills those chains, so the removed hint's
 * offloaded flows return to the slow path (recreateOps).
 */
export function deltaTransaction(delta: Delta, o: RenderOptions, chains?: ReadonlyMap<string, ChainSpec>): Transaction {
  const ops: Op[] = [];
  for (const c of delta.addChains) ops.push(...chainOps(c.name, c.spec, o));
  for (const c of delta.addShortChains) ops.push(...shortChainOps(c.name, c.spec, o));
  for (const a of delta.removeElements) ops.push(del(vipElement(a)));
  for (const e of delta.removeLong) ops.push(del(longElement(e)));
  for (const k of delta.removeShortElements) ops.push(del(shortElement(k)));
  for (const e of delta.addElements) ops.push(add(vipElement(e.address, e.chain)));
  for (const e of delta.addLong) ops.push(add(longElement(e)));
  for (const e of delta.addShortElements) ops.push(add(shortElement(e.key, e.chain)));
  for (const name of delta.removeChains) ops.push(del({ type: 'chain', name: chainId(name) }));
  for (const c of delta.removeShortChains) {
    ops.push(del({ type: 'chain', name: chainId(c) }));
    const node = o.nodeTimeouts ?? KERNEL_TIMEOUTS;
    if (o.ctTimeout !== false) ops.push(del({ type: 'ct timeout', name: timeoutObjectName(chainId(c), node) }));
  }
  if (chains && chains.size > 0 && delta.removeLong.length > 0 && o.flowtable)
    ops.push(...recreateFlowtable(o, chains));
  return ops;
}

/**
 * The flowtable deleted and created again with `o.devices`, and the offload chains that name
 * it (`chains`) refilled: every offloaded flow returns to the slow path (recreateOps).
 */
export function recreateFlowtable(o: RenderOptions, chains: ReadonlyMap<string, ChainSpec>): Op[] {
  const ops = recreateOps(o, [...chains.keys()].sort().map(chainId));
  for (const [name, spec] of byName(chains))
    ops.push(...spec.rules.map((r) => add({ type: 'rule', chain: name, rule: ruleText(spec.family, r, o) })));
  return ops;
}

/** `--cleanup-on-exit`, `flowhint cleanup`: the three tables gone, whichever exist. */
export const DELETE_TABLE: Transaction = DELETE_ALL;

/** The same transactions as `nft -f` text, for the dry run, the demo and the golden files. */
export function renderFull(state: DesiredState, o: RenderOptions, current?: TableModel): string {
  return toText(fullTransaction(state, o, current));
}

export function renderDelta(delta: Delta, o: RenderOptions): string {
  return toText(deltaTransaction(delta, o));
}
