/**
 * kube-proxy's rulesets for a list of Services, as kube-proxy itself would program them, so
 * that flowhint is tested and measured beside what real clusters run rather than a one-line
 * DNAT. Our own generator; the structure (chains, priorities, maps, marks, comments, the
 * order of rules) follows kube-proxy's published test expectations:
 *
 * - nftables mode: kubernetes/kubernetes pkg/proxy/nftables/proxier_test.go (`baseRules`,
 *   TestOverallNFTablesRules): `table ip kube-proxy`, base chains at -110/-100/0/100, the
 *   `service-ips` / `service-nodeports` verdict maps, per-Service and per-endpoint chains with
 *   `numgen random mod N vmap`, `mark-for-masquerade` and `masquerade fully-random`,
 *   `cluster-ips-check` (reject unknown ports, drop unallocated ClusterIPs), and
 *   `no-endpoint-services` / `no-endpoint-nodeports` pointing at `reject-chain`.
 * - iptables mode: pkg/proxy/iptables/proxier_test.go: `KUBE-SERVICES` -> `KUBE-SVC-*` ->
 *   `KUBE-SEP-*` with `-m statistic --mode random`, `KUBE-EXT-*`, `KUBE-MARK-MASQ`,
 *   `KUBE-POSTROUTING` MASQUERADE, `KUBE-FORWARD`, and REJECT for Services without endpoints.
 *
 * Simplifications, none of which touch a packet this suite sends: IPv4 only, Cluster traffic
 * policy, no session affinity, no source ranges, no health-check node ports. Chain-name
 * hashes are ours (base32 of SHA-256), the same length as kube-proxy's.
 *
 * usage: node test/helpers/kube-proxy.ts nft|iptables SPEC.json   (the ruleset on stdout,
 * for `nft -f -` or `iptables-restore`)
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';

const Ipv4 = z.ipv4();
const Port = z.object({
  name: z.string().regex(/^[a-z0-9-]*$/),
  protocol: z.enum(['TCP', 'UDP']),
  port: z.number().int().min(1).max(65535),
  targetPort: z.number().int().min(1).max(65535),
  nodePort: z.number().int().min(1).max(65535).optional(),
});
const Service = z.object({
  namespace: z.string().regex(/^[a-z0-9-]+$/),
  name: z.string().regex(/^[a-z0-9-]+$/),
  clusterIP: Ipv4,
  loadBalancerIPs: z.array(Ipv4).default([]),
  ports: z.array(Port).min(1),
  /** Ready endpoint addresses (Pod IPs); empty: the Service has no endpoints. */
  endpoints: z.array(Ipv4),
});
export const ClusterSpec = z
  .object({
    podCIDR: z.string().regex(/^[0-9.]+\/[0-9]+$/),
    serviceCIDR: z.string().regex(/^[0-9.]+\/[0-9]+$/),
    /** Addresses that accept NodePort traffic (kube-proxy's `nodeport-ips`). */
    nodeIPs: z.array(Ipv4).min(1),
    services: z.array(Service),
    /**
     * This many more ClusterIP Services, two endpoints each, as a cluster's load: addresses
     * 10.100.x.y (inside the Service CIDR), endpoints in `fillerEndpointPrefix`.0/24.
     */
    filler: z.number().int().min(0).max(20_000).default(0),
    fillerEndpointPrefix: z
      .string()
      .regex(/^[0-9]+\.[0-9]+\.[0-9]+$/)
      .default('10.0.9'),
  })
  .superRefine((spec, ctx) => {
    // The API server allocates each NodePort once; a duplicate would fail the whole transaction.
    const seen = new Set<string>();
    for (const s of spec.services) {
      for (const p of s.ports) {
        if (p.nodePort === undefined) continue;
        const k = `${p.protocol}/${p.nodePort}`;
        if (seen.has(k))
          ctx.addIssue({
            code: 'custom',
            message: `NodePort ${k} is used twice (${s.namespace}/${s.name})`,
            path: ['services'],
          });
        seen.add(k);
      }
    }
  });
export type ClusterSpec = z.input<typeof ClusterSpec>;
type Spec = z.output<typeof ClusterSpec>;
type Svc = z.output<typeof Service>;
type SvcPort = z.output<typeof Port>;

