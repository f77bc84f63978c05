import t from 'tap';
import { parseAddress } from '../../../agent/state/address.ts';
import { buildDesired } from '../../../agent/state/desired.ts';
import {
  BYPASS_DETAIL,
  bypassText,
  localDelivery,
  parseIpvs,
  parseLocalAddresses,
} from '../../../agent/host/local-delivery.ts';
import { entry } from '../../helpers/agent.ts';

// /proc/net/ip_vs as Debian's 6.1 kernel printed it in the VM (test/kernel, IPVS scenario),
// plus an IPv6 and a fwmark service in the kernel's own formats ("[%pI6]:%04X", "FWM  %08X").
const PROC = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port Forward Weight ActiveConn InActConn
UDP  0A60020A:0035 rr  
  -> 0A000202:1B58      Masq    1      0          0         
TCP  0A60020A:0050 rr  
  -> 0A000202:1451      Masq    1      0          0         
TCP  [fd00:0096:0000:0000:0000:0000:0000:0010]:01BB rr  
  -> [fd02:0000:0000:0000:0000:0000:0000:0002]:1451      Masq    1      0          0         
FWM  00000001 rr  
`;

t.test('parseIpvs: IPv4 and IPv6 virtual services, real servers and fwmarks skipped', async (t) => {
  t.same([...parseIpvs(PROC)].sort(), ['tcp|ip 10.96.2.10|80', 'tcp|ip6 fd00:96::10|443', 'udp|ip 10.96.2.10|53']);
  t.same([...parseIpvs('')], []);
  t.same([...parseIpvs('TCP  ZZZZZZZZ:0050 rr\nTCP 0A60020A:50 rr\n')], [], 'malformed lines are ignored');
});

t.test('parseLocalAddresses: every address, up or down (kube-ipvs0 is down)', async (t) => {
  const json = JSON.stringify([
    { ifname: 'lo', addr_info: [{ local: '127.0.0.1' }, { local: '::1' }] },
    { ifname: 'kube-ipvs0', operstate: 'DOWN', addr_info: [{ local: '10.96.2.10' }, { local: 'FD00:96::10' }] },
    { ifname: 'eth0', addr_info: [] },
  ]);
  t.same([...parseLocalAddresses(json)].sort(), ['ip 10.96.2.10', 'ip 127.0.0.1', 'ip6 ::1', 'ip6 fd00:96::10']);
});

t.test('localDelivery: IPVS ports, local addresses, NodePorts only when IPVS serves them', async (t) => {
  const node = [parseAddress('192.168.1.10')!];
  const state = buildDesired(
    [
      entry({
        name: 'ipvs',
        clusterIPs: ['10.96.2.10'],
        ports: [{ port: 80 }, { port: 53, protocol: 'UDP' }, { port: 8080 }],
      }),
      entry({ name: 'local', clusterIPs: ['10.96.3.3'], ports: [{ port: 80 }] }),
      entry({
        name: 'forwarded',
        clusterIPs: ['10.96.4.4'],
        ports: [
          { port: 80, nodePort: 30080 },
          { port: 81, nodePort: 30081 },
        ],
      }),
    ],
    node,
  );
  const view = {
    ipvs: new Set(['tcp|ip 10.96.2.10|80', 'udp|ip 10.96.2.10|53', 'tcp|ip 192.168.1.10|30081']),
    local: new Set(['ip 10.96.3.3', 'ip 192.168.1.10']),
  };
  const got = localDelivery(state, view);
  t.same(Object.fromEntries(got), {
    'default/ipvs': [
      { address: '10.96.2.10', proto: 'tcp', port: 80, reason: 'ipvs' },
      { address: '10.96.2.10', proto: 'udp', port: 53, reason: 'ipvs' },
    ],
    'default/local': [{ address: '10.96.3.3', proto: 'tcp', port: 80, reason: 'local-address' }],
    'default/forwarded': [{ address: '192.168.1.10', proto: 'tcp', port: 30081, reason: 'ipvs' }],
  });
  t.same(
    localDelivery(state, { ipvs: new Set(), local: new Set(['ip 192.168.1.10']) }).size,
    0,
    'a NodePort on a node address is forwarded after DNAT: not reported',
  );
});

t.test('parseIpvs: only whole fields; IPv6 only in brackets', async (t) => {
  t.same(
    [...parseIpvs('TCP  0A60020A0:0050 rr\nTCP  A60020A:0050 rr\n  TCP  0A60020A:0050 rr\nXTCP  0A60020A:0050 rr\n')],
    [],
    'nine or seven hex digits, indented, or a longer protocol word',
  );
  t.same(
    [
      ...parseIpvs(
        'TCP  fd00:0096:0000:0000:0000:0000:0000:0010]:01BB rr\nTCP  [fd00:0096:0000:0000:0000:0000:0000:0010:01BB rr\n',
      ),
    ],
    [],
    'a bracket missing',
  );
  t.same([...parseIpvs('UDP  [::ffff:10.0.0.1]:0035 rr\n')], ['udp|ip6 ::ffff:a00:1|53']);
});

t.test('localDelivery: IPVS alone, local addresses alone; ShortLived never reported', async (t) => {
  const state = buildDesired(
    [
      entry({ name: 'a', clusterIPs: ['10.96.2.10'], ports: [{ port: 80 }] }),
      entry({ name: 'dns', hint: 'ShortLived', clusterIPs: ['10.96.2.11'], ports: [{ port: 53, protocol: 'UDP' }] }),
    ],
    [],
  );
  t.same(Object.fromEntries(localDelivery(state, { ipvs: new Set(['tcp|ip 10.96.2.10|80']), local: new Set() })), {
    'default/a': [{ address: '10.96.2.10', proto: 'tcp', port: 80, reason: 'ipvs' }],
  });
  t.same(Object.fromEntries(localDelivery(state, { ipvs: new Set(), local: new Set(['ip 10.96.2.10']) })), {
    'default/a': [{ address: '10.96.2.10', proto: 'tcp', port: 80, reason: 'local-address' }],
  });
  t.same(
    localDelivery(state, { ipvs: new Set(['udp|ip 10.96.2.11|53']), local: new Set(['ip 10.96.2.11']) }).size,
    0,
    'a ShortLived Service is never offloaded, so never reported',
  );
  // kube-vip or keepalived holds the address on the node, and kube-proxy (iptables or
  // nftables mode) DNATs it in prerouting: forwarded to an endpoint, so offloadable.
  t.same(
    localDelivery(state, { ipvs: new Set(), local: new Set(['ip 10.96.2.10']), dnatBeforeRouting: true }).size,
    0,
    'a node-held address that kube-proxy DNATs before routing is not local delivery',
  );
  t.same(
    Object.fromEntries(
      localDelivery(state, { ipvs: new Set(['tcp|ip 10.96.2.10|80']), local: new Set(), dnatBeforeRouting: true }),
    ),
    { 'default/a': [{ address: '10.96.2.10', proto: 'tcp', port: 80, reason: 'ipvs' }] },
    'IPVS is IPVS whatever else is loaded',
  );
});

t.test('what each reason tells the operator', async (t) => {
  t.equal(
    bypassText({ address: 'fd00::1', proto: 'udp', port: 53, reason: 'ipvs' }),
    '[fd00::1] udp/53',
    'IPv6 in brackets',
  );
  t.equal(bypassText({ address: '10.0.0.1', proto: 'tcp', port: 80, reason: 'local-address' }), '10.0.0.1 tcp/80');
  t.match(BYPASS_DETAIL.ipvs, /^an IPVS virtual service \(kube-proxy IPVS mode\) delivers it on this node/);
  t.match(
    BYPASS_DETAIL['local-address'],
    /^the address is local to this node and nothing DNATs it before routing, so its traffic is delivered, not forwarded/,
  );
});

t.test('parseLocalAddresses: no output is no address', async (t) => {
  t.same([...parseLocalAddresses('')], []);
});
