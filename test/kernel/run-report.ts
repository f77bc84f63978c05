/**
 * What `npm run test:kernel` (run.ts) repeats at the end of its output, pure.
 *
 * - A failed run's digest: CI keeps only the tail of a long run's output, and with two VMs at
 *   a time a run that failed in its first seconds was printed half an hour before the end
 *   (stop 46's CI: "kernel sid: 0 passed, 1 failed (scenarios.sh 8s)", and nothing else of it
 *   in the part CI kept). So each failed run's failed checks and last lines come again after
 *   every console.
 * - A lone script's JSON line (a benchmark's result) with the run's wall-clock seconds on the
 *   host: under icount the guest's clock counts instructions, so only the host can say how
 *   long the run took. A figure to read, never a pass/fail check.
 */

/** How many of a failed run's last lines are repeated. */
export const DIGEST_LINES = 40;
/** How many of its failed checks (`not ok …`) at most. */
export const DIGEST_FAILED_CHECKS = 20;

/** A failed run's failed checks (`not ok …`, the first DIGEST_FAILED_CHECKS), then its last DIGEST_LINES lines. */
export function failureDigest(output: string): string {
  const lines = output.split(/\r?\n/);
  while (lines.length > 0 && lines.at(-1)!.trim() === '') lines.pop();
  const notOk = lines.filter((l) => /^not ok\b/.test(l)).slice(0, DIGEST_FAILED_CHECKS);
  return [...(notOk.length > 0 ? [...notOk, '...'] : []), ...lines.slice(-DIGEST_LINES)].join('\n');
}

/** `json` (one JSON object) with `run_wall_s` added; anything else unchanged. */
export function withWallTime(json: string, secs: number): string {
  let o: unknown;
  try {
    o = JSON.parse(json);
  } catch {
    return json;
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return json;
  return JSON.stringify({ ...o, run_wall_s: secs });
}

/** How soon a run must end, with no check passed, to count as dying at its start. */
export const EARLY_SECS = 90;

/**
 * A run that failed before any check passed, within EARLY_SECS: the VM or the script's start
 * failed (a boot, a 9p read), not a scenario. run.ts runs it once more and reports both; a
 * second such end fails like any other. A scenario that fails after its first check never
 * qualifies, however early.
 */
export function diedAtStart(r: { code: number; passed: number; failed: number; secs: number }): boolean {
  return (r.code !== 0 || r.failed > 0) && r.passed === 0 && r.secs < EARLY_SECS;
}
