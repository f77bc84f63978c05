/**
 * nft text (pure). The agent owns exactly one table, `inet flowhint`, and nothing outside it.
 *
 *   table inet flowhint {
 *     flowtable fastpath { hook ingress priority filter; devices = { … }; counter; }
 *     map vips4 { type ipv4_addr : verdict; }       # Service address -> the chain for its ports
 *     map vips6 { type ipv6_addr : verdict; }
 *     set seen4 { type ipv4_addr; flags dynamic; counter; }  # offload decisions per address
 *     set seen6 { type ipv6_addr; flags dynamic; counter; }
 *     chain classify {                               # the only base chain
 *       type filter hook forward priority filter + 10; policy accept;
 *       ct state established ct status dnat ct original ip daddr vmap @vips4
 *       ct state established ct status dnat ct original ip6 daddr vmap @vips6
 *     }
 *     chain v4_<hash(family, rules)> {               # shared by every address with these rules
 *       meta l4proto tcp ct original proto-dst 80 ct packets > 20 update @seen4 { ct original ip daddr } flow add @fastpath
 *     }
 *     # ShortLived (short-lived.ts): a conntrack timeout policy for new connections
 *     map short4 { type ipv4_addr . inet_proto . inet_service : verdict; }  # address . proto . port -> chain
 *     map short6 { type ipv6_addr . inet_proto . inet_service : verdict; }
 *     chain short_pre { type filter hook prerouting priority -150; policy accept;
 *       ct state new ip daddr . meta l4proto . th dport vmap @short4
 *       ct state new ip6 daddr . meta l4proto . th dport vmap @short6 }
 *     chain short_out { type filter hook output priority -150; … the same two rules }   # hostNetwork Pods
 *     ct timeout c4_<hash(family, proto, seconds)> { protocol udp; l3proto ip; policy = { unreplied : 5, replied : 5 }; }
 *     chain s4_<same hash> { ct timeout set "c4_<same hash>" }
 *   }
 *
 * Why priority -150 and the packet's own header for ShortLived: a timeout policy must be
 * attached when conntrack creates the entry, at its first packet (after conntrack at -200),
 * and before kube-proxy's DNAT (-100) the packet still carries the Service address and port.
 * Unlike `ct original proto-dst`, `ip daddr . meta l4proto . th dport` can be concatenated,
 * so one map lookup per new connection finds the Service port. TCP policies set only the
 * closing states: an idle established connection keeps the kernel's timeout.
 *
 * Why the forward hook and the conntrack original tuple (not a prerouting mark before
 * DNAT, KEP-4963 v2's choice): the original tuple still holds the Service address after
 * kube-proxy's DNAT in prerouting `dstnat`, so no packet mark is needed and none is shared
 * with kube-proxy or the CNI; `flow add` is only valid in forward anyway; and unhinted
 * traffic costs one hash lookup in an established-only chain. `ct original proto-dst` can be
 * neither concatenated nor used in sets, so each port is one comparison, in a chain reached
 * through a verdict map keyed on address. Priority `filter + 10` runs after kube-proxy's and
 * CNIs' forward filters, so a packet they drop is never offloaded.
 *
 * Why `ct status dnat` (only connections that netfilter's NAT rewrote): a flowtable entry
 * re-applies to each packet the NAT that conntrack recorded (the IPS_DST_NAT / IPS_SRC_NAT
 * bits and the reply tuple) and forwards it on the route to the other direction's source.
 * kube-proxy's iptables and nftables modes DNAT in prerouting, so that is exactly right.
 * kube-proxy's IPVS mode is not: the Service address is local (on `kube-ipvs0`), the client's
 * packets are delivered to INPUT, where IPVS rewrites and sends them itself; only the replies
 * cross the forward hook, and IPVS un-NATs them at forward priority 100, after this chain.
 * Measured on Debian's 6.1 kernel: such a connection has no `dnat` status bit; offloaded, its
 * client packets went to the Pod still addressed to the Service, and the Pod's replies
 * reached the client from the Pod's address, so every offloaded IPVS connection broke
 * (iperf3's control socket reset; echo connections hung). Without the `dnat` bit the
 * flowtable cannot forward a connection correctly, so it is never offloaded, and the
 * agent reports such ports (agent/local-delivery.ts). The check is one bit test, in the
 * base rule, before the map lookup: traffic that no NAT touched (Pod to Pod) now skips
 * the lookup altogether.
 *
 * Why shared chains and per-address counting sets: nft fetches every chain and named object
 * of the ruleset before each rule or element command, so per-Service chains or counters
 * would make every change cost O(Services). With chains per rule list, a changed Service is
 * mostly map elements.
 *
 * Nothing user-controlled is rendered: only validated addresses, ports and protocols,
 * validated device names, and hex hashes.
 */
