/**
 * The time a timing rule reads and the timers it sets, as one interface (kube-proxy's
 * BoundedFrequencyRunner takes a timer "for testing" the same way). Production code gets
 * `realClock`; tests pass a fake (`@sinonjs/fake-timers`' `createClock`, adapted by
 * `test/helpers/fake-clock.ts`) and step it exactly.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => {
    clearTimeout(handle as NodeJS.Timeout);
  },
};
