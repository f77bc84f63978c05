/**
 * kube-proxy's BoundedFrequencyRunner, reduced to what the agent needs: run one function
 * when asked, at most once per `minIntervalMs` (a burst of requests is one run), never two
 * at once; after a failed run, again after the backoff's delay (requests meanwhile wait for
 * it); after a successful one, again as soon as allowed if requests came in meanwhile.
 */
import type { Backoff } from './backoff.ts';
import { realClock, type Clock } from './clock.ts';

export interface BoundedRunnerOptions {
  minIntervalMs: number;
  backoff: Backoff;
  /** The work; resolves whether it succeeded. */
  run: () => Promise<boolean>;
  /** Time and timers; default the real clock. Tests pass a fake one. */
  clock?: Clock;
}

export class BoundedRunner {
  private readonly o: BoundedRunnerOptions;
  private readonly clock: Clock;
  private timer: unknown;
  private inflight: Promise<void> = Promise.resolve();
  private lastRunAt = -Infinity;
  private requested = false;
  private active = false;
  private running = false;
  private stopped = false;

  constructor(o: BoundedRunnerOptions) {
    this.o = o;
    this.clock = o.clock ?? realClock;
  }

  /** Start running requests (those made before start included). */
  start(): void {
    this.active = true;
    if (this.requested) this.schedule();
  }

  /** Ask for a run. */
  request(): void {
    this.requested = true;
    this.schedule();
  }

  /** Nothing running and nothing asked for (a failed run's retry is asked for). */
  get idle(): boolean {
    return !this.running && !this.requested;
  }

  /** Run `fn` after the run in flight, if any. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.inflight.then(fn);
    this.inflight = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /** No more runs; resolves when the one in flight (if any) has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    await this.inflight;
  }

  private schedule(delayMs?: number): void {
    // During a run, a request waits for its end: the interval counts from there.
    if (!this.active || this.stopped || this.timer !== undefined || this.running) return;
    const wait = delayMs ?? Math.max(0, this.o.minIntervalMs - (this.clock.now() - this.lastRunAt));
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      void this.exclusive(() => this.once());
    }, wait);
  }

  private async once(): Promise<void> {
    if (this.stopped) return;
    this.requested = false;
    this.running = true;
    const ok = await this.o.run().catch(() => false);
    this.running = false;
    this.lastRunAt = this.clock.now();
    if (!ok) {
      this.requested = true;
      this.schedule(this.o.backoff.next());
    } else {
      this.o.backoff.succeeded();
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- request() may have set it while run() was awaited.
      if (this.requested) this.schedule();
    }
  }
}
