/**
 * The agent's loop as plain code, without root: the Agent against the FAKE nft and host
 * (test/helpers/fake-nft.ts) and a source the test drives. What each test checks against
 * is written from its inputs (test/helpers/table-view.ts), not taken from the agent.
 * test/agent/netns.test.ts and the VM suite run the same agent against real nft.
 */
import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, type AgentOptions } from '../../agent/agent.ts';
import { createAgentMetrics, type AgentMetrics } from '../../agent/report/metrics.ts';
import type { Source, SourceSink } from '../../agent/sources/source.ts';
import type { TableModel } from '../../agent/nft/table-model.ts';
import type { Transaction } from '../../agent/nft/transaction.ts';
import { FakeNft, fakeHost } from '../helpers/fake-nft.ts';
import { expectOffloads, offloads, viewText, type PortSpec } from '../helpers/table-view.ts';
import { svc } from '../helpers/agent.ts';
import { capturedLogs } from '../helpers/logs.ts';

/** A source the test drives: Services in, as a list/watch source would deliver them. */
class TestSource implements Source {
  readonly name = 'test';
  private sink: SourceSink | undefined;
  private readonly initial: Array<Record<string, unknown>>;
  constructor(initial: Array<Record<string, unknown>>) {
    this.initial = initial;
  }
  async start(sink: SourceSink): Promise<void> {
    this.sink = sink;
    sink.events(this.initial.map((object) => ({ type: 'upsert', key: key(object), object })));
    sink.synced();
  }
  async stop(): Promise<void> {}
  upsert(object: Record<string, unknown>): void {
    this.sink?.events([{ type: 'upsert', key: key(object), object }]);
  }
  remove(name: string): void {
    this.sink?.events([{ type: 'delete', key: `default/${name}` }]);
  }
}

const key = (o: Record<string, unknown>) => `default/${(o.metadata as { name: string }).name}`;

interface Svc {
  name: string;
  addr: string;
  ports: PortSpec[];
}

const service = (s: Svc) =>
  svc({
    name: s.name,
    clusterIPs: [s.addr],
    ports: s.ports.map((p) => ({ port: p.port, protocol: (p.proto ?? 'tcp').toUpperCase() })),
    ...(s.ports[0]?.threshold !== undefined ? { threshold: String(s.ports[0].threshold) } : {}),
  });

/** What the table must do for these Services (node address 192.0.2.10 has no NodePorts here). */
const expected = (list: Svc[]) => expectOffloads(list.map((s) => ({ addrs: [s.addr], ports: s.ports })));

function makeAgent(
  nft: FakeNft,
  source: Source,
  extra: Partial<AgentOptions> = {},
): { agent: Agent; metrics: AgentMetrics; lines: Array<Record<string, unknown>> } {
  const metrics = createAgentMetrics({ defaultMetrics: false });
  const { logger, lines } = capturedLogs();
  const agent = new Agent({
    run: fakeHost(nft),
    nft,
    source,
    logger,
    metrics,
    defaultThreshold: 20,
    devices: {},
    counter: true,
    backoff: { initialMs: 5, maxMs: 20 },
    minSyncIntervalMs: 1,
    ...extra,
  });
  return { agent, metrics, lines };
}

async function metric(m: AgentMetrics, name: string): Promise<string> {
  return m.registry.getSingleMetricAsString(name);
}

/** A full transaction starts by (re)declaring the table; partial ones never do. */
const isFull = (tx: Transaction) => tx[0]?.verb === 'add' && tx[0].obj.type === 'table';
const flowtableOps = (tx: Transaction) => tx.filter((op) => op.obj.type === 'flowtable');

const A: Svc = { name: 'a', addr: '10.96.0.10', ports: [{ port: 80 }] };
const B: Svc = { name: 'b', addr: '10.96.0.11', ports: [{ port: 443, threshold: 500 }] };

t.test('first sync is full and programs what the Services ask for', async (t) => {
  const nft = new FakeNft();
  const { agent } = makeAgent(nft, new TestSource([service(A), service(B)]));
  await agent.prepare();
  const r = await agent.sync();
  t.equal(r.kind, 'full');
  t.ok(r.ok, r.error ?? 'ok');
  t.same(offloads(nft.table), expected([A, B]));
  t.same([...(nft.table?.flowtables.get('fastpath')?.devices ?? [])], ['eth0'], 'the flowtable is on the node device');
  await agent.stop();
});