import type { Address } from './address.ts';
import type { ChainSpec, Delta, DesiredState, Rule } from './desired.ts';
import { keyToAddress } from './desired.ts';
import { parseElementKey, timeoutObjectName, type ShortChain } from './short-lived.ts';

export const FAMILY = 'inet';
export const TABLE = 'flowhint';
export const FLOWTABLE = 'fastpath';
export const BASE_CHAIN = 'classify';
export const MAP = { ip: 'vips4', ip6: 'vips6' } as const;
export const SEEN = { ip: 'seen4', ip6: 'seen6' } as const;
export const SHORT_MAP = { ip: 'short4', ip6: 'short6' } as const;
export const SHORT_BASES = ['short_pre', 'short_out'] as const;
/** Bound on the counting sets; stale addresses are pruned at each full sync. */
export const SEEN_SIZE = 65536;
const T = `${FAMILY} ${TABLE}`;

export interface RenderOptions {
  /** The kernel supports flowtables. When false: no flowtable and no `flow add` (degraded). */
  readonly flowtable: boolean;
  readonly devices: readonly string[];
  /** The flowtable `counter` flag: keeps conntrack byte counts true for offloaded flows. */
  readonly counter: boolean;
  /** The kernel supports `ct timeout` objects. When false, ShortLived chains stay empty (degraded). */
  readonly ctTimeout?: boolean;
}

/** What exists in the kernel now, from `nft -j list table inet flowhint`. */
export interface Listing {
  readonly chains: ReadonlySet<string>;
  readonly counters: ReadonlySet<string>;
  /** `ct timeout` objects. */
  readonly ctTimeouts?: ReadonlySet<string>;
  readonly maps: ReadonlySet<string>;
  /** Elements of the counting sets now, to prune those of addresses no longer desired. */
  readonly seenElements?: ReadonlyMap<string, readonly string[]>;
  readonly sets: ReadonlySet<string>;
  readonly flowtables: ReadonlyMap<string, { devices: readonly string[] }>;
}

export const EMPTY_LISTING: Listing = { chains: new Set(), counters: new Set(), maps: new Set(), sets: new Set(), flowtables: new Map() };

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

function devicesClause(devices: readonly string[]): string {
  const ok = devices.filter(isRenderableDevice);
  return ok.length === 0 ? '' : ` devices = { ${ok.map((d) => `"${d}"`).join(', ')} };`;
}

function flowtableSpec(o: RenderOptions, devices: readonly string[]): string {
  return `{ hook ingress priority filter;${devicesClause(devices)}${o.counter ? ' counter;' : ''} }`;
}

/** Flowtable lines for a full sync: create, or adjust devices in place (never recreate needlessly). */
function flowtableLines(o: RenderOptions, current: Listing): { before: string[]; after: string[] } {
  const before: string[] = [];
  const after: string[] = [];
  const existing = current.flowtables.get(FLOWTABLE);
  for (const name of current.flowtables.keys()) if (name !== FLOWTABLE) after.push(`delete flowtable ${T} ${name}`);
  if (!o.flowtable) {
    if (existing) after.push(`delete flowtable ${T} ${FLOWTABLE}`);
    return { before, after };
  }
  if (!existing) {
    before.push(`add flowtable ${T} ${FLOWTABLE} ${flowtableSpec(o, o.devices)}`);
  } else {
    // Never recreated: that would drop every offloaded flow. (nft 1.0.6 does not list the
    // `counter` flag, so a changed --no-flowtable-counter takes effect after `flowhint cleanup`.)
    before.push(...deviceLines(existing.devices, o.devices));
  }
  return { before, after };
}

