/**
 * The agent's ruleset as a transaction (pure; agent/nft/transaction.ts turns it into nft text). The agent owns exactly one table, `inet flowhint`, and nothing outside it.
 *
 *   table inet flowhint {
 *     flowtable fastpath { hook ingress priority filter; devices = { … }; counter; }
 *     map vips4 { type ipv4_addr : verdict; }       # Service address -> the chain for its ports
 *     map vips6 { type ipv6_addr : verdict; }
 *     set seen4 { type ipv4_addr; flags dynamic; counter; }  # offload decisions per address
 *     set seen6 { type ipv6_addr; flags dynamic; counter; }
 *     set long4 { type ipv4_addr . inet_proto . inet_service; }  # LongLived address . proto . port
 *     set long6 { type ipv6_addr . inet_proto . inet_service; }
 *     map short4 { type ipv4_addr . inet_proto . inet_service : verdict; }  # ShortLived -> chain
 *     map short6 { type ipv6_addr . inet_proto . inet_service : verdict; }
 *     chain new_pre {                                # a connection's first packet only
 *       type nat hook prerouting priority -110; policy accept;
 *       ip daddr . meta l4proto . th dport @long4 ct mark set ct mark | 8192
 *       ip6 daddr . meta l4proto . th dport @long6 ct mark set ct mark | 8192
 *       ip daddr . meta l4proto . th dport vmap @short4
 *       ip6 daddr . meta l4proto . th dport vmap @short6
 *     }
 *     chain new_out { type nat hook output priority -110; … the two ShortLived rules }  # hostNetwork Pods
 *     chain classify {                               # every forwarded packet: one test
 *       type filter hook forward priority filter + 10; policy accept;
 *       ct mark & 8192 != 0 goto hinted
 *     }
 *     chain hinted {
 *       ct state established ct status dnat ct original ip daddr vmap @vips4
 *       ct state established ct status dnat ct original ip6 daddr vmap @vips6
 *     }
 *     chain v4_<hash(family, rules)> {               # shared by every address with these rules
 *       meta l4proto tcp ct original proto-dst 80 ct packets > 20 update @seen4 { ct original ip daddr } flow add @fastpath
 *     }
 *     ct timeout c4_<hash(family, proto, seconds)> { protocol udp; l3proto ip; policy = { unreplied : 5, replied : 5 }; }
 *     chain s4_<same hash> { ct timeout set "c4_<same hash>" }
 *   }
 *
 * What each packet that flowhint does not accelerate pays (docs: README "Performance"): a
 * flowhint base chain costs every packet that crosses its hook, even one that holds nothing
 * for it, so the ruleset keeps per-packet work to the least the mechanism allows.
 * - **Decisions at a connection's first packet, in `type nat` chains.** netfilter runs NAT
 *   chains only for a connection's first packet (until a NAT binding is set up; established
 *   packets reuse it), so `new_pre`/`new_out` cost nothing per packet afterwards. At priority
 *   -110, before kube-proxy's DNAT (-100), the packet still carries the Service address and
 *   port, and `ip daddr . meta l4proto . th dport` is one concatenated lookup (`ct original
 *   proto-dst` could not be concatenated). A LongLived port sets one conntrack mark bit
 *   (`--ct-mark-bit`, default 0x2000); a ShortLived port attaches its timeout policy, which
 *   must be set before conntrack confirms the entry. A NAT chain that ran before ours and set
 *   up a DNAT would skip it: nothing in kube-proxy's modes does (they DNAT at -100).
 * - **One test per forwarded packet.** `classify`, at forward `filter + 10` (after kube-proxy's
 *   and CNIs' forward filters, so a packet they drop is never offloaded; `flow add` is only
 *   valid in forward), tests the mark bit: an unhinted connection leaves after one conntrack
 *   field test (measured: about 140 instructions a packet). A marked one goes on to the checks
 *   that decide, so a bit set by someone else only costs that connection a lookup.
 * - **Only what the Services in use need:** the flowtable, `classify` and `hinted` exist only
 *   while a LongLived Service does (the flowtable's ingress hook costs every packet on its
 *   devices, about 600 instructions); `new_pre` while any hint is in use; `new_out` while a
 *   ShortLived Service is. A change of that shape is a full sync (agent.ts).
 *
 * Why the conntrack original tuple and `ct status dnat` in `hinted`: the original tuple still
 * holds the Service address after kube-proxy's DNAT, so no packet mark is shared with
 * kube-proxy or the CNI. A flowtable entry re-applies to each packet the NAT that conntrack
 * recorded and forwards it on the route to the other direction's source; kube-proxy's
 * iptables and nftables modes DNAT in prerouting, so that is exactly right. kube-proxy's IPVS
 * mode is not: the Service address is local (on `kube-ipvs0`), IPVS rewrites the client's
 * packets itself at INPUT; only the replies cross forward, and IPVS un-NATs them at forward
 * priority 100, after this chain. Measured on Debian's 6.1 kernel: such a connection has no
 * `dnat` status bit; offloaded, every one broke (iperf3's control socket reset; echo
 * connections hung). Without the `dnat` bit it is never offloaded, and the agent reports such
 * ports (agent/host/local-delivery.ts). `ct original proto-dst` cannot be used in sets, so each
 * port is one comparison, in a chain reached through a verdict map keyed on address.
 *
 * TCP timeout policies set only the closing states: an idle established connection keeps
 * the kernel's timeout.
 *
 * Why shared chains and per-address counting sets: nft fetches every chain and named object
 * of the ruleset before each rule or element command, so per-Service chains or counters
 * would make every change cost O(Services). With chains per rule list, a changed Service is
 * mostly map elements.
 *
 * Nothing user-controlled is rendered: only validated addresses, ports and protocols,
 * validated device names, the mark bit (a power of two), and hex hashes.
 */
