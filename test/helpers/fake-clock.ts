/**
 * A fake clock for timing rules: `@sinonjs/fake-timers`' standalone clock (it patches no
 * globals) behind lib/clock.ts's interface. Time moves only when a test calls `tick`, which
 * runs the timers due on the way and lets promises settle between them.
 */
import FakeTimers from '@sinonjs/fake-timers';
import type { Clock } from '../../lib/clock.ts';

export interface FakeClock {
  clock: Clock;
  /** Milliseconds since the fake epoch (0 unless given). */
  now(): number;
  /** Move time forward by `ms`, running every timer due on the way. */
  tick(ms: number): Promise<void>;
  /** A promise that resolves `ms` later on this clock. */
  sleep(ms: number): Promise<void>;
}

export function fakeClock(start = 0): FakeClock {
  const fake = FakeTimers.createClock(start);
  return {
    clock: {
      now: () => fake.now,
      setTimeout: (fn, ms) => fake.setTimeout(fn, ms),
      clearTimeout: (handle) => {
        fake.clearTimeout(handle as FakeTimers.TimerId);
      },
    },
    now: () => fake.now,
    tick: async (ms) => {
      await fake.tickAsync(ms);
    },
    sleep: (ms) =>
      new Promise((resolve) => {
        fake.setTimeout(() => {
          resolve();
        }, ms);
      }),
  };
}
