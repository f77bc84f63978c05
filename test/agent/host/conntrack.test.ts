/** conntrack -L parsing and per-Service counts, on lines Debian's 6.1 kernel printed in the VM (test/kernel). */
import t from 'tap';
import { parseAddress } from '../../../agent/state/address.ts';
import { conntrackDestinations, countByService, entriesByService } from '../../../agent/host/conntrack.ts';
import { buildDesired } from '../../../agent/state/desired.ts';
import { entry } from '../../helpers/agent.ts';

const LINES = [
  'tcp      6 src=10.0.1.2 dst=10.96.0.10 sport=47892 dport=80 packets=6196 bytes=271837509 src=10.0.2.2 dst=10.0.1.2 sport=5201 dport=47892 packets=4401 bytes=228860 [OFFLOAD] mark=0 use=2',
  'tcp      6 119 TIME_WAIT src=10.0.1.2 dst=10.96.0.10 sport=47890 dport=80 packets=16 bytes=1293 src=10.0.2.2 dst=10.0.1.2 sport=5201 dport=47890 packets=13 bytes=1018 [ASSURED] mark=0 use=2',
  'udp      17 4 src=10.0.1.2 dst=10.96.0.53 sport=48316 dport=53 src=10.0.2.2 dst=10.0.1.2 sport=7000 dport=48316 mark=0 use=1',
  'udp      17 27 src=10.0.1.2 dst=10.96.0.53 sport=48317 dport=53 src=10.0.2.2 dst=10.0.1.2 sport=7000 dport=48317 mark=0 use=1',
  'ipv6     10 udp      17 src=fd01::2 dst=fd00:96::10 sport=40000 dport=53 src=fd02::2 dst=fd01::2 sport=7000 dport=40000 [OFFLOAD] mark=0 use=2',
  'icmp     1 29 src=10.0.1.2 dst=10.0.1.1 type=8 code=0 id=1 src=10.0.1.1 dst=10.0.1.2 type=0 code=0 id=1 mark=0 use=1',
  'conntrack v1.4.7 (conntrack-tools): 6 flow entries have been shown.',
].join('\n');

t.test('destinations: TCP and UDP entries by original destination, offloaded or not; others skipped', async (t) => {
  t.same(conntrackDestinations(LINES), [
    { proto: 'tcp', addr: 'ip 10.96.0.10', port: 80, offloaded: true },
    { proto: 'tcp', addr: 'ip 10.96.0.10', port: 80, offloaded: false },
    { proto: 'udp', addr: 'ip 10.96.0.53', port: 53, offloaded: false },
    { proto: 'udp', addr: 'ip 10.96.0.53', port: 53, offloaded: false },
    { proto: 'udp', addr: 'ip6 fd00:96::10', port: 53, offloaded: true },
  ]);
});

t.test('counts: offloaded per LongLived Service, every entry per ShortLived Service', async (t) => {
  const state = buildDesired(
    [
      entry({
        name: 'web',
        clusterIPs: ['10.96.0.10', 'fd00:96::10'],
        ports: [{ port: 80 }, { port: 53, protocol: 'UDP' }],
      }),
      entry({ name: 'dns', hint: 'ShortLived', clusterIPs: ['10.96.0.53'], ports: [{ port: 53, protocol: 'UDP' }] }),
      entry({ name: 'idle', clusterIPs: ['10.96.0.99'] }),
    ],
    [parseAddress('10.0.1.1')!],
  );
  const dests = conntrackDestinations(LINES);
  t.same(
    Object.fromEntries(countByService(state, dests)),
    { 'default/web': 2, 'default/idle': 0 },
    'the TIME_WAIT entry is not offloaded; ShortLived Services are not counted here',
  );
  t.same(
    Object.fromEntries(entriesByService(state, dests)),
    { 'default/dns': 2 },
    'both DNS entries, offloaded or not',
  );
});
