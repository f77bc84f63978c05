/** The Kubernetes source (client-node informer) against the list/watch FAKE in test/helpers. */
import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeSource } from '../../../agent/sources/kube.ts';
import type { SourceEvent } from '../../../agent/sources/source.ts';
import { silentLogger } from '../../../lib/log.ts';
import { FakeApiServer } from '../../helpers/fake-apiserver.ts';
import { fakeKubeConfig } from '../../helpers/fake-kube.ts';
import { eventually } from '../../helpers/eventually.ts';

const HINT = 'flowhint.dev/traffic-hint';

function service(name: string, hinted = true, port = 80) {
  const labels: Record<string, string> = hinted ? { [HINT]: 'LongLived' } : { app: name };
  const annotations: Record<string, string> = hinted ? { [HINT]: 'LongLived' } : {};
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'demo', labels, annotations },
    spec: { clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ports: [{ port, protocol: 'TCP' }] },
  };
}

async function setup(t: { teardown: (fn: () => Promise<void> | void) => void }, listTimeoutMs?: number) {
  const api = new FakeApiServer();
  await api.start();
  const kc = fakeKubeConfig(api.url);
  const state = new Map<string, unknown>();
  const events: SourceEvent[] = [];
  let synced = 0;
  let restarts = 0;
  const source = new KubeSource({
    kubeConfig: kc,
    logger: silentLogger(),
    onRestart: () => (restarts += 1),
    backoff: { initialMs: 20, maxMs: 200 },
    ...(listTimeoutMs ? { listTimeoutMs } : {}),
  });
  const start = () =>
    source.start({
      events: (evs) => {
        for (const e of evs) {
          events.push(e);
          if (e.type === 'upsert') state.set(e.key, e.object);
          else state.delete(e.key);
        }
      },
      synced: () => (synced += 1),
    });
  t.teardown(async () => {
    await source.stop();
    await api.stop();
  });
  return { api, source, state, events, start, synced: () => synced, restarts: () => restarts };
}

t.test('initial list and watch carry the label selector; only hinted Services arrive', async (t) => {
  const s = await setup(t);
  s.api.apply(service('a'));
  s.api.apply(service('plain', false));
  await s.start();
  await eventually('synced', () => s.synced() === 1);
  t.same([...s.state.keys()], ['demo/a']);
  await eventually('watch open', () => s.api.openWatches === 1);
  const list = s.api.requests.find((r) => r.query.watch === undefined);
  const watch = s.api.requests.find((r) => r.query.watch === 'true');
  t.equal(list?.query.labelSelector, HINT, 'list passes the selector');
  t.equal(watch?.query.labelSelector, HINT, 'watch passes the selector');
  t.ok(Number(watch?.query.resourceVersion) > 0, 'watch starts at the list resourceVersion');
});

t.test('watch events: add, modify, label removed (DELETED to the selecting watch), delete', async (t) => {
  const s = await setup(t);
  await s.start();
  await eventually('watch open', () => s.api.openWatches === 1);
  s.api.apply(service('b'));
  await eventually('b added', () => s.state.has('demo/b'));
  s.api.apply(service('b', true, 8080));
  await eventually('b modified', () => JSON.stringify(s.state.get('demo/b')).includes('8080'));
  s.api.apply(service('b', false));
  await eventually('b gone when unlabelled', () => !s.state.has('demo/b'));
  s.api.apply(service('c'));
  await eventually('c', () => s.state.has('demo/c'));
  s.api.delete('demo', 'c');
  await eventually('c deleted', () => !s.state.has('demo/c'));
});

t.test('watch closed by the server: the informer re-watches from its resourceVersion', async (t) => {
  const s = await setup(t);
  await s.start();
  await eventually('watch open', () => s.api.openWatches === 1);
  s.api.endWatches();
  s.api.apply(service('d'));
  await eventually('d after re-watch', () => s.state.has('demo/d'));
  t.equal(s.restarts(), 0, 'a cleanly closed watch is not an error');
});

t.test('connection reset: client-node stops the informer; we restart it, nothing lost', async (t) => {
  const s = await setup(t);
  await s.start();
  await eventually('watch open', () => s.api.openWatches === 1);
  s.api.dropWatches();
  s.api.apply(service('d2'));
  await eventually('d2 after restart', () => s.state.has('demo/d2'));
  t.ok(s.restarts() >= 1, `restart counted (${s.restarts()})`);
});

t.test('410 Gone: relist, with deletions that happened meanwhile', async (t) => {
  const s = await setup(t);
  s.api.apply(service('e'));
  s.api.apply(service('f'));
  await s.start();
  await eventually('e,f', () => s.state.size === 2);
  await eventually('watch open', () => s.api.openWatches === 1);
  const lists = () => s.api.requests.filter((r) => r.query.watch === undefined).length;
  const before = lists();
  // While the watch is down, f goes away and history is compacted.
  s.api.endWatches();
  s.api.delete('demo', 'f');
  s.api.apply(service('g'));
  s.api.compact();
  await eventually('relisted state', () => !s.state.has('demo/f') && s.state.has('demo/g'));
  t.ok(lists() > before, 'a new list after 410');
  t.equal(s.restarts(), 0, '410 is handled by relisting, not by a restart');
});

