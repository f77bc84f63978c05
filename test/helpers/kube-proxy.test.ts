import t from 'tap';
import { execFileSync } from 'node:child_process';
import { renderNftables } from './kube-proxy.ts';
import { renderIptables } from './kube-proxy-iptables.ts';
import { hashName, type ClusterSpec } from './kube-proxy-spec.ts';
import { createNetns } from './netns.ts';

// kube-proxy's own expectations, copied as data from kubernetes/kubernetes
// pkg/proxy/nftables/proxier_test.go (`baseRules` and TestOverallNFTablesRules, svc1 and
// svc6; Service CIDR 172.30.0.0/16, Pod CIDR 10.0.0.0/8, node IP 192.168.0.2).
const KUBE_PROXY_BASE = `
add table ip kube-proxy { comment "rules for kube-proxy" ; }
add set ip kube-proxy cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
add set ip kube-proxy nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }
add map ip kube-proxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
add map ip kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }
add chain ip kube-proxy cluster-ips-check
add chain ip kube-proxy filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }
add chain ip kube-proxy filter-output-pre-dnat { type filter hook output priority -110 ; }
add chain ip kube-proxy filter-forward { type filter hook forward priority 0 ; }
add chain ip kube-proxy filter-input { type filter hook input priority 0 ; }
add chain ip kube-proxy filter-output { type filter hook output priority 0 ; }
add chain ip kube-proxy firewall-check
add chain ip kube-proxy mark-for-masquerade
add chain ip kube-proxy masquerading
add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip kube-proxy nodeport-endpoints-check
add chain ip kube-proxy reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
add chain ip kube-proxy services
add chain ip kube-proxy service-endpoints-check
add rule ip kube-proxy cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
add rule ip kube-proxy cluster-ips-check ip daddr { 172.30.0.0/16 } drop comment "Drop traffic to unallocated ClusterIPs"
add rule ip kube-proxy filter-prerouting-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-forward ct state new jump service-endpoints-check
add rule ip kube-proxy filter-forward ct state new jump cluster-ips-check
add rule ip kube-proxy filter-input ct state new jump nodeport-endpoints-check
add rule ip kube-proxy filter-input ct state new jump service-endpoints-check
add rule ip kube-proxy filter-output ct state new jump service-endpoints-check
add rule ip kube-proxy filter-output-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-output ct state new jump cluster-ips-check
add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000
add rule ip kube-proxy masquerading mark and 0x4000 == 0 return
add rule ip kube-proxy masquerading mark set mark xor 0x4000
add rule ip kube-proxy masquerading masquerade fully-random
add rule ip kube-proxy nat-output jump services
add rule ip kube-proxy nat-postrouting jump masquerading
add rule ip kube-proxy nat-prerouting jump services
add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
add rule ip kube-proxy reject-chain reject
add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
add element ip kube-proxy nodeport-ips { 192.168.0.2 }
add rule ip kube-proxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
`;
const KUBE_PROXY_SVC1_SVC6 = `
add chain ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80
add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 ip daddr 172.30.0.41 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 }
add chain ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80
add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 ip saddr 10.180.0.1 jump mark-for-masquerade
add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 meta l4proto tcp dnat to 10.180.0.1:80
add element ip kube-proxy cluster-ips { 172.30.0.41 }
add element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }
add element ip kube-proxy cluster-ips { 172.30.0.46 }
add element ip kube-proxy no-endpoint-services { 172.30.0.46 . tcp . 80 comment "ns6/svc6:p80" : goto reject-chain }
`;

const lines = (s: string) => s.split('\n').filter((l) => l.trim() !== '');
/** kube-proxy's hashes are its own; ours have the same length and place. */
const normalize = (l: string) => l.replace(/(service|endpoint|external)-[A-Z2-7]{8}-/g, '$1-HASH-');

const upstream: ClusterSpec = {
  podCIDR: '10.0.0.0/8',
  serviceCIDR: '172.30.0.0/16',
  nodeIPs: ['192.168.0.2'],
  services: [
    {
      namespace: 'ns1',
      name: 'svc1',
      clusterIP: '172.30.0.41',
      ports: [{ name: 'p80', protocol: 'TCP', port: 80, targetPort: 80 }],
      endpoints: ['10.180.0.1'],
    },
    {
      namespace: 'ns6',
      name: 'svc6',
      clusterIP: '172.30.0.46',
      ports: [{ name: 'p80', protocol: 'TCP', port: 80, targetPort: 80 }],
      endpoints: [],
    },
  ],
};

t.test('nftables mode: the same rules as kube-proxy expects of itself, up to hashes', async (t) => {
  const ours = lines(renderNftables(upstream));
  t.same(ours.slice(0, 2), ['add table ip kube-proxy', 'delete table ip kube-proxy'], 'an atomic replacement first');
  const want = [...lines(KUBE_PROXY_BASE), ...lines(KUBE_PROXY_SVC1_SVC6)].map(normalize).sort();
  t.same(ours.slice(2).map(normalize).sort(), want);
});

