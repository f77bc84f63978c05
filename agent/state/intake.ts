/**
 * A batch of source events as desired-state updates (pure): every upserted object is
 * re-checked with the api/ reader; a usable hint becomes a Service entry, an unhinted or
 * deleted one an `undefined` (not programmed), and an unusable one a refusal, which is also
 * not programmed.
 */
import { readHint } from '../../api/index.ts';
import { serviceEntry, type ServiceEntry } from './desired.ts';
import type { Refusal } from './refusals.ts';

/** A source's event (sources/source.ts has the same shape). */
export type IntakeEvent =
  | { readonly type: 'upsert'; readonly key: string; readonly object: unknown }
  | { readonly type: 'delete'; readonly key: string };

export interface IntakeDefaults {
  /** LongLived Services without their own threshold. */
  readonly threshold: number;
  /** ShortLived Services without their own timeout, in seconds. */
  readonly timeout?: number | undefined;
}

export interface Intake {
  /** Per Service key: its entry, or `undefined` for nothing to program. */
  readonly updates: Map<string, ServiceEntry | undefined>;
  /** Services refused by this batch. */
  readonly refused: Map<string, Refusal>;
  /** Services whose earlier refusal no longer holds (usable, unhinted or deleted). */
  readonly cleared: Set<string>;
}

export function intake(events: readonly IntakeEvent[], defaults: IntakeDefaults): Intake {
  const out: Intake = { updates: new Map(), refused: new Map(), cleared: new Set() };
  for (const ev of events) {
    out.refused.delete(ev.key);
    out.cleared.delete(ev.key);
    const r = ev.type === 'delete' ? undefined : readHint(ev.object);
    if (r?.usable) {
      out.updates.set(ev.key, serviceEntry(r.hint, defaults.threshold, defaults.timeout));
      out.cleared.add(ev.key);
    } else {
      out.updates.set(ev.key, undefined);
      if (r && r.code !== 'FH_NOT_HINTED') out.refused.set(ev.key, { code: r.code, reason: r.reason });
      else out.cleared.add(ev.key);
    }
  }
  return out;
}
