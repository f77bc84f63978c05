import t from 'tap';
import { shortChainName } from '../../../agent/state/short-lived.ts';
import { buildDesired, emptyState, rulesFor, withNodeAddresses, withServices } from '../../../agent/state/desired.ts';
import { diff, isEmptyDelta } from '../../../agent/state/delta.ts';
import { parseAddress } from '../../../agent/state/address.ts';
import { entry, svc } from '../../helpers/agent.ts';

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

t.test('after any sequence of updates, each address has the rules its live Services ask for', async (t) => {
  let s = buildDesired([], [parseAddress('10.0.0.1')!]);
  const specs = Array.from({ length: 40 }, (_, i) => ({
    name: `s${i % 13}`,
    clusterIPs: [`10.96.0.${i % 7}`],
    ports: [{ port: 80 + (i % 3), nodePort: i % 4 === 0 ? 30000 + i : undefined }],
    threshold: i % 5 === 0 ? String(i) : undefined,
  }));
  const live = new Map<string, (typeof specs)[number]>();
  for (const [i, spec] of specs.entries()) {
    const e = entry(spec);
    const gone = i % 6 === 5;
    s = withServices(s, new Map([[e.key, gone ? undefined : e]]));
    if (gone) live.delete(spec.name);
    else live.set(spec.name, spec);
  }
  // Expected, from the live specs alone: per address, `tcp/<port>><threshold>` for each port
  // (the lowest threshold where two Services share one), sorted by port; the node address
  // carries every NodePort.
  const want = new Map<string, Map<number, number>>();
  const put = (addr: string, port: number, threshold: number) => {
    const ports = want.get(addr) ?? new Map<number, number>();
    ports.set(port, Math.min(threshold, ports.get(port) ?? Infinity));
    want.set(addr, ports);
  };
  for (const spec of live.values()) {
    const threshold = spec.threshold === undefined ? 20 : Number(spec.threshold);
    put(`ip ${spec.clusterIPs[0]!}`, spec.ports[0]!.port, threshold);
    if (spec.ports[0]!.nodePort !== undefined) put('ip 10.0.0.1', spec.ports[0]!.nodePort, threshold);
  }
  const text = (ports: Map<number, number>) =>
    [...ports]
      .sort(([a], [b]) => a - b)
      .map(([port, th]) => `tcp/${port}>${th}`)
      .join(',');
  const expected = Object.fromEntries([...want].map(([addr, ports]) => [addr, text(ports)]));
  const actual = Object.fromEntries(
    [...s.chainOf].map(([addr, chain]) => [
      addr,
      (s.chains.get(chain)?.rules ?? []).map((r) => `${r.proto}/${r.port}>${r.threshold}`).join(','),
    ]),
  );
  t.same(actual, expected, 'every address with its rules, and no other');
  const refs: Record<string, number> = {};
  for (const rules of Object.values(expected)) refs[rules] = (refs[rules] ?? 0) + 1;
  t.same(
    Object.fromEntries(
      [...s.chains.values()].map((c) => [c.rules.map((r) => `${r.proto}/${r.port}>${r.threshold}`).join(','), c.refs]),
    ),
    refs,
    'one chain per distinct rule list, counting the addresses that use it',
  );
  t.ok(live.size > 3 && Object.keys(expected).length > 3, 'the sequence leaves several Services and addresses');
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

t.test('ShortLived: an update moves a Service between the maps, and diff names only the change', async (t) => {
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
  // Expected, written out from the inputs: a keeps its UDP 53 and NodePort 30053 timeouts at
  // the 5 s default; b (now LongLived) leaves the timeout map for the offload map.
  const udp5 = shortChainName('ip', 'udp', 5);
  t.same(Object.fromEntries(after.shortOf), { 'ip 10.96.0.1|udp|53': udp5, 'ip 192.168.1.10|udp|30053': udp5 });
  t.same(Object.fromEntries([...after.shortChains].map(([k, c]) => [k, `${c.proto}/${c.seconds}x${c.refs}`])), {
    [udp5]: 'udp/5x2',
  });
  t.same(
    Object.fromEntries(
      [...after.chainOf].map(([addr, chain]) => [
        addr,
        after.chains.get(chain)?.rules.map((r) => `${r.proto}/${r.port}>${r.threshold}`),
      ]),
    ),
    { 'ip 10.96.0.2': ['udp/53>20'] },
  );
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

t.test('Services sharing an address, protocol and port: the lowest threshold, the shortest timeout', async (t) => {
  const long = (name: string, threshold: string) =>
    entry({ name, clusterIPs: ['10.96.0.9'], ports: [{ port: 80 }], threshold });
  const short = (name: string, timeout: string) =>
    entry({ name, hint: 'ShortLived', timeout, clusterIPs: ['10.96.0.53'], ports: [{ port: 53, protocol: 'UDP' }] });
  const rules = (s: ReturnType<typeof buildDesired>) =>
    s.chains.get(s.chainOf.get('ip 10.96.0.9') ?? '')?.rules.map((r) => `${r.proto}/${r.port}>${r.threshold}`);
  const seconds = (s: ReturnType<typeof buildDesired>) =>
    s.shortChains.get(s.shortOf.get('ip 10.96.0.53|udp|53') ?? '')?.seconds;
  for (const order of [
    ['a', 'b'],
    ['b', 'a'],
  ]) {
    const byName: Record<string, ReturnType<typeof entry>[]> = {
      a: [long('a', '50'), short('c', '30s')],
      b: [long('b', '5'), short('d', '2m')],
    };
    let s = buildDesired([], []);
    for (const n of order) s = withServices(s, new Map(byName[n]!.map((e) => [e.key, e])));
    t.same(rules(s), ['tcp/80>5'], `threshold 5 of 5 and 50 (${order.join(' then ')})`);
    t.equal(seconds(s), 30, `30 s of 30 s and 2 min (${order.join(' then ')})`);
    t.equal(s.shortChains.size, 1, 'one timeout chain: the 2 min one is unused');
  }
  let s = buildDesired([long('a', '50'), long('b', '5'), short('c', '30s'), short('d', '2m')], []);
  s = withServices(
    s,
    new Map([
      ['default/b', undefined],
      ['default/c', undefined],
    ]),
  );
  t.same(rules(s), ['tcp/80>50'], 'the lower threshold gone: the other one');
  t.equal(seconds(s), 120, 'the shorter timeout gone: the other one');
  t.equal(s.shortChains.size, 1, 'and the 30 s chain is gone');
  s = withServices(
    s,
    new Map([
      ['default/a', undefined],
      ['default/d', undefined],
    ]),
  );
  t.same([s.chainOf.size, s.chains.size, s.shortOf.size, s.shortChains.size], [0, 0, 0, 0], 'all gone: nothing left');
});

t.test(
  'entry: only whole ports 1-65535, sorted by protocol then number, each once; clusterIP when clusterIPs is empty',
  async (t) => {
    const e = entry({
      name: 'p',
      clusterIPs: ['10.96.0.1'],
      ports: [
        { port: 0 },
        { port: 65535, nodePort: 65536 },
        { port: 1, nodePort: 0 },
        { port: 443, protocol: 'UDP' },
        { port: 9 },
        { port: 9 },
        { port: 70000 },
      ],
    });
    t.same(e.ports, [
      { proto: 'tcp', port: 1 },
      { proto: 'tcp', port: 9 },
      { proto: 'tcp', port: 65535 },
      { proto: 'udp', port: 443 },
    ]);
    t.same(e.nodePorts, []);
    const obj = svc({ name: 'legacy', clusterIPs: ['10.96.0.7'], lbIPs: ['198.51.100.7'] }) as {
      spec: { clusterIPs: string[] };
      status: { loadBalancer: { ingress: object[] } };
    };
    obj.spec.clusterIPs = [];
    obj.status.loadBalancer.ingress.push({ hostname: 'lb.example.com' });
    t.same(
      entry(obj).vips.map((v) => v.addr),
      ['10.96.0.7', '198.51.100.7'],
      'spec.clusterIP, and ingress entries with an IP',
    );
    const s = buildDesired(
      [
        entry({
          name: 'q',
          clusterIPs: ['10.96.0.2'],
          ports: [{ port: 8080 }, { port: 80 }, { port: 53, protocol: 'UDP' }],
        }),
      ],
      [],
    );
    t.same(
      rulesFor(s, 'ip 10.96.0.2')?.rules.map((r) => `${r.proto}/${r.port}`),
      ['tcp/80', 'tcp/8080', 'udp/53'],
      'rules sorted by protocol, then port number (not text)',
    );
  },
);

t.test('NodePorts follow the node addresses and the Services that have them', async (t) => {
  const np = entry({ name: 'np', clusterIPs: ['10.96.0.3'], ports: [{ port: 80, nodePort: 30080 }] });
  const plain = entry({ name: 'plain', clusterIPs: ['10.96.0.4'], ports: [{ port: 80 }] });
  const nodes = [parseAddress('10.0.0.2')!, parseAddress('10.0.0.1')!];
  let s = buildDesired([plain], nodes);
  t.equal(rulesFor(s, 'ip 10.0.0.1'), undefined, 'no NodePort Service: nothing on the node addresses');
  s = withServices(s, new Map([[np.key, np]]));
  t.same(
    [...s.chainOf.keys()].sort(),
    ['ip 10.0.0.1', 'ip 10.0.0.2', 'ip 10.96.0.3', 'ip 10.96.0.4'],
    'a NodePort Service added: every node address',
  );
  t.same(
    s.nodeAddresses.map((a) => a.addr),
    ['10.0.0.1', '10.0.0.2'],
    'node addresses sorted',
  );
  const npNoPorts = entry({ name: 'np', clusterIPs: ['10.96.0.3'], ports: [{ port: 80 }] });
  s = withServices(s, new Map([[np.key, npNoPorts]]));
  t.same([...s.chainOf.keys()].sort(), ['ip 10.96.0.3', 'ip 10.96.0.4'], 'its NodePort removed: the node addresses go');
  s = withServices(s, new Map([[np.key, np]]));
  const short = entry({
    name: 'np',
    hint: 'ShortLived',
    clusterIPs: ['10.96.0.3'],
    ports: [{ port: 80, nodePort: 30080 }],
  });
  s = withServices(s, new Map([[np.key, short]]));
  t.same([...s.chainOf.keys()].sort(), ['ip 10.96.0.4'], 'turned ShortLived: no offload on its addresses or the nodes');
  t.same([...s.shortOf.keys()].sort(), ['ip 10.0.0.1|tcp|30080', 'ip 10.0.0.2|tcp|30080', 'ip 10.96.0.3|tcp|80']);
  const moved = withNodeAddresses(s, [parseAddress('10.0.0.9')!]);
  t.same(
    [...moved.shortOf.keys()].sort(),
    ['ip 10.0.0.9|tcp|30080', 'ip 10.96.0.3|tcp|80'],
    'ShortLived NodePorts move',
  );
  t.same(diff(s, moved, []).removeShortElements.sort(), ['ip 10.0.0.1|tcp|30080', 'ip 10.0.0.2|tcp|30080']);
  const plainMoved = withNodeAddresses(buildDesired([plain, short], []), [parseAddress('10.0.0.9')!]);
  t.same([...plainMoved.shortOf.keys()].sort(), ['ip 10.0.0.9|tcp|30080', 'ip 10.96.0.3|tcp|80']);
  t.equal(withServices(s, new Map()), s, 'no updates: the same state');
});

t.test(
  'diff with the changed ids: a NodePort change moves the node address; ShortLived changes without ids',
  async (t) => {
    const node = [parseAddress('10.0.0.1')!];
    const np = entry({ name: 'np', clusterIPs: ['10.96.0.3'], ports: [{ port: 80, nodePort: 30080 }] });
    const moved = entry({ name: 'np', clusterIPs: ['10.96.0.3'], ports: [{ port: 80, nodePort: 30081 }] });
    const before = buildDesired([np], node);
    const after = withServices(before, new Map([[np.key, moved]]));
    const d = diff(before, after, [np.key]);
    t.same(
      d.removeElements.map((a) => a.addr),
      ['10.0.0.1'],
      'the node address leaves its old chain',
    );
    t.same(
      d.addElements.map((e) => e.address.addr),
      ['10.0.0.1'],
      'and joins the chain with port 30081',
    );
    t.same(
      [d.removeLong.map((e) => `${e.address.addr} ${e.port}`), d.addLong.map((e) => `${e.address.addr} ${e.port}`)],
      [['10.0.0.1 30080'], ['10.0.0.1 30081']],
    );

    const dns = entry({
      name: 'dns',
      hint: 'ShortLived',
      clusterIPs: ['10.96.0.53'],
      ports: [{ port: 53, protocol: 'UDP' }],
    });
    const dns2 = entry({
      name: 'dns',
      hint: 'ShortLived',
      timeout: '30s',
      clusterIPs: ['10.96.0.53'],
      ports: [{ port: 53, protocol: 'UDP' }],
    });
    const s1 = buildDesired([dns], []);
    const s2 = withServices(s1, new Map([[dns.key, dns2]]));
    const full = diff(s1, s2);
    t.same(full.removeShortElements, ['ip 10.96.0.53|udp|53'], 'without ids every element is compared');
    t.same(
      full.addShortElements.map((e) => [e.key, e.chain]),
      [['ip 10.96.0.53|udp|53', shortChainName('ip', 'udp', 30)]],
    );
    t.same(diff(s1, s2, [dns.key]).addShortElements, full.addShortElements, 'and with its id, the same');
  },
);

t.test('Services sharing a port: the lowest threshold whatever their names', async (t) => {
  const a = entry({ name: 'a', clusterIPs: ['10.96.0.9'], ports: [{ port: 80 }], threshold: '5' });
  const b = entry({ name: 'b', clusterIPs: ['10.96.0.9'], ports: [{ port: 80 }], threshold: '50' });
  t.same(
    rulesFor(buildDesired([a, b], []), 'ip 10.96.0.9')?.rules.map((r) => r.threshold),
    [5],
  );
});
