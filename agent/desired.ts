/**
 * Desired state (pure): what this node must accelerate, as data.
 *
 * From each usable hinted Service: every address in spec.clusterIPs, spec.externalIPs and
 * status.loadBalancer.ingress[].ip, crossed with each TCP/UDP port; and each NodePort on this
 * node's own addresses. Rules are grouped per destination address, since several Services
 * may share one (externalIPs, shared LoadBalancer IPs, a node address for every NodePort).
 *
 * `diff` compares two states. Given the ids that changed it looks only at those, so the
 * cost of a sync follows the change, not the number of Services.
 */
import { effectiveThreshold, isOffloadable, portProtocol, type EffectiveHint } from '../api/index.ts';
import { addressKey, parseAddress, shortHash, type Address } from './address.ts';

export type Proto = 'tcp' | 'udp';

export interface PortMatch {
  readonly proto: Proto;
  readonly port: number;
}

export interface ServiceEntry {
  /** Hash of namespace/name: the Service's only name in nft text (counter `s_<id>`). */
  readonly id: string;
  readonly key: string;
  readonly threshold: number;
  readonly vips: readonly Address[];
  readonly ports: readonly PortMatch[];
  readonly nodePorts: readonly PortMatch[];
}

export interface DesiredState {
  readonly services: ReadonlyMap<string, ServiceEntry>;
  /** addressKey -> ids of Services with that VIP. Derived from `services`. */
  readonly byAddress: ReadonlyMap<string, ReadonlySet<string>>;
  readonly nodeAddresses: readonly Address[];
  /** ids of Services with at least one NodePort. Derived from `services`. */
  readonly nodePortServices: ReadonlySet<string>;
}

export interface Rule {
  readonly counter: string;
  readonly proto: Proto;
  readonly port: number;
  readonly threshold: number;
}

export interface AddressRules {
  readonly address: Address;
  readonly rules: readonly Rule[];
}

function validPort(n: number | null | undefined): n is number {
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 65535;
}

function uniqBy<T>(xs: T[], key: (x: T) => string): T[] {
  const seen = new Map<string, T>();
  for (const x of xs) if (!seen.has(key(x))) seen.set(key(x), x);
  return [...seen.values()];
}

/** One Service's entry. Everything from the object is validated here or dropped. */
export function serviceEntry(hint: EffectiveHint, defaultThreshold: number): ServiceEntry {
  const spec = hint.service.spec ?? {};
  const rawIps = [
    ...(spec.clusterIPs && spec.clusterIPs.length > 0 ? spec.clusterIPs : spec.clusterIP ? [spec.clusterIP] : []),
    ...(spec.externalIPs ?? []),
    ...(hint.service.status?.loadBalancer?.ingress ?? []).flatMap((i) => (i.ip ? [i.ip] : [])),
  ];
  const vips = uniqBy(
    rawIps.flatMap((ip) => {
      const a = parseAddress(ip);
      return a ? [a] : [];
    }),
    addressKey,
  ).sort((a, b) => addressKey(a).localeCompare(addressKey(b)));
  const ports: PortMatch[] = [];
  const nodePorts: PortMatch[] = [];
  for (const p of spec.ports ?? []) {
    const protocol = portProtocol(p);
    if (!isOffloadable(protocol)) continue;
    const proto = protocol.toLowerCase() as Proto;
    if (validPort(p.port)) ports.push({ proto, port: p.port });
    if (validPort(p.nodePort)) nodePorts.push({ proto, port: p.nodePort });
  }
  const byPort = (x: PortMatch) => `${x.proto}/${x.port}`;
  const sort = (xs: PortMatch[]) => uniqBy(xs, byPort).sort((a, b) => a.proto.localeCompare(b.proto) || a.port - b.port);
  return {
    id: shortHash(hint.key),
    key: hint.key,
    threshold: effectiveThreshold(hint, defaultThreshold),
    vips,
    ports: sort(ports),
    nodePorts: sort(nodePorts),
  };
}

export function emptyState(nodeAddresses: readonly Address[] = []): DesiredState {
  return { services: new Map(), byAddress: new Map(), nodeAddresses, nodePortServices: new Set() };
}

/** A new state with these entries set (or removed, for `undefined`). The input is not changed. */
export function withServices(state: DesiredState, updates: ReadonlyMap<string, ServiceEntry | undefined>): DesiredState {
  if (updates.size === 0) return state;
  const services = new Map(state.services);
  const byAddress = new Map(state.byAddress);
  const nodePortServices = new Set(state.nodePortServices);
  const touched = new Map<string, Set<string>>();
  const setFor = (k: string) => {
    let s = touched.get(k);
    if (!s) {
      s = new Set(byAddress.get(k) ?? []);
      touched.set(k, s);
      byAddress.set(k, s);
    }
    return s;
  };
  for (const [id, entry] of updates) {
    const old = services.get(id);
    if (old) for (const a of old.vips) setFor(addressKey(a)).delete(id);
    nodePortServices.delete(id);
    if (entry) {
      services.set(id, entry);
      for (const a of entry.vips) setFor(addressKey(a)).add(id);
      if (entry.nodePorts.length > 0) nodePortServices.add(id);
    } else {
      services.delete(id);
    }
  }
  for (const [k, s] of touched) if (s.size === 0) byAddress.delete(k);
  return { services, byAddress, nodeAddresses: state.nodeAddresses, nodePortServices };
}

