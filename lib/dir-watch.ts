/**
 * Watch directories for changes the way Kubernetes volumes change: `fs.watch` on the
 * directory (Secret and ConfigMap volumes swap a `..data` symlink, which a watch on a file
 * misses), plus polling as a fallback, with bursts debounced into one callback.
 */
import { watch, type FSWatcher } from 'node:fs';
import type { Logger } from 'pino';
import { errorMessage } from './errors.ts';

export interface DirWatch {
  stop(): void;
}

export function watchDirs(
  dirs: Iterable<string>,
  onChange: () => void,
  o: { pollMs: number; logger: Logger; what: string; debounceMs?: number },
): DirWatch {
  const watchers: FSWatcher[] = [];
  let debounce: NodeJS.Timeout | undefined;
  const schedule = () => {
    if (debounce) return;
    // Symlink swaps arrive as a burst of events; settle first.
    debounce = setTimeout(() => {
      debounce = undefined;
      onChange();
    }, o.debounceMs ?? 100);
    debounce.unref();
  };
  for (const dir of new Set(dirs)) {
    try {
      const w = watch(dir, schedule);
      w.on('error', (err) =>
        o.logger.warn({ err: errorMessage(err), dir }, `${o.what} watch failed; polling continues`),
      );
      watchers.push(w);
    } catch (err) {
      o.logger.warn({ err: errorMessage(err), dir }, `cannot watch ${o.what}; polling only`);
    }
  }
  const timer = setInterval(schedule, o.pollMs);
  timer.unref();
  return {
    stop() {
      for (const w of watchers) w.close();
      clearInterval(timer);
      if (debounce) clearTimeout(debounce);
    },
  };
}
