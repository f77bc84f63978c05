/**
 * NodeStatusWriter over the real client (node-api.ts) against the FAKE API server's Nodes and
 * FlowhintNode CRD (test/helpers/fake-flowhintnodes.ts), on a fake clock: what is written,
 * when, and what happens when the API server refuses, conflicts or hangs.
 */
import t from 'tap';
import type { FlowhintNodeStatus } from '../../../api/index.ts';
import { kubeNodeStatusApi } from '../../../agent/report/node-api.ts';
import { NodeStatusWriter } from '../../../agent/report/node-writer.ts';
import { FakeApiServer } from '../../helpers/fake-apiserver.ts';
import { FakeFlowhintNodes } from '../../helpers/fake-flowhintnodes.ts';
import { fakeKubeConfig } from '../../helpers/fake-kube.ts';
import { fakeClock } from '../../helpers/fake-clock.ts';
import { eventually } from '../../helpers/eventually.ts';
import { capturedLogs } from '../../helpers/logs.ts';
import { nodeStatusFixture } from '../../helpers/flowhint-node.ts';

const STATUS = nodeStatusFixture((s) => {
  s.services = { hinted: 2, programmed: 2, refused: 0, offloadedConnections: 1 };
});

async function setup(t: { teardown: (fn: () => unknown) => void }) {
  const api = new FakeApiServer();
  await api.start();
  const fhn = new FakeFlowhintNodes(api);
  const uid = fhn.addNode('node-a');
  const clock = fakeClock(1_000_000);
  const { logger, lines } = capturedLogs();
  const status = structuredClone(STATUS);
  const writer = new NodeStatusWriter({
    api: kubeNodeStatusApi(fakeKubeConfig(api.url)),
    node: 'node-a',
    log: logger,
    clock: clock.clock,
    minIntervalMs: 10_000,
    refreshMs: 60_000,
    requestTimeoutMs: 2_000,
    backoff: { initialMs: 5_000, maxMs: 40_000 },
  });
  t.teardown(async () => {
    await writer.stop();
    fhn.release();
    await api.stop();
  });
  const statusWrites = () => fhn.applies.filter((a) => a.subresource === 'status' && a.code === 200).length;
  return {
    api,
    fhn,
    uid,
    clock,
    lines,
    writer,
    statusWrites,
    set(change: (s: FlowhintNodeStatus) => void) {
      change(status);
    },
    start() {
      writer.start(() => structuredClone(status));
    },
    /** Let timers due within `ms` fire, then let the requests they started land (no new request for 50 ms). */
    async step(ms: number) {
      await clock.tick(ms);
      let seen = -1;
      while (seen !== api.requests.length) {
        seen = api.requests.length;
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

t.test('created with the owner reference, its status applied by flowhint-agent', async (t) => {
  const s = await setup(t);
  s.start();
  await s.clock.tick(0);
  await eventually('written', () => s.statusWrites() === 1);
  const o = s.fhn.read('node-a') as { metadata: Record<string, unknown>; status: unknown };
  t.strictSame(o.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Node', name: 'node-a', uid: s.uid }]);
  // The fake clock starts at 1,000,000 ms after the epoch: 16 minutes 40 seconds.
  t.strictSame(o.status, { ...STATUS, heartbeatTime: '1970-01-01T00:16:40.000Z' }, 'the status and its heartbeat');
  t.strictSame(o.metadata.managedFields, [
    { manager: 'flowhint-agent', operation: 'Apply', apiVersion: 'flowhint.dev/v1alpha1' },
    { manager: 'flowhint-agent', operation: 'Apply', apiVersion: 'flowhint.dev/v1alpha1', subresource: 'status' },
  ]);
  t.strictSame(
    s.fhn.applies.map((a) => [a.subresource ?? 'object', a.manager, a.force, a.code]),
    [
      ['object', 'flowhint-agent', true, 200],
      ['status', 'flowhint-agent', true, 200],
    ],
  );
  await eventually('said once', () => s.lines.some((l) => l.msg === 'FlowhintNode status written'));
  t.equal(s.writer.writes, 1);
});

t.test(
  'not rewritten when nothing changed; time and offloaded count at most once a minute; a heartbeat every minute',
  async (t) => {
    const s = await setup(t);
    s.start();
    await s.clock.tick(0);
    await eventually('written', () => s.statusWrites() === 1);
    for (let i = 0; i < 5; i++) s.writer.request();
    await s.step(30_000);
    t.equal(s.statusWrites(), 1, 'the same status is not written again');
    s.set((x) => {
      x.lastSync = { time: '2026-12-05T00:00:20.000Z', kind: 'full', result: 'Succeeded' };
      x.services.offloadedConnections = 5;
    });
    s.writer.request();
    await s.step(20_000);
    t.equal(s.statusWrites(), 1, 'a new sync time 50 s after the last write waits');
    await s.step(20_000);
    await eventually('refreshed', () => s.statusWrites() === 2);
    t.equal((s.fhn.read('node-a') as { status: FlowhintNodeStatus }).status.services.offloadedConnections, 5);
    // Seconds after the first write (at 1,000,000 ms on the fake clock) of the last heartbeat;
    // the fake timers run a zero delay 1 ms later during a tick, hence "about".
    const heartbeatAt = () =>
      (Date.parse((s.fhn.read('node-a') as { status: FlowhintNodeStatus }).status.heartbeatTime ?? '') - 1_000_000) /
      1000;
    t.equal(Math.round(heartbeatAt()), 60, 'the refresh carried the heartbeat due 60 s after the first write');
    for (let i = 0; i < 10; i++) await s.step(60_000);
    t.equal(s.statusWrites(), 12, 'ten quiet minutes: ten heartbeats, one a minute, nothing else');
    t.equal(Math.round(heartbeatAt()), 660, 'the last one ten minutes later');
    t.equal(s.fhn.applies.filter((a) => a.subresource === undefined).length, 1, 'the object is applied once');
  },
);

t.test('a write for a change renews the heartbeat: no heartbeat write within a minute of it', async (t) => {
  const s = await setup(t);
  s.start();
  await s.clock.tick(0);
  await eventually('written', () => s.statusWrites() === 1);
  await s.step(40_000);
  s.set((x) => {
    x.services.programmed = 7;
  });
  s.writer.request();
  await s.step(0);
  await eventually('the change', () => s.statusWrites() === 2);
  await s.step(50_000);
  t.equal(s.statusWrites(), 2, '90 s after the first write, 50 s after the change: no heartbeat yet');
  await s.step(11_000);
  await eventually('the heartbeat 60 s after the change', () => s.statusWrites() === 3);
});

t.test('a change a reader would see is written within the minimum interval, bursts coalesced', async (t) => {
  const s = await setup(t);
  s.start();
  await s.clock.tick(0);
  await eventually('written', () => s.statusWrites() === 1);
  s.set((x) => {
    x.services.programmed = 3;
    x.services.hinted = 3;
  });
  s.writer.request();
  await s.step(10_000);
  await eventually('updated', () => s.statusWrites() === 2);
  t.equal((s.fhn.read('node-a') as { status: FlowhintNodeStatus }).status.services.programmed, 3);
  // A minute of churn: a visible change every second.
  for (let i = 0; i < 60; i++) {
    s.set((x) => {
      x.services.programmed = 10 + i;
    });
    s.writer.request();
    await s.step(1_000);
  }
  await s.step(10_000);
  const writes = s.statusWrites() - 2;
  t.ok(writes >= 5 && writes <= 7, `churn: one write per 10 s (${writes} in 70 s)`);
  t.equal((s.fhn.read('node-a') as { status: FlowhintNodeStatus }).status.services.programmed, 69, 'the last one');
});

t.test('the CRD not installed: logged once, retried with backoff, written once installed', async (t) => {
  const s = await setup(t);
  s.fhn.crdInstalled = false;
  s.start();
  await s.clock.tick(0);
  await eventually('refused', () => s.fhn.applies.length === 0 && s.lines.some((l) => /CRD/.test(String(l.msg))));
  // Three minutes, a second at a time. Backoff 5 s doubling to 40 s, ±20 %: tries at 0, then
  // after 5, 10, 20, 40, 40, … s: 6 to 8 tries (not 18, once per minimum interval).
  for (let i = 0; i < 180; i++) await s.step(1_000);
  const patches = () => s.api.requests.filter((r) => r.method === 'PATCH').length;
  t.ok(patches() >= 6 && patches() <= 8, `retried with backoff (${patches()} tries in 3 minutes)`);
  t.equal(s.lines.filter((l) => /CRD flowhintnodes\.flowhint\.dev is not installed/.test(String(l.msg))).length, 1);
  s.fhn.crdInstalled = true;
  // The next retry is at most the backoff's cap (40 s) plus its jitter (20 %) away.
  await s.step(50_000);
  await eventually('written', () => s.statusWrites() === 1);
});

t.test('a conflict or a server error: logged once per kind, retried', async (t) => {
  const s = await setup(t);
  s.fhn.refuse = 409;
  s.start();
  await s.clock.tick(0);
  for (let i = 0; i < 3; i++) await s.step(20_000);
  t.equal(s.lines.filter((l) => l.msg === 'FlowhintNode write conflict; retrying').length, 1);
  s.fhn.refuse = 500;
  for (let i = 0; i < 3; i++) await s.step(40_000);
  t.equal(s.lines.filter((l) => /cannot write FlowhintNode status/.test(String(l.msg))).length, 1);
  s.fhn.refuse = undefined;
  await s.step(50_000);
  await eventually('written', () => s.statusWrites() === 1);
});

t.test('a hung API server: the request is abandoned and retried; stop() aborts the one in flight', async (t) => {
  const s = await setup(t);
  s.fhn.hang = true;
  s.start();
  await s.clock.tick(0);
  await eventually('held', () => s.fhn.held.size === 1);
  // The request's deadline is real time (AbortSignal.timeout): 2 s.
  await eventually('abandoned', () => s.fhn.held.size === 0 && s.lines.some((l) => /cannot write/.test(String(l.msg))));
  await s.step(10_000);
  await eventually('retried', () => s.fhn.held.size === 1);
  await s.writer.stop();
  await eventually('closed by stop()', () => s.fhn.held.size === 0);
  s.fhn.hang = false;
  await s.step(600_000);
  t.equal(s.statusWrites(), 0, 'nothing after stop');
});

t.test('the Node deleted: its FlowhintNode goes with it and is not written for a missing Node', async (t) => {
  const s = await setup(t);
  s.start();
  await s.clock.tick(0);
  await eventually('written', () => s.statusWrites() === 1);
  s.fhn.deleteNode('node-a');
  t.equal(s.fhn.read('node-a'), undefined, 'collected with its owner');
  s.set((x) => {
    x.services.programmed = 1;
  });
  s.writer.request();
  for (let i = 0; i < 3; i++) await s.step(20_000);
  t.equal(s.fhn.read('node-a'), undefined, 'not created again without its Node');
  t.ok(s.lines.some((l) => /Node node-a not found/.test(String(l.msg))));
  const uid = s.fhn.addNode('node-a');
  for (let i = 0; i < 3; i++) await s.step(40_000);
  await eventually('recreated', () => s.fhn.read('node-a'));
  const o = s.fhn.read('node-a') as { metadata: { ownerReferences: Array<{ uid: string }> } };
  t.equal(o.metadata.ownerReferences[0]?.uid, uid, 'owned by the new Node');
});
