/**
 * The agent's loop as plain code, without root: the Agent against the FAKE nft and host
 * (test/helpers/fake-nft.ts) and a source the test drives. What each test checks against
 * is written from its inputs (test/helpers/table-view.ts), not taken from the agent.
 * test/agent/netns.test.ts and the VM suite run the same agent against real nft.
 */
import t from 'tap';
import type { TableModel } from '../../agent/nft/table-model.ts';
import { FakeNft } from '../helpers/fake-nft.ts';
import { offloads, viewText } from '../helpers/table-view.ts';
import {
  A,
  B,
  TestSource,
  expected,
  flowtableOps,
  isFull,
  makeAgent,
  metric,
  runningAgent,
  service,
  syncedAgent,
  type Svc,
} from '../helpers/loop-agent.ts';
import { svc } from '../helpers/agent.ts';
import { eventually } from '../helpers/eventually.ts';

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

t.test('a device that vanishes during a full sync is pruned; device changes never fail a sync', async (t) => {
  const nft = new FakeNft(['eth0', 'eth1']);
  const { agent, metrics } = makeAgent(nft, new TestSource([service(A)]));
  await agent.prepare();
  nft.beforeApply = () => {
    nft.devices.delete('eth1'); // gone between listing the devices and the transaction
    nft.beforeApply = undefined;
  };
  const r = await agent.sync();
  t.ok(r.ok, r.error ?? 'ok');
  const first = nft.transactions[0] ?? [];
  t.ok(
    first.every((op) => op.obj.type !== 'flowtable' || (op.obj.devices ?? []).length === 0),
    "the Services' transaction names no device (the flowtable is created empty)",
  );
  t.equal(nft.transactions.length, 3, 'then the devices (failed: eth1 is gone), then eth0 alone');
  t.same([...(nft.table?.flowtables.get('fastpath')?.devices ?? [])], ['eth0']);
  t.same(offloads(nft.table), expected([A]));
  t.match(await metric(metrics, 'flowhint_agent_devices_missing_total'), /flowhint_agent_devices_missing_total 1/);
  t.same(agent.statusDoc().devices, ['eth0']);

  // Device transactions that keep failing: the Services are programmed and the sync succeeds;
  // the next host poll sees the flowtable short of the node's devices and adds them.
  const again = makeAgent(new FakeNft(['eth0', 'eth1']), new TestSource([service(A)]));
  const nft2 = (again.agent as unknown as { o: { nft: FakeNft } }).o.nft;
  await again.agent.prepare();
  nft2.beforeApply = (tx) => {
    if (tx.some((op) => op.obj.type === 'flowtable' && (op.obj.devices ?? []).length > 0))
      throw new Error('Could not process rule: No such file or directory');
  };
  const survived = await again.agent.sync();
  t.ok(survived.ok, survived.error ?? 'the sync succeeds');
  t.same(offloads(nft2.table), expected([A]), 'the Services are programmed');
  t.same([...(nft2.table?.flowtables.get('fastpath')?.devices ?? [])], [], 'no device yet');
  t.ok(
    again.lines.some((l) => l.msg === 'flowtable device changes failed (vanished devices); the next host poll retries'),
  );
  nft2.beforeApply = undefined;
  await (again.agent as unknown as { pollHost(): Promise<void> }).pollHost();
  const healed = await again.agent.sync();
  t.ok(healed.ok);
  t.equal(healed.kind, 'devices', 'by a devices sync');
  t.same([...(nft2.table?.flowtables.get('fastpath')?.devices ?? [])].sort(), ['eth0', 'eth1']);
  await again.agent.stop();
  await agent.stop();
});

t.test(
  'a hint change never waits for device work: its sync names no device, the devices follow in their own',
  async (t) => {
    const nft = new FakeNft(['eth0']);
    const source = new TestSource([service(A)]);
    const { agent, poll, held, first: start } = await syncedAgent(nft, source);
    t.ok(start.ok);
    nft.devices.add('eth1');
    await poll(); // the poll saw eth1: a device change is waiting
    source.upsert(service(B)); // and so is a Service change
    const seen = nft.transactions.length;
    const first = await agent.sync();
    t.equal(first.kind, 'partial');
    t.ok(first.ok, first.error ?? 'ok');
    t.same(offloads(nft.table), expected([A, B]), 'the Service is programmed');
    t.same(nft.transactions.slice(seen).flatMap(flowtableOps), [], 'by a sync with no flowtable operation');
    t.same(held(), ['eth0'], 'the device is not there yet');
    const second = await agent.sync();
    t.equal(second.kind, 'devices', 'the next sync is the devices one');
    t.same(held(), ['eth0', 'eth1']);
    t.same(offloads(nft.table), expected([A, B]));
    await agent.stop();
  },
);

