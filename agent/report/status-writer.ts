/**
 * Writing the status file off the sync path. The document lists every programmed Service,
 * so writing it is O(Services): at most one write per interval, in order, and `flush` for
 * stop(). A failed write is logged once, until a write succeeds again.
 */
import type { Logger } from 'pino';
import type { Conditions } from '../../lib/conditions.ts';
import { errorMessage } from '../../lib/errors.ts';
import { writeStatus, type StatusDoc } from './status.ts';

export interface StatusWriterOptions {
  /** Where `status.json` goes; undefined: nowhere (tests, --once without --state-dir). */
  dir: string | undefined;
  intervalMs: number;
  doc: () => StatusDoc;
  log: Logger;
  /** The agent's conditions: a failing status file is one of them. */
  conditions: Conditions;
}

export class StatusWriter {
  private readonly o: StatusWriterOptions;
  private timer: NodeJS.Timeout | undefined;
  private lastAt = -Infinity;
  private writes: Promise<void> = Promise.resolve();

  constructor(o: StatusWriterOptions) {
    this.o = o;
  }

  /** Write soon: at most one write per interval. */
  soon(): void {
    if (!this.o.dir || this.timer) return;
    const wait = Math.max(0, this.lastAt + this.o.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, wait);
  }

  /** Write now (after any write in progress). */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.lastAt = Date.now();
    const dir = this.o.dir;
    if (!dir) return;
    const doc = this.o.doc();
    const { log, conditions } = this.o;
    this.writes = this.writes
      .then(() => writeStatus(dir, doc))
      .then(
        () => void conditions.changed('status-file', 'ok'),
        (err: unknown) => {
          if (!conditions.changed('status-file', 'failing')) return;
          log.warn(
            { err: errorMessage(err), dir },
            'cannot write status file; `flowhint status` will not see this agent',
          );
        },
      );
    await this.writes;
  }
}
