/**
 * nodeStatus: the FlowhintNode status made from a status document written out here; the
 * expected statuses are written by hand from that document.
 */
import t from 'tap';
import { FlowhintNodeStatus, KUBE_PROXY_MEANING, NOT_OFFLOADABLE_MAX } from '../../../api/index.ts';
import { nodeStatus, visiblePart, volatilePart } from '../../../agent/report/node-status.ts';
import { BYPASS_DETAIL } from '../../../agent/host/local-delivery.ts';
import { OTHER_FLOWTABLE_DETAIL } from '../../../agent/host/other-flowtables.ts';
import { StatusDoc } from '../../../agent/report/status.ts';

const base = {
  version: 1,
  pid: 1,
  updatedAt: '2026-12-03T00:00:00Z',
  node: {
    mode: 'supported',
    detail: 'flowtables available',
    conntrackAccounting: { enabled: true, detail: 'on' },
    conntrackTimeout: { supported: false, detail: 'no nft_ct timeout' },
    nodeAddresses: ['192.0.2.10'],
    kubeProxyMode: 'ipvs',
  },
  table: 'inet flowhint',
  devices: ['eth0'],
  otherFlowtables: [{ table: 'inet kindnet', name: 'fastpath', priority: 0, devices: ['eth0'] }],
  services: [
    {
      service: 'shop/web',
      hint: 'LongLived',
      threshold: 20,
      addresses: ['10.96.0.10'],
      ports: ['tcp/80', 'tcp/443'],
      nodePorts: [],
      // Out of order on purpose: the status sorts them.
      notOffloaded: [
        { address: '10.96.0.10', proto: 'tcp', port: 80, reason: 'ipvs' },
        { address: '10.96.0.10', proto: 'tcp', port: 443, reason: 'ipvs' },
      ],
    },
    {
      service: 'shop/cart',
      hint: 'LongLived',
      threshold: 20,
      addresses: ['192.0.2.10'],
      ports: ['tcp/80'],
      nodePorts: [],
      notOffloaded: [{ address: '192.0.2.10', proto: 'tcp', port: 80, reason: 'local-address' }],
    },
  ],
  invalid: [
    { service: 'shop/zed', code: 'FH_THRESHOLD_INVALID', reason: 'bad threshold' },
    { service: 'shop/bad', code: 'FH_HINT_UNSUPPORTED', reason: 'unsupported hint Fast' },
  ],
  lastSync: { at: '2026-12-03T00:00:01Z', kind: 'partial', ok: true, durationMs: 2 },
};
const doc = StatusDoc.parse(base);

t.test('the status says what the document says, in the CRD schema', async (t) => {
  const s = nodeStatus({ doc, version: '0.1.0', offloaded: 7 });
  t.strictSame(s, {
    agentVersion: '0.1.0',
    support: { offload: 'Supported', reason: 'flowtables available', conntrackTimeouts: 'Degraded' },
    kubeProxy: { mode: 'ipvs', meaning: KUBE_PROXY_MEANING.ipvs },
    services: { hinted: 4, programmed: 2, refused: 2, offloadedConnections: 7 },
    notOffloadable: [
      { kind: 'RefusedHint', service: 'shop/bad', target: 'FH_HINT_UNSUPPORTED', reason: 'unsupported hint Fast' },
      { kind: 'RefusedHint', service: 'shop/zed', target: 'FH_THRESHOLD_INVALID', reason: 'bad threshold' },
      {
        kind: 'LocalAddress',
        service: 'shop/cart',
        target: '192.0.2.10 tcp/80',
        reason: BYPASS_DETAIL['local-address'],
      },
      { kind: 'IPVSPort', service: 'shop/web', target: '10.96.0.10 tcp/443', reason: BYPASS_DETAIL.ipvs },
      { kind: 'IPVSPort', service: 'shop/web', target: '10.96.0.10 tcp/80', reason: BYPASS_DETAIL.ipvs },
      {
        kind: 'OtherFlowtable',
        target: 'inet kindnet/fastpath on eth0 (priority 0)',
        reason: OTHER_FLOWTABLE_DETAIL,
      },
    ],
    notOffloadableTotal: 6,
    lastSync: { time: '2026-12-03T00:00:01Z', kind: 'partial', result: 'Succeeded' },
  });
  t.ok(FlowhintNodeStatus.safeParse(s).success);
});

