/**
 * kube-proxy's mode, read from a scratch netns holding what each mode programs: the
 * nftables and iptables rulesets as kube-proxy writes them (test/helpers/kube-proxy.ts,
 * loaded with nft and iptables-restore, iptables-nft), and IPVS's `kube-ipvs0` beside the
 * iptables chains IPVS mode also keeps.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { kubeProxyMode, parseTables, readKubeProxyMode } from '../../../agent/host/kube-proxy-mode.ts';
import { renderNftables } from '../../helpers/kube-proxy.ts';
import { renderIptables } from '../../helpers/kube-proxy-iptables.ts';
import { ClusterSpec } from '../../helpers/kube-proxy-spec.ts';
import { createNetns } from '../../helpers/netns.ts';

const spec = ClusterSpec.parse({
  podCIDR: '10.0.2.0/24',
  serviceCIDR: '10.96.0.0/16',
  nodeIPs: ['10.0.1.1'],
  services: [
    {
      namespace: 'demo',
      name: 'web',
      clusterIP: '10.96.0.10',
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
      endpoints: ['10.0.2.2'],
    },
  ],
});

t.test('the classification (pure)', async (t) => {
  const none = { tables: [], iptablesChains: false, ipvsDevice: false };
  t.equal(kubeProxyMode(none), 'unknown');
  t.equal(kubeProxyMode({ ...none, tables: ['inet flowhint', 'ip kube-proxy'] }), 'nftables');
  t.equal(kubeProxyMode({ ...none, tables: ['ip6 kube-proxy'] }), 'nftables');
  t.equal(kubeProxyMode({ ...none, tables: ['inet kube-proxy'] }), 'unknown', 'not a kube-proxy family');
  t.equal(kubeProxyMode({ ...none, iptablesChains: true }), 'iptables');
  t.equal(kubeProxyMode({ ...none, iptablesChains: true, ipvsDevice: true }), 'ipvs', 'IPVS keeps iptables chains');
  t.equal(kubeProxyMode({ tables: ['ip kube-proxy'], iptablesChains: true, ipvsDevice: false }), 'nftables');
  t.strictSame(
    parseTables(
      '{"nftables":[{"metainfo":{"version":"1.0.6"}},{"table":{"family":"ip","name":"nat","handle":1}},{"table":{"family":"inet","name":"flowhint","handle":2}}]}',
    ),
    ['ip nat', 'inet flowhint'],
  );
  t.strictSame(parseTables(''), []);
  t.strictSame(parseTables('{"other":1}'), [], 'an answer of another shape lists none');
});

t.test('read from the kernel: each mode as kube-proxy leaves it', async (t) => {
  const ns = createNetns();
  t.teardown(() => ns.destroy());
  const exec = (cmd: string, args: string[], input?: string) =>
    execFileSync('ip', ['netns', 'exec', ns.name, cmd, ...args], { input, stdio: ['pipe', 'ignore', 'inherit'] });
  t.equal(await readKubeProxyMode(ns.run), 'unknown', 'an empty node');
  exec('nft', ['-f', '-'], renderNftables(spec));
  t.equal(await readKubeProxyMode(ns.run), 'nftables');
  exec('nft', ['delete', 'table', 'ip', 'kube-proxy']);
  exec('iptables-restore', [], renderIptables(spec));
  t.equal(await readKubeProxyMode(ns.run), 'iptables');
  // kube-proxy's kube-ipvs0 is a dummy device; this host has no dummy driver, and the
  // mode is read from the name, so a veth stands in.
  exec('ip', ['link', 'add', 'kube-ipvs0', 'type', 'veth', 'peer', 'name', 'ipvs-peer']);
  t.equal(await readKubeProxyMode(ns.run), 'ipvs');
});
