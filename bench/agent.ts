/**
 * `npm run bench:agent`: the real agent programming a scratch network namespace on this
 * machine's kernel (degraded: no flowtable here, everything else identical) with 100, 1,000
 * and 10,000 hinted Services (2 ports each, dual-stack for a tenth of them; a quarter ShortLived).
 *
 * At each size: the full-sync time, the latency of applying one changed Service (p50/p99
 * over CHANGES changes: sync() from the event to `nft -f` done), and RSS. A benchmark: it
 * prints figures and asserts nothing. Needs root, nft and ip.
 *
 * Each size runs in a child process started inside the namespace (`ip netns exec`), so the
 * agent calls `nft` directly, as on a node, and RSS is the agent process's own.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { Agent } from '../agent/agent.ts';
import { createAgentMetrics } from '../agent/report/metrics.ts';
import { makeNft } from '../agent/nft/nft.ts';
import type { Source, SourceSink } from '../agent/sources/source.ts';
import { makeRunner } from '../lib/exec.ts';
import { silentLogger } from '../lib/log.ts';
import { deployedEnv, round, writePage } from './lib.ts';

const SIZES = (process.env.BENCH_SIZES ?? '100,1000,10000').split(',').map(Number);
const CHANGES = Number(process.env.BENCH_CHANGES ?? 60);

/** A source the bench drives by hand. */
class ManualSource implements Source {
  readonly name = 'bench';
  sink: SourceSink | undefined;
  async start(sink: SourceSink): Promise<void> {
    this.sink = sink;
    sink.synced();
  }
  async stop(): Promise<void> {}
}

function service(i: number, threshold?: number) {
  const v4 = `10.${96 + Math.floor(i / 65536)}.${Math.floor(i / 256) % 256}.${i % 256}`;
  const dual = i % 10 === 0;
  // A quarter are ShortLived: their changes are timeout elements, their chains shared per timeout.
  const hint = i % 4 === 1 ? 'ShortLived' : 'LongLived';
  const annotations: Record<string, string> = { 'flowhint.dev/traffic-hint': hint };
  if (threshold !== undefined && hint === 'LongLived')
    annotations['flowhint.dev/offload-after-packets'] = String(threshold);
  if (threshold !== undefined && hint === 'ShortLived')
    annotations['flowhint.dev/conntrack-timeout'] = `${(threshold % 600) + 1}s`;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: `svc-${i}`,
      namespace: `ns-${i % 50}`,
      annotations,
      labels: { 'flowhint.dev/traffic-hint': hint },
    },
    spec: {
      clusterIP: v4,
      clusterIPs: dual ? [v4, `fd00:96::${i.toString(16)}`] : [v4],
      ports: [
        { name: 'http', port: 80, protocol: 'TCP' },
        { name: 'grpc', port: 9090, protocol: 'TCP' },
      ],
    },
  };
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] as number;
}

interface SizeResult {
  size: number;
  fullMs: number;
  p50: number;
  p99: number;
  rssMiB: number;
}

/** In the child, inside the namespace: program `size` Services, then change them one by one. */
async function measureHere(size: number): Promise<SizeResult> {
  const run = makeRunner([]);
  const source = new ManualSource();
  const agent = new Agent({
    run,
    nft: makeNft(run),
    source,
    logger: silentLogger(),
    metrics: createAgentMetrics({ defaultMetrics: false }),
    defaultThreshold: 20,
    devices: {},
    counter: true,
    nodeAddresses: [],
  });
  await agent.prepare();
  source.sink!.events(
    Array.from({ length: size }, (_, i) => ({
      type: 'upsert' as const,
      key: `ns-${i % 50}/svc-${i}`,
      object: service(i),
    })),
  );
  const t0 = performance.now();
  const full = await agent.sync();
  const fullMs = performance.now() - t0;
  if (!full.ok) throw new Error(`full sync failed: ${full.error}`);
  const lat: number[] = [];
  for (let c = 0; c < CHANGES; c++) {
    const i = (c * 7919) % size;
    const started = performance.now();
    source.sink!.events([{ type: 'upsert', key: `ns-${i % 50}/svc-${i}`, object: service(i, 100 + c) }]);
    const r = await agent.sync();
    lat.push(performance.now() - started);
    if (!r.ok || r.kind !== 'partial') throw new Error(`change ${c}: ${r.kind} ${r.error ?? ''}`);
  }
  const rssMiB = process.memoryUsage().rss / 1048576;
  await agent.stop();
  return { size, fullMs, p50: pct(lat, 50), p99: pct(lat, 99), rssMiB };
}

