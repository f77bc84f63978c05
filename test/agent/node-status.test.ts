/**
 * The whole agent (KubeSource, nft in a scratch netns) reporting its node to the FAKE API
 * server's FlowhintNode CRD: what it writes matches what was asked of it (Services applied
 * here; this host's kernel has no flowtables, so the node is degraded), and programming goes
 * on while the API server refuses or hangs the FlowhintNode writes.
 */
import t from 'tap';
import type { FlowhintNodeStatus } from '../../api/index.ts';
import { apiService, startKubeAgent, type Expected } from '../helpers/kube-agent.ts';
import { eventually } from '../helpers/eventually.ts';

const status = (k: { fhn: { read(n: string): unknown } }) =>
  (k.fhn.read('node-a') as { status?: FlowhintNodeStatus } | undefined)?.status;

t.test('the agent reports its node: support, counts, refusals, last sync', async (t) => {
  const k = await startKubeAgent(t, { nodeStatus: { minIntervalMs: 200 } });
  k.api.apply(apiService({ name: 'a', clusterIPs: ['10.96.3.1'], ports: [{ port: 80 }] }));
  k.api.apply(apiService({ name: 'b', clusterIPs: ['10.96.3.2'], ports: [{ port: 80 }] }));
  const bad = apiService({ name: 'bad', clusterIPs: ['10.96.3.3'], ports: [{ port: 80 }] });
  (bad.metadata as unknown as { annotations: Record<string, string> }).annotations[
    'flowhint.dev/offload-after-packets'
  ] = 'many';
  k.api.apply(bad);
  await k.agent.prepare();
  k.agent.startLoops();
  const want: Expected = { 'demo/a': { addr: '10.96.3.1', port: 80 }, 'demo/b': { addr: '10.96.3.2', port: 80 } };
  await k.timeToConverge(want, 30_000);
  const s = await eventually('reported', () => {
    const x = status(k);
    return x?.services.programmed === 2 && x.lastSync ? x : undefined;
  });
  t.match(s, {
    support: { offload: 'Degraded' },
    kubeProxy: { mode: 'unknown' },
    services: { hinted: 3, programmed: 2, refused: 1 },
    notOffloadableTotal: 1,
    lastSync: { result: 'Succeeded' },
  });
  t.match(s.support.reason, /flowtable/);
  t.strictSame(
    s.notOffloadable.map((e) => [e.kind, e.service, e.target]),
    [['RefusedHint', 'demo/bad', 'FH_THRESHOLD_INVALID']],
  );
  const o = k.fhn.read('node-a') as { metadata: { ownerReferences: Array<{ kind: string; name: string }> } };
  t.match(o.metadata.ownerReferences, [{ kind: 'Node', name: 'node-a' }]);
  // A Service deleted: the count follows.
  k.api.delete('demo', 'b');
  await eventually('count follows', () => status(k)?.services.programmed === 1);
});

t.test('programming goes on while the API server hangs, then refuses, FlowhintNode writes', async (t) => {
  t.setTimeout(120_000);
  const k = await startKubeAgent(t, {
    nodeStatus: { minIntervalMs: 200, requestTimeoutMs: 1_000, backoff: { initialMs: 500, maxMs: 4_000 } },
  });
  k.api.apply(apiService({ name: 'a', clusterIPs: ['10.96.4.1'], ports: [{ port: 80 }] }));
  k.fhn.hang = true;
  await k.agent.prepare();
  k.agent.startLoops();
  await k.timeToConverge({ 'demo/a': { addr: '10.96.4.1', port: 80 } }, 30_000);
  await eventually('a write is held', () => k.fhn.held.size > 0);
  k.api.apply(apiService({ name: 'b', clusterIPs: ['10.96.4.2'], ports: [{ port: 80 }] }));
  const both: Expected = { 'demo/a': { addr: '10.96.4.1', port: 80 }, 'demo/b': { addr: '10.96.4.2', port: 80 } };
  await k.timeToConverge(both, 30_000);
  t.equal(k.nodeStatus.writes, 0, 'programmed while no status write got through');
  k.fhn.hang = false;
  k.fhn.release();
  k.fhn.refuse = 500;
  k.api.delete('demo', 'a');
  await k.timeToConverge({ 'demo/b': both['demo/b']! }, 30_000);
  t.equal(k.nodeStatus.writes, 0, 'programmed while status writes are refused');
  k.fhn.refuse = undefined;
  // The retry backoff is at most 4 s here.
  await eventually('written once the API server answers', () => status(k)?.services.programmed === 1, {
    timeoutMs: 30_000,
  });
});
