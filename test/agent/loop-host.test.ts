/**
 * The agent's loop without root, continued (test/agent/loop.test.ts has the syncs and the
 * retry): drift, host polling, conditions and support that appears, against the FAKE nft.
 */
import t from 'tap';
import { fakeClock } from '../helpers/fake-clock.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { FakeNft } from '../helpers/fake-nft.ts';
import { expectOffloads, offloads, viewText } from '../helpers/table-view.ts';
import {
  A,
  B,
  TestSource,
  expected,
  isFull,
  makeAgent,
  metric,
  service,
  syncedAgent,
  type Svc,
} from '../helpers/loop-agent.ts';
import { eventually } from '../helpers/eventually.ts';

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
  const devices = () => [...(nft.table?.flowtables.get('fastpath')?.devices ?? [])].sort().join(',');
  await eventually('first sync', () => devices() === 'eth0');
  const handle = nft.table?.flowtables.get('fastpath')?.handle;
  nft.devices.add('eth1');
  await eventually('a new device is added', () => devices() === 'eth0,eth1');
  t.equal(agent.lastSync?.kind, 'devices', 'by a devices sync');
  nft.removeDevice('eth0');
  await eventually('a gone device is forgotten', () => agent.statusDoc().devices.join(',') === 'eth1');
  t.equal(devices(), 'eth1');
  t.equal(nft.table?.flowtables.get('fastpath')?.handle, handle, 'never recreated');
  t.same(offloads(nft.table), expected([A]), 'the Services stay programmed');
  t.ok(lines.some((l) => l.msg === 'flowtable devices updated in place'));

  // A device change and a Service change in the same sync: one partial transaction.
  const from = nft.transactions.length;
  nft.devices.add('eth2');
  source.upsert(service(B));
  await eventually(
    'both applied',
    () => devices() === 'eth1,eth2' && viewText(offloads(nft.table)) === viewText(expected([A, B])),
  );
  t.ok(
    nft.transactions.slice(from).every((tx) => !isFull(tx)),
    'without a full sync',
  );
  await agent.stop();
});

