import t from 'tap';
import { shortChainName } from '../../../agent/state/short-lived.ts';
import { buildDesired, emptyState, rulesFor, withNodeAddresses, withServices } from '../../../agent/state/desired.ts';
import { diff, isEmptyDelta } from '../../../agent/state/delta.ts';
import { parseAddress } from '../../../agent/state/address.ts';
import { entry } from '../../helpers/agent.ts';

t.test('entry: addresses from clusterIPs, externalIPs, LB ingress; TCP/UDP ports; threshold', async (t) => {
  const e = entry({
    name: 'a',
    namespace: 'n',
    clusterIPs: ['10.96.0.1', 'fd00::1'],
    externalIPs: ['192.0.2.1', '10.96.0.1'],
    lbIPs: ['198.51.100.1'],
    ports: [
      { port: 80, nodePort: 30080 },
      { port: 53, protocol: 'UDP' },
      { port: 9, protocol: 'SCTP' },
    ],
    threshold: '7',
  });
  t.equal(e.key, 'n/a');
  t.same(
    e.vips.map((v) => v.addr),
    ['10.96.0.1', '192.0.2.1', '198.51.100.1', 'fd00::1'],
  );
  t.same(e.ports, [
    { proto: 'tcp', port: 80 },
    { proto: 'udp', port: 53 },
  ]);
  t.same(e.nodePorts, [{ proto: 'tcp', port: 30080 }]);
  t.equal(e.threshold, 7);
  t.equal(entry({ name: 'b' }, 33).threshold, 33, 'agent default');
});

t.test('shared addresses and NodePorts group per destination', async (t) => {
  const x = entry({
    name: 'x',
    clusterIPs: ['10.96.0.5'],
    externalIPs: ['192.0.2.50'],
    ports: [{ port: 80, nodePort: 30080 }],
  });
  const y = entry({ name: 'y', clusterIPs: ['10.96.0.6'], externalIPs: ['192.0.2.50'], ports: [{ port: 443 }] });
  const s = buildDesired([x, y], [parseAddress('10.0.0.1')!]);
  t.same(
    rulesFor(s, 'ip 192.0.2.50')
      ?.rules.map((r) => r.port)
      .sort(),
    [443, 80],
  );
  t.same(
    rulesFor(s, 'ip 10.0.0.1')?.rules.map((r) => r.port),
    [30080],
  );
  t.same([...s.chainOf.keys()].sort(), ['ip 10.0.0.1', 'ip 10.96.0.5', 'ip 10.96.0.6', 'ip 192.0.2.50']);
  const noNode = withServices(s, new Map([[x.key, undefined]]));
  t.equal(rulesFor(noNode, 'ip 10.0.0.1'), undefined, 'no NodePort Services: node address unused');
  t.same(
    rulesFor(noNode, 'ip 192.0.2.50')?.rules.map((r) => r.port),
    [443],
  );
});

t.test('diff: only what changed; states are not mutated', async (t) => {
  const a = entry({ name: 'a', clusterIPs: ['10.96.0.1'] });
  const b = entry({ name: 'b', clusterIPs: ['10.96.0.2'] });
  const s1 = buildDesired([a, b], []);
  t.equal(s1.chains.size, 1, 'same ports and threshold: one shared chain');
  t.equal([...s1.chains.values()][0]?.refs, 2);
  const a2 = entry({ name: 'a', clusterIPs: ['10.96.0.3'] });
  const s2 = withServices(s1, new Map([[a2.key, a2]]));
  t.equal(s1.services.get(a.key), a, 'old state unchanged');
  t.equal(s1.chainOf.size, 2, 'old derived maps unchanged');
  const d = diff(s1, s2, [a.key]);
  t.same(
    d.removeElements.map((x) => x.addr),
    ['10.96.0.1'],
  );
  t.same(
    d.addElements.map((x) => x.address.addr),
    ['10.96.0.3'],
  );
  t.same(d.addChains, [], 'the shared chain exists already');
  t.same(d.removeChains, []);
  t.same(diff(s1, s2), d, 'same result without the hint of changed ids');
  const a3 = entry({ name: 'a', clusterIPs: ['10.96.0.3'], threshold: '99' });
  const s3 = withServices(s2, new Map([[a3.key, a3]]));
  const d3 = diff(s2, s3, [a3.key]);
  t.equal(d3.addChains.length, 1, 'a new threshold: a new chain');
  t.same(
    d3.addChains[0]?.spec.rules.map((r) => r.threshold),
    [99],
  );
  t.same(
    d3.removeElements.map((x) => x.addr),
    ['10.96.0.3'],
    'moved: delete and re-add the element',
  );
  t.same(
    d3.addElements.map((x) => x.address.addr),
    ['10.96.0.3'],
  );
  const s4 = withServices(
    s3,
    new Map([
      [a3.key, undefined],
      [b.key, undefined],
    ]),
  );
  const d4 = diff(s3, s4, [a3.key, b.key]);
  t.equal(d4.removeChains.length, 2, 'unused chains are deleted');
  t.equal(s4.chains.size, 0);
  t.ok(isEmptyDelta(diff(s1, s1)));
  const moved = withNodeAddresses(
    buildDesired([entry({ name: 'n', ports: [{ port: 80, nodePort: 30001 }] })], [parseAddress('10.0.0.1')!]),
    [parseAddress('10.0.0.2')!],
  );
  const before = buildDesired(
    [entry({ name: 'n', ports: [{ port: 80, nodePort: 30001 }] })],
    [parseAddress('10.0.0.1')!],
  );
  const nd = diff(before, moved, []);
  t.same(
    nd.removeElements.map((x) => x.addr),
    ['10.0.0.1'],
  );
  t.same(
    nd.addElements.map((x) => x.address.addr),
    ['10.0.0.2'],
  );
  t.ok(isEmptyDelta(diff(emptyState(), emptyState())));
});

