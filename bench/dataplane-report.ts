/**
 * `npm run bench:dataplane`'s report: medians per path, workload and mode, and each ratio the
 * issue names with a 95 % bootstrap confidence interval, so that a reader can tell a gain from
 * noise (TCG spreads rounds of the same mode by ±20 %). Pure functions plus a CLI; the VM
 * script (bench.sh) only collects samples.
 *
 * usage: node bench/dataplane-report.ts SAMPLES [--svg FILE] [key=value ...]
 *   SAMPLES: one line per measurement, `path workload mode value` (higher is better)
 *   --svg FILE: also draw each mode against no flowhint, per path and workload (vega-lite)
 *   key=value: extra figures for the JSON line (the ShortLived conntrack peak ratio)
 * Prints a table per path, then the ratios, then one JSON line.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { median } from './lib.ts';

export { median };

export type Samples = Map<string, number[]>;

const sampleKey = (path: string, workload: string, mode: string) => `${path} ${workload} ${mode}`;

export function parseSamples(text: string): Samples {
  const out: Samples = new Map();
  for (const line of text.split('\n')) {
    const [path, workload, mode, value, extra] = line.trim().split(/\s+/);
    const v = Number(value);
    if (!path || !workload || !mode || extra !== undefined || !Number.isFinite(v)) continue;
    const k = sampleKey(path, workload, mode);
    out.set(k, [...(out.get(k) ?? []), v]);
  }
  return out;
}

/** mulberry32: a small seeded generator, so a report is reproducible from its samples. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The ratio of medians a/b and its 95 % percentile-bootstrap interval: both samples are
 * resampled with replacement `iterations` times.
 */
export function ratioWithCi(a: readonly number[], b: readonly number[], iterations = 4000, seed = 1): { ratio: number; low: number; high: number } {
  const ratio = median(a) / median(b);
  if (a.length === 0 || b.length === 0) return { ratio, low: Number.NaN, high: Number.NaN };
  const next = rng(seed);
  const draw = (xs: readonly number[]) => median(Array.from({ length: xs.length }, () => xs[Math.floor(next() * xs.length)]!));
  const rs: number[] = [];
  for (let i = 0; i < iterations; i++) rs.push(draw(a) / draw(b));
  rs.sort((x, y) => x - y);
  return { ratio, low: rs[Math.floor(0.025 * (iterations - 1))]!, high: rs[Math.ceil(0.975 * (iterations - 1))]! };
}

/** The JSON line's ratios: [key, path, workload, mode, baseline mode]. */
export const RATIOS: ReadonlyArray<readonly [string, string, string, string, string]> = [
  ['kpnft_tcp_hinted_vs_none', 'kpnft', 'tcp', 'hinted', 'none'],
  ['kpnft_udp_pps_hinted_vs_none', 'kpnft', 'udp_pps', 'hinted', 'none'],
  ['kpnft_rr_hinted_vs_none', 'kpnft', 'rr', 'hinted', 'none'],
  ['kpnft_crr_hinted_vs_none', 'kpnft', 'crr', 'hinted', 'none'],
  ['kpnft_tcp_unhinted_vs_none', 'kpnft', 'tcp', 'unhinted', 'none'],
  ['kpnft_udp_pps_unhinted_vs_none', 'kpnft', 'udp_pps', 'unhinted', 'none'],
  ['kpnft_tcp_hinted_vs_handwritten', 'kpnft', 'tcp', 'hinted', 'handwritten'],
  ['kpnft_udp_pps_hinted_vs_handwritten', 'kpnft', 'udp_pps', 'hinted', 'handwritten'],
  ['kpipt_tcp_hinted_vs_none', 'kpipt', 'tcp', 'hinted', 'none'],
  ['kpipt_udp_pps_hinted_vs_none', 'kpipt', 'udp_pps', 'hinted', 'none'],
  ['dnat_tcp_hinted_vs_none', 'dnat', 'tcp', 'hinted', 'none'],
  // Beyond the list: 4 streams, and what the flowtable `counter` flag costs.
  ['kpnft_tcp4_hinted_vs_none', 'kpnft', 'tcp4', 'hinted', 'none'],
  ['kpnft_tcp_counter_vs_nocounter', 'kpnft', 'tcp', 'hinted', 'nocounter'],
  ['kpnft_udp_pps_counter_vs_nocounter', 'kpnft', 'udp_pps', 'hinted', 'nocounter'],
];

const round3 = (x: number) => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : null);

