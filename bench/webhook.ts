/**
 * `npm run bench:webhook`: the real webhook (a child `flowhint webhook`) against two
 * baselines answering a canned AdmissionReview: a bare node:https server, and a minimal
 * fastify route on the webhook's TLS settings (the framework's own floor). autocannon drives
 * each over HTTPS on loopback with the same body: a realistic CREATE of a hinted Service that
 * gets defaulted. Rounds alternate (bare, fastify, webhook, bare, …) and medians are reported.
 * A benchmark: it prints figures, it asserts nothing.
 */
import autocannon from 'autocannon';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateCerts, writeBundle } from '../certs/generate.ts';
import { median, round, rssMiB, startChild, startWebhookChild, stopChild } from './lib.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = 32;

const service = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: {
    name: 'video',
    namespace: 'media',
    uid: '5f0c6a3e-1b7e-4c55-9a53-0d7f9c1f7a10',
    labels: { app: 'video', tier: 'stream' },
    annotations: { 'flowhint.dev/traffic-hint': ' longlived', 'flowhint.dev/offload-after-packets': '100', 'example.com/owner': 'media-team' },
  },
  spec: {
    type: 'ClusterIP',
    selector: { app: 'video' },
    clusterIP: '10.96.12.34',
    clusterIPs: ['10.96.12.34'],
    ipFamilies: ['IPv4'],
    ipFamilyPolicy: 'SingleStack',
    ports: [
      { name: 'rtmp', protocol: 'TCP', port: 1935, targetPort: 1935 },
      { name: 'hls', protocol: 'TCP', port: 443, targetPort: 8443 },
    ],
    sessionAffinity: 'None',
    internalTrafficPolicy: 'Cluster',
  },
  status: { loadBalancer: {} },
};
const body = JSON.stringify({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
    kind: { group: '', version: 'v1', kind: 'Service' },
    resource: { group: '', version: 'v1', resource: 'services' },
    requestKind: { group: '', version: 'v1', kind: 'Service' },
    requestResource: { group: '', version: 'v1', resource: 'services' },
    name: 'video',
    namespace: 'media',
    operation: 'CREATE',
    userInfo: { username: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] },
    object: service,
    oldObject: null,
    dryRun: false,
    options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1', fieldManager: 'kubectl-client-side-apply' },
  },
});

function cannon(url: string, extra: Partial<autocannon.Options> = {}): Promise<autocannon.Result> {
  return autocannon({
    url: `${url}/mutate`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    connections: CONNECTIONS,
    duration: SECONDS,
    ...extra,
  });
}

const dir = await mkdtemp(join(tmpdir(), 'flowhint-bench-'));
try {
  await writeBundle(dir, await generateCerts({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }));
  const cert = join(dir, 'tls.crt');
  const key = join(dir, 'tls.key');
  const node = process.execPath;
  const port = (l: string) => (/^\d+$/.test(l) ? l : undefined);
  const bare = await startChild(node, ['bench/bare-server.ts', cert, key], port, join(dir, 'bare.log'));
  const floor = await startChild(node, ['bench/fastify-server.ts', cert, key], port, join(dir, 'fastify.log'));
  const hook = await startWebhookChild(cert, key, dir);
  const urls = { bare: `https://127.0.0.1:${bare.value}`, fastify: `https://127.0.0.1:${floor.value}`, webhook: hook.url };
  type Name = keyof typeof urls;
  const names = Object.keys(urls) as Name[];
  // Warm each up (JIT, TLS session setup), then alternate rounds.
  for (const n of names) await cannon(urls[n], { duration: 1 });
  const rps: Record<Name, number[]> = { bare: [], fastify: [], webhook: [] };
  let errors = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const line: string[] = [];
    for (const n of names) {
      const r = await cannon(urls[n]);
      errors += r.errors + r.non2xx;
      rps[n].push(r.requests.average);
      line.push(`${n} ${round(r.requests.average, 0)} req/s (p99 ${r.latency.p99} ms)`);
    }
    console.log(`round ${i + 1}: ${line.join(', ')}`);
  }
  // Tail latency at the same fixed rate: on a 2-core machine that also runs the load
  // generator it is partly the machine's, which is why the baselines' own figures are beside it.
  const fixed = {} as Record<Name, autocannon.Result>;
  for (const n of names) {
    fixed[n] = await cannon(urls[n], { overallRate: 1000, connections: 16, duration: Math.max(SECONDS, 5) });
    errors += fixed[n].errors + fixed[n].non2xx;
  }
  // RSS right after load, each process as it served it.
  const rss = { bare: rssMiB(bare.child.pid!), fastify: rssMiB(floor.child.pid!), webhook: rssMiB(hook.child.pid!) };
  await Promise.all([stopChild(bare.child), stopChild(floor.child), stopChild(hook.child)]);
  const med = (n: Name) => median(rps[n]);
  console.log(`\nmedian of ${ROUNDS} x ${SECONDS}s, ${CONNECTIONS} connections: webhook ${round(med('webhook'), 0)} req/s, fastify floor ${round(med('fastify'), 0)} req/s, bare node:https ${round(med('bare'), 0)} req/s`);
  for (const n of names) console.log(`${n.padEnd(8)} at 1000 req/s: p50 ${fixed[n].latency.p50} ms, p99 ${fixed[n].latency.p99} ms; RSS ${round(rss[n], 1)} MiB`);
  console.log(`errors ${errors}`);
  console.log(
    JSON.stringify({
      throughput_ratio: round(med('webhook') / med('bare')),
      throughput_ratio_vs_fastify: round(med('webhook') / med('fastify')),
      p99_ms_at_1000rps: fixed.webhook.latency.p99,
      bare_p99_ms_at_1000rps: fixed.bare.latency.p99,
      rss_mib: round(rss.webhook, 1),
      bare_rss_mib: round(rss.bare, 1),
    }),
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