t.test('device work stops between its transactions for a Service change that arrives meanwhile', async (t) => {
  const nft = new FakeNft(['eth0']);
  const source = new TestSource([service(A)]);
  const { agent, poll, held, first } = await syncedAgent(nft, source);
  t.ok(first.ok);
  for (const d of ['eth1', 'eth2', 'eth3', 'gone']) nft.devices.add(d);
  await poll();
  nft.devices.delete('gone'); // vanished since the poll: the devices' transaction fails, then one by one
  let singles = 0;
  nft.beforeApply = (tx) => {
    const devices = tx.flatMap((op) => (op.obj.type === 'flowtable' ? (op.obj.devices ?? []) : []));
    if (devices.length === 1 && ++singles === 1) source.upsert(service(B)); // a hint changes meanwhile
  };
  const r = await agent.sync();
  t.equal(r.kind, 'devices');
  t.ok(r.ok, r.error ?? 'ok');
  t.equal(singles, 1, 'one device transaction ran, then the work stopped');
  t.equal(held().length, 2, 'the flowtable holds eth0 and the one device added');
  nft.beforeApply = undefined;
  const next = await agent.sync();
  t.equal(next.kind, 'partial', 'the waiting Service goes next');
  t.same(offloads(nft.table), expected([A, B]));
  t.equal(held().length, 2, 'still without the rest of the devices');
  const last = await agent.sync();
  t.equal(last.kind, 'devices', 'then the rest of the devices');
  t.same(held(), ['eth0', 'eth1', 'eth2', 'eth3']);
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
      { chains: ['new_out4:nat output -110', 'new_pre4:nat prerouting -110'], flowtable: false },
      'ShortLived alone: the two NAT chains, no forward chain, no flowtable',
    );

    source.upsert(service(A));
    t.equal((await agent.sync()).kind, 'full', 'the first LongLived Service: full');
    t.same(shape(), {
      chains: [
        'classify:filter forward 10',
        'hinted:regular',
        'new_out4:nat output -110',
        'new_pre4:nat prerouting -110',
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
      { chains: ['classify:filter forward 10', 'hinted:regular', 'new_pre4:nat prerouting -110'], flowtable: true },
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
  const { agent, metrics } = await runningAgent(nft, source);
  nft.failNext(3);
  const from = nft.transactions.length;
  source.upsert(service(B));
  await eventually(
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
  await eventually(
    'the burst is programmed',
    () => viewText(offloads(nft.table)) === viewText(expected([{ ...A, ports: [{ port: 81 }] }, C])),
  );
  t.ok(
    nft.transactions.length - burst <= 2,
    `three changes in at most two transactions (${nft.transactions.length - burst})`,
  );
  await agent.stop();
});

t.test(
  'freshness: the last success is renewed while the loop is idle after a good sync, never while syncs fail',
  async (t) => {
    const nft = new FakeNft();
    const source = new TestSource([service(A)]);
    const { agent, metrics } = await runningAgent(nft, source);
    const last = async () =>
      Number(/ ([0-9.e+]+)$/m.exec(await metric(metrics, 'flowhint_agent_last_sync_success_timestamp_seconds'))?.[1]);
    metrics.lastSyncSuccess.set(1);
    const before = Date.now() / 1000;
    agent.renewFreshness();
    t.ok((await last()) >= before, 'idle after a good sync: renewed to now');
    nft.failNext(1_000_000);
    source.upsert(service(B));
    await eventually('the change failed', () => agent.lastSync?.ok === false);
    metrics.lastSyncSuccess.set(1);
    agent.renewFreshness();
    t.equal(await last(), 1, 'syncs failing: not renewed, so freshness climbs');
    nft.failNext(0);
    await eventually('recovered', () => agent.lastSync?.ok === true);
    agent.renewFreshness();
    t.ok((await last()) >= before, 'recovered: renewed again');
    await agent.stop();
  },
);

t.test("a removed LongLived hint's offloaded flows are evicted: the flowtable is recreated in that sync", async (t) => {
  // A flowtable entry outlives the rules that made it; only the flowtable's deletion ends it
  // (issue 32). The fake gives a recreated flowtable a new handle.
  const nft = new FakeNft(['eth0']);
  const source = new TestSource([service(A), service(B)]);
  const { agent } = makeAgent(nft, source);
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  const handle = () => nft.table?.flowtables.get('fastpath')?.handle;
  const first = handle();

  source.upsert(service({ ...B, name: 'c', addr: '10.96.0.12' }));
  const added = await agent.sync();
  t.equal(added.kind, 'partial');
  t.equal(handle(), first, 'adding a hint keeps every offloaded flow');

  source.remove(B.name);
  const removed = await agent.sync();
  t.ok(removed.ok, removed.error ?? 'ok');
  t.equal(removed.kind, 'partial', 'one partial sync');
  t.not(handle(), first, 'removing one recreates the flowtable: its flows return to the slow path');
  t.same(offloads(nft.table), expected([A, { ...B, name: 'c', addr: '10.96.0.12' }]), 'the others stay programmed');
  t.same([...(nft.table?.flowtables.get('fastpath')?.devices ?? [])], ['eth0'], 'on the same devices');

  // Restarted after a hint went while no agent ran: the full sync evicts too.
  const second = handle();
  await agent.stop();
  const again = makeAgent(nft, new TestSource([service(A)]));
  await again.agent.prepare();
  t.ok((await again.agent.sync()).ok);
  t.not(handle(), second, 'a full sync that drops a LongLived port recreates it');
  const third = handle();
  again.agent.requestFull();
  t.ok((await again.agent.sync()).ok);
  t.equal(handle(), third, 'and one that drops none keeps it');
  await again.agent.stop();
});

t.test('a hint added is applied to live connections: their mark is set after the sync', async (t) => {
  const nft = new FakeNft(['eth0']);
  const source = new TestSource([service(A)]);
  const { agent } = makeAgent(nft, source);
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  await agent.marked();
  const updates = () => nft.ran.filter((c) => c.startsWith('conntrack -U'));
  t.same(
    updates(),
    ['conntrack -U -f ipv4 -p tcp --orig-dst 10.96.0.10 --dport 80 --mark 0x2000/0x2000'],
    "the first sync: every LongLived port's connections (opened before the agent ran)",
  );
  const seen = updates().length;
  source.upsert(service(B));
  t.ok((await agent.sync()).ok);
  await agent.marked();
  t.same(
    updates().slice(seen),
    ['conntrack -U -f ipv4 -p tcp --orig-dst 10.96.0.11 --dport 443 --mark 0x2000/0x2000'],
    'a partial sync: only the added port',
  );
  const again = updates().length;
  agent.requestFull();
  t.ok((await agent.sync()).ok);
  await agent.marked();
  t.equal(updates().length, again, 'a full sync that adds nothing marks nothing');
  await agent.stop();

  const restarted = makeAgent(nft, new TestSource([service(A), service(B)]));
  await restarted.agent.prepare();
  t.ok((await restarted.agent.sync()).ok);
  await restarted.agent.marked();
  t.equal(updates().length, again, 'a restart over the table it left marks nothing: its rules marked them');
  await restarted.agent.stop();
});

t.test(
  'classify sends LongLived packets to `hinted` only past the lowest threshold in use, kept so as Services come and go',
  async (t) => {
    const nft = new FakeNft();
    const source = new TestSource([service(B)]);
    const { agent } = makeAgent(nft, source);
    await agent.prepare();
    // Written from the inputs: the default mark bits (0x2000, ShortLived 0x1000) and thresholds.
    const classify = () => nft.table?.chains.get('classify')?.rules;
    const past = (n: number) => [`ct mark & 12288 == 8192 ct packets > ${n} goto hinted`];
    t.ok((await agent.sync()).ok);
    t.same(classify(), past(500), 'B alone: its threshold, 500');
    source.upsert(service(A));
    const lower = await agent.sync();
    t.ok(lower.ok, lower.error ?? 'ok');
    t.equal(lower.kind, 'full', 'a new lowest threshold rewrites the base chain: a full sync');
    t.same(classify(), past(20), "A's default threshold, 20, is lower");
    t.same(offloads(nft.table), expected([A, B]));
    source.upsert(service({ name: 'c', addr: '10.96.0.12', ports: [{ port: 80, threshold: 100 }] }));
    const same = await agent.sync();
    t.equal(same.kind, 'partial', 'a threshold above the lowest changes nothing in classify');
    t.same(classify(), past(20));
    source.remove('a');
    t.equal((await agent.sync()).kind, 'full');
    t.same(classify(), past(100), 'A gone: the lowest left is c, 100');
    source.upsert(service({ name: 'd', addr: '10.96.0.13', ports: [{ port: 80, threshold: 0 }] }));
    t.ok((await agent.sync()).ok);
    t.same(classify(), ['ct mark & 12288 == 8192 goto hinted'], 'a threshold of 0: every packet of theirs goes on');
    await agent.stop();
  },
);
