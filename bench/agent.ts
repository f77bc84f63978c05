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
 * agent calls `nft` directly, as on a node, and RSS is the agent process's own. The children
 * (bench/agent-child.ts) run bundled, as the image runs flowhint.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { APP_NODE, bundle } from '../build/bundle.ts';
import { deployedEnv, round, writePage } from './lib.ts';
import { conntrackMax, rounded, runTable, type PollResult, type Reader } from './agent-conntrack.ts';
import { runApiSeries, storedBytes, type ApiResult, type Cache } from './agent-api.ts';
import { CHANGES, REPEATS, summarize, type SizeResult, type SizeSummary } from './agent-sizes.ts';

const SIZES = (process.env.BENCH_SIZES ?? '100,1000,10000').split(',').map(Number);
/** The conntrack series (`BENCH_CONNTRACK=0` skips it) and its Service counts. */
const CONNTRACK = process.env.BENCH_CONNTRACK !== '0';
const CT_SERVICES = [2, 1000];
/** The API-server series (`BENCH_API=0` skips it): Services listed through the informer. */
const API = process.env.BENCH_API !== '0';
const API_SERVICES = Number(process.env.BENCH_API_SERVICES ?? 10000);

function runSize(size: number, measured: string): SizeResult {
  const ns = `fh-bench-${process.pid}-${size}`;
  execFileSync('ip', ['netns', 'add', ns]);
  try {
    const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, measured, '--child', String(size)], {
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: deployedEnv('agent.yaml', 'agent', 'NODE_OPTIONS') ?? '' },
    });
    if (r.status !== 0) throw new Error(`size ${size} failed: ${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as SizeResult;
  } finally {
    execFileSync('ip', ['netns', 'del', ns]);
  }
}

/**
 * The measured children (bench/agent-child.ts) bundled as the image's code is (build/bundle.ts):
 * they load what the image's agent loads, the way it loads it (Node's type stripping and
 * per-file modules would add tens of MiB of RSS).
 */
async function measuredChild(): Promise<string> {
  const outdir = new URL('../.cache/bench-agent/', import.meta.url).pathname;
  await bundle({ entries: ['bench/agent-child.ts'], outdir, node: APP_NODE });
  return `${outdir}bench/agent-child.js`;
}

{
  const measured = await measuredChild();
  const results: SizeSummary[] = [];
  for (const size of SIZES) {
    const r = summarize(Array.from({ length: REPEATS }, () => runSize(size, measured)));
    results.push(r);
    console.log(
      `${String(size).padStart(6)} Services, median of ${r.runs}: full sync ${round(r.fullMs, 1)} ms; apply one: p50 ${round(r.p50, 1)} ms, p99 ${round(r.p99, 1)} ms (${CHANGES} changes); agent RSS ${round(r.rssMiB, 1)} MiB (${round(r.rssMinMiB, 1)}–${round(r.rssMaxMiB, 1)}; anonymous ${round(r.anonMiB, 1)})`,
    );
  }
  const small = results[0]!;
  const big = results[results.length - 1]!;
  console.log(
    `\nscaling: apply-one p99 at ${big.size} vs ${small.size} = ${round(big.p99 / small.p99, 2)}x (anchor: kube-proxy nftables mode, 141 ms to add one Service beside 10k)`,
  );

  // The conntrack series: one poll's cost against a busy table, filtered reader beside the whole dump.
  const tables = CONNTRACK ? [0, 100_000, conntrackMax()] : [];
  const series: Array<{ actual: number; results: PollResult[]; aloneMs: number }> = [];
  for (const target of tables) {
    const t = runTable(target, CT_SERVICES, measured);
    series.push(t);
    console.log(
      `conntrack ${String(t.actual).padStart(7)} entries: the same dump by conntrack alone (no agent): CPU ${round(t.aloneMs, 1)} ms`,
    );
    for (const r of t.results) {
      const x = rounded(r);
      console.log(
        `conntrack ${String(t.actual).padStart(7)} entries, ${String(r.services).padStart(4)} Services, ${r.reader.padEnd(8)} reader: peak RSS ${x.rss} MiB, CPU per poll ${x.cpu} ms; ${r.counted} entries counted`,
      );
    }
  }
  // The API-server series: the informer's cache cut down (the agent's) beside kept whole.
  const apiResults: ApiResult[] = API ? await runApiSeries(API_SERVICES, measured) : [];
  for (const r of apiResults)
    console.log(
      `through the API server, ${r.services} Services, cache ${r.cache.padEnd(5)}: RSS ${round(r.rssMiB, 1)} MiB, peak ${round(r.peakMiB, 1)} MiB; ${r.programmed} programmed`,
    );
  const apiJson: Record<string, number> = {};
  const byCache = (c: Cache) => apiResults.find((r) => r.cache === c);
  if (byCache('view') && byCache('whole')) {
    const [v, w] = [byCache('view')!, byCache('whole')!];
    if (v.programmed !== w.programmed || v.programmed !== API_SERVICES)
      throw new Error(`programmed ${v.programmed} (view) and ${w.programmed} (whole) of ${API_SERVICES}`);
    Object.assign(apiJson, {
      rss_mib_api_10k: round(v.rssMiB, 1),
      rss_mib_api_10k_old: round(w.rssMiB, 1),
      peak_mib_api_10k: round(v.peakMiB, 1),
      peak_mib_api_10k_old: round(w.peakMiB, 1),
    });
  }
  const pick = (i: number, reader: Reader) =>
    series[i]?.results.find((r) => r.reader === reader && r.services === Math.max(...CT_SERVICES));
  const ctJson: Record<string, number> = {};
  if (series.length > 0) {
    const last = series.length - 1;
    for (const [reader, suffix] of [
      ['filtered', ''],
      ['whole', '_old'],
    ] as const) {
      ctJson[`rss_mib_conntrack_0${suffix}`] = rounded(pick(0, reader)!).rss;
      ctJson[`rss_mib_conntrack_full${suffix}`] = rounded(pick(last, reader)!).rss;
      ctJson[`cpu_ms_per_poll_conntrack_full${suffix}`] = rounded(pick(last, reader)!).cpu;
    }
    ctJson.cpu_ms_conntrack_alone_full = round(series[last]!.aloneMs, 1);
    ctJson.conntrack_full_entries = series[last]!.actual;
  }
  const json = {
    apply_one_p99_ms_10k: round(big.p99, 1),
    scaling_ratio_10k_vs_100: round(big.p99 / small.p99, 2),
    full_sync_10k_ms: round(big.fullMs, 0),
    rss_mib_10k: round(big.rssMiB, 1),
    rss_mib_10k_min: round(big.rssMinMiB, 1),
    rss_mib_10k_max: round(big.rssMaxMiB, 1),
    rss_anon_mib_10k: round(big.anonMiB, 1),
    ...apiJson,
    ...ctJson,
  };
  const cell = (f: (r: SizeSummary) => string) => results.map(f);
  writePage(new URL('../docs/bench-agent.md', import.meta.url).pathname, {
    title: 'Agent benchmark',
    command: 'npm run bench:agent',
    method: [
      `The real agent in a scratch network namespace on this machine's kernel, with ${SIZES.join(', ')} hinted Services;`,
      `${CHANGES} changed Services applied one at a time at each size; ${REPEATS} agents per size, each figure their median`,
      `(RSS with its range: where a full sync's garbage lands moves it). Targets at ${big.size}: apply one p99 ≤ 50 ms,`,
      'full sync ≤ 2 s, RSS ≤ 120 MiB, p99 scaling vs the smallest size ≤ 1.5. Anchor: kube-proxy nftables mode, 141 ms to',
      'add one Service beside 10k. Each measured agent runs bench/agent.ts bundled as the image bundles flowhint',
      "(build/bundle.ts: one minified file per command, no type stripping), with the DaemonSet's NODE_OPTIONS.",
    ].join('\n'),
    header: ['', ...results.map((r) => `${r.size} Services`)],
    rows: [
      ['apply one changed Service, p50 (ms)', ...cell((r) => String(round(r.p50, 1)))],
      ['apply one changed Service, p99 (ms)', ...cell((r) => String(round(r.p99, 1)))],
      ['full sync (ms)', ...cell((r) => String(round(r.fullMs, 0)))],
      ['agent RSS (MiB)', ...cell((r) => String(round(r.rssMiB, 1)))],
      ['its range (MiB)', ...cell((r) => `${round(r.rssMinMiB, 1)}–${round(r.rssMaxMiB, 1)}`)],
      ['of which anonymous (MiB)', ...cell((r) => String(round(r.anonMiB, 1)))],
    ],
    sections: [
      ...(apiResults.length
        ? [
            {
              heading: 'Through the API server',
              method: [
                `The agent with its Services listed and watched by the real KubeSource (@kubernetes/client-node's informer, loaded`,
                `as the Pod loads it) from the list/watch FAKE API server, ${API_SERVICES} Services stored as \`kubectl apply\` leaves them`,
                `(managedFields, last-applied-configuration, selector: ${storedBytes()} bytes of JSON each). *view*: the informer's cache`,
                "cut down to the fields flowhint reads (the agent's); *whole*: kept as sent (before), in the same run. RSS after the",
                'first full sync, and the peak (the initial list is the high-water mark). Target: RSS ≤ 120 MiB [80].',
              ].join('\n'),
              header: ['Services', 'informer cache', 'RSS (MiB)', 'peak RSS (MiB)'],
              rows: apiResults.map((r) => [r.services, r.cache, round(r.rssMiB, 1), round(r.peakMiB, 1)]),
            },
          ]
        : []),
      ...(series.length
        ? [
            {
              heading: 'A busy conntrack table',
              method: [
                'One conntrack poll (every 15 s in the agent) against a namespace whose table holds real UNREPLIED UDP entries,',
                `${CT_SERVICES.join(' and ')} hinted Services programmed (and their live connections marked, once, before the polls), 2,000`,
                'entries marked as flowhint marks its own. *filtered*: the',
                "agent's reader (one `conntrack -L --mark 0x2000/0x2000`, streamed); *whole*: the reader it replaced (`conntrack -L`",
                'read whole, every line parsed), in the same run. Peak RSS of the agent process; CPU per poll includes the conntrack',
                "children, in steady state (after one untimed poll and a second at rest, so that the sync's index and garbage are not",
                "counted as a poll's). Targets: RSS at a full table within 10 MiB of an empty one [2 MiB]; CPU per poll at a full table ≤ 50 ms [10 ms].",
                '*conntrack alone*: the same filtered dump by `conntrack` started from the small bench process, no agent: the floor',
                "under a poll, most of it the kernel walking its whole table (the kernel's cost, which no reader of conntrack avoids).",
              ].join('\n'),
              header: ['conntrack entries', 'Services', 'reader', 'peak RSS (MiB)', 'CPU per poll (ms)'],
              rows: series.flatMap((t) => [
                ...t.results.map((r) => [t.actual, r.services, r.reader, rounded(r).rss, rounded(r).cpu]),
                [t.actual, '-', 'conntrack alone', '-', round(t.aloneMs, 1)],
              ]),
            },
          ]
        : []),
    ],
    json,
  });
  console.log(JSON.stringify(json));
}