t.test('a failed transaction leaves the table unchanged, and the retry is full', async (t) => {
  const nft = new FakeNft();
  const source = new TestSource([service(A)]);
  const { agent, metrics } = makeAgent(nft, source);
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  const before: TableModel | undefined = nft.table;
  source.upsert(service(B));
  nft.failNext(1);
  const failed = await agent.sync();
  t.equal(failed.kind, 'partial');
  t.equal(failed.ok, false);
  t.match(failed.error, /injected failure/);
  t.equal(nft.table, before, 'the table is the one before the failed transaction');
  t.same(offloads(nft.table), expected([A]));
  const retry = await agent.sync();
  t.equal(retry.kind, 'full', 'the retry is full');
  t.ok(retry.ok, retry.error ?? 'ok');
  t.ok(isFull(nft.transactions.at(-1)!), 'and its transaction is a full one');
  t.same(offloads(nft.table), expected([A, B]));
  t.equal(retry.drift, false, 'a failure is not drift');
  t.match(await metric(metrics, 'flowhint_agent_sync_failures_total'), /kind="partial"\} 1/);
  await agent.stop();
});

t.test('nft itself refuses (a goto to a missing chain): nothing changes, the agent says why', async (t) => {
  const nft = new FakeNft();
  const { agent } = makeAgent(nft, new TestSource([service(A)]));
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  const before = nft.table;
  await t.rejects(
    nft.apply([
      { verb: 'add', obj: { type: 'element', set: 'vips4', key: ['10.1.1.1'], goto: 'v4_0000000000000000' } },
    ]),
    /No such file or directory/,
  );
  await t.rejects(
    nft.apply([{ verb: 'delete', obj: { type: 'element', set: 'vips4', key: ['10.9.9.9'] } }]),
    /No such file or directory/,
  );
  t.equal(nft.table, before, 'the fake, like nft, applied nothing');
  await agent.stop();
});

t.test('a device that vanishes during a full sync is pruned, and the sync retried once', async (t) => {
  const nft = new FakeNft(['eth0', 'eth1']);
  const { agent, metrics } = makeAgent(nft, new TestSource([service(A)]));
  await agent.prepare();
  nft.beforeApply = () => {
    nft.devices.delete('eth1'); // gone between listing the devices and the transaction
    nft.beforeApply = undefined;
  };
  const r = await agent.sync();
  t.ok(r.ok, r.error ?? 'ok');
  t.equal(nft.transactions.length, 2, 'one failed transaction, one retry');
  t.same([...(nft.table?.flowtables.get('fastpath')?.devices ?? [])], ['eth0']);
  t.same(offloads(nft.table), expected([A]));
  t.match(await metric(metrics, 'flowhint_agent_devices_missing_total'), /flowhint_agent_devices_missing_total 1/);
  t.same(agent.statusDoc().devices, ['eth0']);

  // Once, not in a loop: a retry that fails too fails the sync.
  const again = makeAgent(new FakeNft(['eth0', 'eth1']), new TestSource([service(A)]));
  const nft2 = (again.agent as unknown as { o: { nft: FakeNft } }).o.nft;
  await again.agent.prepare();
  nft2.beforeApply = () => nft2.devices.delete('eth1');
  nft2.failNext(5);
  const failed = await again.agent.sync();
  t.equal(failed.ok, false);
  t.equal(nft2.transactions.length, 2, 'retried once, then given up until the next sync');
  await again.agent.stop();
  await agent.stop();
});

t.test('a restart over an unchanged table applies nothing that recreates the flowtable', async (t) => {
  const nft = new FakeNft(['eth0', 'eth1']);
  const first = makeAgent(nft, new TestSource([service(A), service(B)]));
  await first.agent.prepare();
  t.ok((await first.agent.sync()).ok);
  await first.agent.stop();
  const handle = nft.table?.flowtables.get('fastpath')?.handle;
  const seen = nft.transactions.length;

  const second = makeAgent(nft, new TestSource([service(A), service(B)]));
  await second.agent.prepare();
  const r = await second.agent.sync();
  t.ok(r.ok, r.error ?? 'ok');
  t.equal(r.drift, false);
  const mine = nft.transactions.slice(seen);
  t.same(mine.flatMap(flowtableOps), [], 'no flowtable operation at all');
  t.equal(nft.table?.flowtables.get('fastpath')?.handle, handle, 'the same flowtable (same handle)');
  t.same(offloads(nft.table), expected([A, B]));
  await second.agent.stop();
});