export function withNodeAddresses(state: DesiredState, nodeAddresses: readonly Address[]): DesiredState {
  return { ...state, nodeAddresses: [...nodeAddresses].sort((a, b) => addressKey(a).localeCompare(addressKey(b))) };
}

export function buildDesired(entries: Iterable<ServiceEntry>, nodeAddresses: readonly Address[]): DesiredState {
  const updates = new Map<string, ServiceEntry>();
  for (const e of entries) updates.set(e.id, e);
  return withServices(withNodeAddresses(emptyState(), nodeAddresses), updates);
}

function isNodeAddress(state: DesiredState, key: string): boolean {
  return state.nodeAddresses.some((a) => addressKey(a) === key);
}

/** The rules for one destination address, sorted; `undefined` if nothing targets it. */
export function rulesFor(state: DesiredState, key: string): AddressRules | undefined {
  const rules: Rule[] = [];
  const push = (e: ServiceEntry, ports: readonly PortMatch[]) => {
    for (const p of ports) rules.push({ counter: e.id, proto: p.proto, port: p.port, threshold: e.threshold });
  };
  for (const id of [...(state.byAddress.get(key) ?? [])].sort()) {
    const e = state.services.get(id);
    if (e) push(e, e.ports);
  }
  if (isNodeAddress(state, key)) {
    for (const id of [...state.nodePortServices].sort()) {
      const e = state.services.get(id);
      if (e) push(e, e.nodePorts);
    }
  }
  if (rules.length === 0) return undefined;
  const [family, addr] = key.split(' ') as [Address['family'], string];
  return { address: { family, addr }, rules };
}

export function allAddressKeys(state: DesiredState): string[] {
  const keys = new Set(state.byAddress.keys());
  if (state.nodePortServices.size > 0) for (const a of state.nodeAddresses) keys.add(addressKey(a));
  return [...keys].sort();
}

export interface Delta {
  /** Addresses whose chain must be (re)written, with their new rules. */
  readonly upsert: AddressRules[];
  /** Addresses that no longer have any rule (their chain was created before). */
  readonly remove: string[];
  /** Of `upsert`, those that had no chain before (need a map element). */
  readonly created: ReadonlySet<string>;
  readonly addCounters: string[];
  readonly removeCounters: string[];
}

function sameEntry(a: ServiceEntry | undefined, b: ServiceEntry | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * What changes between two states. With `changed` (ids the caller knows may differ) only
 * those Services are compared; without it every Service is.
 */
export function diff(prev: DesiredState, next: DesiredState, changed?: Iterable<string>): Delta {
  const ids = changed ? new Set(changed) : new Set([...prev.services.keys(), ...next.services.keys()]);
  const affected = new Set<string>();
  const addCounters: string[] = [];
  const removeCounters: string[] = [];
  let nodePortsChanged = false;
  for (const id of ids) {
    const a = prev.services.get(id);
    const b = next.services.get(id);
    if (sameEntry(a, b)) continue;
    if (!a && b) addCounters.push(id);
    if (a && !b) removeCounters.push(id);
    for (const e of [a, b]) {
      if (!e) continue;
      for (const v of e.vips) affected.add(addressKey(v));
      if (e.nodePorts.length > 0) nodePortsChanged = true;
    }
  }
  const prevNodes = prev.nodeAddresses.map(addressKey).join(',');
  const nextNodes = next.nodeAddresses.map(addressKey).join(',');
  if (nodePortsChanged || prevNodes !== nextNodes) {
    for (const a of [...prev.nodeAddresses, ...next.nodeAddresses]) affected.add(addressKey(a));
  }
  const upsert: AddressRules[] = [];
  const remove: string[] = [];
  const created = new Set<string>();
  for (const key of [...affected].sort()) {
    const before = rulesFor(prev, key);
    const after = rulesFor(next, key);
    if (JSON.stringify(before) === JSON.stringify(after)) continue;
    if (after) {
      upsert.push(after);
      if (!before) created.add(key);
    } else if (before) {
      remove.push(key);
    }
  }
  return { upsert, remove, created, addCounters: addCounters.sort(), removeCounters: removeCounters.sort() };
}

export function isEmptyDelta(d: Delta): boolean {
  return d.upsert.length === 0 && d.remove.length === 0 && d.addCounters.length === 0 && d.removeCounters.length === 0;
}
