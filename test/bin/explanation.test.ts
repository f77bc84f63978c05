/**
 * explain (pure): a Service and FlowhintNodes written out here, the answer expected from
 * them by hand.
 */
import t from 'tap';
import type { FlowhintNode, FlowhintNodeStatus } from '../../api/index.ts';
import { HINTS } from '../../api/index.ts';
import { age, explain, formatExplanation } from '../../bin/explanation.ts';
import { svc } from '../helpers/agent.ts';
import { nodeStatusFixture } from '../helpers/flowhint-node.ts';

function node(name: string, change: (s: FlowhintNodeStatus) => void = () => {}): FlowhintNode {
  return { metadata: { name }, status: nodeStatusFixture(change) };
}

const cart = svc({ namespace: 'shop', name: 'cart', threshold: '100' });

t.test('accepted and programmed on every node', async (t) => {
  const e = explain(cart, [node('a'), node('b'), node('c')]);
  t.match(e, {
    service: 'shop/cart',
    hint: 'LongLived',
    accepted: true,
    parameters: { offloadAfterPackets: 100, conntrackTimeoutSeconds: null },
    nodeStatus: 'available',
    nodes: { total: 3, programmed: 3 },
    notOffloadable: [],
    advice: [],
  });
  t.equal(
    formatExplanation(e),
    `shop/cart: accepted: LongLived: ${HINTS.LongLived.description} (offload after 100 packets)\nprogrammed on 3 of 3 nodes\n`,
    'the whole text: nothing about programmed nodes, no advice',
  );
});

t.test('the parameters as written: none, or the conntrack timeout of a ShortLived Service', async (t) => {
  const plain = explain(svc({ namespace: 'shop', name: 'web' }), [node('a')]);
  t.strictSame(plain.parameters, { offloadAfterPackets: null, conntrackTimeoutSeconds: null });
  t.equal(
    formatExplanation(plain),
    `shop/web: accepted: LongLived: ${HINTS.LongLived.description}\nprogrammed on 1 of 1 nodes\n`,
  );
  const dns = explain(svc({ namespace: 'kube-system', name: 'dns', hint: 'ShortLived', timeout: '30s' }), [node('a')]);
  t.strictSame(dns.parameters, { offloadAfterPackets: null, conntrackTimeoutSeconds: 30 });
  t.match(formatExplanation(dns), /^kube-system\/dns: accepted: ShortLived: .* \(conntrack timeout 30s\)$/m);
});

t.test('refused by the webhook: the value is not a hint; the nodes do not matter', async (t) => {
  const bad = svc({ namespace: 'shop', name: 'cart' }) as { metadata: { annotations: Record<string, string> } };
  bad.metadata.annotations['flowhint.dev/traffic-hint'] = 'Fast';
  const e = explain(bad, [node('a')]);
  t.equal(e.accepted, false);
  t.equal(e.hint, 'Fast');
  t.equal(e.code, 'FH_HINT_UNSUPPORTED');
  t.match(e.reason, /Fast/);
  t.match(e.advice[0], /fix the annotation/);
  t.match(formatExplanation(e), /^shop\/cart: not accepted \(FH_HINT_UNSUPPORTED\): /m);
});

t.test('not admitted (no label) and not hinted', async (t) => {
  const unlabelled = svc({ namespace: 'shop', name: 'cart' }) as { metadata: { labels?: object } };
  delete unlabelled.metadata.labels;
  const e = explain(unlabelled, [node('a')]);
  t.equal(e.code, 'FH_NOT_ADMITTED');
  t.match(e.advice[0], /flowhint backfill/);
  const plain = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'cart', namespace: 'shop' }, spec: {} };
  const n = explain(plain, [node('a')]);
  t.equal(n.code, 'FH_NOT_HINTED');
  t.equal(n.hint, null);
  t.match(n.advice[0], /kubectl annotate service -n shop cart flowhint\.dev\/traffic-hint=LongLived/);
  // Whatever the nodes say (a truncated list here), advice for a hint not accepted is only the fix.
  const truncated = node('a', (s) => {
    s.notOffloadableTotal = 40;
  });
  t.equal(explain(plain, [truncated]).advice.length, 1);
});