t.test(
  'only what the hints in use need: base chains and flowtable follow the first and last Service of a hint',
  async (t) => {
    const nft = new FakeNft(['eth0']);
    const source = new TestSource([]);
    const { agent } = makeAgent(nft, source);
    await agent.prepare();
    t.ok((await agent.sync()).ok);
    // What each state must hold, written out here: [chain name with its hook or 'regular'], flowtable.
    const shape = () => ({
      chains: [...(nft.table?.chains ?? [])]
        .filter(([n]) => !/^[vs][46]_/.test(n))
        .map(([n, c]) => `${n}:${c.base ? `${c.base.type ?? 'filter'} ${c.base.hook} ${c.base.priority}` : 'regular'}`)
        .sort(),
      flowtable: nft.table?.flowtables.has('fastpath') ?? false,
    });
    t.same(
      shape(),
      { chains: [], flowtable: false },
      'no hinted Service: no base chain, no flowtable, no packet pays anything',
    );

    const dns = svc({
      name: 'dns',
      clusterIPs: ['10.96.0.53'],
      hint: 'ShortLived',
      ports: [{ port: 53, protocol: 'UDP' }],
    });
    source.upsert(dns);
    t.equal((await agent.sync()).kind, 'full', 'the first ShortLived Service changes the shape: a full sync');
    t.same(
      shape(),
      { chains: ['new_out:nat output -110', 'new_pre:nat prerouting -110'], flowtable: false },
      'ShortLived alone: the two NAT chains, no forward chain, no flowtable',
    );

    source.upsert(service(A));
    t.equal((await agent.sync()).kind, 'full', 'the first LongLived Service: full');
    t.same(shape(), {
      chains: [
        'classify:filter forward 10',
        'hinted:regular',
        'new_out:nat output -110',
        'new_pre:nat prerouting -110',
      ],
      flowtable: true,
    });
    t.same(offloads(nft.table), expected([A]));

    source.upsert(service(B));
    t.equal((await agent.sync()).kind, 'partial', 'a second LongLived Service keeps the shape: partial');
    t.same(offloads(nft.table), expected([A, B]));

    source.remove('dns');
    t.equal((await agent.sync()).kind, 'full', 'the last ShortLived Service goes: full');
    t.same(
      shape(),
      { chains: ['classify:filter forward 10', 'hinted:regular', 'new_pre:nat prerouting -110'], flowtable: true },
      'the output chain only ShortLived needs is gone',
    );

    source.remove('a');
    source.remove('b');
    t.equal((await agent.sync()).kind, 'full');
    t.same(shape(), { chains: [], flowtable: false }, 'the last hinted Service goes: nothing per packet is left');
    await agent.stop();
  },
);

t.test('the loop: a burst is batched, failures back off and retry as full syncs', async (t) => {
  const nft = new FakeNft();
  const source = new TestSource([service(A)]);
  const { agent, metrics } = makeAgent(nft, source);
  await agent.prepare();
  agent.startLoops();
  const until = async (what: string, ok: () => boolean) => {
    for (let i = 0; i < 400 && !ok(); i++) await sleep(5);
    t.ok(ok(), what);
  };
  await until('first full sync', () => agent.lastSync?.ok === true);
  nft.failNext(3);
  const from = nft.transactions.length;
  source.upsert(service(B));
  await until(
    'converged after three failures',
    () => agent.lastSync?.ok === true && nft.transactions.length - from === 4,
  );
  t.same(
    nft.transactions.slice(from).map((tx) => (isFull(tx) ? 'full' : 'partial')),
    ['partial', 'full', 'full', 'full'],
    'after a failure, only full syncs',
  );
  t.same(offloads(nft.table), expected([A, B]));
  const failures = await metric(metrics, 'flowhint_agent_sync_failures_total');
  t.match(failures, /kind="partial"\} 1/);
  t.match(failures, /kind="full"\} 2/);
  const C: Svc = { name: 'c', addr: '10.96.0.12', ports: [{ port: 8080 }] };
  const burst = nft.transactions.length;
  for (const s of [C, { ...A, ports: [{ port: 81 }] }]) source.upsert(service(s));
  source.remove('b');
  await until(
    'the burst is programmed',
    () => viewText(offloads(nft.table)) === viewText(expected([{ ...A, ports: [{ port: 81 }] }, C])),
  );
  t.ok(
    nft.transactions.length - burst <= 2,
    `three changes in at most two transactions (${nft.transactions.length - burst})`,
  );
  await agent.stop();
});

