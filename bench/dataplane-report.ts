/**
 * `npm run bench:dataplane`'s report. The VM runs under icount (test/kernel/icount/lib.sh):
 * guest time counts executed instructions, so each throughput is work per instruction and
 * repeats within 1 %. Each configuration is measured twice; the report gives their mean, the
 * relative difference between the two as the spread, the cost in instructions per unit of
 * work, and the ratios the issue names. Pure functions plus a CLI; the VM script (bench.sh)
 * only collects samples.
 *
 * usage: node bench/dataplane-report.ts SAMPLES [--svg FILE] [--markdown FILE] [key=value ...]
 *   SAMPLES: one line per measurement, `path workload mode value` (throughput, higher is better),
 *     or `path workload mode failed` for a measurement that failed (a transfer that did not
 *     complete, a stalled CRR connection): never a lower sample; every ratio it enters is null
 *   --svg FILE: instructions per unit of work per mode and path (vega-lite)
 *   --markdown FILE: the tables and ratios as a page (docs/dataplane.md)
 *   key=value: extra figures for the JSON line
 * Prints the tables, then the ratios, then one JSON line.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

export type Samples = Map<string, number[]>;

const sampleKey = (path: string, workload: string, mode: string) => `${path} ${workload} ${mode}`;

export function parseSamples(text: string): Samples {
  const out: Samples = new Map();
  for (const line of text.split('\n')) {
    const [path, workload, mode, value, extra] = line.trim().split(/\s+/);
    const v = Number(value);
    if (!path || !workload || !mode || extra !== undefined || !Number.isFinite(v) || v <= 0) continue;
    const k = sampleKey(path, workload, mode);
    out.set(k, [...(out.get(k) ?? []), v]);
  }
  return out;
}

/** The configurations (`path workload mode`) with a failed measurement, and how many failed. */
export function parseFailures(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const [path, workload, mode, value, extra] = line.trim().split(/\s+/);
    if (!path || !workload || !mode || value !== 'failed' || extra !== undefined) continue;
    const k = sampleKey(path, workload, mode);
    out.set(k, (out.get(k) ?? 0) + 1);
  }
  return out;
}

export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** The largest relative difference between repeats of one configuration: (max − min) / mean. */
export function spread(xs: readonly number[]): number {
  return xs.length < 2 ? 0 : (Math.max(...xs) - Math.min(...xs)) / mean(xs);
}

/** What one unit of each workload is, and how throughput turns into instructions per unit. */
export const UNITS: Readonly<Record<string, { throughput: string; unit: string; perSecond: (v: number) => number }>> = {
  udp_pps: { throughput: 'packets/s', unit: 'packet', perSecond: (v) => v },
  tcp: { throughput: 'Mbit/s', unit: 'kB', perSecond: (v) => (v * 1e6) / 8 / 1000 },
  rr: { throughput: 'transactions/s', unit: 'transaction', perSecond: (v) => v },
  crr: { throughput: 'connections/s', unit: 'connection', perSecond: (v) => v },
};

/**
 * Instructions per unit of work: under icount one guest nanosecond is one instruction, so a
 * second of guest time is 1e9 instructions, shared by everything on the one vCPU.
 */
export function cost(workload: string, throughput: number): number {
  const u = UNITS[workload];
  return u ? 1e9 / u.perSecond(throughput) : Number.NaN;
}

const value = (s: Samples, path: string, workload: string, mode: string) =>
  mean(s.get(sampleKey(path, workload, mode)) ?? []);

