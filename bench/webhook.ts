/**
 * `npm run bench:webhook`: the real webhook (a child `flowhint webhook`) against a bare
 * node:https server answering a canned AdmissionReview, driven by autocannon over HTTPS on
 * loopback with the same body: a realistic CREATE of a hinted Service that gets defaulted.
 * Rounds alternate (bare, webhook, bare, webhook, …) and medians are reported. A benchmark:
 * it prints figures, it asserts nothing.
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
  const bare = await startChild(node, ['bench/bare-server.ts', cert, key], (l) => (/^\d+$/.test(l) ? l : undefined), join(dir, 'bare.log'));
  const hook = await startWebhookChild(cert, key, dir);
  const bareUrl = `https://127.0.0.1:${bare.value}`;
  const hookUrl = hook.url;
  // Warm both up (JIT, TLS session setup), then alternate rounds.
  await cannon(bareUrl, { duration: 1 });
  await cannon(hookUrl, { duration: 1 });
  const bareRps: number[] = [];
  const hookRps: number[] = [];
  let errors = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const b = await cannon(bareUrl);
    const w = await cannon(hookUrl);
    errors += w.errors + w.non2xx;
    bareRps.push(b.requests.average);
    hookRps.push(w.requests.average);
    console.log(`round ${i + 1}: bare ${round(b.requests.average, 0)} req/s, webhook ${round(w.requests.average, 0)} req/s (p99 ${w.latency.p99} ms)`);
  }
  // The baseline at the same fixed rate, for context: tail latency on a 2-core machine that
  // also runs the load generator is partly the machine's.
  const bareFixed = await cannon(bareUrl, { overallRate: 1000, connections: 16, duration: Math.max(SECONDS, 5) });
  const fixed = await cannon(hookUrl, { overallRate: 1000, connections: 16, duration: Math.max(SECONDS, 5) });
  errors += fixed.errors + fixed.non2xx;
  const rss = rssMiB(hook.child.pid!);
  const bareRss = rssMiB(bare.child.pid!);
  await stopChild(bare.child);
  await stopChild(hook.child);
  const ratio = median(hookRps) / median(bareRps);
  console.log(`\nwebhook ${round(median(hookRps), 0)} req/s vs bare node:https ${round(median(bareRps), 0)} req/s (median of ${ROUNDS} x ${SECONDS}s, ${CONNECTIONS} connections)`);
  console.log(`at 1000 req/s: webhook p50 ${fixed.latency.p50} ms, p99 ${fixed.latency.p99} ms (bare: p50 ${bareFixed.latency.p50} ms, p99 ${bareFixed.latency.p99} ms); ${fixed.requests.total} requests; webhook RSS ${round(rss, 1)} MiB (bare ${round(bareRss, 1)} MiB); errors ${errors}`);
  console.log(JSON.stringify({ throughput_ratio: round(ratio), p99_ms_at_1000rps: fixed.latency.p99, rss_mib: round(rss, 1) }));
} finally {
  await rm(dir, { recursive: true, force: true });
}
