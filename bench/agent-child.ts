/**
 * The measured children of `npm run bench:agent` (bench/agent.ts): run inside the bench's
 * namespaces, bundled as the image's code is (bench/agent.ts bundles this file with
 * build/bundle.ts), so that what they load, and the memory it takes, is what the image's
 * agent loads. Each prints one JSON line.
 *
 * - `--child SIZE`: program SIZE Services, then apply CHANGES changed Services one at a time.
 * - `--polls ENTRIES SERVICES READER`: the conntrack series (agent-conntrack.ts).
 * - `--api SERVICES` (the FAKE API server, not measured) and `--api-agent URL SERVICES CACHE`
 *   (agent-api.ts).
 */
import { readFileSync } from 'node:fs';
import { benchAgent } from './bench-agent.ts';
import { measurePolls, type Reader } from './agent-conntrack.ts';
import type { Cache } from './agent-api.ts';
import { CHANGES, type SizeResult } from './agent-sizes.ts';
// agent-api.ts loads @kubernetes/client-node: imported only where used, so the other children stay without it.
const apiSeries = () => import('./agent-api.ts');

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

/** In the child, inside the namespace: program `size` Services, then change them one by one. */
async function measureHere(size: number): Promise<SizeResult> {
  const { agent, source } = await benchAgent();
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
  const anonMiB = Number(/^RssAnon:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0) / 1024;
  await agent.stop();
  return { size, fullMs, p50: pct(lat, 50), p99: pct(lat, 99), rssMiB, anonMiB };
}

const arg = (i: number) => process.argv[2 + i] as string;
if (arg(0) === '--child') {
  process.stdout.write(`${JSON.stringify(await measureHere(Number(arg(1))))}\n`);
} else if (arg(0) === '--api') {
  await (await apiSeries()).serveApi(Number(arg(1)));
} else if (arg(0) === '--api-agent') {
  const { measureApi } = await apiSeries();
  process.stdout.write(`${JSON.stringify(await measureApi(arg(1), Number(arg(2)), arg(3) as Cache))}\n`);
} else if (arg(0) === '--polls') {
  process.stdout.write(`${JSON.stringify(await measurePolls(Number(arg(1)), Number(arg(2)), arg(3) as Reader))}\n`);
}