t.test('drift is content: a re-pointed element or a changed port is seen, counted, logged and repaired', async (t) => {
  const nft = new FakeNft();
  const source = new TestSource([service(A), service(B)]);
  const { agent, metrics, lines } = makeAgent(nft, source);
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  const full = async () => {
    agent.requestFull();
    return agent.sync();
  };
  t.equal((await full()).drift, false, 'no drift in the table the agent wrote');

  // Same chains, same counts: only the content differs.
  const table = nft.table!;
  const vips4 = table.maps.get('vips4')!;
  const chainB = vips4.elements.get(B.addr)!;
  nft.table = {
    ...table,
    maps: new Map([...table.maps, ['vips4', { ...vips4, elements: new Map([...vips4.elements, [A.addr, chainB]]) }]]),
  };
  t.not(viewText(offloads(nft.table)), viewText(expected([A, B])), 'tampered');
  const r1 = await full();
  t.equal(r1.drift, true, 'a re-pointed element is drift');
  t.same(offloads(nft.table), expected([A, B]), 'repaired');

  const chainA = nft.table.maps.get('vips4')!.elements.get(A.addr)!;
  const chains = new Map(nft.table.chains);
  chains.set(chainA, { rules: chains.get(chainA)!.rules.map((r) => r.replace('proto-dst 80 ', 'proto-dst 8080 ')) });
  nft.table = { ...nft.table, chains };
  const r2 = await full();
  t.equal(r2.drift, true, 'a changed port is drift');
  t.same(offloads(nft.table), expected([A, B]), 'repaired');
  t.match(await metric(metrics, 'flowhint_agent_drift_repairs_total'), /flowhint_agent_drift_repairs_total 2/);
  const warned = lines.filter((l) => l.msg === 'table differs from what flowhint last programmed (drift); repairing');
  t.equal(warned.length, 2);
  t.match(String((warned[1]?.differences as string[])[0]), /proto-dst 8080/, 'the log line says what differed');
  t.equal(lines.filter((l) => l.msg === 'synced' && l.drift === true).length, 2, '"drift":true in the synced lines');
  await agent.stop();
});

t.test('many partial syncs, then a full one: no false drift', async (t) => {
  const nft = new FakeNft();
  const source = new TestSource([]);
  const { agent } = makeAgent(nft, source);
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  const live = new Map<string, Svc>();
  let seed = 7;
  const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  for (let i = 0; i < 200; i++) {
    const name = `s${rand(30)}`;
    if (rand(4) === 0) {
      live.delete(name);
      source.remove(name);
    } else {
      const s: Svc = {
        name,
        addr: `10.96.1.${rand(20)}`,
        ports: [{ port: 1000 + rand(3), proto: rand(2) ? 'tcp' : 'udp', threshold: [1, 20][rand(2)]! }],
      };
      // Two Services on one address would merge their ports; keep addresses distinct.
      for (const [n, o] of live)
        if (o.addr === s.addr && n !== name) {
          live.delete(n);
          source.remove(n);
        }
      live.set(name, s);
      source.upsert(service(s));
    }
    const r = await agent.sync();
    if (!r.ok) t.fail(r.error ?? 'sync failed');
  }
  t.same(offloads(nft.table), expected([...live.values()]), 'partial syncs reach what the Services ask for');
  agent.requestFull();
  const r = await agent.sync();
  t.equal(r.drift, false, 'the full sync agrees with the partial ones');
  await agent.stop();
});

