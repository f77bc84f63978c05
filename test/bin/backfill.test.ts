/** `flowhint backfill` through the real client-node calls, against the list/watch/patch FAKE. */
import t from 'tap';
import { KubeConfig } from '@kubernetes/client-node';
import { backfill, kubeServiceApi } from '../../bin/backfill.ts';
import { FakeApiServer } from '../helpers/fake-apiserver.ts';

const HINT = 'flowhint.dev/traffic-hint';
const svc = (name: string, annotations: Record<string, string>, labels: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'demo', annotations, labels },
  spec: { clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, protocol: 'TCP' }] },
});

t.test('labels annotated Services, reports invalid ones, leaves the rest', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.apply(svc('old-hint', { [HINT]: ' longlived' }));
  api.apply(svc('done', { [HINT]: 'LongLived' }, { [HINT]: 'LongLived' }));
  api.apply(svc('bad', { [HINT]: 'Turbo' }));
  api.apply(svc('plain', {}));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'f', server: api.url, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'x' }],
    contexts: [{ name: 'c', cluster: 'f', user: 'u' }],
    currentContext: 'c',
  });
  const dry = await backfill(kubeServiceApi(kc), { dryRun: true });
  t.same(dry.map((r) => `${r.service}:${r.outcome}`).sort(), [
    'demo/bad:invalid',
    'demo/done:unchanged',
    'demo/old-hint:patched',
  ]);
  const results = await backfill(kubeServiceApi(kc), { dryRun: false });
  t.same(results.map((r) => `${r.service}:${r.outcome}`).sort(), [
    'demo/bad:invalid',
    'demo/done:unchanged',
    'demo/old-hint:patched',
  ]);
  t.match(results.find((r) => r.outcome === 'invalid')?.detail, /unsupported value "Turbo"/);
  const last = api.patches.at(-1)!;
  t.equal(last.contentType, 'application/json-patch+json');
  t.match(JSON.stringify(last.ops), /"op":"test","path":"\/metadata\/resourceVersion"/);
  const again = await backfill(kubeServiceApi(kc), { dryRun: false });
  t.same(
    again.filter((r) => r.outcome === 'patched'),
    [],
    'idempotent: a second run patches nothing',
  );
});

t.test('a Service changed between list and patch is skipped, not overwritten', async (t) => {
  const stale = {
    list: async () => ({
      items: [
        {
          ...svc('x', { [HINT]: 'longlived' }),
          metadata: { ...svc('x', { [HINT]: 'longlived' }).metadata, resourceVersion: '1' },
        },
      ],
      cont: undefined,
    }),
    patch: async () => Promise.reject(Object.assign(new Error('test failed'), { code: 422 })),
  };
  const r = await backfill(stale, { dryRun: false });
  t.equal(r[0]?.outcome, 'conflict');
});