t.test('a new device joins the flowtable once it has stayed up; one that lives less never reaches nft', async (t) => {
  const nft = new FakeNft(['eth0']);
  const time = fakeClock(1_000_000);
  const synced = await syncedAgent(nft, new TestSource([service(A)]), { deviceSettleMs: 1_000, clock: time.clock });
  const { agent, poll } = synced;
  const held = () => synced.held().join(',');
  t.ok(synced.first.ok);
  t.equal(held(), 'eth0', 'the devices present at start join at once');
  const named = (d: string) =>
    nft.transactions.filter((tx) => tx.some((op) => op.obj.type === 'flowtable' && op.obj.devices?.includes(d)));

  nft.devices.add('veth-job'); // a short-lived pod: seen by two polls 600 ms apart, then gone
  nft.devices.add('veth-app'); // a pod that stays
  await poll();
  await time.tick(600);
  await poll();
  t.equal((await agent.sync()).kind, 'partial', 'nothing for the devices sync to do yet');
  t.equal(held(), 'eth0', 'neither device has stayed up 1 s');
  nft.devices.delete('veth-job');
  await time.tick(400);
  await poll(); // veth-app: listed for 1 000 ms now
  const r = await agent.sync();
  t.equal(r.kind, 'devices');
  t.equal(held(), 'eth0,veth-app', 'the pod that stayed joins');
  t.same(named('veth-job'), [], 'the short-lived one never reached nft');

  nft.devices.delete('veth-app');
  await time.tick(100);
  await poll();
  await agent.sync();
  nft.devices.add('veth-app'); // back again: it waits again
  await time.tick(100);
  await poll();
  await agent.sync();
  t.equal(held(), 'eth0', 'a device that went and came back waits again');
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
  await eventually('a first sync', () => agent.lastSync?.ok === true);
  t.same(
    offloads(nft.table),
    expectOffloads([{ addrs: [A.addr], ports: A.ports }], false),
    'degraded: counting rules, no flow add',
  );
  t.equal(nft.table?.flowtables.size, 0);
  t.equal(lines.filter((l) => /^degraded: kernel has no flowtable support/.test(String(l.msg))).length, 1, 'said once');
  nft.flowtableSupported = true;
  await eventually('the upgrade', () => viewText(offloads(nft.table)) === viewText(expected([A])));
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

t.test('device churn: a device that vanished before its transaction never holds back a Service change', async (t) => {
  const nft = new FakeNft(['eth0']);
  const source = new TestSource([service(A)]);
  const { agent, metrics } = makeAgent(nft, source);
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  // A poll saw a short-lived pod's veth; it is gone by the time the sync runs.
  nft.devices.add('veth9');
  await (agent as unknown as { pollHost(): Promise<void> }).pollHost();
  nft.devices.delete('veth9');
  source.upsert(service(B));
  const from = nft.transactions.length;
  const r = await agent.sync();
  t.ok(r.ok, r.error ?? 'the sync succeeds');
  t.equal(r.kind, 'partial', 'without falling back to a full sync');
  t.same(offloads(nft.table), expected([A, B]), 'the Service change is programmed in this sync');
  const first = nft.transactions[from] ?? [];
  t.ok(
    first.every((op) => op.obj.type !== 'flowtable') && first.some((op) => op.obj.type === 'element'),
    'Service elements in a transaction of their own, first',
  );
  t.ok(
    nft.transactions.slice(from).every((tx) => tx.every((op) => op.obj.type !== 'flowtable')),
    'and no device transaction in that sync: the device change waits for a sync of its own',
  );
  const devices = await agent.sync();
  t.equal(devices.kind, 'devices', 'which comes next');
  t.ok(devices.ok, devices.error ?? 'and succeeds');
  t.same([...(nft.table?.flowtables.get('fastpath')?.devices ?? [])], ['eth0'], 'the vanished device is dropped');
  t.match(await metric(metrics, 'flowhint_agent_devices_missing_total'), /flowhint_agent_devices_missing_total 1/);

  // The same in a full sync over an existing flowtable.
  nft.devices.add('veth8');
  await (agent as unknown as { pollHost(): Promise<void> }).pollHost();
  nft.beforeApply = () => {
    nft.devices.delete('veth8');
    nft.beforeApply = undefined;
  };
  source.upsert(service({ ...B, ports: [{ port: 8443 }] }));
  agent.requestFull();
  const full = await agent.sync();
  t.ok(full.ok, full.error ?? 'the full sync succeeds');
  t.same(offloads(nft.table), expected([A, { ...B, ports: [{ port: 8443 }] }]));
  t.same([...(nft.table?.flowtables.get('fastpath')?.devices ?? [])], ['eth0']);
  await agent.stop();
});

t.test(
  'a kernel without in-place device changes (before 5.8): probed, reported, and devices still reach the flowtable',
  async (t) => {
    const nft = new FakeNft(['eth0']);
    nft.deviceUpdateSupported = false;
    const source = new TestSource([service(A)]);
    const { agent, lines, metrics } = makeAgent(nft, source);
    await agent.prepare();
    t.ok((await agent.sync()).ok);
    const doc = agent.statusDoc();
    t.equal(doc.node.flowtableDeviceUpdate?.supported, false, 'the status document says so');
    t.match(doc.node.flowtableDeviceUpdate?.detail, /left it out.*needs Linux 5\.8.*recreates the flowtable/);
    t.match(await metric(metrics, 'flowhint_agent_flowtable_device_update_supported'), /_supported 0/);
    t.ok(lines.some((l) => l.msg === 'degraded: each flowtable device change recreates the flowtable'));
    t.equal(nft.others.size, 0, 'the probe left no table behind');
    const devices = () => [...(nft.table?.flowtables.get('fastpath')?.devices ?? [])].sort().join(',');
    const handle = nft.table?.flowtables.get('fastpath')?.handle;
    nft.devices.add('eth1');
    await (agent as unknown as { pollHost(): Promise<void> }).pollHost();
    const r = await agent.sync();
    t.ok(r.ok, r.error ?? 'the devices sync succeeds');
    t.equal(devices(), 'eth0,eth1', 'the new device is in the flowtable (an in-place add would have changed nothing)');
    t.not(nft.table?.flowtables.get('fastpath')?.handle, handle, 'by recreating it');
    t.same(offloads(nft.table), expected([A]), 'with its offload rules back');
    await agent.stop();
  },
);

t.test('a kernel with in-place device changes: probed once, reported, the flowtable kept', async (t) => {
  const nft = new FakeNft(['eth0']);
  const { agent, metrics } = makeAgent(nft, new TestSource([service(A)]));
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  t.same(agent.statusDoc().node.flowtableDeviceUpdate, {
    supported: true,
    detail: 'kernel adds and removes devices on a live flowtable',
  });
  t.match(await metric(metrics, 'flowhint_agent_flowtable_device_update_supported'), /_supported 1/);
  t.equal(nft.others.size, 0, 'the probe left no table behind');
  await agent.stop();
});
