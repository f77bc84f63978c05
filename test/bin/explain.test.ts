/**
 * `flowhint explain` as a user runs it: a child process with a kubeconfig pointing at the
 * FAKE API server (Services, and the FlowhintNode CRD from test/helpers/fake-flowhintnodes.ts),
 * also as the kubectl plugin found on PATH, and through kubectl itself where it is installed.
 */
import t from 'tap';
import { execFileSync, spawnSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { explainCluster, liveStatus } from '../helpers/explain-cluster.ts';

t.test('text and json, NAMESPACE/NAME or NAME with the namespace of the context or -n', async (t) => {
  const c = await explainCluster(t);
  const text = await c.run(['explain', 'shop/cart']);
  t.equal(text.code, 0, text.err);
  t.match(text.out, /^shop\/cart: accepted: LongLived: /m);
  t.match(text.out, /^programmed on 1 of 2 nodes$/m);
  t.match(text.out, /^ {2}node-b: degraded: no nf_flow_table$/m);
  const json = await c.run(['explain', 'cart', '--output', 'json']);
  t.equal(json.code, 0, json.err);
  const e = JSON.parse(json.out) as {
    service: string;
    accepted: boolean;
    nodes: { total: number; programmed: number };
  };
  t.match(e, { service: 'shop/cart', accepted: true, nodes: { total: 2, programmed: 1 } });
  t.equal((await c.run(['explain', 'cart', '-n', 'shop', '-o', 'json'])).out, json.out);
});

t.test('a FlowhintNode another version wrote is a node without a readable status, not no node', async (t) => {
  const c = await explainCluster(t);
  c.fhn.putRaw('node-c', { agentVersion: '9.0.0', support: { offload: 'Partial' } });
  const r = await c.run(['explain', 'shop/cart']);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^programmed on 1 of 3 nodes$/m);
  t.match(r.out, /^ {2}node-c: not-reported: its status is not one this flowhint reads/m);
});

t.test('a dead agent: its heartbeat 10 minutes old, so its node is not programmed', async (t) => {
  const c = await explainCluster(t);
  const tenMinutesAgo = new Date(Date.now() - 600_000).toISOString();
  c.fhn.put('node-a', { status: { ...liveStatus(), heartbeatTime: tenMinutesAgo } }, 'flowhint-agent', 'status');
  const r = await c.run(['explain', 'shop/cart']);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^programmed on 0 of 2 nodes$/m);
  t.match(r.out, /^ {2}node-a: not-alive: last heartbeat 10m ago \(renewed every minute\)/m);
  t.match(r.out, /node-a: its agent is not alive; kubectl -n flowhint-system get pods .*spec\.nodeName=node-a/);
});

t.test('every Node that should run the agent counts: one without an agent, a Windows one not', async (t) => {
  const c = await explainCluster(t);
  c.fhn.addNode('node-c');
  c.fhn.addNode('win-a', 'windows');
  const r = await c.run(['explain', 'shop/cart']);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^programmed on 1 of 3 nodes$/m);
  t.match(r.out, /^ {2}node-c: no-agent: no FlowhintNode/m);
  t.notMatch(r.out, /win-a/);
  t.match(r.out, /node-c: no agent has reported from there/);
  // Names are all it reads: the list asks for metadata only, not every Node's status and images.
  const lists = c.api.requests.filter((q) => q.method === 'GET' && q.path === '/api/v1/nodes');
  t.equal(lists.length, 1);
  t.match(lists[0]?.accept, /^application\/json;as=PartialObjectMetadataList;g=meta\.k8s\.io;v=v1,/);
});

t.test('Nodes refused (403): nodes with an agent are counted, and the permission named', async (t) => {
  const c = await explainCluster(t);
  c.fhn.addNode('node-c');
  c.fhn.refuseNodeList = 403;
  const r = await c.run(['explain', 'shop/cart']);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^programmed on 1 of 2 nodes \(nodes without an agent not counted: you may not list Nodes\)$/m);
  t.match(r.out, /you may not list Nodes, .*ClusterRole flowhint-viewer/);
});

