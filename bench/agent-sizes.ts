/**
 * The size series of `npm run bench:agent` (bench/agent.ts), the part the parent and the
 * measured child (bench/agent-child.ts) share: how many changes a child applies, what it
 * reports, and how the parent folds repeated children into one figure per size.
 *
 * RSS after a full sync at 10,000 Services moved by up to 20 MiB between identical children
 * (119 to 139 MiB, 2026-12-07): the full sync's transient heap (its transaction and text,
 * about 8 MiB at 10,000) is returned to the system or not depending on when V8 collects.
 * So each size runs REPEATS children, and the report gives the median and the range.
 */

import { median } from './lib.ts';

/** Changed Services each child applies, one at a time, after its full sync. */
export const CHANGES = Number(process.env.BENCH_CHANGES ?? 60);
/** Children per size (`BENCH_REPEATS`). */
export const REPEATS = Math.max(1, Number(process.env.BENCH_REPEATS ?? 5));

/** One child's figures. */
export interface SizeResult {
  size: number;
  fullMs: number;
  p50: number;
  p99: number;
  rssMiB: number;
  /** Of which anonymous (RssAnon): RSS minus the node binary's and libraries' file-backed pages. */
  anonMiB: number;
}

/** A size's figures over its children: each field's median, and RSS's lowest and highest. */
export interface SizeSummary extends SizeResult {
  runs: number;
  rssMinMiB: number;
  rssMaxMiB: number;
}

export function summarize(runs: readonly SizeResult[]): SizeSummary {
  const first = runs[0];
  if (!first) throw new Error('no runs to summarize');
  const of = (f: (r: SizeResult) => number) => median(runs.map(f));
  const rss = runs.map((r) => r.rssMiB);
  return {
    size: first.size,
    fullMs: of((r) => r.fullMs),
    p50: of((r) => r.p50),
    p99: of((r) => r.p99),
    rssMiB: of((r) => r.rssMiB),
    anonMiB: of((r) => r.anonMiB),
    runs: runs.length,
    rssMinMiB: Math.min(...rss),
    rssMaxMiB: Math.max(...rss),
  };
}
