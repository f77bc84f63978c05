/**
 * Service ports this node delivers locally instead of forwarding: the flowtable cannot
 * accelerate them, and the ruleset never offloads them (`ct status dnat` in render.ts).
 * This module only finds and explains them, for `status` and metrics.
 *
 * - `ipvs`: kube-proxy's IPVS mode. The Service address is bound to the node (`kube-ipvs0`),
 *   packets to it are delivered to INPUT and IPVS rewrites and sends them itself, without
 *   netfilter NAT. A flowtable entry for such a connection would forward the client's packets
 *   unrewritten (still addressed to the Service) and the replies un-NATed (from the Pod's
 *   address): the connection would break. Found in `/proc/net/ip_vs` (virtual services).
 * - `local-address`: a ClusterIP, external or LoadBalancer address that is an address of this
 *   node but no IPVS virtual service, on a node where nothing DNATs Service addresses before
 *   routing: the node itself answers, nothing is forwarded. Where kube-proxy's iptables or
 *   nftables mode runs, it DNATs every Service address in prerouting, before the routing
 *   decision, so an address the node holds (kube-vip, keepalived, MetalLB in L2 mode) is
 *   still DNAT'd to an endpoint and forwarded: offloadable, not reported. NodePorts are on
 *   node addresses by design and are only reported when IPVS serves them.
 *
 * Parsing and classification are pure; `readLocalDelivery` is the only I/O (through the
 * Runner, so `--netns` reads the right namespace).
 */
import { z } from 'zod';
import type { Runner } from '../../lib/exec.ts';
import { addressKey, parseAddress, type Address, type Proto } from '../state/address.ts';
import { offloads, type DesiredState } from '../state/desired.ts';

export type BypassReason = 'ipvs' | 'local-address';

export const BYPASS_DETAIL: Record<BypassReason, string> = {
  ipvs: 'an IPVS virtual service (kube-proxy IPVS mode) delivers it on this node; flowtables can only forward what netfilter NAT rewrote, so it is never offloaded',
  'local-address':
    'the address is local to this node and nothing DNATs it before routing, so its traffic is delivered, not forwarded; nothing to offload',
};

export interface Bypass {
  readonly address: string;
  readonly proto: Proto;
  readonly port: number;
  readonly reason: BypassReason;
}

export interface LocalView {
  /** `proto|addressKey|port` of every IPVS virtual service (TCP and UDP; fwmark ones are skipped). */
  readonly ipvs: ReadonlySet<string>;
  /** addressKey of every address configured on any interface of this node, up or down. */
  readonly local: ReadonlySet<string>;
  /** kube-proxy DNATs Service addresses before routing (its iptables or nftables mode). */
  readonly dnatBeforeRouting?: boolean;
}

const viewKey = (proto: string, a: Address, port: number) => `${proto}|${addressKey(a)}|${port}`;

/** The kernel's `%08X` IPv4 or `[%pI6]` IPv6 text, as an Address. */
function hexAddress(text: string): Address | undefined {
  if (text.startsWith('[') && text.endsWith(']')) return parseAddress(text.slice(1, -1));
  if (!/^[0-9A-Fa-f]{8}$/.test(text)) return undefined;
  const n = Number.parseInt(text, 16);
  return parseAddress([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.'));
}

/**
 * Virtual services of `/proc/net/ip_vs` (pure). Lines look like
 * `TCP  0A60020A:0050 rr` or `UDP  [fd00:0096:0000:0000:0000:0000:0000:0010]:0035 rr`;
 * real-server lines (`  -> …`) and `FWM` services are skipped.
 */
export function parseIpvs(text: string): Set<string> {
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    const m = /^(TCP|UDP)\s+(\S+):([0-9A-Fa-f]{4})\s/.exec(line);
    if (!m) continue;
    const [, proto = '', hex = '', port = ''] = m;
    const a = hexAddress(hex);
    if (a) out.add(viewKey(proto.toLowerCase(), a, Number.parseInt(port, 16)));
  }
  return out;
}

const Addrs = z.array(
  z.looseObject({ addr_info: z.array(z.looseObject({ local: z.string().optional() })).default([]) }),
);

/** Every address of `ip -j addr show` (pure), whatever the interface's state. */
export function parseLocalAddresses(json: string): Set<string> {
  const out = new Set<string>();
  for (const i of Addrs.parse(JSON.parse(json || '[]'))) {
    for (const a of i.addr_info) {
      const p = a.local === undefined ? undefined : parseAddress(a.local);
      if (p) out.add(addressKey(p));
    }
  }
  return out;
}

/** Per Service key, the ports that are delivered locally, and why (pure). */
export function localDelivery(state: DesiredState, view: LocalView): Map<string, Bypass[]> {
  const out = new Map<string, Bypass[]>();
  if (view.ipvs.size === 0 && view.local.size === 0) return out;
  for (const e of state.services.values()) {
    if (!offloads(e)) continue;
    const found: Bypass[] = [];
    for (const v of e.vips) {
      for (const p of e.ports) {
        if (view.ipvs.has(viewKey(p.proto, v, p.port))) found.push({ address: v.addr, ...p, reason: 'ipvs' });
        else if (view.local.has(addressKey(v)) && view.dnatBeforeRouting !== true)
          found.push({ address: v.addr, ...p, reason: 'local-address' });
      }
    }
    for (const n of state.nodeAddresses) {
      for (const p of e.nodePorts)
        if (view.ipvs.has(viewKey(p.proto, n, p.port))) found.push({ address: n.addr, ...p, reason: 'ipvs' });
    }
    if (found.length > 0) out.set(e.key, found);
  }
  return out;
}

/** Read the node's IPVS virtual services and addresses. No IPVS module: no virtual services. */
export async function readLocalDelivery(run: Runner): Promise<LocalView> {
  const [ipvs, addrs] = await Promise.all([
    run(['cat', '/proc/net/ip_vs'], { timeoutMs: 10_000 }),
    run(['ip', '-j', 'addr', 'show'], { timeoutMs: 10_000 }),
  ]);
  return {
    ipvs: ipvs.code === 0 ? parseIpvs(ipvs.stdout) : new Set(),
    local: addrs.code === 0 ? parseLocalAddresses(addrs.stdout) : new Set(),
  };
}

/** One line for people: `10.96.2.10 tcp/80`. */
export function bypassText(b: Bypass): string {
  return `${b.address.includes(':') ? `[${b.address}]` : b.address} ${b.proto}/${b.port}`;
}
