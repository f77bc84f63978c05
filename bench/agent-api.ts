/**
 * The API-server series of `npm run bench:agent`: the agent's memory when its Services come
 * as in a cluster, through the real KubeSource (@kubernetes/client-node's informer, the
 * library loaded as the Pod loads it) from the list/watch FAKE API server
 * (test/helpers/fake-apiserver.ts), holding Services as the API server stores them after
 * `kubectl apply`: managedFields, the last-applied-configuration annotation, a selector,
 * session affinity, a status.
 *
 * Side by side in the same run: the informer cache cut down to what flowhint reads (the
 * agent's) and kept whole (the cache before it; `view: false`). Each runs in its own child
 * inside a scratch namespace that stands for the node, against a FAKE in a second child in
 * the same namespace (its memory is not the agent's). Reported: RSS once the first full
 * sync is done (the process's steady size), and the peak (getrusage maxRSS: the initial
 * list, parsed and deserialized by the library, is the high-water mark).
 */
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { KubeSource } from '../agent/sources/kube.ts';
import { silentLogger } from '../lib/log.ts';
import { FakeApiServer } from '../test/helpers/fake-apiserver.ts';
import { fakeKubeConfig } from '../test/helpers/fake-kube.ts';
import { deployedEnv } from './lib.ts';
import { preparedAgent } from './bench-agent.ts';

export type Cache = 'view' | 'whole';

export interface ApiResult {
  services: number;
  cache: Cache;
  /** RSS after the first full sync (MiB). */
  rssMiB: number;
  /** Peak RSS over start-up, the initial list and the first full sync (MiB). */
  peakMiB: number;
  /** Services programmed by that sync (both caches must agree). */
  programmed: number;
}

const HINT = 'flowhint.dev/traffic-hint';

/** Service i as `kubectl apply` leaves it in the API server, hinted and admitted. */
export function storedService(i: number) {
  const hint = i % 4 === 1 ? 'ShortLived' : 'LongLived';
  const name = `svc-${i}`;
  const namespace = `ns-${i % 50}`;
  const ip = `10.${96 + Math.floor(i / 65536)}.${Math.floor(i / 256) % 256}.${i % 256}`;
  const ports = [
    { name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 },
    { name: 'grpc', port: 9090, protocol: 'TCP', targetPort: 9090 },
  ];
  const applied = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, labels: { app: name }, annotations: { [HINT]: hint } },
    spec: { selector: { app: name }, ports },
  };
  const port = (p: { port: number }): [string, object] => [
    `k:{"port":${p.port},"protocol":"TCP"}`,
    { '.': {}, 'f:name': {}, 'f:port': {}, 'f:protocol': {}, 'f:targetPort': {} },
  ];
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace,
      uid: `6f9f1c2e-0000-4000-8000-${String(i).padStart(12, '0')}`,
      creationTimestamp: '2026-12-01T10:00:00Z',
      labels: { app: name, [HINT]: hint },
      annotations: {
        [HINT]: hint,
        'kubectl.kubernetes.io/last-applied-configuration': `${JSON.stringify(applied)}\n`,
      },
      managedFields: [
        {
          manager: 'kubectl-client-side-apply',
          operation: 'Update',
          apiVersion: 'v1',
          time: '2026-12-01T10:00:00Z',
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:metadata': {
              'f:annotations': { '.': {}, [`f:${HINT}`]: {}, 'f:kubectl.kubernetes.io/last-applied-configuration': {} },
              'f:labels': { '.': {}, 'f:app': {}, [`f:${HINT}`]: {} },
            },
            'f:spec': {
              'f:internalTrafficPolicy': {},
              'f:ports': { '.': {}, ...Object.fromEntries(ports.map(port)) },
              'f:selector': {},
              'f:sessionAffinity': {},
              'f:type': {},
            },
          },
        },
      ],
    },
    spec: {
      ports,
      selector: { app: name },
      clusterIP: ip,
      clusterIPs: [ip],
      type: 'ClusterIP',
      sessionAffinity: 'None',
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      internalTrafficPolicy: 'Cluster',
    },
    status: { loadBalancer: {} },
  };
}

/** The FAKE (a child, inside the namespace): `services` stored Services, its URL on stdout. */
export async function serveApi(services: number): Promise<void> {
  const api = new FakeApiServer();
  for (let i = 0; i < services; i++) api.apply(storedService(i));
  await api.start();
  process.stdout.write(`${api.url}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => void api.stop().then(() => process.exit(0)));
}

/** The agent (a child, inside the namespace): the real KubeSource against `url`. */
export async function measureApi(url: string, services: number, cache: Cache): Promise<ApiResult> {
  const { agent } = await preparedAgent(
    new KubeSource({ kubeConfig: fakeKubeConfig(url), logger: silentLogger(), view: cache === 'view' }),
  );
  const r = await agent.sync();
  if (!r.ok) throw new Error(`sync failed: ${r.error}`);
  const rssMiB = process.memoryUsage().rss / 1048576;
  const peakMiB = process.resourceUsage().maxRSS / 1024;
  const programmed = agent.statusDoc().services.length;
  await agent.stop({ cleanup: true });
  return { services, cache, rssMiB, peakMiB, programmed };
}

/** Both caches at `services`, in one namespace with one FAKE; the agents run `measured` (bench/lib.ts). */
export async function runApiSeries(services: number, measured: string): Promise<ApiResult[]> {
  const ns = `fh-bench-api-${process.pid}`;
  execFileSync('ip', ['netns', 'add', ns]);
  const script = new URL('./agent-child.ts', import.meta.url).pathname;
  const api = spawn('ip', ['netns', 'exec', ns, process.execPath, script, '--api', String(services)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  try {
    execFileSync('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up']);
    const url = await new Promise<string>((resolve, reject) => {
      createInterface({ input: api.stdout }).once('line', resolve);
      api.once('exit', (code) => reject(new Error(`the FAKE API server exited (${code})`)));
    });
    const results: ApiResult[] = [];
    for (const cache of ['view', 'whole'] as const) {
      const r = spawnSync(
        'ip',
        ['netns', 'exec', ns, process.execPath, measured, '--api-agent', url, String(services), cache],
        {
          encoding: 'utf8',
          env: { ...process.env, NODE_OPTIONS: deployedEnv('agent.yaml', 'agent', 'NODE_OPTIONS') ?? '' },
        },
      );
      if (r.status !== 0) throw new Error(`--api-agent ${cache} failed: ${r.stderr}`);
      results.push(JSON.parse(r.stdout.trim().split('\n').at(-1)!) as ApiResult);
    }
    return results;
  } finally {
    api.stdin.end();
    await new Promise((r) => setTimeout(r, 200));
    api.kill();
    execFileSync('ip', ['netns', 'del', ns]);
  }
}

/** Bytes of one stored Service as JSON, for the page. */
export const storedBytes = () => JSON.stringify(storedService(1)).length;