import type { Address } from '../state/address.ts';
import type { ChainSpec, Delta, DesiredState, LongElement, Rule } from '../state/desired.ts';
import { longOf } from '../state/desired.ts';
import { keyToAddress } from '../state/address.ts';
import { parseElementKey, timeoutObjectName, type ShortChain } from '../state/short-lived.ts';
import type { TableModel } from './table-model.ts';
import { add, del, flush, toText, type Hook, type Op, type Transaction } from './transaction.ts';

export const FLOWTABLE = 'fastpath';
/** The forward base chain (one mark test per packet) and the chain it sends marked connections to. */
export const BASE_CHAIN = 'classify';
export const HINTED_CHAIN = 'hinted';
/** The NAT chains that see a connection's first packet: prerouting, and output (hostNetwork Pods). */
export const NEW_PRE = 'new_pre';
export const NEW_OUT = 'new_out';
export const MAP = { ip: 'vips4', ip6: 'vips6' } as const;
export const SEEN = { ip: 'seen4', ip6: 'seen6' } as const;
export const LONG_SET = { ip: 'long4', ip6: 'long6' } as const;
export const SHORT_MAP = { ip: 'short4', ip6: 'short6' } as const;
/** Before kube-proxy's DNAT (-100): the packet still carries the Service address and port. */
export const NEW_PRIORITY = -110;
/** The conntrack mark bit that says "a LongLived port": `--ct-mark-bit`. */
export const DEFAULT_CT_MARK = 0x2000;
/** Bound on the counting sets; stale addresses are pruned at each full sync. */
export const SEEN_SIZE = 65536;

export interface RenderOptions {
  /** The kernel supports flowtables. When false: no flowtable and no `flow add` (degraded). */
  readonly flowtable: boolean;
  readonly devices: readonly string[];
  /** The flowtable `counter` flag: keeps conntrack byte counts true for offloaded flows. */
  readonly counter: boolean;
  /** The kernel supports `ct timeout` objects. When false, ShortLived chains stay empty (degraded). */
  readonly ctTimeout?: boolean;
  /** The conntrack mark bit for LongLived connections (a power of two); DEFAULT_CT_MARK if absent. */
  readonly ctMark?: number;
}

/** Which hints are in use: what decides the table's base chains and flowtable. */
export interface Shape {
  readonly long: boolean;
  readonly short: boolean;
}

