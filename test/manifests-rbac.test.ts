/**
 * The agent's ClusterRole against what the agent really asks the API server: its Service
 * informer and its FlowhintNode writer run against the FAKE API server, each request is
 * turned into the RBAC attributes the API server would check (verb, group, resource), and
 * every one must be allowed by the role, and every rule of the role used.
 */
import t, { type Test } from 'tap';
import { loadAll } from 'js-yaml';
import { KubeSource } from '../agent/sources/kube.ts';
import { kubeNodeStatusApi } from '../agent/report/node-api.ts';
import { NodeStatusWriter } from '../agent/report/node-writer.ts';
import { silentLogger } from '../lib/log.ts';
import { FakeApiServer, type RequestLog } from './helpers/fake-apiserver.ts';
import { FakeFlowhintNodes } from './helpers/fake-flowhintnodes.ts';
import { fakeKubeConfig } from './helpers/fake-kube.ts';
import { eventually } from './helpers/eventually.ts';
import { kustomizeBuild } from './helpers/kustomize.ts';
import { nodeStatus } from '../agent/report/node-status.ts';
import { StatusDoc } from '../agent/report/status.ts';
import { kubeExplainApi } from '../bin/explain.ts';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/** The attributes the API server authorizes for a request (API concepts: verbs from methods). */
function attributes(r: RequestLog): Array<{ verb: string; group: string; resource: string }> {
  const core = /^\/api\/v1\/(services|nodes)(?:\/([^/]+))?$/.exec(r.path);
  if (core && r.method === 'GET') {
    const verb = core[2] ? 'get' : r.query.watch === 'true' ? 'watch' : 'list';
    return [{ verb, group: '', resource: core[1]! }];
  }
  if (r.path === '/apis/flowhint.dev/v1alpha1/flowhintnodes' && r.method === 'GET')
    return [{ verb: 'list', group: 'flowhint.dev', resource: 'flowhintnodes' }];
  const one = /^\/api\/v1\/namespaces\/[^/]+\/services\/[^/]+$/.exec(r.path);
  if (one && r.method === 'GET') return [{ verb: 'get', group: '', resource: 'services' }];
  const fhn = /^\/apis\/flowhint\.dev\/v1alpha1\/flowhintnodes\/[^/]+(\/status)?$/.exec(r.path);
  if (fhn && r.method === 'PATCH') {
    if (fhn[1]) return [{ verb: 'patch', group: 'flowhint.dev', resource: 'flowhintnodes/status' }];
    // A server-side apply that creates the object is authorized as create too.
    return ['patch', 'create'].map((verb) => ({ verb, group: 'flowhint.dev', resource: 'flowhintnodes' }));
  }
  throw new Error(`unexpected request ${r.method} ${r.path}`);
}

const objs = loadAll(kustomizeBuild(new URL('../manifests/base', import.meta.url).pathname)) as Array<{
  kind: string;
  metadata: { name: string };
  rules?: Rule[];
}>;
const roleRules = (name: string) => objs.find((o) => o.kind === 'ClusterRole' && o.metadata.name === name)?.rules ?? [];
type Attributes = { verb: string; group: string; resource: string };
const allows = (rule: Rule, a: Attributes) =>
  rule.apiGroups.includes(a.group) && rule.resources.includes(a.resource) && rule.verbs.includes(a.verb);

/** Every request allowed by a rule of the role, and every grant of the role used by a request. */
function grantsExactly(t: Test, rules: Rule[], asked: Attributes[]): void {
  for (const a of asked)
    t.ok(
      rules.some((r) => allows(r, a)),
      `allowed: ${a.verb} ${a.group}/${a.resource}`,
    );
  for (const r of rules)
    for (const resource of r.resources)
      for (const verb of r.verbs)
        t.ok(
          asked.some((a) => a.group === r.apiGroups[0] && a.resource === resource && a.verb === verb),
          `used: ${verb} ${r.apiGroups[0]}/${resource}`,
        );
}

t.test('the agent asks for nothing its ClusterRole does not grant, and uses every grant', async (t) => {
  const rules = roleRules('flowhint-agent');
  const api = new FakeApiServer();
  await api.start();
  const fhn = new FakeFlowhintNodes(api);
  fhn.addNode('node-a');
  const kubeConfig = fakeKubeConfig(api.url);
  const source = new KubeSource({ kubeConfig, logger: silentLogger() });
  const writer = new NodeStatusWriter({ api: kubeNodeStatusApi(kubeConfig), node: 'node-a', log: silentLogger() });
  t.teardown(async () => {
    await writer.stop();
    await source.stop();
    await api.stop();
  });
  let synced = false;
  await source.start({ events: () => {}, synced: () => (synced = true) });
  const doc = StatusDoc.parse({
    version: 1,
    pid: 1,
    updatedAt: 'x',
    node: {
      mode: 'supported',
      detail: 'd',
      conntrackAccounting: { enabled: true, detail: 'd' },
      nodeAddresses: [],
    },
    table: 'inet flowhint',
    devices: [],
    services: [],
    invalid: [],
    lastSync: null,
  });
  writer.start(() => nodeStatus({ doc, version: 'v', offloaded: undefined }));
  await eventually('listed, watching, written', () => synced && api.openWatches > 0 && writer.writes === 1);
  grantsExactly(t, rules, api.requests.flatMap(attributes));
});

t.test('explain: flowhint-viewer grants every cluster-wide read it makes, and nothing it does not use', async (t) => {
  const rules = roleRules('flowhint-viewer');
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const fhn = new FakeFlowhintNodes(api);
  fhn.addNode('node-a');
  const explainApi = kubeExplainApi(fakeKubeConfig(api.url));
  await Promise.all([explainApi.service('shop', 'cart'), explainApi.flowhintNodes(), explainApi.nodes()]);
  const asked = api.requests.flatMap(attributes);
  // The Service itself is read with the caller's namespace rights (view), not this role.
  const cluster = asked.filter((a) => a.resource !== 'services');
  t.same(cluster.map((a) => `${a.verb} ${a.group}/${a.resource}`).sort(), [
    'list /nodes',
    'list flowhint.dev/flowhintnodes',
  ]);
  grantsExactly(t, rules, cluster);
});