t.test('bookmarks move the resourceVersion without events', async (t) => {
  const s = await setup(t);
  s.api.apply(service('h'));
  await s.start();
  await eventually('watch open', () => s.api.openWatches === 1);
  const firstWatch = s.api.requests.filter((r) => r.query.watch === 'true').at(-1);
  // An unhinted change bumps the resourceVersion but is filtered out of our watch.
  s.api.apply(service('noise', false));
  const n = s.events.length;
  s.api.bookmark();
  await sleep(200);
  t.equal(s.events.length, n, 'no events from a bookmark');
  s.api.endWatches();
  await eventually('rewatch', () => s.api.requests.filter((r) => r.query.watch === 'true').length >= 2);
  const last = s.api.requests.filter((r) => r.query.watch === 'true').at(-1);
  t.equal(
    Number(last?.query.resourceVersion),
    Number(firstWatch?.query.resourceVersion) + 1,
    "re-watch from the bookmark's resourceVersion",
  );
});

t.test('500s stop the library informer; we restart it with backoff and count it', async (t) => {
  const s = await setup(t);
  s.api.apply(service('i'));
  s.api.failNext(3, 500);
  await s.start();
  await eventually('recovered', () => s.state.has('demo/i'), { timeoutMs: 15_000 });
  t.ok(s.restarts() >= 1, `restarts counted (${s.restarts()})`);
  await eventually('watch open', () => s.api.openWatches === 1);
  s.api.failNext(2, 500);
  s.api.dropWatches();
  s.api.apply(service('j'));
  await eventually('j after restarts', () => s.state.has('demo/j'), { timeoutMs: 15_000 });
  t.ok(s.restarts() >= 2);
});

t.test('the API server away for a while: nothing is deleted meanwhile; converges on recovery', async (t) => {
  const s = await setup(t);
  s.api.apply(service('k'));
  s.api.apply(service('l'));
  await s.start();
  await eventually('k,l', () => s.state.size === 2);
  await eventually('watch open', () => s.api.openWatches === 1);
  await s.api.pause();
  // Changes the agent cannot see while the API server is unreachable.
  s.api.delete('demo', 'k');
  s.api.apply(service('m'));
  await sleep(1500);
  t.same([...s.state.keys()].sort(), ['demo/k', 'demo/l'], 'state kept as it was through the outage');
  t.ok(s.restarts() >= 1, `restarts counted while away (${s.restarts()})`);
  await s.api.resume();
  await eventually(
    'converged after recovery',
    () => !s.state.has('demo/k') && s.state.has('demo/m') && s.state.has('demo/l'),
    { timeoutMs: 15_000 },
  );
});

t.test('a watch that hangs without data is cut by client-node after 30 s and re-opened', async (t) => {
  const s = await setup(t);
  await s.start();
  await eventually('watch open', () => s.api.openWatches === 1);
  s.api.hangNextWatches(1);
  s.api.endWatches();
  await eventually('the hanging watch is open', () => s.api.openWatches === 1);
  s.api.apply(service('n'));
  await eventually('n arrives once the silent watch is replaced', () => s.state.has('demo/n'), { timeoutMs: 45_000 });
  t.equal(s.restarts(), 0, 'a timeout is not an error');
});

t.test(
  'restarts back off through an outage: the delay doubles to its cap, and does not start over on each reconnect',
  async (t) => {
    const s = await setup(t);
    await s.start();
    await eventually('watch open', () => s.api.openWatches === 1);
    await s.api.pause();
    await sleep(2000);
    const during = s.restarts();
    // 20, 40, 80, 160 ms, then 200 ms (±20 %): about 13 in 2 s. Starting over at 20 ms on
    // every reconnect (the library signals one before each list) would give about 70.
    t.ok(during >= 3 && during <= 20, `${during} restarts in 2 s of refused connections`);
    await s.api.resume();
    s.api.apply(service('o'));
    await eventually('o after recovery', () => s.state.has('demo/o'), { timeoutMs: 15_000 });
  },
);

t.test(
  'an API server that accepts and never answers: the list deadline ends the wait; converges once it answers',
  async (t) => {
    const s = await setup(t, 300);
    s.api.apply(service('p'));
    s.api.unresponsive();
    await s.start();
    t.ok(s.restarts() >= 1, 'the hanging list was cut by its deadline and restarted');
    t.equal(s.state.size, 0, 'nothing known yet');
    await sleep(1000);
    s.api.respond();
    await eventually('p once the server answers', () => s.state.has('demo/p'), { timeoutMs: 15_000 });
    await eventually('abandoned requests closed by the client', () => s.api.heldRequests === 0, { timeoutMs: 5_000 });
  },
);
