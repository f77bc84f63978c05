/** formatStatus: what `flowhint status` prints, from a status document written out here. */
import t from 'tap';
import { StatusDoc, formatStatus } from '../../../agent/report/status.ts';

const doc = StatusDoc.parse({
  version: 1,
  pid: 1,
  updatedAt: '2026-12-03T00:00:00Z',
  node: {
    mode: 'degraded',
    detail: 'kernel has no flowtable support',
    conntrackAccounting: { enabled: false, detail: 'cannot set it' },
    conntrackTimeout: { supported: true, detail: 'ok' },
    nodeAddresses: ['192.0.2.10'],
  },
  table: 'inet flowhint',
  devices: [],
  otherFlowtables: [{ table: 'inet kindnet', name: 'fastpath', priority: 0, devices: ['eth0'] }],
  services: [
    {
      service: 'demo/web',
      id: 'abc',
      hint: 'LongLived',
      threshold: 20,
      addresses: ['10.96.0.10'],
      ports: ['tcp/80'],
      nodePorts: ['tcp/30080'],
      offloadedNow: 3,
      notOffloaded: [{ address: '10.96.0.10', proto: 'tcp', port: 80, reason: 'ipvs' }],
    },
    {
      service: 'demo/dns',
      hint: 'ShortLived',
      threshold: 20,
      timeoutSeconds: 5,
      addresses: ['10.96.0.53'],
      ports: ['udp/53'],
      nodePorts: [],
      conntrackEntries: null,
    },
  ],
  invalid: [{ service: 'demo/bad', code: 'FH_HINT_UNSUPPORTED', reason: 'metadata.annotations: no' }],
  lastSync: {
    at: '2026-12-03T00:00:01Z',
    kind: 'full',
    ok: false,
    durationMs: 1.5,
    error: 'nft transaction failed: x',
  },
});

t.test('every part of the document is printed', async (t) => {
  const text = formatStatus(doc);
  t.match(text, /^node: degraded: kernel has no flowtable support$/m);
  t.match(text, /^conntrack accounting: OFF \(cannot set it\)$/m);
  t.match(text, /^table: inet flowhint; devices: n\/a \(degraded\)$/m);
  t.match(text, /^other flowtable: inet kindnet\/fastpath on eth0 \(priority 0\): /m);
  t.match(text, /^last sync: 2026-12-03T00:00:01Z full FAILED: nft transaction failed: x \(1\.5 ms\)$/m);
  t.match(
    text,
    /^ {2}demo\/web {2}10\.96\.0\.10 {2}tcp\/80 nodePorts tcp\/30080 {2}after 20 packets {2}offloaded now: 3$/m,
  );
  t.match(text, /^ {4}not offloaded: .*80.*: ipvs: /m);
  t.match(text, /^ {2}demo\/dns .*ShortLived: conntrack timeout 5s {2}conntrack entries: unknown$/m);
  t.match(text, /^not programmed \(1\):\n {2}demo\/bad {2}FH_HINT_UNSUPPORTED: metadata\.annotations: no$/m);
});

t.test('documents without newer fields still read (older agents)', async (t) => {
  const old = StatusDoc.parse({
    ...doc,
    services: [{ service: 'a/b', id: 'x', threshold: 1, addresses: [], ports: [], nodePorts: [] }],
    otherFlowtables: undefined,
    lastSync: null,
  });
  t.match(formatStatus(old), /a\/b .*after 1 packets {2}offloaded: unknown/);
  t.match(formatStatus(old), /last sync: none yet/);
});

t.test('statusDoc: the document from the agent state, written out by hand', async (t) => {
  const { statusDoc } = await import('../../../agent/report/status.ts');
  const { buildDesired } = await import('../../../agent/state/desired.ts');
  const { entry } = await import('../../helpers/agent.ts');
  const state = buildDesired(
    [entry({ name: 'web', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, protocol: 'TCP' }] })],
    [],
  );
  const doc = statusDoc({
    pid: 42,
    now: new Date('2026-12-04T10:00:00Z'),
    support: {
      flowtable: false,
      flowtableDetail: 'no flowtables',
      ctTimeout: true,
      ctTimeoutDetail: 'ok',
      acct: { enabled: true, detail: 'set' },
    },
    nodeAddresses: [{ family: 'ip', addr: '192.0.2.10' }],
    applied: { state, devices: ['eth0'] },
    otherFlowtables: [],
    bypassed: new Map(),
    refused: [{ service: 'demo/bad', code: 'FH_HINT_UNSUPPORTED', reason: 'Turbo' }],
    lastSync: { kind: 'full', ok: false, durationMs: 12.345, error: 'nft said no', at: '2026-12-04T09:59:59Z' },
  });
  t.same(doc, {
    version: 1,
    pid: 42,
    updatedAt: '2026-12-04T10:00:00.000Z',
    node: {
      mode: 'degraded',
      detail: 'no flowtables',
      conntrackTimeout: { supported: true, detail: 'ok' },
      conntrackAccounting: { enabled: true, detail: 'set' },
      nodeAddresses: ['192.0.2.10'],
    },
    table: 'inet flowhint',
    devices: ['eth0'],
    otherFlowtables: [],
    services: [
      {
        service: 'default/web',
        hint: 'LongLived',
        threshold: 20,
        addresses: ['10.96.0.10'],
        ports: ['tcp/80'],
        nodePorts: [],
      },
    ],
    invalid: [{ service: 'demo/bad', code: 'FH_HINT_UNSUPPORTED', reason: 'Turbo' }],
    lastSync: { at: '2026-12-04T09:59:59Z', kind: 'full', ok: false, durationMs: 12.3, error: 'nft said no' },
  });
  t.ok(StatusDoc.safeParse(doc).success, 'and it is a valid document');
  const none = statusDoc({
    ...{ pid: 1, now: new Date(0), nodeAddresses: [], otherFlowtables: [], bypassed: new Map(), refused: [] },
    support: {
      flowtable: true,
      flowtableDetail: '',
      ctTimeout: false,
      ctTimeoutDetail: 'x',
      acct: { enabled: false, detail: '' },
    },
    applied: undefined,
    lastSync: undefined,
  });
  t.match(none, { node: { mode: 'supported' }, devices: [], services: [], lastSync: null }, 'before the first sync');
});
