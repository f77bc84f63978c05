/**
 * Waiting where real time must pass (child processes, sockets, the file system, a loop on
 * real timers): poll `check` until it returns something truthy, and return that; or throw,
 * naming what was awaited, after `timeoutMs`. Polls often at first (1 ms, doubling to 25 ms)
 * so a fast answer costs little, and the timeout is generous so that a busy machine is slow,
 * not red. Timing rules themselves are tested on a fake clock (test/helpers/fake-clock.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';

export interface EventuallyOptions {
  /** Give up after this long; default 10 s. */
  timeoutMs?: number;
}

export async function eventually<T>(
  what: string,
  check: () => T | Promise<T>,
  o: EventuallyOptions = {},
): Promise<NonNullable<T>> {
  const timeoutMs = o.timeoutMs ?? 10_000;
  const started = Date.now();
  let pause = 1;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() - started >= timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await sleep(pause);
    pause = Math.min(pause * 2, 25);
  }
}
