import t from 'tap';
import { buildDesired, withServices, type ServiceEntry } from '../../../agent/state/desired.ts';
import { diff } from '../../../agent/state/delta.ts';
import { deltaTransaction, fullTransaction, renderDelta, renderFull } from '../../../agent/nft/render.ts';
import { applyTransaction } from '../../../agent/nft/table-model.ts';
import { KERNEL_TIMEOUTS } from '../../../agent/state/timeout-policy.ts';
import { deviceOps } from '../../../agent/nft/flowtable.ts';
import type { RenderOptions } from '../../../agent/nft/names.ts';
import type { TableModel } from '../../../agent/nft/table-model.ts';
import { toText } from '../../../agent/nft/transaction.ts';
import { parseAddress, type Address } from '../../../agent/state/address.ts';
import { entry, golden } from '../../helpers/agent.ts';

const node: Address[] = [parseAddress('192.168.1.10')!, parseAddress('fd00:1::10')!];
const on: RenderOptions = { flowtable: true, devices: ['eth0', 'veth12ab'], counter: true };
const degraded: RenderOptions = { flowtable: false, devices: [], counter: true };

const cases: Array<[string, Parameters<typeof entry>[0][], RenderOptions]> = [
  ['clusterip-v4.nft', [{ name: 'web', namespace: 'shop' }], on],
  ['clusterip-v6.nft', [{ name: 'web6', clusterIPs: ['fd00:96::a'] }], on],
  ['dual-stack.nft', [{ name: 'ds', clusterIPs: ['10.96.0.11', 'FD00:96:0:0::B'] }], on],
  [
    'multi-port-udp.nft',
    [
      {
        name: 'dns',
        clusterIPs: ['10.96.0.53'],
        ports: [
          { port: 53, protocol: 'UDP' },
          { port: 53, protocol: 'TCP' },
          { port: 9153 },
          { port: 7, protocol: 'SCTP' },
        ],
      },
    ],
    on,
  ],
  [
    'external-lb-nodeport.nft',
    [
      {
        name: 'edge',
        type: 'LoadBalancer',
        externalIPs: ['192.0.2.10'],
        lbIPs: ['198.51.100.7', '2001:db8::7'],
        ports: [
          { port: 443, nodePort: 30443 },
          { port: 8443, protocol: 'UDP', nodePort: 30444 },
        ],
      },
    ],
    on,
  ],
  [
    'thresholds.nft',
    [
      { name: 'a', clusterIPs: ['10.96.0.1'], threshold: '0' },
      { name: 'b', clusterIPs: ['10.96.0.2'], threshold: '1000000' },
      { name: 'c', clusterIPs: ['10.96.0.3'] },
    ],
    on,
  ],
  [
    'shared-address.nft',
    [
      { name: 'x', clusterIPs: ['10.96.0.5'], externalIPs: ['192.0.2.50'], ports: [{ port: 80 }] },
      { name: 'y', clusterIPs: ['10.96.0.6'], externalIPs: ['192.0.2.50'], ports: [{ port: 443 }] },
    ],
    on,
  ],
  ['empty.nft', [], on],
  [
    'short-lived.nft',
    [
      {
        name: 'dns',
        hint: 'ShortLived',
        clusterIPs: ['10.96.0.53', 'fd00:96::53'],
        ports: [
          { port: 53, protocol: 'UDP', nodePort: 30053 },
          { port: 53, protocol: 'TCP' },
        ],
      },
      { name: 'api', hint: 'ShortLived', timeout: '2m', clusterIPs: ['10.96.0.80'], ports: [{ port: 80 }] },
      { name: 'video', clusterIPs: ['10.96.0.10'], ports: [{ port: 1935 }] },
    ],
    on,
  ],
  ['degraded.nft', [{ name: 'web', namespace: 'shop', ports: [{ port: 80, nodePort: 30080 }] }], degraded],
];

t.test('golden renderings', async (t) => {
  for (const [file, specs, opts] of cases) {
    const state = buildDesired(
      specs.map((s) => entry(s)),
      node,
    );
    const text = renderFull(state, opts);
    t.equal(text, golden(file, text), file);
  }
});

t.test('degraded: no flowtable and no flow add, counters kept', async (t) => {
  const text = renderFull(buildDesired([entry({ name: 'web' })], node), degraded);
  t.notMatch(text, /flowtable|flow add/);
  t.match(text, /update @seen4 \{ ct original ip daddr \}/);
});

