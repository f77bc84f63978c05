/**
 * kube-proxy's iptables-mode ruleset (iptables-restore input) for the same cluster as
 * kube-proxy.ts's nftables mode, in the structure kube-proxy's own tests expect
 * (pkg/proxy/iptables/proxier_test.go).
 */
import { ClusterSpec, external, hashName, portName, proto, withFiller } from './kube-proxy-spec.ts';

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
