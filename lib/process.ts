/** What a long-running command needs of its process: the stop signals, and a deadline. */
import type { FlowhintError } from './errors.ts';

/** The first SIGTERM or SIGINT, by name; `off` removes the handlers. */
export function stopSignals(): { signal: Promise<string>; off: () => void } {
  let off = () => {};
  const signal = new Promise<string>((resolve) => {
    const term = () => resolve('SIGTERM');
    const int = () => resolve('SIGINT');
    process.once('SIGTERM', term);
    process.once('SIGINT', int);
    off = () => {
      process.off('SIGTERM', term);
      process.off('SIGINT', int);
    };
  });
  return { signal, off };
}

/** Rejects with `error()` after `seconds`, unless cancelled. */
export function deadline(seconds: number, error: () => FlowhintError): { expired: Promise<never>; cancel: () => void } {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(error());
    }, seconds * 1000);
  });
  return { expired, cancel: () => clearTimeout(timer) };
}