t.test('derived maps equal a rebuild from scratch after any sequence of updates', async (t) => {
  let s = buildDesired([], [parseAddress('10.0.0.1')!]);
  const specs = Array.from({ length: 40 }, (_, i) => ({
    name: `s${i % 13}`,
    clusterIPs: [`10.96.0.${i % 7}`],
    ports: [{ port: 80 + (i % 3), nodePort: i % 4 === 0 ? 30000 + i : undefined }],
    threshold: i % 5 === 0 ? String(i) : undefined,
  }));
  for (const [i, spec] of specs.entries()) {
    const e = entry(spec);
    s = withServices(s, new Map([[e.key, i % 6 === 5 ? undefined : e]]));
  }
  const fresh = buildDesired(s.services.values(), s.nodeAddresses);
  t.same([...s.chainOf].sort(), [...fresh.chainOf].sort());
  t.same([...s.chains].sort(), [...fresh.chains].sort());
});

t.test('ShortLived: elements per address, protocol and port, shared chains, never offloaded', async (t) => {
  const node = [parseAddress('192.168.1.10')!];
  const dns = entry({
    name: 'dns',
    hint: 'ShortLived',
    clusterIPs: ['10.96.0.53'],
    ports: [{ port: 53, protocol: 'UDP', nodePort: 30053 }],
  });
  const api = entry({
    name: 'api',
    hint: 'ShortLived',
    timeout: '2m',
    clusterIPs: ['10.96.0.80'],
    ports: [{ port: 80 }],
  });
  const s = buildDesired([dns, api], node);
  // Expected, written out from the inputs: UDP 53 and NodePort 30053 at the 5 s default, TCP 80 at 120 s.
  const udp5 = shortChainName('ip', 'udp', 5);
  const tcp120 = shortChainName('ip', 'tcp', 120);
  t.same(Object.fromEntries(s.shortOf), {
    'ip 10.96.0.53|udp|53': udp5,
    'ip 192.168.1.10|udp|30053': udp5,
    'ip 10.96.0.80|tcp|80': tcp120,
  });
  t.same(Object.fromEntries([...s.shortChains].map(([k, c]) => [k, `${c.proto}/${c.seconds}x${c.refs}`])), {
    [udp5]: 'udp/5x2',
    [tcp120]: 'tcp/120x1',
  });
  t.equal(s.chainOf.size, 0, 'no offload elements for ShortLived Services');
  t.equal(dns.timeout, 5);
  t.equal(api.timeout, 120);
});

t.test('ShortLived: incremental updates equal a fresh build, and diff names only the change', async (t) => {
  const node = [parseAddress('192.168.1.10')!];
  const a = entry({
    name: 'a',
    hint: 'ShortLived',
    clusterIPs: ['10.96.0.1'],
    ports: [{ port: 53, protocol: 'UDP', nodePort: 30053 }],
  });
  const b = entry({ name: 'b', hint: 'ShortLived', clusterIPs: ['10.96.0.2'], ports: [{ port: 53, protocol: 'UDP' }] });
  const bLong = entry({ name: 'b', clusterIPs: ['10.96.0.2'], ports: [{ port: 53, protocol: 'UDP' }] });
  const before = buildDesired([a, b], node);
  const after = withServices(before, new Map([[bLong.key, bLong]]));
  const fresh = buildDesired([a, bLong], node);
  for (const k of ['shortOf', 'shortChains', 'chainOf', 'chains'] as const)
    t.same(Object.fromEntries(after[k]), Object.fromEntries(fresh[k]), `${k} as a fresh build`);
  const d = diff(before, after, [bLong.key]);
  t.same(d.removeShortElements, ['ip 10.96.0.2|udp|53'], 'b leaves the timeout map');
  t.same(
    d.addElements.map((e) => e.address.addr),
    ['10.96.0.2'],
    'and joins the offload map',
  );
  t.same(d.removeShortChains, [], 'the UDP 5 s chain is still used by a');
  const moved = withNodeAddresses(after, [parseAddress('192.168.1.11')!]);
  t.same(
    [...moved.shortOf.keys()].sort(),
    ['ip 10.96.0.1|udp|53', 'ip 192.168.1.11|udp|30053'],
    'NodePort elements follow the node address',
  );
  const dm = diff(after, moved, []);
  t.same(
    [dm.removeShortElements, dm.addShortElements.map((e) => e.key)],
    [['ip 192.168.1.10|udp|30053'], ['ip 192.168.1.11|udp|30053']],
  );
  const gone = withServices(moved, new Map([[a.key, undefined]]));
  const dg = diff(moved, gone, [a.key]);
  t.same(dg.removeShortChains, [shortChainName('ip', 'udp', 5)], 'the last user gone: its chain goes');
  t.equal(gone.shortOf.size, 0);
});
