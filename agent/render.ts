/**
 * nft text (pure). The agent owns exactly one table, `inet flowhint`, and nothing outside it.
 *
 *   table inet flowhint {
 *     flowtable fastpath { hook ingress priority filter; devices = { … }; counter; }
 *     map vips4 { type ipv4_addr : verdict; }        # Service address -> its chain
 *     map vips6 { type ipv6_addr : verdict; }
 *     counter s_<hash(namespace/name)> { … }          # per-Service offload decisions
 *     chain classify {                                # the only base chain
 *       type filter hook forward priority filter + 10; policy accept;
 *       ct state established ct original ip daddr vmap @vips4
 *       ct state established ct original ip6 daddr vmap @vips6
 *     }
 *     chain a_<hash(address)> {                       # one per destination address
 *       meta l4proto tcp ct original proto-dst 80 ct packets > 20 counter name "s_…" flow add @fastpath
 *     }
 *   }
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
 * Nothing user-controlled is rendered: only validated addresses, ports and protocols,
 * validated device names, and hex hashes.
 */
import type { Address } from './address.ts';
import { addressKey, shortHash } from './address.ts';
import type { AddressRules, Delta, DesiredState, Rule } from './desired.ts';
import { allAddressKeys, rulesFor } from './desired.ts';

export const FAMILY = 'inet';
export const TABLE = 'flowhint';
export const FLOWTABLE = 'fastpath';
export const BASE_CHAIN = 'classify';
export const MAP = { ip: 'vips4', ip6: 'vips6' } as const;
const T = `${FAMILY} ${TABLE}`;

export interface RenderOptions {
  /** The kernel supports flowtables. When false: no flowtable and no `flow add` (degraded). */
  readonly flowtable: boolean;
  readonly devices: readonly string[];
  /** The flowtable `counter` flag: keeps conntrack byte counts true for offloaded flows. */
  readonly counter: boolean;
}

/** What exists in the kernel now, from `nft -j list table inet flowhint`. */
export interface Listing {
  readonly chains: ReadonlySet<string>;
  readonly counters: ReadonlySet<string>;
  readonly maps: ReadonlySet<string>;
  readonly sets: ReadonlySet<string>;
  readonly flowtables: ReadonlyMap<string, { devices: readonly string[] }>;
}

export const EMPTY_LISTING: Listing = { chains: new Set(), counters: new Set(), maps: new Set(), sets: new Set(), flowtables: new Map() };

/** Interface names as the kernel allows them, minus anything that could end a token. */
const DEVICE = /^[A-Za-z0-9_.-]{1,15}$/;
export function isRenderableDevice(name: string): boolean {
  return DEVICE.test(name);
}

export function addressChain(key: string): string {
  return `a_${shortHash(key)}`;
}

export function counterName(serviceId: string): string {
  if (!/^[0-9a-f]{16}$/.test(serviceId)) throw new Error(`not a service id: ${serviceId}`);
  return `s_${serviceId}`;
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

export function ruleText(r: Rule, o: RenderOptions): string {
  const proto = r.proto === 'tcp' ? 'tcp' : 'udp';
  const base = `meta l4proto ${proto} ct original proto-dst ${int(r.port, 1, 65535)} ct packets > ${int(r.threshold, 0, 1_000_000)} counter name "${counterName(r.counter)}"`;
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

function chainLines(r: AddressRules, o: RenderOptions): string[] {
  const name = addressChain(addressKey(r.address));
  return [`add chain ${T} ${name}`, `flush chain ${T} ${name}`, ...r.rules.map((rule) => `add rule ${T} ${name} ${ruleText(rule, o)}`)];
}

function elementLine(verb: 'add' | 'delete', a: Address): string {
  const map = MAP[a.family];
  return verb === 'add'
    ? `add element ${T} ${map} { ${addr(a)} : goto ${addressChain(addressKey(a))} }`
    : `delete element ${T} ${map} { ${addr(a)} }`;
}

function keyToAddress(key: string): Address {
  const [family, a] = key.split(' ') as [Address['family'], string];
  return { family, addr: a };
}

/** Objects every ruleset has, besides the per-address chains and per-Service counters. */
function skeleton(): string[] {
  return [
    `add table ${T}`,
    `add map ${T} ${MAP.ip} { type ipv4_addr : verdict; }`,
    `add map ${T} ${MAP.ip6} { type ipv6_addr : verdict; }`,
    `add chain ${T} ${BASE_CHAIN} { type filter hook forward priority filter + 10; policy accept; }`,
  ];
}

/**
 * One atomic transaction that makes the table exactly the desired state, whatever is there
 * now. It flushes and refills, keeping the flowtable (so offloaded flows stay offloaded)
 * and the counters of Services that remain.
 */
export function renderFull(state: DesiredState, o: RenderOptions, current: Listing = EMPTY_LISTING): string {
  const ft = flowtableLines(o, current);
  const keys = allAddressKeys(state);
  const wantedChains = new Set([BASE_CHAIN, ...keys.map(addressChain)]);
  const wantedCounters = new Set([...state.services.keys()].map(counterName));
  const lines: string[] = [`add table ${T}`, ...ft.before, ...skeleton().slice(1)];
  lines.push(`flush chain ${T} ${BASE_CHAIN}`, `flush map ${T} ${MAP.ip}`, `flush map ${T} ${MAP.ip6}`);
  for (const c of [...current.chains].sort()) if (!wantedChains.has(c)) lines.push(`flush chain ${T} ${c}`);
  for (const m of [...current.maps].sort()) if (m !== MAP.ip && m !== MAP.ip6) lines.push(`flush map ${T} ${m}`);
  for (const c of [...wantedCounters].sort()) lines.push(`add counter ${T} ${c}`);
  for (const key of keys) {
    const r = rulesFor(state, key);
    if (r) lines.push(...chainLines(r, o));
  }
  for (const key of keys) lines.push(elementLine('add', keyToAddress(key)));
  lines.push(
    `add rule ${T} ${BASE_CHAIN} ct state established ct original ip daddr vmap @${MAP.ip}`,
    `add rule ${T} ${BASE_CHAIN} ct state established ct original ip6 daddr vmap @${MAP.ip6}`,
  );
  for (const c of [...current.chains].sort()) if (!wantedChains.has(c)) lines.push(`delete chain ${T} ${c}`);
  for (const m of [...current.maps].sort()) if (m !== MAP.ip && m !== MAP.ip6) lines.push(`delete map ${T} ${m}`);
  for (const s of [...current.sets].sort()) lines.push(`delete set ${T} ${s}`);
  for (const c of [...current.counters].sort()) if (!wantedCounters.has(c)) lines.push(`delete counter ${T} ${c}`);
  lines.push(...ft.after);
  return `${lines.join('\n')}\n`;
}

/** An incremental transaction: only the chains, elements and counters that changed. */
export function renderDelta(delta: Delta, o: RenderOptions): string {
  const lines: string[] = [];
  for (const key of delta.remove) lines.push(elementLine('delete', keyToAddress(key)));
  for (const c of delta.addCounters) lines.push(`add counter ${T} ${counterName(c)}`);
  for (const r of delta.upsert) lines.push(...chainLines(r, o));
  for (const r of delta.upsert) if (delta.created.has(addressKey(r.address))) lines.push(elementLine('add', r.address));
  for (const key of delta.remove) lines.push(`delete chain ${T} ${addressChain(key)}`);
  for (const c of delta.removeCounters) lines.push(`delete counter ${T} ${counterName(c)}`);
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

export function renderDeleteTable(): string {
  return `delete table ${T}\n`;
}