/** The JSON line's throughput ratios (> 1 is faster): [key, path, workload, mode, baseline path, baseline mode]. */
export const RATIOS: ReadonlyArray<readonly [string, string, string, string, string, string]> = [
  ['kpnft_tcp_hinted_vs_none', 'kpnft', 'tcp', 'hinted', 'kpnft', 'none'],
  ['kpnft_udp_pps_hinted_vs_none', 'kpnft', 'udp_pps', 'hinted', 'kpnft', 'none'],
  ['kpnft_rr_hinted_vs_none', 'kpnft', 'rr', 'hinted', 'kpnft', 'none'],
  ['kpnft_crr_hinted_vs_none', 'kpnft', 'crr', 'hinted', 'kpnft', 'none'],
  ['kpnft_tcp_unhinted_vs_none', 'kpnft', 'tcp', 'unhinted', 'kpnft', 'none'],
  ['kpnft_udp_pps_unhinted_vs_none', 'kpnft', 'udp_pps', 'unhinted', 'kpnft', 'none'],
  ['kpnft_rr_unhinted_vs_none', 'kpnft', 'rr', 'unhinted', 'kpnft', 'none'],
  ['kpnft_crr_unhinted_vs_none', 'kpnft', 'crr', 'unhinted', 'kpnft', 'none'],
  ['kpnft_tcp_unhinted_vs_inherent', 'kpnft', 'tcp', 'unhinted', 'kpnft', 'inherent'],
  ['kpnft_udp_pps_unhinted_vs_inherent', 'kpnft', 'udp_pps', 'unhinted', 'kpnft', 'inherent'],
  ['kpnft_crr_unhinted_vs_inherent', 'kpnft', 'crr', 'unhinted', 'kpnft', 'inherent'],
  ['kpnft_crr_hinted_vs_inherent', 'kpnft', 'crr', 'hinted', 'kpnft', 'inherent'],
  ['kpnft_crr_hinted_vs_handwritten', 'kpnft', 'crr', 'hinted', 'kpnft', 'handwritten'],
  ['kpnft_udp_pps_inherent_vs_none', 'kpnft', 'udp_pps', 'inherent', 'kpnft', 'none'],
  ['kpnft_udp_pps_bare_vs_none', 'kpnft', 'udp_pps', 'bare', 'kpnft', 'none'],
  ['kpnft_tcp_hinted_vs_handwritten', 'kpnft', 'tcp', 'hinted', 'kpnft', 'handwritten'],
  ['kpnft_udp_pps_hinted_vs_handwritten', 'kpnft', 'udp_pps', 'hinted', 'kpnft', 'handwritten'],
  ['kpnft_udp_pps_hinted_vs_nocounter', 'kpnft', 'udp_pps', 'hinted', 'kpnft', 'nocounter'],
  ['kpipt_udp_pps_hinted_vs_none', 'kpipt', 'udp_pps', 'hinted', 'kpipt', 'none'],
  ['kpipt_udp_pps_unhinted_vs_none', 'kpipt', 'udp_pps', 'unhinted', 'kpipt', 'none'],
  ['kpipt_tcp_hinted_vs_none', 'kpipt', 'tcp', 'hinted', 'kpipt', 'none'],
  ['dnat_tcp_hinted_vs_none', 'dnat', 'tcp', 'hinted', 'dnat', 'none'],
  ['kpnft_udp_pps_unhinted_10k_vs_10', 'kpnft10k', 'udp_pps', 'unhinted', 'kpnft10', 'unhinted'],
  ['kpnft_udp_pps_hinted_10k_vs_10', 'kpnft10k', 'udp_pps', 'hinted', 'kpnft10', 'hinted'],
];

const round4 = (x: number) => (Number.isFinite(x) ? Math.round(x * 10000) / 10000 : null);

/**
 * The share of the node's netfilter cost per packet that `mode` removes: (none − mode) /
 * (none − floor), in instructions per packet; floor is the same forwarding with no rules.
 */
export function shareRemoved(s: Samples, path: string, workload: string, mode: string): number {
  const none = cost(workload, value(s, path, workload, 'none'));
  const floor = cost(workload, value(s, 'floor', workload, 'none'));
  return (none - cost(workload, value(s, path, workload, mode))) / (none - floor);
}