t.test('host polling: devices that come and go are changed in place by the sync loop', async (t) => {
  const nft = new FakeNft(['eth0']);
  const source = new TestSource([service(A)]);
  const { agent, lines } = makeAgent(nft, source, { devicePollMs: 10 });
  await agent.prepare();
  agent.startLoops();
  const until = async (what: string, ok: () => boolean) => {
    for (let i = 0; i < 400 && !ok(); i++) await sleep(5);
    t.ok(ok(), what);
  };
  const devices = () => [...(nft.table?.flowtables.get('fastpath')?.devices ?? [])].sort().join(',');
  await until('first sync', () => devices() === 'eth0');
  const handle = nft.table?.flowtables.get('fastpath')?.handle;
  nft.devices.add('eth1');
  await until('a new device is added', () => devices() === 'eth0,eth1');
  t.equal(agent.lastSync?.kind, 'devices', 'by a devices sync');
  nft.removeDevice('eth0');
  await until('a gone device is forgotten', () => agent.statusDoc().devices.join(',') === 'eth1');
  t.equal(devices(), 'eth1');
  t.equal(nft.table?.flowtables.get('fastpath')?.handle, handle, 'never recreated');
  t.same(offloads(nft.table), expected([A]), 'the Services stay programmed');
  t.ok(lines.some((l) => l.msg === 'flowtable devices updated in place'));

  // A device change and a Service change in the same sync: one partial transaction.
  const from = nft.transactions.length;
  nft.devices.add('eth2');
  source.upsert(service(B));
  await until(
    'both applied',
    () => devices() === 'eth1,eth2' && viewText(offloads(nft.table)) === viewText(expected([A, B])),
  );
  t.ok(
    nft.transactions.slice(from).every((tx) => !isFull(tx)),
    'without a full sync',
  );
  await agent.stop();
});

t.test('a condition is logged when it changes, not at every check, and its memory does not grow', async (t) => {
  const nft = new FakeNft(['eth0']);
  const { agent, lines } = makeAgent(nft, new TestSource([service(A)]), { devicePollMs: 5 });
  await agent.prepare();
  agent.startLoops();
  for (let i = 0; i < 30; i++) {
    nft.devices.add(`bad"${i % 3}`);
    await sleep(8);
    nft.devices.delete(`bad"${i % 3}`);
  }
  await sleep(20);
  const warned = lines.filter((l) => l.msg === 'device names cannot be rendered safely; not added to the flowtable');
  t.ok(warned.length > 0 && warned.length <= 30, `one line per change (${warned.length} for 30 appearances)`);
  const conditions = (agent as unknown as { conditions: { states: Map<string, string> } }).conditions.states;
  t.ok(conditions.size <= 5, `conditions remembered: ${[...conditions.keys()].join(', ')}`);
  t.same([...(nft.table?.flowtables.get('fastpath')?.devices ?? [])], ['eth0'], 'never added');
  await agent.stop();
});

t.test('flowtable support that appears while the agent runs upgrades the ruleset in place', async (t) => {
  const nft = new FakeNft(['eth0']);
  nft.flowtableSupported = false;
  const { agent, lines } = makeAgent(nft, new TestSource([service(A)]), { reprobeMs: 10 });
  await agent.prepare();
  agent.startLoops();
  for (let i = 0; i < 200 && agent.lastSync?.ok !== true; i++) await sleep(5);
  t.same(
    offloads(nft.table),
    expectOffloads([{ addrs: [A.addr], ports: A.ports }], false),
    'degraded: counting rules, no flow add',
  );
  t.equal(nft.table?.flowtables.size, 0);
  t.equal(lines.filter((l) => /^degraded: kernel has no flowtable support/.test(String(l.msg))).length, 1, 'said once');
  nft.flowtableSupported = true;
  for (let i = 0; i < 200 && viewText(offloads(nft.table)) !== viewText(expected([A])); i++) await sleep(5);
  t.same(offloads(nft.table), expected([A]), 'upgraded: flow add, and the flowtable');
  t.same([...(nft.table?.flowtables.get('fastpath')?.devices ?? [])], ['eth0']);
  t.equal(agent.statusDoc().node.mode, 'supported');
  t.equal(
    lines.filter((l) => /^degraded: kernel has no flowtable support/.test(String(l.msg))).length,
    1,
    'still said once',
  );
  await agent.stop();
});