t.test('nftables mode: chains before the rules that jump to them; endpoints spread by numgen', async (t) => {
  const spec: ClusterSpec = {
    ...upstream,
    services: [
      {
        namespace: 'a',
        name: 'b',
        clusterIP: '172.30.0.9',
        loadBalancerIPs: ['1.2.3.4'],
        ports: [{ name: 'http', protocol: 'UDP', port: 53, targetPort: 5353, nodePort: 30053 }],
        endpoints: ['10.1.0.1', '10.1.0.2', '10.1.0.3'],
      },
    ],
  };
  const out = lines(renderNftables(spec));
  // A goto or jump to a chain not yet added fails the whole transaction.
  const added = new Map(
    out.flatMap((l, i) => (l.startsWith('add chain ip kube-proxy ') ? [[l.split(' ')[4]!, i] as const] : [])),
  );
  const targets = out.flatMap((l, i) =>
    [...l.matchAll(/(?:goto|jump) ([^ ,}]+)/g)].map((m) => ({ chain: m[1]!, at: i })),
  );
  t.ok(targets.length > 10);
  t.same(
    targets.filter((r) => !((added.get(r.chain) ?? Infinity) < r.at)),
    [],
    'every chain is added before a rule jumps to it',
  );
  t.match(
    out.find((l) => l.includes('numgen')),
    /numgen random mod 3 vmap \{ 0 : goto endpoint-\S+__10\.1\.0\.1\/5353 , 1 : goto endpoint-\S+__10\.1\.0\.2\/5353 , 2 : goto endpoint-\S+__10\.1\.0\.3\/5353 \}$/,
  );
  t.ok(
    out.some((l) => /service-ips \{ 1\.2\.3\.4 \. udp \. 53 : goto external-/.test(l)),
    'the LoadBalancer IP goes to the external chain',
  );
  t.ok(
    out.some((l) => /service-nodeports \{ udp \. 30053 : goto external-/.test(l)),
    'so does the NodePort',
  );
  t.equal(out.filter((l) => /meta l4proto udp dnat to 10\.1\.0\.\d:5353$/.test(l)).length, 3);
});

t.test('iptables mode: KUBE-SVC picks each endpoint with probability 1/(n-i); no endpoints: REJECT', async (t) => {
  const spec: ClusterSpec = {
    ...upstream,
    services: [
      {
        namespace: 'a',
        name: 'b',
        clusterIP: '172.30.0.9',
        ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30080 }],
        endpoints: ['10.1.0.1', '10.1.0.2', '10.1.0.3'],
      },
      upstream.services[1]!,
    ],
  };
  const out = lines(renderIptables(spec));
  const svc = `KUBE-SVC-${hashName('a/b:http/TCP', 16)}`;
  t.same(
    out
      .filter((l) => l.startsWith(`-A ${svc} `) && l.includes('KUBE-SEP-'))
      .map((l) => /--probability (\S+)/.exec(l)?.[1] ?? 'rest'),
    ['0.3333333333', '0.5000000000', 'rest'],
  );
  t.ok(
    out.includes(
      `-A KUBE-SERVICES -m comment --comment "a/b:http cluster IP" -m tcp -p tcp -d 172.30.0.9 --dport 80 -j ${svc}`,
    ),
  );
  t.ok(
    out.some((l) => l.startsWith('-A KUBE-NODEPORTS ') && l.includes('--dport 30080 -j KUBE-EXT-')),
    'the NodePort goes through KUBE-EXT',
  );
  t.ok(
    out.includes(
      '-A KUBE-SERVICES -m comment --comment "ns6/svc6:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.46 --dport 80 -j REJECT',
    ),
  );
  t.equal(
    out.filter((l) => l.startsWith('-A KUBE-SERVICES ')).at(-1),
    '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
    'the nodeports jump is last',
  );
});

t.test('bad specs are refused before anything is rendered', async (t) => {
  t.throws(() => renderNftables({ ...upstream, nodeIPs: [] }));
  const port = { name: 'http', protocol: 'TCP' as const, port: 80, targetPort: 80, nodePort: 30080 };
  const twice = {
    ...upstream,
    services: [
      { namespace: 'a', name: 'x', clusterIP: '172.30.0.1', ports: [port], endpoints: [] },
      { namespace: 'a', name: 'y', clusterIP: '172.30.0.2', ports: [port], endpoints: [] },
    ],
  };
  t.throws(() => renderIptables(twice), /NodePort TCP\/30080 is used twice \(a\/y\)/);
  t.throws(() =>
    renderNftables({ ...upstream, services: [{ ...upstream.services[0]!, clusterIP: '172.30.0.41; flush ruleset' }] }),
  );
});

t.test('both modes load into a real kernel, twice (the replacement is atomic and repeatable)', async (t) => {
  const ns = createNetns();
  t.teardown(() => ns.destroy());
  const spec: ClusterSpec = { ...upstream, filler: 300 };
  const run = (cmd: string[], input: string) =>
    execFileSync('ip', ['netns', 'exec', ns.name, ...cmd], { input, encoding: 'utf8' });
  for (let i = 0; i < 2; i++) {
    run(['nft', '-f', '-'], renderNftables(spec));
    run(['iptables-restore'], renderIptables(spec));
  }
  // 301 Services with endpoints: a service chain each, one endpoint chain for svc1, two per filler.
  const chains = ns
    .sh('nft', 'list', 'table', 'ip', 'kube-proxy')
    .split('\n')
    .filter((l) => /^\s*chain (service|endpoint)-[A-Z2-7]{8}-/.test(l));
  t.equal(chains.length, 1 + 300 + 1 + 600);
  const nat = ns.sh('iptables-save', '-t', 'nat');
  t.equal(nat.split('\n').filter((l) => /^:KUBE-SVC-/.test(l)).length, 301);
  t.equal(nat.split('\n').filter((l) => /^:KUBE-SEP-/.test(l)).length, 601);
});