export function report(
  s: Samples,
  failed: ReadonlyMap<string, number> = new Map(),
): { lines: string[]; json: Record<string, number | null> } {
  const lines: string[] = [];
  const json: Record<string, number | null> = {};
  for (const [key, path, workload, mode, basePath, base] of RATIOS) {
    const broken = [sampleKey(path, workload, mode), sampleKey(basePath, workload, base)].filter((k) => failed.has(k));
    if (broken.length > 0) {
      json[key] = null;
      lines.push(`${key.padEnd(38)} -   (failed measurements: ${broken.join(', ')})`);
      continue;
    }
    const r = value(s, path, workload, mode) / value(s, basePath, workload, base);
    json[key] = round4(r);
    const ca = cost(workload, value(s, path, workload, mode));
    const cb = cost(workload, value(s, basePath, workload, base));
    lines.push(
      `${key.padEnd(38)} ${Number.isFinite(r) ? r.toFixed(4) : '-'}   (${fmt(ca)} vs ${fmt(cb)} instructions per ${UNITS[workload]?.unit ?? '?'})`,
    );
  }
  for (const [path, mode] of [
    ['kpnft', 'hinted'],
    ['kpnft', 'handwritten'],
    ['kpipt', 'hinted'],
  ] as const) {
    for (const w of ['udp_pps', 'tcp'] as const) {
      const key = `${path}_${w === 'udp_pps' ? 'udp' : 'tcp'}_netfilter_share_removed_${mode}`;
      json[key] = round4(shareRemoved(s, path, w, mode));
      lines.push(
        `${key.padEnd(38)} ${json[key] ?? '-'}   (of the node's netfilter cost per ${UNITS[w]!.unit}, none − floor)`,
      );
    }
  }
  json.max_repeat_spread = round4(Math.max(0, ...[...s.values()].map(spread)));
  json.crr_max_repeat_spread = round4(
    Math.max(0, ...[...s].filter(([k]) => k.split(' ')[1] === 'crr').map(([, xs]) => spread(xs))),
  );
  json.failed_samples = [...failed.values()].reduce((a, b) => a + b, 0);
  return { lines, json };
}

const fmt = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '-');
export const MODES = ['floor', 'none', 'bare', 'inherent', 'unhinted', 'hinted', 'nocounter', 'handwritten'] as const;

/** Per path, workloads as rows and modes as columns: throughput, instructions per unit, spread. */
export function tables(s: Samples): string[] {
  const paths = [...new Set([...s.keys()].map((k) => k.split(' ')[0]!))];
  const out: string[] = [];
  for (const p of paths) {
    const modes = MODES.filter((m) => [...s.keys()].some((k) => k.startsWith(`${p} `) && k.endsWith(` ${m}`)));
    out.push(`| ${p} | ${modes.join(' | ')} |`, `| --- | ${modes.map(() => '---').join(' | ')} |`);
    const workloads = Object.keys(UNITS).filter((w) => [...s.keys()].some((k) => k.startsWith(`${p} ${w} `)));
    for (const w of workloads) {
      const cell = (m: string) => {
        const xs = s.get(sampleKey(p, w, m));
        if (!xs) return '-';
        return `${fmt(mean(xs))} ${UNITS[w]!.throughput}<br>**${fmt(cost(w, mean(xs)))}** per ${UNITS[w]!.unit}<br>±${(spread(xs) * 100).toFixed(2)} %`;
      };
      out.push(`| ${w} | ${modes.map(cell).join(' | ')} |`);
    }
    out.push('');
  }
  return out;
}

/**
 * The headline table for one path: a row per mode (the floor first, from its own path), a
 * column per workload, instructions per unit of work (throughput ratio to none beside it).
 */
export function summary(s: Samples, path: string): string[] {
  const workloads = Object.keys(UNITS).filter((w) => [...s.keys()].some((k) => k.startsWith(`${path} ${w} `)));
  const out = [
    `| ${path}, instructions per | ${workloads.map((w) => UNITS[w]!.unit).join(' | ')} |`,
    `| --- | ${workloads.map(() => '---').join(' | ')} |`,
  ];
  for (const m of MODES) {
    const from = m === 'floor' ? 'floor' : path;
    const mode = m === 'floor' ? 'none' : m;
    if (!workloads.some((w) => s.has(sampleKey(from, w, mode)))) continue;
    const cell = (w: string) => {
      const v = value(s, from, w, mode);
      if (!Number.isFinite(v)) return '-';
      const r = v / value(s, path, w, 'none');
      return `${fmt(cost(w, v))}${m === 'none' || !Number.isFinite(r) ? '' : ` (×${r.toFixed(3)})`}`;
    };
    out.push(`| ${m} | ${workloads.map(cell).join(' | ')} |`);
  }
  return out;
}

