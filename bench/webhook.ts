/**
 * `npm run bench:webhook`: the real webhook (a child `flowhint webhook`) against two
 * baselines answering a canned AdmissionReview: a bare node:https server, and a minimal
 * fastify route on the webhook's TLS settings (the framework's own floor). autocannon drives
 * each over HTTPS on loopback with the same body: a realistic CREATE of a hinted Service that
 * gets defaulted.
 *
 * - The webhook runs twice: as the image ships it (the bundle `npm run build` makes)
 *   and from the TypeScript sources (Node's type stripping, as in development). The
 *   baselines are bundled the same way (each into one file), so none pays for type
 *   stripping or per-file loading that the shipped webhook does not.
 * - Throughput: rounds alternate (bare, fastify, webhook, webhook-ts, bare, …). This
 *   machine's own speed drifts by 2-4x within a minute, so each ratio is taken within a
 *   round, between neighbours seconds apart, and the median over rounds is reported.
 * - CPU per request: all four are driven at once at the same fixed rate, so that they share
 *   the machine's state, and each one's CPU time (from /proc) is divided by its requests.
 *   The least noisy figure of the run.
 * A benchmark: it prints figures, it asserts nothing.
 */
import autocannon from 'autocannon';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateCerts, writeBundle } from '../certs/generate.ts';
import { buildDist, bundleFiles } from '../test/helpers/build.ts';
import { median, round, rssMiB, startChild, startWebhookChild, stopChild, writePage } from './lib.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CONNECTIONS = 32;
/** Per server, in the CPU-per-request measurement (all four at once). */
const CPU_RATE = 600;
/** Inside the repository, so that the baselines resolve fastify from its node_modules. */
const BASELINES = new URL('../.cache/bench-baselines/', import.meta.url).pathname;