t.test('degraded, failing, refusing and silent nodes are named, not counted', async (t) => {
  const e = explain(cart, [
    node('a'),
    node('b', (s) => {
      s.support = { offload: 'Degraded', reason: 'no nf_flow_table module', conntrackTimeouts: 'Supported' };
    }),
    node('c', (s) => {
      s.lastSync = { time: '2026-12-05T00:01:00Z', kind: 'partial', result: 'Failed', error: 'nft: busy' };
    }),
    node('d', (s) => {
      s.notOffloadable = [{ kind: 'RefusedHint', service: 'shop/cart', target: 'FH_X', reason: 'because' }];
      s.notOffloadableTotal = 1;
    }),
    { metadata: { name: 'e' } },
    { metadata: { name: 'f' }, unreadable: true },
    node('g', (s) => {
      s.notOffloadable = [{ kind: 'RefusedHint', service: 'shop/other', target: 'FH_X', reason: 'not this one' }];
      s.notOffloadableTotal = 1;
    }),
    node('h', (s) => {
      s.lastSync = { time: '2026-12-05T00:01:00Z', kind: 'full', result: 'Failed' };
    }),
    node('i', (s) => {
      delete s.lastSync;
    }),
    node('j', (s) => {
      s.support.offload = 'Degraded';
      s.support.reason = 'old kernel';
    }),
  ]);
  t.strictSame(e.nodes, {
    total: 10,
    programmed: 2,
    findings: [
      { node: 'a', state: 'programmed' },
      { node: 'b', state: 'degraded', detail: 'no nf_flow_table module' },
      { node: 'c', state: 'failing', detail: 'nft: busy' },
      { node: 'd', state: 'refused', detail: 'FH_X: because' },
      { node: 'e', state: 'not-reported', detail: 'the agent has not written its status yet' },
      {
        node: 'f',
        state: 'not-reported',
        detail: 'its status is not one this flowhint reads (another version wrote it)',
      },
      { node: 'g', state: 'programmed' },
      { node: 'h', state: 'failing', detail: 'last sync failed' },
      { node: 'i', state: 'not-reported', detail: 'no sync yet' },
      { node: 'j', state: 'degraded', detail: 'old kernel' },
    ],
  });
  t.strictSame(e.notOffloadable, [], "a refusal is not one of the Service's ports");
  t.match(e.advice.join('\n'), /nodes refused the hint/);
  const text = formatExplanation(e);
  t.match(text, /^programmed on 2 of 10 nodes$/m);
  t.notMatch(text, /^ {2}a: /m, 'programmed nodes are not listed');
  t.match(text, /^ {2}b: degraded: no nf_flow_table module$/m);
  t.match(text, /^ {2}- b, j: the kernel lacks what the hint needs/m);
  t.match(text, /^what to do:$/m);
  t.match(text, /^ {2}- c: the agent's last sync failed; read its log: kubectl .*spec\.nodeName=c$/m);
  // ShortLived needs conntrack timeouts, not flowtables.
  const dns = svc({ namespace: 'kube-system', name: 'dns', hint: 'ShortLived' });
  const d = explain(dns, [
    node('b', (s) => {
      s.support = { offload: 'Degraded', reason: 'x', conntrackTimeouts: 'Supported' };
    }),
    node('f', (s) => {
      s.support.conntrackTimeouts = 'Degraded';
    }),
  ]);
  t.strictSame(d.nodes.findings, [
    { node: 'b', state: 'programmed' },
    { node: 'f', state: 'degraded', detail: 'no conntrack timeout policies on this kernel' },
  ]);
  t.notMatch(explain(cart, [node('a')]).advice.join('\n'), /refused/, 'no refusal, no refusal advice');
});

t.test('IPVS ports are not offloadable where kube-proxy runs IPVS', async (t) => {
  const e = explain(cart, [
    node('a'),
    node('b', (s) => {
      s.kubeProxy = { mode: 'ipvs', meaning: 'm' };
      s.notOffloadable = [
        { kind: 'IPVSPort', service: 'shop/cart', target: '10.96.0.10 tcp/80', reason: 'ipvs' },
        { kind: 'IPVSPort', service: 'shop/other', target: '10.96.0.11 tcp/80', reason: 'ipvs' },
      ];
      s.notOffloadableTotal = 2;
    }),
  ]);
  t.strictSame(e.notOffloadable, [{ node: 'b', kind: 'IPVSPort', target: '10.96.0.10 tcp/80', reason: 'ipvs' }]);
  t.strictSame(e.otherFlowtables, [], 'ports are not flowtables');
  t.equal(e.nodes.programmed, 2, 'programmed, but those ports are delivered locally');
  t.match(e.advice.join('\n'), /IPVS mode/);
  t.match(formatExplanation(e), /^not offloadable on b: 10\.96\.0\.10 tcp\/80 \(IPVSPort\): ipvs$/m);
});

t.test('a local address is not offloadable, but says nothing of IPVS', async (t) => {
  const e = explain(cart, [
    node('a', (s) => {
      s.notOffloadable = [{ kind: 'LocalAddress', service: 'shop/cart', target: '192.0.2.1 tcp/80', reason: 'local' }];
      s.notOffloadableTotal = 1;
    }),
  ]);
  t.strictSame(e.notOffloadable, [{ node: 'a', kind: 'LocalAddress', target: '192.0.2.1 tcp/80', reason: 'local' }]);
  t.strictSame(e.advice, []);
});

t.test('a truncated list: advice only where this Service may be among what is cut', async (t) => {
  const e = explain(cart, [
    node('listed', (s) => {
      s.notOffloadable = [{ kind: 'IPVSPort', service: 'shop/cart', target: '10.96.0.10 tcp/80', reason: 'ipvs' }];
      s.notOffloadableTotal = 40;
    }),
    node('cut', (s) => {
      s.notOffloadableTotal = 40;
    }),
  ]);
  const advice = e.advice.join('\n');
  t.match(advice, /cut lists only part/);
  t.notMatch(advice, /listed lists only part/, "its list has this Service's ports");
});

t.test('the CRD absent; no node reported; another flowtable; a truncated list', async (t) => {
  const absent = explain(cart, 'crd-absent');
  t.equal(absent.nodeStatus, 'crd-absent');
  t.match(absent.advice[0], /FlowhintNode CRD is not installed/);
  t.match(formatExplanation(absent), /^nodes: unknown \(no FlowhintNode CRD\)$/m);
  const forbidden = explain(cart, 'forbidden');
  t.equal(forbidden.nodeStatus, 'forbidden');
  t.equal(forbidden.accepted, true, 'the Service is still explained');
  t.equal(forbidden.advice.length, 1, 'not also "no node has reported"');
  t.match(forbidden.advice[0], /may not list FlowhintNodes.*--clusterrole=flowhint-view/);
  t.match(formatExplanation(forbidden), /^nodes: unknown \(you may not list FlowhintNodes\)$/m);
  t.match(explain(cart, []).advice[0], /no node has reported/);
  const e = explain(cart, [
    node('a', (s) => {
      s.notOffloadable = [{ kind: 'OtherFlowtable', target: 'inet kindnet/fastpath on eth0', reason: 'r' }];
      s.notOffloadableTotal = 40;
    }),
  ]);
  t.strictSame(e.otherFlowtables, [{ node: 'a', flowtable: 'inet kindnet/fastpath on eth0' }]);
  t.match(e.advice.join('\n'), /another flowtable shares the devices/);
  t.match(e.advice.join('\n'), /a lists only part of what it cannot offload/);
  t.match(formatExplanation(e), /^other flowtable on a: inet kindnet\/fastpath on eth0$/m);
});

t.test('liveness: a heartbeat older than three minutes is a node not alive, never programmed', async (t) => {
  const now = Date.parse('2026-12-07T12:00:00Z');
  const beat = (secondsAgo: number) =>
    node('a', (s) => (s.heartbeatTime = new Date(now - secondsAgo * 1000).toISOString()));
  t.match(explain(cart, [beat(179)], { now }).nodes, { total: 1, programmed: 1 }, '179 s: alive');
  t.match(explain(cart, [beat(180)], { now }).nodes, { total: 1, programmed: 1 }, '180 s: alive, just');
  const dead = explain(cart, [beat(181)], { now });
  t.match(dead.nodes, { total: 1, programmed: 0 }, '181 s: not alive');
  t.match(dead.nodes.findings[0], { node: 'a', state: 'not-alive', detail: /^last heartbeat 3m ago/ });
  t.match(dead.advice, [/^a: its agent is not alive; kubectl -n flowhint-system get pods/]);
  const old = explain(cart, [node('a')], { now });
  t.match(old.nodes.findings[0], { state: 'not-alive', detail: /writes no heartbeat/ }, 'no heartbeat at all');
  t.match(explain(cart, [node('a')]).nodes, { programmed: 1 }, 'without now, liveness is not judged');
  t.match(formatExplanation(dead), /^ {2}a: not-alive: last heartbeat 3m ago/m);
});

t.test('every Node counts: one without a FlowhintNode is no-agent; Nodes refused or CRD absent', async (t) => {
  const e = explain(cart, [node('a'), node('b')], { nodes: ['a', 'b', 'c', 'd'] });
  t.match(e, { nodeList: 'available', nodes: { total: 4, programmed: 2 } });
  t.match(e.nodes.findings[2], { node: 'c', state: 'no-agent', detail: /^no FlowhintNode: no agent has reported/ });
  t.match(e.advice, [/^c, d: no agent has reported from there/]);
  t.equal(formatExplanation(e).split('\n')[1], 'programmed on 2 of 4 nodes');
  const refused = explain(cart, [node('a')], { nodes: 'forbidden' });
  t.match(refused, { nodeList: 'forbidden', nodes: { total: 1, programmed: 1 } });
  t.match(refused.advice, [/you may not list Nodes, .*flowhint-viewer/]);
  t.match(formatExplanation(refused), /^programmed on 1 of 1 nodes \(nodes without an agent not counted/m);
  t.notMatch(
    explain(cart, 'crd-absent', { nodes: 'forbidden' }).advice.join('\n'),
    /may not list Nodes/,
    'Nodes refused is not said when FlowhintNodes are not read either',
  );
  const noCrd = explain(cart, 'crd-absent', { nodes: ['a', 'b'] });
  t.match(noCrd.nodes, { total: 0, findings: [] }, 'without FlowhintNodes, no node is said to lack an agent');
  t.equal(explain(cart, [node('a')]).nodeList, 'not-read');
});

t.test('agent versions: listed when more than one runs, or another than this flowhint', async (t) => {
  const mixed = explain(cart, [node('a'), node('b', (s) => (s.agentVersion = '0.0.9'))], { version: '0.1.0' });
  t.same(mixed.agentVersions, { '0.1.0': 1, '0.0.9': 1 });
  t.match(formatExplanation(mixed), /^agent versions: 0\.1\.0 on 1 node, 0\.0\.9 on 1 node$/m);
  t.match(mixed.advice, [/finish the rollout/]);
  t.same(explain(cart, [node('a'), node('b')], { version: '0.2.0' }).agentVersions, { '0.1.0': 2 }, 'all older');
  const unknown = explain(cart, [node('a'), node('b', (s) => (s.agentVersion = '0.0.9'))]);
  t.same(unknown.agentVersions, { '0.1.0': 1, '0.0.9': 1 }, 'two versions, whatever this one is');
  t.equal(explain(cart, [node('a'), node('b')], { version: '0.1.0' }).agentVersions, undefined, 'all the same');
});

t.test('age: as kubectl prints it', async (t) => {
  const cases: Array<[number, string]> = [
    [0, '0s'],
    [45.9, '45s'],
    [119, '119s'],
    [120, '2m'],
    [7199, '119m'],
    [7200, '2h'],
    [172_799, '47h'],
    [172_800, '2d'],
    [-5, '0s'],
  ];
  for (const [s, want] of cases) t.equal(age(s), want, `${s} s`);
});