/** The plot: instructions per unit of work per mode, a panel per path and workload (lower is cheaper). */
export function chartSpec(s: Samples): TopLevelSpec {
  const values: Array<{ path: string; workload: string; mode: string; instructions: number }> = [];
  for (const [k, xs] of s) {
    const [path, workload, mode] = k.split(' ') as [string, string, string];
    if (workload !== 'udp_pps' && workload !== 'crr') continue;
    values.push({
      path,
      workload: `${workload} (per ${UNITS[workload]!.unit})`,
      mode,
      instructions: Math.round(cost(workload, mean(xs))),
    });
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: 'Instructions per packet (UDP) and per connection (CRR), by mode and path',
      subtitle: 'qemu icount: guest time counts instructions; lower is cheaper',
    },
    data: { values },
    facet: {
      row: { field: 'workload', type: 'nominal', title: null },
      column: { field: 'path', type: 'nominal', title: null },
    },
    resolve: { scale: { y: 'independent' } },
    spec: {
      width: 200,
      height: 160,
      mark: 'bar',
      encoding: {
        x: { field: 'mode', type: 'nominal', sort: [...MODES], title: null },
        y: { field: 'instructions', type: 'quantitative', title: 'instructions', scale: { zero: false } },
        color: { field: 'mode', type: 'nominal', sort: [...MODES], legend: null },
      },
    },
  };
}

export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  return view.toSVG();
}

/** docs/dataplane.md: generated, so the page never holds figures from an older run. */
export function markdown(
  s: Samples,
  r: ReturnType<typeof report>,
  extra: Record<string, number | null>,
  header: string,
): string {
  return [
    '# Data-plane figures (generated by `npm run bench:dataplane`; do not edit)',
    '',
    header,
    '',
    ...summary(s, 'kpnft'),
    '',
    'Each cell: throughput, **instructions per unit of work** (the whole path: client, node and server share one vCPU), and the spread between the two repeats. Modes and paths: `test/kernel/icount/lib.sh`.',
    '',
    ...tables(s),
    '![instructions per packet and per connection](dataplane.svg)',
    '',
    '```',
    ...r.lines,
    '```',
    '',
    '```json',
    JSON.stringify({ ...r.json, ...extra }),
    '```',
    '',
  ].join('\n');
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const take = (flag: string) => {
    const at = args.indexOf(flag);
    return at >= 0 ? args.splice(at, 2)[1] : undefined;
  };
  const svgFile = take('--svg');
  const mdFile = take('--markdown');
  const header = take('--header') ?? '';
  const [file, ...extras] = args;
  if (!file) {
    process.stderr.write(
      'usage: node bench/dataplane-report.ts SAMPLES [--svg FILE] [--markdown FILE] [key=value ...]\n',
    );
    process.exit(2);
  }
  const text = readFileSync(file, 'utf8');
  const samples = parseSamples(text);
  for (const l of [...summary(samples, 'kpnft'), '', ...tables(samples)]) console.log(l);
  const r = report(samples, parseFailures(text));
  console.log('\nthroughput ratios (instructions per unit beside them):');
  for (const l of r.lines) console.log(l);
  const extra = Object.fromEntries(extras.map((e) => e.split('=')).map(([k, v]) => [k!, round4(Number(v))]));
  if (svgFile) {
    writeFileSync(svgFile, await renderSvg(chartSpec(samples)));
    console.log(`plot: ${svgFile}`);
  }
  if (mdFile) writeFileSync(mdFile, markdown(samples, r, extra, header));
  console.log(JSON.stringify({ ...r.json, ...extra }));
}