const service = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: {
    name: 'video',
    namespace: 'media',
    uid: '5f0c6a3e-1b7e-4c55-9a53-0d7f9c1f7a10',
    labels: { app: 'video', tier: 'stream' },
    annotations: {
      'flowhint.dev/traffic-hint': ' longlived',
      'flowhint.dev/offload-after-packets': '100',
      'example.com/owner': 'media-team',
    },
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

/** User plus system CPU time of a process, in seconds (clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const dir = await mkdtemp(join(tmpdir(), 'flowhint-bench-'));
try {
  await writeBundle(dir, await generateCerts({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }));
  const cert = join(dir, 'tls.crt');
  const key = join(dir, 'tls.key');
  const node = process.execPath;
  const { entry: shipped } = await buildDist();
  const [bareJs, fastifyJs] = await bundleFiles(['bench/bare-server.ts', 'bench/fastify-server.ts'], BASELINES);
  const port = (l: string) => (/^\d+$/.test(l) ? l : undefined);
  const bare = await startChild(node, [bareJs!, cert, key], port, join(dir, 'bare.log'));
  const floor = await startChild(node, [fastifyJs!, cert, key], port, join(dir, 'fastify.log'));
  const hook = await startWebhookChild(cert, key, dir, shipped);
  const hookTs = await startWebhookChild(cert, key, dir);
  const servers = {
    bare: { url: `https://127.0.0.1:${bare.value}`, child: bare.child },
    fastify: { url: `https://127.0.0.1:${floor.value}`, child: floor.child },
    webhook: { url: hook.url, child: hook.child },
    'webhook-ts': { url: hookTs.url, child: hookTs.child },
  };
  type Name = keyof typeof servers;
  const names = Object.keys(servers) as Name[];
  // Warm each up (JIT, TLS session setup), then alternate rounds.
  for (const n of names) await cannon(servers[n].url, { duration: 1 });
  const rps = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<Name, number[]>;
  let errors = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const line: string[] = [];
    for (const n of names) {
      const r = await cannon(servers[n].url);
      errors += r.errors + r.non2xx;
      rps[n].push(r.requests.average);
      line.push(`${n} ${round(r.requests.average, 0)} req/s (p99 ${r.latency.p99} ms)`);
    }
    console.log(`round ${i + 1}: ${line.join(', ')}`);
  }
  /** Median over rounds of a/b, each pair measured in the same round. */
  const paired = (a: Name, b: Name) => median(rps[a].map((x, i) => x / rps[b][i]!));
  // CPU per request, all four at once at the same rate.
  const cpu = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<Name, number[]>;
  for (let i = 0; i < 3; i++) {
    const before = names.map((n) => cpuSeconds(servers[n].child.pid!));
    const results = await Promise.all(
      names.map((n) => cannon(servers[n].url, { overallRate: CPU_RATE, connections: 8, duration: 5 })),
    );
    names.forEach((n, j) => {
      errors += results[j]!.errors + results[j]!.non2xx;
      cpu[n].push(((cpuSeconds(servers[n].child.pid!) - before[j]!) * 1e6) / results[j]!.requests.total);
    });
  }
  // Tail latency at the same fixed rate: on a 2-core machine that also runs the load
  // generator it is partly the machine's, which is why the baselines' own figures are beside it.
  const fixed = {} as Record<Name, autocannon.Result>;
  for (const n of names) {
    fixed[n] = await cannon(servers[n].url, { overallRate: 1000, connections: 16, duration: 5 });
    errors += fixed[n].errors + fixed[n].non2xx;
  }
  // RSS right after load, each process as it served it.
  const rss = Object.fromEntries(names.map((n) => [n, rssMiB(servers[n].child.pid!)])) as Record<Name, number>;
  await Promise.all(names.map((n) => stopChild(servers[n].child)));
  console.log(`\nmedians of ${ROUNDS} rounds x ${SECONDS}s, ${CONNECTIONS} connections:`);
  for (const n of names) {
    const c = median(cpu[n]);
    console.log(
      `${n.padEnd(10)} ${String(round(median(rps[n]), 0)).padStart(6)} req/s; ${round(c, 0)} µs CPU/request at ${CPU_RATE} req/s; at 1000 req/s p50 ${fixed[n].latency.p50} ms, p99 ${fixed[n].latency.p99} ms; RSS ${round(rss[n], 1)} MiB`,
    );
  }
  console.log(`errors ${errors}`);
  const cpuRatio = (a: Name, b: Name) => round(median(cpu[b].map((x, i) => x / cpu[a][i]!)));
  const json = {
    throughput_ratio: round(paired('webhook', 'bare')),
    throughput_ratio_vs_fastify: round(paired('webhook', 'fastify')),
    p99_ms_at_1000rps: fixed.webhook.latency.p99,
    bare_p99_ms_at_1000rps: fixed.bare.latency.p99,
    rss_mib: round(rss.webhook, 1),
    bare_rss_mib: round(rss.bare, 1),
    cpu_throughput_ratio_vs_fastify: cpuRatio('webhook', 'fastify'),
    ts_throughput_ratio_vs_fastify: round(paired('webhook-ts', 'fastify')),
    ts_rss_mib: round(rss['webhook-ts'], 1),
    errors,
  };
  const each = (f: (n: Name) => string) => names.map(f);
  writePage(new URL('../docs/bench-webhook.md', import.meta.url).pathname, {
    title: 'Webhook benchmark',
    command: 'npm run bench:webhook',
    method: [
      'Four servers answer the same AdmissionReview (a CREATE of a hinted Service that gets defaulted) over loopback HTTPS:',
      'the shipped webhook (the bundle, deployed NODE_OPTIONS), the same from its TypeScript sources, a minimal',
      'fastify route (the framework floor) and a bare `node:https` server. Throughput: autocannon, 32 connections, the',
      `median over ${ROUNDS} rounds of ratios taken within a round; CPU per request with all four at ${CPU_RATE} req/s at once;`,
      'p99 at 1,000 req/s; RSS right after load. Targets: webhook / fastify throughput ≥ 0.6, p99 ≤ 1.5 × bare, RSS ≤ 1.15 × bare.',
    ].join('\n'),
    header: ['', ...names],
    rows: [
      ['throughput, 32 connections (req/s, median)', ...each((n) => String(round(median(rps[n]), 0)))],
      [`CPU per request at ${CPU_RATE} req/s (µs)`, ...each((n) => String(round(median(cpu[n]), 0)))],
      ['p99 at 1,000 req/s (ms)', ...each((n) => String(fixed[n].latency.p99))],
      ['RSS after load (MiB)', ...each((n) => String(round(rss[n], 1)))],
    ],
    json,
  });
  console.log(JSON.stringify(json));
} finally {
  await rm(dir, { recursive: true, force: true });
}