export function shapeOf(state: DesiredState): Shape {
  return { long: state.chains.size > 0, short: state.shortChains.size > 0 };
}

export function sameShape(a: Shape, b: Shape): boolean {
  return a.long === b.long && a.short === b.short;
}

/**
 * Whether `n` can be the mark bit: one of bits 0 to 30 of the conntrack mark. (nft lists a
 * test of bit 31 as a prefix, `ct mark != 0x00000000/1`, which would read back as drift.)
 */
export function isMarkBit(n: number): boolean {
  return Number.isInteger(n) && n >= 1 && n <= 0x40000000 && (n & (n - 1)) === 0;
}

function markBit(o: RenderOptions): string {
  const m = o.ctMark ?? DEFAULT_CT_MARK;
  if (!isMarkBit(m)) throw new Error(`refusing to render conntrack mark ${m}: not a single bit`);
  return String(m);
}

/** Interface names as the kernel allows them, minus anything that could end a token. */
const DEVICE = /^[A-Za-z0-9_.-]{1,15}$/;
export function isRenderableDevice(name: string): boolean {
  return DEVICE.test(name);
}

function chainId(name: string): string {
  if (!/^[vs][46]_[0-9a-f]{16}$/.test(name)) throw new Error(`refusing to render chain name ${JSON.stringify(name)}`);
  return name;
}

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
  const base = `meta l4proto ${proto} ct original proto-dst ${int(r.port, 1, 65535)} ct packets > ${int(r.threshold, 0, 1_000_000)} update @${SEEN[family]} { ct original ${ip} daddr }`;
  return o.flowtable ? `${base} flow add @${FLOWTABLE}` : base;
}

const flowtable = (devices?: readonly string[], counter?: boolean) => ({
  type: 'flowtable' as const,
  name: FLOWTABLE,
  ...(devices ? { devices: devices.filter(isRenderableDevice) } : {}),
  ...(counter ? { counter } : {}),
});

/** Flowtable operations for a full sync: create, or adjust devices in place (never recreate needlessly). */
function flowtableOps(o: RenderOptions, current: TableModel | undefined): { before: Op[]; after: Op[] } {
  const before: Op[] = [];
  const after: Op[] = [];
  const existing = current?.flowtables.get(FLOWTABLE);
  for (const name of current?.flowtables.keys() ?? [])
    if (name !== FLOWTABLE) after.push(del({ type: 'flowtable', name }));
  if (!o.flowtable) {
    if (existing) after.push(del(flowtable()));
    return { before, after };
  }
  if (!existing) {
    before.push(add(flowtable(o.devices, o.counter)));
  } else {
    // Never recreated: that would drop every offloaded flow. (nft 1.0.6 does not list the
    // `counter` flag, so a changed --no-flowtable-counter takes effect after `flowhint cleanup`.)
    before.push(...deviceOps(existing.devices, o.devices));
  }
  return { before, after };
}

