/**
 * One exponential backoff for every retry loop (the agent's failed syncs, the informer's
 * restarts): doubling from `initialMs` up to `maxMs`, jittered ±20 % so that a cluster's
 * nodes do not retry in step. With `resetMs`, it starts over only after that long without a
 * failure (client-go's reflector does the same), not on the first success: a connection
 * that succeeds and then fails at once would otherwise retry at the initial delay forever.
 */
import { realClock, type Clock } from './clock.ts';

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Start over after this long without a failure; default: at the first success. */
  resetMs?: number | undefined;
  /** ± fraction; default 0.2. */
  jitter?: number;
  /** What `next()` reads as now; default the real clock. */
  clock?: Clock;
}

export class Backoff {
  private readonly o: Required<Omit<BackoffOptions, 'resetMs' | 'clock'>> & { resetMs: number | undefined };
  private readonly clock: Clock;
  private delayMs: number;
  private lastFailureAt = -Infinity;
  private readonly random: () => number;

  constructor(o: BackoffOptions, random: () => number = Math.random) {
    this.o = { initialMs: o.initialMs, maxMs: o.maxMs, jitter: o.jitter ?? 0.2, resetMs: o.resetMs };
    this.clock = o.clock ?? realClock;
    this.delayMs = o.initialMs;
    this.random = random;
  }

  /** A failure now: the delay before the next attempt. */
  next(now = this.clock.now()): number {
    if (this.o.resetMs !== undefined && now - this.lastFailureAt > this.o.resetMs) this.delayMs = this.o.initialMs;
    this.lastFailureAt = now;
    const j = this.o.jitter;
    const delay = Math.round(this.delayMs * (1 - j + this.random() * 2 * j));
    this.delayMs = Math.min(this.delayMs * 2, this.o.maxMs);
    return delay;
  }

  /** A success: start over, unless `resetMs` decides. */
  succeeded(): void {
    if (this.o.resetMs === undefined) this.delayMs = this.o.initialMs;
  }
}
