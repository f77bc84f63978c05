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

async function setup(
  t: { teardown: (fn: () => Promise<void> | void) => void },
  listTimeoutMs?: number,
  listPage?: number,
) {
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
    ...(listPage ? { listPage } : {}),
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

t.test('the list comes in pages of one snapshot; changes meanwhile arrive through the watch', async (t) => {
  const s = await setup(t, undefined, 2);
  for (const n of ['a', 'b', 'c', 'd', 'e']) s.api.apply(service(n));
  // Between the first and the second page, one Service changes and one goes: the pages
  // still show the snapshot, and the watch (from the snapshot's resourceVersion) the changes.
  let pages = 0;
  s.api.route((req, _res, url) => {
    if (url.pathname === '/api/v1/services' && !url.searchParams.has('watch') && ++pages === 2) {
      s.api.apply(service('a', true, 8080));
      s.api.delete('demo', 'e');
    }
    return false;
  });
  await s.start();
  await eventually('a modified', () => JSON.stringify(s.state.get('demo/a')).includes('8080'));
  await eventually('e deleted', () => !s.state.has('demo/e'));
  t.same([...s.state.keys()].sort(), ['demo/a', 'demo/b', 'demo/c', 'demo/d']);
  const lists = s.api.requests.filter((r) => r.path === '/api/v1/services' && r.query.watch === undefined);
  t.same(
    lists.map((r) => [r.query.limit, r.query.continue === undefined]),
    [
      ['2', true],
      ['2', false],
      ['2', false],
    ],
    'three pages of 2, the later ones continued',
  );
  const added = s.events.filter((e) => e.type === 'upsert').map((e) => e.key);
  t.same(added.slice(0, 5), ['demo/a', 'demo/b', 'demo/c', 'demo/d', 'demo/e'], 'the snapshot, e included');
  t.equal(s.restarts(), 0);
});

t.test('an expired continue token: the list starts over and converges', async (t) => {
  const s = await setup(t, undefined, 2);
  for (const n of ['a', 'b', 'c']) s.api.apply(service(n));
  let expired = false;
  s.api.route((_req, _res, url) => {
    if (url.searchParams.has('continue') && !expired) {
      expired = true;
      s.api.expireContinues();
    }
    return false;
  });
  await s.start();
  await eventually('all three', () => s.state.size === 3);
  t.equal(s.restarts(), 1, 'the 410 restarted the informer once');
  t.ok(
    s.api.requests.some((r) => r.query.continue !== undefined),
    'a continued page was asked for',
  );
});

t.test('the informer caches only what flowhint reads, listed or watched, and still follows changes', async (t) => {
  // As the API server stores a Service applied with kubectl: managedFields, the
  // last-applied-configuration annotation, a selector, a status with conditions.
  const bulky = (name: string, port: number) => {
    const s = service(name, true, port) as ReturnType<typeof service> & Record<string, any>;
    s.metadata = {
      ...s.metadata,
      uid: `uid-${name}`,
      annotations: { ...s.metadata.annotations, 'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify(s) },
      managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': {} } }],
    } as never;
    (s.spec as Record<string, unknown>).selector = { app: name };
    s.status = { loadBalancer: {}, conditions: [{ type: 'x', status: 'True' }] };
    return s;
  };
  const s = await setup(t);
  s.api.apply(bulky('listed', 80));
  await s.start();
  await eventually('watch open', () => s.api.openWatches === 1);
  s.api.apply(bulky('watched', 81));
  await eventually('watched added', () => s.state.has('demo/watched'));
  // The cache itself (a private field: the claim is about what the library holds).
  const cache = () => (s.source as unknown as { informer: { list(): unknown[] } }).informer.list();
  const want = (name: string, port: number) => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace: 'demo',
      uid: `uid-${name}`,
      resourceVersion: (cache().find((o) => (o as any).metadata.name === name) as any)?.metadata.resourceVersion,
      labels: { [HINT]: 'LongLived' },
      annotations: { [HINT]: 'LongLived' },
    },
    spec: { clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ports: [{ port, protocol: 'TCP' }] },
    status: { loadBalancer: {} },
  });
  t.same(
    JSON.parse(JSON.stringify(cache())).sort((a: any, b: any) => a.metadata.name.localeCompare(b.metadata.name)),
    [want('listed', 80), want('watched', 81)],
  );
  t.ok(Number(want('listed', 80).metadata.resourceVersion) > 0, 'resourceVersion kept');
  t.equal(
    s.state.get('demo/watched'),
    cache().find((o) => (o as any).metadata.name === 'watched'),
    'what the agent got',
  );
  // Still followed: a change to a cut-down object, and a relist after 410 Gone.
  s.api.apply(bulky('listed', 8080));
  await eventually('listed modified', () => JSON.stringify(s.state.get('demo/listed')).includes('8080'));
  s.api.compact();
  s.api.dropWatches();
  s.api.apply(bulky('later', 82));
  await eventually('later added after the relist', () => s.state.has('demo/later'));
  t.notOk(JSON.stringify(cache()).includes('managedFields'), 'nothing bulky came back');
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