t.test('full sync over an existing table keeps the flowtable and prunes what is not desired', async (t) => {
  const state = buildDesired([entry({ name: 'web' })], node);
  const chain = { rules: [] };
  const set = (...elements: string[]) => ({
    key: 'ipv4_addr',
    dynamic: true,
    elements: new Map(elements.map((e) => [e, 0])),
  });
  const current: TableModel = {
    tables: new Set(['inet']),
    chains: new Map([
      ['classify', chain],
      ['a_0000000000000000', chain],
      ['rogue', chain],
    ]),
    counters: new Set(['s_1111111111111111']),
    maps: new Map(['vips4', 'vips6', 'extra'].map((m) => [m, { key: 'ipv4_addr', elements: new Map() }])),
    sets: new Map([
      ['junk', set()],
      ['seen4', set('10.96.0.10', '10.1.1.1')],
      ['seen6', set()],
    ]),
    flowtables: new Map([
      ['fastpath', { devices: new Set(['eth0', 'gone0']), handle: 1 }],
      ['other', { devices: new Set(), handle: 2 }],
    ]),
    ctTimeouts: new Map(),
    nextHandle: 3,
  };
  const text = renderFull(state, on, current);
  t.notMatch(
    text,
    /add flowtable inet flowhint fastpath \{ hook ingress priority filter; devices = \{ "eth0"/,
    'flowtable not recreated',
  );
  t.notMatch(text, /delete flowtable inet flowhint fastpath$/m);
  t.match(text, /delete flowtable inet flowhint fastpath \{ devices = \{ "gone0" \}; \}/);
  t.match(text, /add flowtable inet flowhint fastpath \{ hook ingress priority filter; devices = \{ "veth12ab" \}; \}/);
  t.match(text, /delete flowtable inet flowhint other/);
  for (const c of ['a_0000000000000000', 'rogue']) {
    t.ok(
      text.indexOf(`flush chain inet flowhint ${c}`) < text.indexOf(`delete chain inet flowhint ${c}`),
      `${c} flushed before deleted`,
    );
  }
  t.match(text, /delete map inet flowhint extra/);
  t.match(text, /delete set inet flowhint junk/);
  t.match(text, /delete counter inet flowhint s_1111111111111111/);
  t.match(text, /delete element inet flowhint seen4 \{ 10\.1\.1\.1 \}/, 'stale counting-set elements pruned');
  t.notMatch(text, /delete set inet flowhint seen/, 'counting sets kept');
});

t.test('device operations, as nft text', async (t) => {
  const deviceLines = (current: string[], wanted: string[]) =>
    deviceOps(current, wanted).map((op) => toText([op]).trimEnd());
  t.same(deviceLines(['a', 'b'], ['b', 'c']), [
    'delete flowtable inet flowhint fastpath { devices = { "a" }; }',
    'add flowtable inet flowhint fastpath { hook ingress priority filter; devices = { "c" }; }',
  ]);
  t.same(deviceLines(['a'], ['a']), []);
  t.same(deviceLines([], ['bad"name', 'ok']), [
    'add flowtable inet flowhint fastpath { hook ingress priority filter; devices = { "ok" }; }',
  ]);
});

t.test('incremental: one changed Service is a few elements and at most a chain', async (t) => {
  const many = Array.from({ length: 50 }, (_, i) => entry({ name: `s${i}`, clusterIPs: [`10.96.1.${i + 1}`] }));
  const before = buildDesired(many, node);
  const changed = entry({ name: 's7', clusterIPs: ['10.96.1.8'], threshold: '500' });
  const after = withServices(before, new Map([[changed.key, changed]]));
  const text = renderDelta(diff(before, after, [changed.key]), on);
  t.match(
    text,
    /^add chain inet flowhint v4_[0-9a-f]{16}\nflush chain inet flowhint v4_[0-9a-f]{16}\nadd rule inet flowhint v4_[0-9a-f]{16} meta l4proto tcp ct original proto-dst 80 ct packets > 500 fib saddr \. iif oif exists update @seen4 \{ ct original ip daddr \} flow add @fastpath\ndelete element inet flowhint vips4 \{ 10\.96\.1\.8 \}\nadd element inet flowhint vips4 \{ 10\.96\.1\.8 : goto v4_[0-9a-f]{16} \}\n$/,
  );
  const added = entry({ name: 'new', clusterIPs: ['10.96.9.9'] });
  const plus = withServices(after, new Map([[added.key, added]]));
  const addText = renderDelta(diff(after, plus, [added.key]), on);
  t.match(
    addText,
    /^add element inet flowhint vips4 \{ 10\.96\.9\.9 : goto v4_[0-9a-f]{16} \}\nadd element ip flowhint long4 \{ 10\.96\.9\.9 \. tcp \. 80 \}\n$/,
    'a Service like the others: its address element and its port for the mark',
  );
  const minus = withServices(plus, new Map([[added.key, undefined]]));
  t.equal(
    renderDelta(diff(plus, minus, [added.key]), on),
    'delete element inet flowhint vips4 { 10.96.9.9 }\ndelete element ip flowhint long4 { 10.96.9.9 . tcp . 80 }\n',
  );
  const moved = entry({
    name: 'new',
    clusterIPs: ['10.96.9.9'],
    ports: [{ port: 8080 }, { port: 53, protocol: 'UDP' }],
  });
  const movedText = renderDelta(diff(plus, withServices(plus, new Map([[moved.key, moved]])), [moved.key]), on);
  t.match(
    movedText,
    /^delete element ip flowhint long4 \{ 10\.96\.9\.9 \. tcp \. 80 \}$/m,
    'a port that goes loses its mark element',
  );
  t.match(movedText, /^add element ip flowhint long4 \{ 10\.96\.9\.9 \. tcp \. 8080 \}$/m);
  t.match(movedText, /^add element ip flowhint long4 \{ 10\.96\.9\.9 \. udp \. 53 \}$/m);
  t.equal(movedText.match(/long4/g)?.length, 3, 'and nothing else of the set is touched');
  const back = withServices(minus, new Map([[changed.key, entry({ name: 's7', clusterIPs: ['10.96.1.8'] })]]));
  t.match(
    renderDelta(diff(minus, back, [changed.key]), on),
    /delete chain inet flowhint v4_[0-9a-f]{16}\n$/,
    'the unused chain goes last',
  );
  t.equal(renderDelta(diff(minus, minus, [added.key]), on), '', 'no change, no transaction');
});

t.test('render refuses values that cannot come from validated inputs (a last line of defence)', async (t) => {
  const o = { flowtable: true, devices: ['eth0'], counter: true };
  const hand = (e: Partial<ServiceEntry>): ServiceEntry => ({
    key: 'x/y',
    hint: 'LongLived',
    threshold: 20,
    vips: [{ family: 'ip', addr: '10.96.0.1' }],
    ports: [{ proto: 'tcp', port: 80 }],
    nodePorts: [],
    ...e,
  });
  t.throws(() => fullTransaction(buildDesired([hand({})], []), { ...o, ctMark: 3 }), {
    message: 'refusing to render conntrack mark 3: not a single bit',
  });
  t.throws(() => fullTransaction(buildDesired([hand({ vips: [{ family: 'ip', addr: 'x10.96.0.1' }] })], []), o), {
    message: 'refusing to render address "x10.96.0.1"',
  });
  t.throws(() => fullTransaction(buildDesired([hand({ threshold: 1_000_001 })], []), o), {
    message: 'refusing to render 1000001: outside 0..1000000',
  });
  t.throws(() => fullTransaction(buildDesired([hand({ threshold: -1 })], []), o), { message: /outside 0\.\.1000000/ });
  t.throws(() => fullTransaction(buildDesired([hand({ threshold: 2.5 })], []), o), { message: /outside 0\.\.1000000/ });
  t.throws(() => fullTransaction(buildDesired([hand({ ports: [{ proto: 'tcp', port: 65536 }] })], []), o), {
    message: 'refusing to render 65536: outside 1..65535',
  });
  t.doesNotThrow(() => fullTransaction(buildDesired([hand({ threshold: 1_000_000 })], []), o));
});

t.test('without ct timeout support: no timeout objects, and those left from before are deleted', async (t) => {
  const o = { flowtable: true, devices: ['eth0'], counter: true };
  const dns = entry({
    name: 'dns',
    hint: 'ShortLived',
    clusterIPs: ['10.96.0.53'],
    ports: [{ port: 53, protocol: 'UDP' }],
  });
  const state = buildDesired([dns], []);
  const supported = fullTransaction(state, { ...o, ctTimeout: true });
  const timeouts = supported.filter((op) => op.obj.type === 'ct timeout' && op.verb === 'add');
  t.equal(timeouts.length, 1, 'supported: one timeout object');
  const degraded = fullTransaction(state, { ...o, ctTimeout: false });
  t.same(
    degraded.filter((op) => op.obj.type === 'ct timeout'),
    [],
    'degraded: none',
  );
  const name = timeouts[0]?.obj.type === 'ct timeout' ? timeouts[0].obj.name : '';
  const current = {
    tables: new Set(['inet', 'ip'] as const),
    flowtables: new Map(),
    chains: new Map(),
    maps: new Map(),
    sets: new Map(),
    ctTimeouts: new Map([
      [name, { protocol: 'udp' as const, l3proto: 'ip' as const, policy: { unreplied: 5, replied: 5 } }],
    ]),
    counters: new Set<string>(),
    nextHandle: 1,
  };
  t.same(
    fullTransaction(state, { ...o, ctTimeout: false }, current)
      .filter((op) => op.obj.type === 'ct timeout')
      .map((op) => `${op.verb} ${op.obj.type === 'ct timeout' ? op.obj.name : ''}`),
    [`delete ${name}`],
    'a timeout object left from before support went away is deleted',
  );
});

t.test("ShortLived policies carry the node's timeouts; a change of them replaces the objects", async (t) => {
  const o = { flowtable: true, devices: ['eth0'], counter: true, ctTimeout: true };
  const kubeProxy = { tcp: { ...KERNEL_TIMEOUTS.tcp, established: 86400, close_wait: 3600 }, udp: KERNEL_TIMEOUTS.udp };
  const api = entry({
    name: 'api',
    hint: 'ShortLived',
    timeout: '5s',
    clusterIPs: ['10.96.0.80'],
    ports: [{ port: 80 }],
  });
  const state = buildDesired([api], []);
  const before = applyTransaction(undefined, fullTransaction(state, o));
  const [oldName, oldSpec] = [...(before?.ctTimeouts ?? [])][0] ?? [];
  t.same(
    oldSpec?.policy,
    { ...KERNEL_TIMEOUTS.tcp, last_ack: 5, time_wait: 5, close: 5 },
    'no node values: the kernel defaults',
  );
  const after = applyTransaction(before, fullTransaction(state, { ...o, nodeTimeouts: kubeProxy }, before));
  t.equal(after?.ctTimeouts.size, 1, 'one object');
  t.notOk(after?.ctTimeouts.has(oldName ?? ''), 'the old object is gone');
  const [name, spec] = [...(after?.ctTimeouts ?? [])][0] ?? [];
  t.equal(spec?.policy.established, 86400, "the node's established, not nft's five days");
  t.equal(spec?.policy.close_wait, 3600, 'close_wait is never shortened');
  t.equal(spec?.policy.fin_wait, 120, 'nor fin_wait');
  t.equal(spec?.policy.time_wait, 5);
  const chain = [...(after?.chains ?? [])].find(([n]) => n.startsWith('s4_'));
  t.match(chain?.[1].rules.join('\n'), `ct timeout set "${name}"`, 'the chain sets the new object');
  const gone = deltaTransaction(diff(state, buildDesired([], []), new Set([api.key])), {
    ...o,
    nodeTimeouts: kubeProxy,
  });
  const empty = applyTransaction(after, gone);
  t.equal(empty?.ctTimeouts.size, 0, 'the last user going deletes the object by its name');
});

t.test('a delta recreates the flowtable only when it removes a LongLived port', async (t) => {
  const o = { flowtable: true, devices: ['eth0'], counter: true };
  const a = entry({ name: 'a', clusterIPs: ['10.96.0.10'], ports: [{ port: 80 }] });
  const b = entry({ name: 'b', clusterIPs: ['10.96.0.11'], ports: [{ port: 443 }] });
  const one = buildDesired([a], []);
  const two = buildDesired([a, b], []);
  const recreates = (tx: ReturnType<typeof deltaTransaction>) =>
    tx.some((op) => op.verb === 'delete' && op.obj.type === 'flowtable' && !op.obj.devices);
  t.notOk(recreates(deltaTransaction(diff(one, two, new Set([b.key])), o, two.chains)), 'an addition: no');
  const removal = deltaTransaction(diff(two, one, new Set([b.key])), o, one.chains);
  t.ok(recreates(removal), 'a removal: yes');
  t.match(
    toText(removal),
    /flush chain inet flowhint v4_[0-9a-f]{16}\ndelete flowtable inet flowhint fastpath\nadd flowtable/,
  );
  t.notOk(recreates(deltaTransaction(diff(two, one, new Set([b.key])), o, new Map())), 'no chain left to refill: no');
  t.notOk(
    recreates(deltaTransaction(diff(two, one, new Set([b.key])), { ...o, flowtable: false }, one.chains)),
    'no flowtable: no',
  );
});

t.test(
  'without ct timeout support a ShortLived chain still marks its connections (counted, kept off classify)',
  async (t) => {
    const dns = entry({
      name: 'dns',
      hint: 'ShortLived',
      clusterIPs: ['10.96.0.53'],
      ports: [{ port: 53, protocol: 'UDP' }],
    });
    const text = renderFull(buildDesired([dns], []), {
      flowtable: true,
      devices: ['eth0'],
      counter: true,
      ctTimeout: false,
    });
    t.match(text, /add rule ip flowhint s4_[0-9a-f]{16} ct mark set ct mark \| 12288\n/);
    t.notMatch(text, /ct timeout/);
  },
);