/** Add and remove flowtable devices in place, so offloaded flows on the others stay offloaded. */
export function deviceLines(current: readonly string[], wanted: readonly string[]): string[] {
  const have = new Set(current);
  const want = new Set(wanted.filter(isRenderableDevice));
  const add = [...want].filter((d) => !have.has(d)).sort();
  const del = [...have].filter((d) => !want.has(d) && isRenderableDevice(d)).sort();
  const lines: string[] = [];
  if (del.length > 0) lines.push(`delete flowtable ${T} ${FLOWTABLE} {${devicesClause(del)} }`);
  if (add.length > 0) lines.push(`add flowtable ${T} ${FLOWTABLE} { hook ingress priority filter;${devicesClause(add)} }`);
  return lines;
}

function chainLines(name: string, c: ChainSpec, o: RenderOptions): string[] {
  const n = chainId(name);
  return [`add chain ${T} ${n}`, `flush chain ${T} ${n}`, ...c.rules.map((rule) => `add rule ${T} ${n} ${ruleText(c.family, rule, o)}`)];
}

/** The ct timeout object and the chain that sets it, for one (family, protocol, seconds). */
function shortChainLines(name: string, c: ShortChain, o: RenderOptions): string[] {
  const n = chainId(name);
  const obj = timeoutObjectName(n);
  const secs = int(c.seconds, 1, 600);
  const policy = c.proto === 'udp' ? `unreplied : ${secs}, replied : ${secs}` : `fin_wait : ${secs}, close_wait : ${secs}, last_ack : ${secs}, time_wait : ${secs}, close : ${secs}`;
  const lines = [`add chain ${T} ${n}`, `flush chain ${T} ${n}`];
  if (o.ctTimeout === false) return lines;
  return [`add ct timeout ${T} ${obj} { protocol ${c.proto}; l3proto ${c.family}; policy = { ${policy} }; }`, ...lines, `add rule ${T} ${n} ct timeout set "${obj}"`];
}

function shortElement(key: string): string {
  const e = parseElementKey(key);
  return `${addr(e.address)} . ${e.proto === 'tcp' ? 'tcp' : 'udp'} . ${int(e.port, 1, 65535)}`;
}

function addShortElementLine(key: string, chain: string): string {
  return `add element ${T} ${SHORT_MAP[parseElementKey(key).address.family]} { ${shortElement(key)} : goto ${chainId(chain)} }`;
}

function deleteShortElementLine(key: string): string {
  return `delete element ${T} ${SHORT_MAP[parseElementKey(key).address.family]} { ${shortElement(key)} }`;
}

function shortBaseRules(): string[] {
  return SHORT_BASES.flatMap((c) => [
    `add rule ${T} ${c} ct state new ip daddr . meta l4proto . th dport vmap @${SHORT_MAP.ip}`,
    `add rule ${T} ${c} ct state new ip6 daddr . meta l4proto . th dport vmap @${SHORT_MAP.ip6}`,
  ]);
}

function addElementLine(a: Address, chain: string): string {
  return `add element ${T} ${MAP[a.family]} { ${addr(a)} : goto ${chainId(chain)} }`;
}

function deleteElementLine(a: Address): string {
  return `delete element ${T} ${MAP[a.family]} { ${addr(a)} }`;
}

/** Objects every ruleset has, besides the per-address chains and per-Service counters. */
function skeleton(): string[] {
  return [
    `add table ${T}`,
    `add map ${T} ${MAP.ip} { type ipv4_addr : verdict; }`,
    `add map ${T} ${MAP.ip6} { type ipv6_addr : verdict; }`,
    `add set ${T} ${SEEN.ip} { type ipv4_addr; size ${SEEN_SIZE}; flags dynamic; counter; }`,
    `add set ${T} ${SEEN.ip6} { type ipv6_addr; size ${SEEN_SIZE}; flags dynamic; counter; }`,
    `add chain ${T} ${BASE_CHAIN} { type filter hook forward priority filter + 10; policy accept; }`,
    `add map ${T} ${SHORT_MAP.ip} { type ipv4_addr . inet_proto . inet_service : verdict; }`,
    `add map ${T} ${SHORT_MAP.ip6} { type ipv6_addr . inet_proto . inet_service : verdict; }`,
    `add chain ${T} short_pre { type filter hook prerouting priority -150; policy accept; }`,
    `add chain ${T} short_out { type filter hook output priority -150; policy accept; }`,
  ];
}

/**
 * One atomic transaction that makes the table exactly the desired state, whatever is there
 * now. It flushes and refills, keeping the flowtable (so offloaded flows stay offloaded)
 * and the counting sets' elements for addresses that remain.
 */
