/**
 * Desired state (pure): what this node must accelerate, as data.
 *
 * From each usable hinted Service: every address in spec.clusterIPs, spec.externalIPs and
 * status.loadBalancer.ingress[].ip, crossed with each TCP/UDP port; and each NodePort on this
 * node's own addresses. Rules are grouped per destination address, since several Services
 * may share one (externalIPs, shared LoadBalancer IPs, a node address for every NodePort).
 *
 * Addresses with the same rule list share one chain, named by a hash of (family, rules): a
 * cluster of 10,000 Services with a handful of port/threshold combinations needs a handful
 * of chains, and a changed Service is usually one map element. The state keeps, per address,
 * its chain, and per chain its rules and how many addresses use it; both are derived from
 * `services` and updated only for the addresses a change touches.
 *
 * delta.ts compares two states.
 */
import {
  HINTS,
  effectiveThreshold,
  effectiveTimeout,
  isOffloadable,
  portProtocol,
  type EffectiveHint,
  type TrafficHint,
} from '../../api/index.ts';
import { addressKey, keyToAddress, parseAddress, shortHash, type Address, type Proto } from './address.ts';
import { PMap, moveRef, pendingSet } from './pmap.ts';
import { asUpdates, emptyShort, moveElements, relinkShort, shortElements, type ShortState } from './short-lived.ts';

export interface PortMatch {
  readonly proto: Proto;
  readonly port: number;
}

export interface ServiceEntry {
  /** namespace/name: the key of the Service in the desired state. */
  readonly key: string;
  readonly hint: TrafficHint;
  /** LongLived: packets before offload. */
  readonly threshold: number;
  /** ShortLived only: the conntrack timeout in seconds (short-lived.ts). */
  readonly timeout?: number | undefined;
  readonly vips: readonly Address[];
  readonly ports: readonly PortMatch[];
  readonly nodePorts: readonly PortMatch[];
}

export interface Rule {
  readonly proto: Proto;
  readonly port: number;
  readonly threshold: number;
}

export interface ChainSpec {
  readonly family: Address['family'];
  readonly rules: readonly Rule[];
  /** How many addresses jump to this chain. */
  readonly refs: number;
}

/** Every map is persistent (pmap.ts): versions share structure, so a change costs O(change). */
export interface DesiredState extends ShortState {
  readonly services: PMap<string, ServiceEntry>;
  /** addressKey -> keys of Services with that VIP. Derived from `services`. */
  readonly byAddress: PMap<string, ReadonlySet<string>>;
  readonly nodeAddresses: readonly Address[];
  /** keys of Services with at least one NodePort. Derived from `services`. */
  readonly nodePortServices: PMap<string, true>;
  /** addressKey -> the chain its packets go to. Derived. */
  readonly chainOf: PMap<string, string>;
  /** chain name -> its rules and reference count. Derived. */
  readonly chains: PMap<string, ChainSpec>;
}

