/** Shared benchmark plumbing: medians and rounding; child servers come from test/helpers. */
export { deployedEnv, rssMiB, startChild, startWebhookChild, stopChild } from '../test/helpers/child.ts';

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