/** base32 (RFC 4648, no padding) of SHA-256, first `n` characters, as kube-proxy's names. */
export function hashName(input: string, n: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const bytes = createHash('sha256').update(input).digest();
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < n) {
      out += alphabet.charAt((value >>> (bits - 5)) & 31);
      bits -= 5;
    }
  }
  return out;
}

function withFiller(spec: Spec): Svc[] {
  const filler: Svc[] = [];
  for (let i = 0; i < spec.filler; i++) {
    const a = spec.fillerEndpointPrefix;
    filler.push({
      namespace: 'load',
      name: `svc-${i}`,
      clusterIP: `10.100.${i >> 8}.${i & 255}`,
      loadBalancerIPs: [],
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
      endpoints: [`${a}.${(i % 250) + 1}`, `${a}.${((i + 1) % 250) + 1}`],
    });
  }
  return [...spec.services, ...filler];
}

const proto = (p: SvcPort) => p.protocol.toLowerCase();
/** kube-proxy's ServicePortName string: `ns/name:port`. */
const portName = (s: Svc, p: SvcPort) => `${s.namespace}/${s.name}:${p.name}`;
const external = (p: SvcPort, s: Svc) => p.nodePort !== undefined || s.loadBalancerIPs.length > 0;

/** nftables mode: one `nft -f` transaction that replaces `table ip kube-proxy` atomically. */
export function renderNftables(input: ClusterSpec): string {
  const spec = ClusterSpec.parse(input);
  const T = 'ip kube-proxy';
  const out: string[] = [
    // add + delete + add: an atomic replacement whether or not the table exists.
    `add table ${T}`,
    `delete table ${T}`,
    `add table ${T} { comment "rules for kube-proxy" ; }`,
    `add set ${T} cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }`,
    `add set ${T} nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }`,
    `add map ${T} firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }`,
    `add map ${T} no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }`,
    `add map ${T} no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }`,
    `add map ${T} service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }`,
    `add map ${T} service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }`,
    `add chain ${T} cluster-ips-check`,
    `add chain ${T} filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }`,
    `add chain ${T} filter-output-pre-dnat { type filter hook output priority -110 ; }`,
    `add chain ${T} filter-forward { type filter hook forward priority 0 ; }`,
    `add chain ${T} filter-input { type filter hook input priority 0 ; }`,
    `add chain ${T} filter-output { type filter hook output priority 0 ; }`,
    `add chain ${T} firewall-check`,
    `add chain ${T} mark-for-masquerade`,
    `add chain ${T} masquerading`,
    `add chain ${T} nat-output { type nat hook output priority -100 ; }`,
    `add chain ${T} nat-postrouting { type nat hook postrouting priority 100 ; }`,
    `add chain ${T} nat-prerouting { type nat hook prerouting priority -100 ; }`,
    `add chain ${T} nodeport-endpoints-check`,
    `add chain ${T} reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }`,
    `add chain ${T} services`,
    `add chain ${T} service-endpoints-check`,
    `add rule ${T} cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"`,
    `add rule ${T} cluster-ips-check ip daddr { ${spec.serviceCIDR} } drop comment "Drop traffic to unallocated ClusterIPs"`,
    `add rule ${T} filter-prerouting-pre-dnat ct state new jump firewall-check`,
    `add rule ${T} filter-forward ct state new jump service-endpoints-check`,
    `add rule ${T} filter-forward ct state new jump cluster-ips-check`,
    `add rule ${T} filter-input ct state new jump nodeport-endpoints-check`,
    `add rule ${T} filter-input ct state new jump service-endpoints-check`,
    `add rule ${T} filter-output ct state new jump service-endpoints-check`,
    `add rule ${T} filter-output-pre-dnat ct state new jump firewall-check`,
    `add rule ${T} filter-output ct state new jump cluster-ips-check`,
    `add rule ${T} firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips`,
    `add rule ${T} mark-for-masquerade mark set mark or 0x4000`,
    `add rule ${T} masquerading mark and 0x4000 == 0 return`,
    `add rule ${T} masquerading mark set mark xor 0x4000`,
    `add rule ${T} masquerading masquerade fully-random`,
    `add rule ${T} nat-output jump services`,
    `add rule ${T} nat-postrouting jump masquerading`,
    `add rule ${T} nat-prerouting jump services`,
    `add rule ${T} nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports`,
    `add rule ${T} reject-chain reject`,
    `add rule ${T} services ip daddr . meta l4proto . th dport vmap @service-ips`,
    `add rule ${T} services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports`,
    `add element ${T} nodeport-ips { ${spec.nodeIPs.join(', ')} }`,
    `add rule ${T} service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services`,
  ];
  // Every chain before any rule that jumps to it: a goto to a chain not yet added fails the
  // whole transaction.
  const chains: string[] = [];
  const rules: string[] = [];
  for (const s of withFiller(spec)) {
    rules.push(`add element ${T} cluster-ips { ${s.clusterIP} }`);
    for (const p of s.ports) {
      const id = `${s.namespace}/${s.name}/${proto(p)}/${p.name}`;
      const hash = hashName(id, 8);
      const svcChain = `service-${hash}-${id}`;
      const extChain = `external-${hash}-${id}`;
      const addrs = [s.clusterIP, ...s.loadBalancerIPs];
      if (s.endpoints.length === 0) {
        for (const a of addrs)
          rules.push(
            `add element ${T} no-endpoint-services { ${a} . ${proto(p)} . ${p.port} comment "${portName(s, p)}" : goto reject-chain }`,
          );
        if (p.nodePort !== undefined)
          rules.push(
            `add element ${T} no-endpoint-nodeports { ${proto(p)} . ${p.nodePort} comment "${portName(s, p)}" : goto reject-chain }`,
          );
        continue;
      }
      const eps = s.endpoints.map((ip) => {
        const epId = `${id}__${ip}/${p.targetPort}`;
        return { ip, chain: `endpoint-${hashName(epId, 8)}-${epId}` };
      });
      chains.push(`add chain ${T} ${svcChain}`);
      rules.push(
        `add rule ${T} ${svcChain} ip daddr ${s.clusterIP} ip saddr != ${spec.podCIDR} jump mark-for-masquerade`,
      );
      rules.push(
        `add rule ${T} ${svcChain} numgen random mod ${eps.length} vmap { ${eps.map((e, i) => `${i} : goto ${e.chain}`).join(' , ')} }`,
      );
      if (external(p, s)) {
        chains.push(`add chain ${T} ${extChain}`);
        rules.push(`add rule ${T} ${extChain} jump mark-for-masquerade`);
        rules.push(`add rule ${T} ${extChain} goto ${svcChain}`);
      }
      for (const e of eps) {
        chains.push(`add chain ${T} ${e.chain}`);
        rules.push(`add rule ${T} ${e.chain} ip saddr ${e.ip} jump mark-for-masquerade`);
        rules.push(`add rule ${T} ${e.chain} meta l4proto ${proto(p)} dnat to ${e.ip}:${p.targetPort}`);
      }
      rules.push(`add element ${T} service-ips { ${s.clusterIP} . ${proto(p)} . ${p.port} : goto ${svcChain} }`);
      for (const lb of s.loadBalancerIPs)
        rules.push(`add element ${T} service-ips { ${lb} . ${proto(p)} . ${p.port} : goto ${extChain} }`);
      if (p.nodePort !== undefined)
        rules.push(`add element ${T} service-nodeports { ${proto(p)} . ${p.nodePort} : goto ${extChain} }`);
    }
  }
  return `${[...out, ...chains, ...rules].join('\n')}\n`;
}

