/**
 * Admission without an API server (pure): default, then validate, then explain, exactly as
 * the webhook's /mutate and /validate would. For clients that see Services the webhook never
 * admitted: the agent's file source, `flowhint backfill`, the demo.
 */
import type { Operation } from 'fast-json-patch';
import { applyDefaults } from './defaulting.ts';
import { explainErrors, validateService, type ValidationCode } from './validation.ts';

export type Admission =
  | { readonly ok: true; readonly object: unknown; readonly patch: Operation[]; readonly warnings: string[] }
  | { readonly ok: false; readonly code: ValidationCode; readonly reason: string };

export function admit(input: unknown): Admission {
  const d = applyDefaults(input);
  if (d.kind === 'skipped') return { ok: false, code: 'FH_SERVICE_UNREADABLE', reason: d.reason };
  const { errors, warnings } = validateService(d.object);
  const first = errors[0];
  if (first) return { ok: false, code: first.code, reason: explainErrors(errors) };
  return { ok: true, object: d.object, patch: d.patch, warnings: [...d.warnings, ...warnings] };
}
