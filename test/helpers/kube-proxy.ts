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
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ClusterSpec, external, hashName, portName, proto, withFiller } from './kube-proxy-spec.ts';
import { renderIptables } from './kube-proxy-iptables.ts';

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