/** Every ratio and its interval's lower end, as the JSON line's keys (null where unmeasured). */
export function report(samples: Samples): { lines: string[]; json: Record<string, number | null> } {
  const lines: string[] = [];
  const json: Record<string, number | null> = {};
  for (const [key, path, workload, mode, base] of RATIOS) {
    const a = samples.get(sampleKey(path, workload, mode)) ?? [];
    const b = samples.get(sampleKey(path, workload, base)) ?? [];
    const r = ratioWithCi(a, b);
    json[key] = round3(r.ratio);
    json[`${key}_ci_low`] = round3(r.low);
    lines.push(`${key.padEnd(38)} ${r.ratio.toFixed(3)}  95% CI [${r.low.toFixed(3)}, ${r.high.toFixed(3)}]  (n=${a.length}/${b.length})`);
  }
  return { lines, json };
}

const UNITS: Record<string, string> = { tcp: 'Mbit/s', tcp4: 'Mbit/s', udp_pps: 'packets/s', rr: 'transactions/s', crr: 'connections/s' };

/** A table per path: workloads as rows, modes as columns, medians and [min–max]. */
export function tables(samples: Samples): string[] {
  const paths = [...new Set([...samples.keys()].map((k) => k.split(' ')[0]!))];
  const modes = ['none', 'hinted', 'unhinted', 'handwritten', 'nocounter'];
  const out: string[] = [];
  for (const p of paths) {
    out.push(`path ${p}:`, `  ${'workload'.padEnd(10)}${modes.map((m) => m.padStart(26)).join('')}`);
    const workloads = [...new Set([...samples.keys()].filter((k) => k.startsWith(`${p} `)).map((k) => k.split(' ')[1]!))];
    for (const w of workloads) {
      const scale = w.startsWith('tcp') ? 1e-6 : 1;
      const cell = (m: string) => {
        const xs = (samples.get(sampleKey(p, w, m)) ?? []).map((x) => x * scale);
        return xs.length === 0 ? '-' : `${median(xs).toFixed(0)} [${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)}]`;
      };
      out.push(`  ${w.padEnd(10)}${modes.map((m) => cell(m).padStart(26)).join('')}  ${UNITS[w] ?? ''}`);
    }
  }
  return out;
}

/**
 * The plot: per path and workload, each mode's median over no flowhint's, with its 95 %
 * bootstrap interval; 1 is "as without flowhint" (pure: a vega-lite spec from the samples).
 */
export function chartSpec(samples: Samples): TopLevelSpec {
  const values: Array<{ path: string; workload: string; mode: string; ratio: number; low: number; high: number }> = [];
  for (const k of samples.keys()) {
    const [path, workload, mode] = k.split(' ') as [string, string, string];
    if (mode === 'none') continue;
    const base = samples.get(sampleKey(path, workload, 'none'));
    if (!base) continue;
    const r = ratioWithCi(samples.get(k)!, base);
    values.push({ path, workload, mode, ratio: r.ratio, low: r.low, high: r.high });
  }
  const x = { field: 'workload', type: 'nominal' as const, title: null, sort: ['tcp', 'tcp4', 'udp_pps', 'rr', 'crr'] };
  const xOffset = { field: 'mode', sort: ['hinted', 'unhinted', 'handwritten', 'nocounter'] };
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: 'Each mode against no flowhint (median ratio, 95 % bootstrap interval)', subtitle: 'emulated kernel (qemu TCG): only the ratios mean anything' },
    data: { values },
    facet: { column: { field: 'path', type: 'nominal', title: null, sort: ['kpnft', 'kpipt', 'dnat'] } },
    spec: {
      width: 220,
      height: 220,
      layer: [
        { mark: 'bar', encoding: { x, xOffset, y: { field: 'ratio', type: 'quantitative', title: 'vs no flowhint' }, color: { field: 'mode', type: 'nominal', sort: ['hinted', 'unhinted', 'handwritten', 'nocounter'] } } },
        { mark: { type: 'rule', color: 'black' }, encoding: { x, xOffset, y: { field: 'low', type: 'quantitative' }, y2: { field: 'high' } } },
        { mark: { type: 'rule', strokeDash: [4, 4], color: 'gray' }, encoding: { y: { datum: 1 } } },
      ],
    },
  };
}

export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  return view.toSVG();
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const svgAt = args.indexOf('--svg');
  const svgFile = svgAt >= 0 ? args.splice(svgAt, 2)[1] : undefined;
  const [file, ...extras] = args;
  if (!file) {
    process.stderr.write('usage: node bench/dataplane-report.ts SAMPLES [key=value ...]\n');
    process.exit(2);
  }
  const samples = parseSamples(readFileSync(file, 'utf8'));
  for (const l of tables(samples)) console.log(l);
  const r = report(samples);
  console.log('\nratios of medians, 95 % bootstrap intervals:');
  for (const l of r.lines) console.log(l);
  const extra = Object.fromEntries(extras.map((e) => e.split('=')).map(([k, v]) => [k!, round3(Number(v))]));
  if (svgFile) {
    writeFileSync(svgFile, await renderSvg(chartSpec(samples)));
    console.log(`plot: ${svgFile}`);
  }
  console.log(JSON.stringify({ ...r.json, ...extra }));
}
