import t from 'tap';
import { allAddressKeys, buildDesired, diff, emptyState, isEmptyDelta, rulesFor, withNodeAddresses, withServices } from '../../agent/desired.ts';
import { parseAddress, shortHash } from '../../agent/address.ts';
import { entry } from '../helpers/agent.ts';

t.test('entry: addresses from clusterIPs, externalIPs, LB ingress; TCP/UDP ports; threshold', async (t) => {
  const e = entry({ name: 'a', namespace: 'n', clusterIPs: ['10.96.0.1', 'fd00::1'], externalIPs: ['192.0.2.1', '10.96.0.1'], lbIPs: ['198.51.100.1'], ports: [{ port: 80, nodePort: 30080 }, { port: 53, protocol: 'UDP' }, { port: 9, protocol: 'SCTP' }], threshold: '7' });
  t.equal(e.id, shortHash('n/a'));
  t.same(e.vips.map((v) => v.addr), ['10.96.0.1', '192.0.2.1', '198.51.100.1', 'fd00::1']);
  t.same(e.ports, [{ proto: 'tcp', port: 80 }, { proto: 'udp', port: 53 }]);
  t.same(e.nodePorts, [{ proto: 'tcp', port: 30080 }]);
  t.equal(e.threshold, 7);
  t.equal(entry({ name: 'b' }, 33).threshold, 33, 'agent default');
});

t.test('addresses are canonical', async (t) => {
  t.same(parseAddress('FD00:0:0::0001'), { family: 'ip6', addr: 'fd00::1' });
  t.same(parseAddress('::ffff:10.0.0.1'), { family: 'ip6', addr: '::ffff:a00:1' });
  t.equal(parseAddress('10.0.0.256'), undefined);
  t.equal(parseAddress('fe80::1%eth0'), undefined);
});

t.test('shared addresses and NodePorts group per destination', async (t) => {
  const x = entry({ name: 'x', clusterIPs: ['10.96.0.5'], externalIPs: ['192.0.2.50'], ports: [{ port: 80, nodePort: 30080 }] });
  const y = entry({ name: 'y', clusterIPs: ['10.96.0.6'], externalIPs: ['192.0.2.50'], ports: [{ port: 443 }] });
  const s = buildDesired([x, y], [parseAddress('10.0.0.1')!]);
  t.same(rulesFor(s, 'ip 192.0.2.50')?.rules.map((r) => r.port).sort(), [443, 80]);
  t.same(rulesFor(s, 'ip 10.0.0.1')?.rules.map((r) => r.port), [30080]);
  t.same(allAddressKeys(s), ['ip 10.0.0.1', 'ip 10.96.0.5', 'ip 10.96.0.6', 'ip 192.0.2.50']);
  const noNode = withServices(s, new Map([[x.id, undefined]]));
  t.equal(rulesFor(noNode, 'ip 10.0.0.1'), undefined, 'no NodePort Services: node address unused');
  t.same(rulesFor(noNode, 'ip 192.0.2.50')?.rules.map((r) => r.port), [443]);
});

t.test('diff: only what changed; states are not mutated', async (t) => {
  const a = entry({ name: 'a', clusterIPs: ['10.96.0.1'] });
  const b = entry({ name: 'b', clusterIPs: ['10.96.0.2'] });
  const s1 = buildDesired([a, b], []);
  const a2 = entry({ name: 'a', clusterIPs: ['10.96.0.3'] });
  const s2 = withServices(s1, new Map([[a2.id, a2]]));
  t.equal(s1.services.get(a.id), a, 'old state unchanged');
  const d = diff(s1, s2, [a.id]);
  t.same(d.upsert.map((u) => u.address.addr), ['10.96.0.3']);
  t.same(d.remove, ['ip 10.96.0.1']);
  t.same([...d.created], ['ip 10.96.0.3']);
  t.same(diff(s1, s2), d, 'same result without the hint of changed ids');
  t.ok(isEmptyDelta(diff(s1, s1)));
  const moved = withNodeAddresses(buildDesired([entry({ name: 'n', ports: [{ port: 80, nodePort: 30001 }] })], [parseAddress('10.0.0.1')!]), [parseAddress('10.0.0.2')!]);
  const before = buildDesired([entry({ name: 'n', ports: [{ port: 80, nodePort: 30001 }] })], [parseAddress('10.0.0.1')!]);
  const nd = diff(before, moved, []);
  t.same(nd.remove, ['ip 10.0.0.1']);
  t.same(nd.upsert.map((u) => u.address.addr), ['10.0.0.2']);
  t.ok(isEmptyDelta(diff(emptyState(), emptyState())));
});