export function renderFull(state: DesiredState, o: RenderOptions, current: Listing = EMPTY_LISTING): string {
  const ft = flowtableLines(o, current);
  const wantedChains = new Set<string>([BASE_CHAIN, ...SHORT_BASES, ...state.chains.keys(), ...state.shortChains.keys()]);
  const ownMaps = new Set<string>([MAP.ip, MAP.ip6, SHORT_MAP.ip, SHORT_MAP.ip6]);
  const ownSets = new Set<string>([SEEN.ip, SEEN.ip6]);
  const wantedTimeouts = new Set(o.ctTimeout === false ? [] : [...state.shortChains.keys()].map(timeoutObjectName));
  const lines: string[] = [`add table ${T}`, ...ft.before, ...skeleton().slice(1)];
  lines.push(`flush chain ${T} ${BASE_CHAIN}`, ...SHORT_BASES.map((c) => `flush chain ${T} ${c}`), ...[...ownMaps].map((m) => `flush map ${T} ${m}`));
  for (const c of [...current.chains].sort()) if (!wantedChains.has(c)) lines.push(`flush chain ${T} ${c}`);
  for (const m of [...current.maps].sort()) if (!ownMaps.has(m)) lines.push(`flush map ${T} ${m}`);
  for (const [name, spec] of [...state.chains].sort(([a], [b]) => a.localeCompare(b))) lines.push(...chainLines(name, spec, o));
  for (const [name, spec] of [...state.shortChains].sort(([a], [b]) => a.localeCompare(b))) lines.push(...shortChainLines(name, spec, o));
  for (const [key, chain] of [...state.chainOf].sort(([a], [b]) => a.localeCompare(b))) lines.push(addElementLine(keyToAddress(key), chain));
  for (const [key, chain] of [...state.shortOf].sort(([a], [b]) => a.localeCompare(b))) lines.push(addShortElementLine(key, chain));
  lines.push(
    `add rule ${T} ${BASE_CHAIN} ct state established ct status dnat ct original ip daddr vmap @${MAP.ip}`,
    `add rule ${T} ${BASE_CHAIN} ct state established ct status dnat ct original ip6 daddr vmap @${MAP.ip6}`,
    ...shortBaseRules(),
  );
  for (const c of [...current.chains].sort()) if (!wantedChains.has(c)) lines.push(`delete chain ${T} ${c}`);
  for (const m of [...current.maps].sort()) if (!ownMaps.has(m)) lines.push(`delete map ${T} ${m}`);
  for (const c of [...(current.ctTimeouts ?? [])].sort()) if (!wantedTimeouts.has(c)) lines.push(`delete ct timeout ${T} ${c}`);
  for (const s of [...current.sets].sort()) if (!ownSets.has(s)) lines.push(`delete set ${T} ${s}`);
  for (const c of [...current.counters].sort()) lines.push(`delete counter ${T} ${c}`);
  for (const family of ['ip', 'ip6'] as const) {
    const stale = (current.seenElements?.get(SEEN[family]) ?? []).filter((a) => !state.chainOf.has(`${family} ${a}`));
    if (stale.length > 0) lines.push(`delete element ${T} ${SEEN[family]} { ${stale.map((a) => addr({ family, addr: a })).join(', ')} }`);
  }
  lines.push(...ft.after);
  return `${lines.join('\n')}\n`;
}

/** An incremental transaction: only the chains and elements that changed. */
export function renderDelta(delta: Delta, o: RenderOptions): string {
  const lines: string[] = [];
  for (const c of delta.addChains) lines.push(...chainLines(c.name, c.spec, o));
  for (const c of delta.addShortChains) lines.push(...shortChainLines(c.name, c.spec, o));
  for (const a of delta.removeElements) lines.push(deleteElementLine(a));
  for (const k of delta.removeShortElements) lines.push(deleteShortElementLine(k));
  for (const e of delta.addElements) lines.push(addElementLine(e.address, e.chain));
  for (const e of delta.addShortElements) lines.push(addShortElementLine(e.key, e.chain));
  for (const c of delta.removeChains) lines.push(`delete chain ${T} ${chainId(c)}`);
  for (const c of delta.removeShortChains) {
    lines.push(`delete chain ${T} ${chainId(c)}`);
    if (o.ctTimeout !== false) lines.push(`delete ct timeout ${T} ${timeoutObjectName(chainId(c))}`);
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

export function renderDeleteTable(): string {
  return `delete table ${T}\n`;
}