/**
 * iptables mode: `iptables-restore` input for the filter and nat tables (iptables-nft on this
 * kernel, as on current distributions). A full restore of both tables, not --noflush: the
 * namespaces it is loaded into hold nothing else in them.
 */
export function renderIptables(input: ClusterSpec): string {
  const spec = ClusterSpec.parse(input);
  const filterChains = [
    'KUBE-NODEPORTS',
    'KUBE-SERVICES',
    'KUBE-EXTERNAL-SERVICES',
    'KUBE-FIREWALL',
    'KUBE-FORWARD',
    'KUBE-PROXY-FIREWALL',
  ];
  const filter: string[] = [
    '-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
    '-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS',
    '-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
    '-A INPUT -j KUBE-FIREWALL',
    '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
    '-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
    '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
    '-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL',
    '-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -j KUBE-FIREWALL',
    '-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
    '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP',
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  ];
  const natChains = ['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ'];
  const nat: string[] = [
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    '-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000',
    '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
    '-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000',
    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
  ];
  const perService: string[] = [];
  for (const s of withFiller(spec)) {
    for (const p of s.ports) {
      const pn = portName(s, p);
      const m = `-m ${proto(p)} -p ${proto(p)}`;
      if (s.endpoints.length === 0) {
        filter.push(
          `-A KUBE-SERVICES -m comment --comment "${pn} has no endpoints" ${m} -d ${s.clusterIP} --dport ${p.port} -j REJECT`,
        );
        for (const lb of s.loadBalancerIPs)
          filter.push(
            `-A KUBE-EXTERNAL-SERVICES -m comment --comment "${pn} has no endpoints" ${m} -d ${lb} --dport ${p.port} -j REJECT`,
          );
        if (p.nodePort !== undefined)
          filter.push(
            `-A KUBE-EXTERNAL-SERVICES -m comment --comment "${pn} has no endpoints" -m addrtype --dst-type LOCAL ${m} --dport ${p.nodePort} -j REJECT`,
          );
        continue;
      }
      const key = `${pn}/${p.protocol}`;
      const svc = `KUBE-SVC-${hashName(key, 16)}`;
      const ext = `KUBE-EXT-${hashName(key, 16)}`;
      natChains.push(svc);
      nat.push(
        `-A KUBE-SERVICES -m comment --comment "${pn} cluster IP" ${m} -d ${s.clusterIP} --dport ${p.port} -j ${svc}`,
      );
      if (external(p, s)) {
        natChains.push(ext);
        for (const lb of s.loadBalancerIPs)
          nat.push(
            `-A KUBE-SERVICES -m comment --comment "${pn} loadbalancer IP" ${m} -d ${lb} --dport ${p.port} -j ${ext}`,
          );
        if (p.nodePort !== undefined)
          nat.push(`-A KUBE-NODEPORTS -m comment --comment ${pn} ${m} --dport ${p.nodePort} -j ${ext}`);
        perService.push(
          `-A ${ext} -m comment --comment "masquerade traffic for ${pn} external destinations" -j KUBE-MARK-MASQ`,
          `-A ${ext} -j ${svc}`,
        );
      }
      perService.push(
        `-A ${svc} -m comment --comment "${pn} cluster IP" ${m} -d ${s.clusterIP} --dport ${p.port} ! -s ${spec.podCIDR} -j KUBE-MARK-MASQ`,
      );
      s.endpoints.forEach((ip, i) => {
        const sep = `KUBE-SEP-${hashName(`${key}/${ip}:${p.targetPort}`, 16)}`;
        natChains.push(sep);
        const left = s.endpoints.length - i;
        // The i-th of n endpoints takes 1/(n-i) of what the ones before it left: uniform overall.
        const stat = left > 1 ? ` -m statistic --mode random --probability ${(1 / left).toFixed(10)}` : '';
        perService.push(`-A ${svc} -m comment --comment "${pn} -> ${ip}:${p.targetPort}"${stat} -j ${sep}`);
        perService.push(
          `-A ${sep} -m comment --comment ${pn} -s ${ip} -j KUBE-MARK-MASQ`,
          `-A ${sep} -m comment --comment ${pn} ${m} -j DNAT --to-destination ${ip}:${p.targetPort}`,
        );
      });
    }
  }
  nat.push(
    '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
  );
  const builtins = (names: string[]) => names.map((n) => `:${n} ACCEPT [0:0]`);
  return [
    '*filter',
    ...builtins(['INPUT', 'FORWARD', 'OUTPUT']),
    ...filterChains.map((c) => `:${c} - [0:0]`),
    ...filter,
    'COMMIT',
    '*nat',
    ...builtins(['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING']),
    ...natChains.map((c) => `:${c} - [0:0]`),
    ...nat,
    ...perService,
    'COMMIT',
    '',
  ].join('\n');
}

if (import.meta.main) {
  const [mode, file] = process.argv.slice(2);
  if ((mode !== 'nft' && mode !== 'iptables') || !file) {
    process.stderr.write('usage: node test/helpers/kube-proxy.ts nft|iptables SPEC.json\n');
    process.exit(2);
  }
  const spec = JSON.parse(readFileSync(file, 'utf8')) as unknown;
  const parsed = ClusterSpec.safeParse(spec);
  if (!parsed.success) {
    process.stderr.write(`kube-proxy.ts: ${file}: ${z.prettifyError(parsed.error)}\n`);
    process.exit(2);
  }
  process.stdout.write(mode === 'nft' ? renderNftables(parsed.data) : renderIptables(parsed.data));
}