/** Add and remove flowtable devices in place, so offloaded flows on the others stay offloaded. */
export function deviceOps(current: Iterable<string>, wanted: readonly string[]): Op[] {
  const have = new Set(current);
  const want = new Set(wanted.filter(isRenderableDevice));
  const adds = [...want].filter((d) => !have.has(d)).sort();
  const dels = [...have].filter((d) => !want.has(d) && isRenderableDevice(d)).sort();
  const ops: Op[] = [];
  if (dels.length > 0) ops.push(del(flowtable(dels)));
  if (adds.length > 0) ops.push(add(flowtable(adds)));
  return ops;
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
  const obj = timeoutObjectName(chain.name);
  const secs = Number(int(c.seconds, 1, 600));
  const states =
    c.proto === 'udp' ? ['unreplied', 'replied'] : ['fin_wait', 'close_wait', 'last_ack', 'time_wait', 'close'];
  const ops = [add(chain), flush(chain)];
  if (o.ctTimeout === false) return ops;
  const timeout = add({
    type: 'ct timeout',
    name: obj,
    spec: { protocol: c.proto, l3proto: c.family, policy: Object.fromEntries(states.map((s) => [s, secs])) },
  });
  return [timeout, ...ops, add({ type: 'rule', chain: chain.name, rule: `ct timeout set "${obj}"` })];
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

function longElement(e: LongElement): Op['obj'] {
  return {
    type: 'element',
    set: LONG_SET[e.address.family],
    key: [addr(e.address), e.proto === 'tcp' ? 'tcp' : 'udp', int(e.port, 1, 65535)],
  };
}

const rule = (chain: string, text: string): Op => add({ type: 'rule', chain, rule: text });
const TUPLE = { ip: 'ip daddr . meta l4proto . th dport', ip6: 'ip6 daddr . meta l4proto . th dport' } as const;
const NEW_KEY = { ip: 'ipv4_addr . inet_proto . inet_service', ip6: 'ipv6_addr . inet_proto . inet_service' } as const;

/** The base chains (and `hinted`) a shape needs, each with its hook and rules, in the order they are written. */
function fixedChains(shape: Shape, o: RenderOptions): Array<{ name: string; base?: Hook; rules: string[] }> {
  const bit = markBit(o);
  const short = [`${TUPLE.ip} vmap @${SHORT_MAP.ip}`, `${TUPLE.ip6} vmap @${SHORT_MAP.ip6}`];
  const nat = (hook: string): Hook => ({ type: 'nat', hook, priority: NEW_PRIORITY });
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
            rules: [`ct mark & ${bit} != 0 goto ${HINTED_CHAIN}`],
          },
        ]
      : []),
    ...(shape.long || shape.short
      ? [
          {
            name: NEW_PRE,
            base: nat('prerouting'),
            rules: [
              `${TUPLE.ip} @${LONG_SET.ip} ct mark set ct mark | ${bit}`,
              `${TUPLE.ip6} @${LONG_SET.ip6} ct mark set ct mark | ${bit}`,
              ...short,
            ],
          },
        ]
      : []),
    ...(shape.short ? [{ name: NEW_OUT, base: nat('output'), rules: short }] : []),
  ];
}

/** Maps and sets every ruleset has: they cost no packet anything until a rule looks them up. */
function skeleton(): Op[] {
  return [
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

const byName = <V>(m: ReadonlyMap<string, V>) => [...m].sort(([a], [b]) => a.localeCompare(b));

/**
 * One atomic transaction that makes the table exactly the desired state, whatever is there
 * now (`current`, as read back; undefined: no table). It flushes and refills, keeping the flowtable (so offloaded flows stay offloaded)
 * and the counting sets' elements for addresses that remain.
 */
export function fullTransaction(state: DesiredState, o: RenderOptions, current?: TableModel): Transaction {
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
  const wantedTimeouts = new Set(o.ctTimeout === false ? [] : [...state.shortChains.keys()].map(timeoutObjectName));
  const stale = (names: Iterable<string>, keep: ReadonlySet<string>) => [...names].sort().filter((n) => !keep.has(n));
  const ops: Op[] = [add({ type: 'table' }), ...ft.before, ...skeleton()];
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
  for (const [name, spec] of byName(state.chains)) ops.push(...chainOps(name, spec, o));
  for (const [name, spec] of byName(state.shortChains)) ops.push(...shortChainOps(name, spec, o));
  for (const [key, chain] of byName(state.chainOf)) ops.push(add(vipElement(keyToAddress(key), chain)));
  for (const e of longOf(state, [...state.chainOf.keys()].sort()).values()) ops.push(add(longElement(e)));
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

/** An incremental transaction: only the chains and elements that changed. */
export function deltaTransaction(delta: Delta, o: RenderOptions): Transaction {
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
    if (o.ctTimeout !== false) ops.push(del({ type: 'ct timeout', name: timeoutObjectName(chainId(c)) }));
  }
  return ops;
}

export const DELETE_TABLE: Transaction = [del({ type: 'table' })];

/** The same transactions as `nft -f` text, for the dry run, the demo and the golden files. */
export function renderFull(state: DesiredState, o: RenderOptions, current?: TableModel): string {
  return toText(fullTransaction(state, o, current));
}

export function renderDelta(delta: Delta, o: RenderOptions): string {
  return toText(deltaTransaction(delta, o));
}