/** One LongLived (address, protocol, port): its new connections get the mark bit (render.ts). */
export interface LongElement {
  readonly address: Address;
  readonly proto: Proto;
  readonly port: number;
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
export function serviceEntry(hint: EffectiveHint, defaultThreshold: number, defaultTimeout?: number): ServiceEntry {
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
  const sort = (xs: PortMatch[]) =>
    uniqBy(xs, byPort).sort((a, b) => a.proto.localeCompare(b.proto) || a.port - b.port);
  return {
    key: hint.key,
    hint: hint.hint,
    threshold: effectiveThreshold(hint, defaultThreshold),
    ...(HINTS[hint.hint].shortTimeout ? { timeout: effectiveTimeout(hint, defaultTimeout) } : {}),
    vips,
    ports: sort(ports),
    nodePorts: sort(nodePorts),
  };
}

export function emptyState(nodeAddresses: readonly Address[] = []): DesiredState {
  return {
    services: PMap.of(),
    byAddress: PMap.of(),
    nodeAddresses,
    nodePortServices: PMap.of(),
    chainOf: PMap.of(),
    chains: PMap.of(),
    ...emptyShort(),
  };
}

/** Whether an entry's connections are offloaded (LongLived), as opposed to ShortLived's timeouts. */
export function offloads(e: ServiceEntry | undefined): e is ServiceEntry {
  return e !== undefined && HINTS[e.hint].offload;
}

/** The chain for a rule list: `v4_`/`v6_` + a hash of family and rules. */
export function chainName(family: Address['family'], rules: readonly Rule[]): string {
  return `${family === 'ip' ? 'v4' : 'v6'}_${shortHash(`${family}|${rules.map((r) => `${r.proto}/${r.port}>${r.threshold}`).join(',')}`)}`;
}

/** chainOf/chains recomputed for the given addresses of `state` (whose other maps are final). */
function relink(state: DesiredState, keys: Iterable<string>): Pick<DesiredState, 'chainOf' | 'chains'> {
  const chainOf = new Map<string, string | undefined>();
  const chains = new Map<string, ChainSpec | undefined>();
  for (const key of keys) {
    const old = chainOf.has(key) ? chainOf.get(key) : state.chainOf.get(key);
    const r = rulesFor(state, key);
    const name = r ? chainName(r.address.family, r.rules) : undefined;
    if (old === name) continue;
    // `make` runs only for a new chain, so only when `r` exists.
    const make = () => ({ family: r?.address.family ?? 'ip', rules: r?.rules ?? [], refs: 1 });
    moveRef(chains, state.chains, old, name, make);
    chainOf.set(key, name);
  }
  return { chainOf: state.chainOf.with(chainOf), chains: state.chains.with(chains) };
}

/** A new state with these entries set (or removed, for `undefined`). The input is not changed. */
export function withServices(
  state: DesiredState,
  updates: ReadonlyMap<string, ServiceEntry | undefined>,
): DesiredState {
  if (updates.size === 0) return state;
  const st = state;
  const touched = new Map<string, Set<string>>();
  const nodePorts = new Map<string, true | undefined>();
  let nodePortsTouched = false;
  const setFor = (k: string) => pendingSet(touched, st.byAddress, k);
  const short = new Map<string, Set<string>>();
  for (const [id, entry] of updates) {
    const old = st.services.get(id);
    moveElements(st, short, id, shortElements(old, st.nodeAddresses), shortElements(entry, st.nodeAddresses));
    if (offloads(old)) for (const a of old.vips) setFor(addressKey(a)).delete(id);
    if (offloads(old) && old.nodePorts.length > 0) nodePortsTouched = true;
    nodePorts.set(id, undefined);
    if (offloads(entry)) {
      for (const a of entry.vips) setFor(addressKey(a)).add(id);
      if (entry.nodePorts.length > 0) {
        nodePorts.set(id, true);
        nodePortsTouched = true;
      }
    }
  }
  const services = st.services.with(updates);
  const next: DesiredState = {
    ...relinkShort(st, asUpdates(short), (id) => services.get(id)?.timeout),
    services,
    byAddress: st.byAddress.with([...touched].map(([k, s]) => [k, s.size === 0 ? undefined : s] as const)),
    nodeAddresses: st.nodeAddresses,
    nodePortServices: st.nodePortServices.with(nodePorts),
    chainOf: st.chainOf,
    chains: st.chains,
  };
  const keys = new Set(touched.keys());
  if (nodePortsTouched) for (const a of st.nodeAddresses) keys.add(addressKey(a));
  return { ...next, ...relink(next, keys) };
}

export function withNodeAddresses(state: DesiredState, nodeAddresses: readonly Address[]): DesiredState {
  const st = state;
  const sorted = [...nodeAddresses].sort((a, b) => addressKey(a).localeCompare(addressKey(b)));
  // ShortLived NodePorts live on node addresses: move their elements.
  const short = new Map<string, Set<string>>();
  for (const e of st.services.values()) {
    if (e.timeout !== undefined && e.nodePorts.length > 0)
      moveElements(
        st,
        short,
        e.key,
        shortElements({ ...e, vips: [] }, st.nodeAddresses),
        shortElements({ ...e, vips: [] }, sorted),
      );
  }
  const next: DesiredState = {
    ...st,
    ...relinkShort(st, asUpdates(short), (id) => st.services.get(id)?.timeout),
    nodeAddresses: sorted,
  };
  return { ...next, ...relink(next, new Set([...st.nodeAddresses, ...sorted].map(addressKey))) };
}

export function buildDesired(entries: Iterable<ServiceEntry>, nodeAddresses: readonly Address[]): DesiredState {
  const updates = new Map<string, ServiceEntry>();
  for (const e of entries) updates.set(e.key, e);
  return withServices(withNodeAddresses(emptyState(), nodeAddresses), updates);
}

function isNodeAddress(state: DesiredState, key: string): boolean {
  return state.nodeAddresses.some((a) => addressKey(a) === key);
}

/** The rules for one destination address, sorted; `undefined` if nothing targets it. */
export function rulesFor(state: DesiredState, key: string): AddressRules | undefined {
  const rules: Rule[] = [];
  const push = (e: ServiceEntry, ports: readonly PortMatch[]) => {
    for (const p of ports) rules.push({ proto: p.proto, port: p.port, threshold: e.threshold });
  };
  for (const id of [...(state.byAddress.get(key) ?? [])].sort()) {
    const e = state.services.get(id);
    if (e) push(e, e.ports);
  }
  if (isNodeAddress(state, key)) {
    for (const id of [...state.nodePortServices.keys()].sort()) {
      const e = state.services.get(id);
      if (e) push(e, e.nodePorts);
    }
  }
  if (rules.length === 0) return undefined;
  // One rule per (proto, port): two Services sharing an address and port (possible only in
  // manifests the API server would refuse) keep the lowest threshold. Sorted, so the chain
  // name does not depend on Service order.
  const best = new Map<string, Rule>();
  for (const r of rules) {
    const k = `${r.proto}/${r.port}`;
    const have = best.get(k);
    if (!have || r.threshold < have.threshold) best.set(k, r);
  }
  const sorted = [...best.values()].sort((a, b) => a.proto.localeCompare(b.proto) || a.port - b.port);
  return { address: keyToAddress(key), rules: sorted };
}