function runSize(size: number): SizeResult {
  const ns = `fh-bench-${process.pid}-${size}`;
  execFileSync('ip', ['netns', 'add', ns]);
  try {
    const r = spawnSync(
      'ip',
      ['netns', 'exec', ns, process.execPath, new URL(import.meta.url).pathname, '--child', String(size)],
      {
        encoding: 'utf8',
        env: { ...process.env, NODE_OPTIONS: deployedEnv('agent.yaml', 'agent', 'NODE_OPTIONS') ?? '' },
      },
    );
    if (r.status !== 0) throw new Error(`size ${size} failed: ${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as SizeResult;
  } finally {
    execFileSync('ip', ['netns', 'del', ns]);
  }
}

if (process.argv[2] === '--child') {
  process.stdout.write(`${JSON.stringify(await measureHere(Number(process.argv[3])))}\n`);
} else {
  const results: SizeResult[] = [];
  for (const size of SIZES) {
    const r = runSize(size);
    results.push(r);
    console.log(
      `${String(size).padStart(6)} Services: full sync ${round(r.fullMs, 1)} ms; apply one: p50 ${round(r.p50, 1)} ms, p99 ${round(r.p99, 1)} ms (${CHANGES} changes); agent RSS ${round(r.rssMiB, 1)} MiB`,
    );
  }
  const small = results[0]!;
  const big = results[results.length - 1]!;
  console.log(
    `\nscaling: apply-one p99 at ${big.size} vs ${small.size} = ${round(big.p99 / small.p99, 2)}x (anchor: kube-proxy nftables mode, 141 ms to add one Service beside 10k)`,
  );
  const json = {
    apply_one_p99_ms_10k: round(big.p99, 1),
    scaling_ratio_10k_vs_100: round(big.p99 / small.p99, 2),
    full_sync_10k_ms: round(big.fullMs, 0),
    rss_mib_10k: round(big.rssMiB, 1),
  };
  const cell = (f: (r: SizeResult) => string) => results.map(f);
  writePage(new URL('../docs/bench-agent.md', import.meta.url).pathname, {
    title: 'Agent benchmark',
    command: 'npm run bench:agent',
    method: [
      `The real agent in a scratch network namespace on this machine's kernel, with ${SIZES.join(', ')} hinted Services;`,
      `${CHANGES} changed Services applied one at a time at each size. Targets at ${big.size}: apply one p99 ≤ 50 ms,`,
      'full sync ≤ 2 s, RSS ≤ 150 MiB, p99 scaling vs the smallest size ≤ 1.5. Anchor: kube-proxy nftables mode, 141 ms to',
      'add one Service beside 10k.',
    ].join('\n'),
    header: ['', ...results.map((r) => `${r.size} Services`)],
    rows: [
      ['apply one changed Service, p50 (ms)', ...cell((r) => String(round(r.p50, 1)))],
      ['apply one changed Service, p99 (ms)', ...cell((r) => String(round(r.p99, 1)))],
      ['full sync (ms)', ...cell((r) => String(round(r.fullMs, 0)))],
      ['agent RSS (MiB)', ...cell((r) => String(round(r.rssMiB, 1)))],
    ],
    json,
  });
  console.log(JSON.stringify(json));
}