t.test('agents of two versions: said, with the rollout to finish', async (t) => {
  const c = await explainCluster(t);
  c.fhn.put('node-b', { status: { ...liveStatus(), agentVersion: '0.0.9' } }, 'flowhint-agent', 'status');
  const r = await c.run(['explain', 'shop/cart']);
  t.equal(r.code, 0, r.err);
  t.match(
    r.out,
    /^agent versions: (0\.0\.9 on 1 node, \d+\.\d+\.\d+ on 1 node|\d+\.\d+\.\d+ on 1 node, 0\.0\.9 on 1 node)$/m,
  );
  t.match(r.out, /finish the rollout/);
});

t.test('the CRD absent: the hint is still explained, nodes unknown', async (t) => {
  const c = await explainCluster(t);
  c.fhn.crdInstalled = false;
  const r = await c.run(['explain', 'shop/cart']);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^nodes: unknown \(no FlowhintNode CRD\)$/m);
  t.match(r.out, /FlowhintNode CRD is not installed/);
});

t.test('FlowhintNodes refused (403): the Service is still explained, and the permission named', async (t) => {
  const c = await explainCluster(t);
  c.fhn.refuse = 403;
  const r = await c.run(['explain', 'shop/cart']);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /^shop\/cart: accepted: /m);
  t.match(r.out, /^nodes: unknown \(you may not list FlowhintNodes\)$/m);
  t.match(r.out, /ClusterRoleBinding to the ClusterRole flowhint-view/);
});

t.test('API errors name the server and the cause', async (t) => {
  const c = await explainCluster(t);
  c.api.failNext(2, 403);
  const refused = await c.run(['explain', 'shop/cart']);
  t.equal(refused.code, 1);
  t.equal(
    refused.err,
    `flowhint: FH_API_FAILED: ${c.api.url} refused to show the Service: you may not get services in namespace shop\n`,
  );
  await c.api.pause();
  const down = await c.run(['explain', 'shop/cart']);
  t.equal(down.code, 1);
  t.match(down.err, `FH_API_FAILED: cannot read from the API server ${c.api.url}: `);
  t.match(down.err, /\(ECONNREFUSED\)\n$/);
});

t.test('errors: no such Service, the API server failing, a bad argument', async (t) => {
  const c = await explainCluster(t);
  const missing = await c.run(['explain', 'shop/nope']);
  t.equal(missing.code, 1);
  t.equal(missing.err, 'flowhint: FH_SERVICE_NOT_FOUND: service shop/nope not found\n');
  c.fhn.refuse = 500;
  const failing = await c.run(['explain', 'shop/cart']);
  t.equal(failing.code, 1);
  t.match(failing.err, /^flowhint: FH_API_FAILED: cannot read from the API server http:\/\/127\.0\.0\.1:\d+: /);
  for (const args of [['explain'], ['explain', 'a/b/c'], ['explain', 'a', 'b'], ['explain', 'x/y', '-n', 'z']]) {
    const r = await c.run(args);
    t.equal(r.code, 2, `${args.join(' ')}: ${r.err}`);
    t.match(r.err, /^flowhint: FH_USAGE: /);
  }
});

t.test('the kubectl plugin: kubectl-flowhint on PATH, and kubectl flowhint where kubectl is installed', async (t) => {
  const c = await explainCluster(t);
  const bin = join(c.dir, 'bin');
  execFileSync('mkdir', [bin]);
  symlinkSync(new URL('../../bin/kubectl-flowhint.ts', import.meta.url).pathname, join(bin, 'kubectl-flowhint'));
  // Node 24 first on PATH: the plugin's #!/usr/bin/env node.
  const PATH = `${bin}:${dirname(process.execPath)}:${process.env.PATH ?? ''}`;
  const direct = await c.run(['explain', 'shop/cart'], 'kubectl-flowhint', { PATH });
  t.equal(direct.code, 0, direct.err);
  t.match(direct.out, /^programmed on 1 of 2 nodes$/m);
  const kubectl = spawnSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' }).stdout.trim();
  if (!kubectl) {
    t.comment('kubectl is not installed here: the plugin was run as kubectl runs it, from PATH');
    return;
  }
  const listed = await c.run(['plugin', 'list'], kubectl, { PATH });
  t.match(listed.out, /kubectl-flowhint/);
  const via = await c.run(['flowhint', 'explain', 'shop/cart'], kubectl, { PATH });
  t.equal(via.code, 0, via.err);
  t.equal(via.out, direct.out, 'kubectl flowhint explain says the same');
});
