/**
 * What a finished sync tells an operator: its duration, what is programmed now, failures by
 * kind, and one log line (`synced`, or the error with nft's own message).
 */
import type { Logger } from 'pino';
import type { Applied } from '../nft/programmer.ts';
import type { AgentMetrics } from './metrics.ts';
import type { SyncResult } from './status.ts';

export interface SyncContext {
  /** Services in the desired state the sync aimed at. */
  readonly services: number;
  /** What is programmed now. */
  readonly applied: Applied | undefined;
  /** Failures in a row, this one included (0 after a success). */
  readonly failures: number;
  /** The Services a partial sync changed (the log names at most ten). */
  readonly changed?: readonly string[] | undefined;
  /** nft's standard error, when nft refused the transaction. */
  readonly stderr?: string | undefined;
}

export function reportSync(metrics: AgentMetrics, log: Logger, r: SyncResult, c: SyncContext): void {
  const { kind } = r;
  metrics.syncDuration.observe({ kind }, r.durationMs / 1000);
  metrics.programmedElements.set(c.applied?.state.chainOf.size ?? 0);
  metrics.devices.set(c.applied?.options.devices.length ?? 0);
  const durationMs = Math.round(r.durationMs * 10) / 10;
  if (r.ok) {
    metrics.lastSyncSuccess.set(Date.parse(r.at) / 1000);
    const changed =
      c.changed && c.changed.length > 0 ? { changed: c.changed.slice(0, 10), changedCount: c.changed.length } : {};
    log.info({ kind, durationMs, services: c.services, drift: r.drift, ...changed }, 'synced');
    return;
  }
  metrics.syncFailures.inc({ kind });
  // A device update that fails most likely met a device that vanished again.
  if (kind === 'devices') metrics.devicesMissing.inc();
  const detail = { kind, err: r.error, stderr: c.stderr?.slice(0, 2000), failures: c.failures };
  log.error(detail, 'sync failed; previous ruleset kept; retrying as a full sync');
}