t.test('degraded, no sync yet, offloaded unknown, an old document without the mode', async (t) => {
  const old = StatusDoc.parse({
    ...base,
    node: { ...base.node, mode: 'degraded', detail: 'no nf_flow_table', kubeProxyMode: undefined },
    lastSync: { at: 'x', kind: 'full', ok: false, durationMs: 1, error: 'nft: Error: x'.repeat(100) },
  });
  const s = nodeStatus({ doc: old, version: 'v', offloaded: undefined });
  t.equal(s.support.offload, 'Degraded');
  t.equal(s.support.reason, 'no nf_flow_table');
  t.equal(s.kubeProxy.mode, 'unknown');
  t.notOk('offloadedConnections' in s.services);
  t.equal(s.lastSync?.result, 'Failed');
  t.equal(s.lastSync?.error?.length, 500, 'errors are cut to 500 characters');
  const none = nodeStatus({ doc: StatusDoc.parse({ ...base, lastSync: null }), version: 'v', offloaded: 0 });
  t.notOk('lastSync' in none);
  const timeouts = StatusDoc.parse({
    ...base,
    node: { ...base.node, conntrackTimeout: { supported: true, detail: 'ok' } },
  });
  t.equal(nodeStatus({ doc: timeouts, version: 'v', offloaded: 0 }).support.conntrackTimeouts, 'Supported');
});

t.test('the list is bounded; the total counts everything', async (t) => {
  const many = StatusDoc.parse({
    ...base,
    invalid: Array.from({ length: 50 }, (_, i) => ({
      service: `ns/s${String(i).padStart(2, '0')}`,
      code: 'FH_X',
      reason: 'r',
    })),
  });
  const s = nodeStatus({ doc: many, version: 'v', offloaded: 0 });
  t.equal(s.notOffloadable.length, NOT_OFFLOADABLE_MAX);
  t.equal(s.notOffloadableTotal, 50 + 3 + 1);
  t.equal(s.notOffloadable[0]?.service, 'ns/s00');
  t.equal(s.notOffloadable.at(-1)?.service, `ns/s${NOT_OFFLOADABLE_MAX - 1}`);
});

t.test('what a reader would see change', async (t) => {
  const s = nodeStatus({ doc, version: '0.1.0', offloaded: 7 });
  const later = nodeStatus({
    doc: StatusDoc.parse({ ...base, lastSync: { ...base.lastSync, at: '2026-12-03T00:05:00Z', durationMs: 9 } }),
    version: '0.1.0',
    offloaded: 9,
  });
  t.equal(visiblePart(later), visiblePart(s), 'a new sync time and offloaded count alone are not visible');
  t.not(volatilePart(later), volatilePart(s), 'but they are volatile');
  const changes: Array<[string, object]> = [
    ['a failed sync', { lastSync: { ...base.lastSync, ok: false, error: 'x' } }],
    ['a full sync', { lastSync: { ...base.lastSync, kind: 'full' } }],
    ['one Service fewer', { services: base.services.slice(1) }],
    ['no refusal', { invalid: [] }],
    ['no other flowtable', { otherFlowtables: [] }],
    ['degraded', { node: { ...base.node, mode: 'degraded' } }],
    ['kube-proxy nftables', { node: { ...base.node, kubeProxyMode: 'nftables' } }],
  ];
  for (const [what, change] of changes) {
    const other = nodeStatus({ doc: StatusDoc.parse({ ...base, ...change }), version: '0.1.0', offloaded: 7 });
    t.not(visiblePart(other), visiblePart(s), `${what} is visible`);
  }
  t.not(visiblePart(nodeStatus({ doc, version: '0.2.0', offloaded: 7 })), visiblePart(s), 'a new version is visible');
});
