/**
 * Defaulting: write a hinted Service's canonical form.
 *
 * - `flowhint.dev/traffic-hint`: any case and surrounding whitespace -> the canonical value.
 * - `flowhint.dev/offload-after-packets`: whitespace trimmed, leading zeros dropped.
 * - `flowhint.dev/conntrack-timeout`: whitespace dropped, unit lower-cased, leading zeros
 *   dropped (`" 05S "` -> `"5s"`); the unit is never rewritten (`"120s"` stays).
 * - The mirror label `flowhint.dev/traffic-hint` is set to the canonical hint, and removed
 *   when the annotation is gone. Values defaulting cannot make canonical are left for
 *   validation to reject with a message.
 *
 * Mutating admission runs before the API server validates the object, so the input may be
 * anything. Only the two maps flowhint owns are read; nothing else is touched.
 */
import fjp from 'fast-json-patch';
import type { Operation } from 'fast-json-patch';
import {
  HINT_ANNOTATION,
  HINT_LABEL,
  THRESHOLD_ANNOTATION,
  TIMEOUT_ANNOTATION,
  canonicalHint,
  canonicalTimeout,
} from './keys.ts';
import { HintMetadata, firstIssue, quoteValue, type StringMap } from './service.ts';

export type DefaultingResult =
  | {
      readonly kind: 'defaulted';
      /** The defaulted object: a new object; the input is not modified. */
      readonly object: Record<string, unknown>;
      /** JSON Patch (RFC 6902) from the input to `object`; empty when nothing changes. */
      readonly patch: Operation[];
      readonly warnings: string[];
    }
  | {
      /** The maps flowhint owns are not string maps: nothing can be defaulted. */
      readonly kind: 'skipped';
      readonly reason: string;
    };

/** `" 0042 "` -> `"42"`. Anything that is not digits once trimmed is returned trimmed. */
export function canonicalThreshold(value: string): string {
  const trimmed = value.trim();
  return /^[0-9]+$/.test(trimmed) ? trimmed.replace(/^0+(?=[0-9])/, '') : trimmed;
}

interface OwnedMaps {
  annotations?: StringMap | null;
  labels?: StringMap | null;
}

function defaultMaps(annotations: StringMap | undefined, labels: StringMap | undefined, warnings: string[]): OwnedMaps {
  const out: OwnedMaps = {};
  let nextAnnotations = annotations;
  const hint = annotations?.[HINT_ANNOTATION];
  const canonical = hint === undefined ? undefined : canonicalHint(hint);
  if (hint !== undefined && canonical !== undefined && canonical !== hint) {
    nextAnnotations = { ...nextAnnotations, [HINT_ANNOTATION]: canonical };
    warnings.push(`${HINT_ANNOTATION}: ${quoteValue(hint, 30)} defaulted to "${canonical}"`);
  }
  const threshold = annotations?.[THRESHOLD_ANNOTATION];
  if (threshold !== undefined) {
    const t = canonicalThreshold(threshold);
    if (t !== threshold) nextAnnotations = { ...nextAnnotations, [THRESHOLD_ANNOTATION]: t };
  }
  const timeout = annotations?.[TIMEOUT_ANNOTATION];
  if (timeout !== undefined) {
    const t = canonicalTimeout(timeout);
    if (t !== timeout) nextAnnotations = { ...nextAnnotations, [TIMEOUT_ANNOTATION]: t };
  }
  if (nextAnnotations !== annotations) out.annotations = nextAnnotations;

  const label = labels?.[HINT_LABEL];
  if (hint === undefined && label !== undefined) {
    const { [HINT_LABEL]: _removed, ...rest } = labels ?? {};
    out.labels = rest;
  } else if (canonical !== undefined && label !== canonical) {
    out.labels = { ...labels, [HINT_LABEL]: canonical };
  }
  return out;
}

/** Only the keys present, so that fast-json-patch emits `add` for a missing map. */
function pick(meta: OwnedMaps): OwnedMaps {
  const out: OwnedMaps = {};
  if (meta.annotations !== undefined) out.annotations = meta.annotations;
  if (meta.labels !== undefined) out.labels = meta.labels;
  return out;
}

export function applyDefaults(input: unknown): DefaultingResult {
  const parsed = HintMetadata.safeParse(input);
  if (!parsed.success) {
    const { path, message } = firstIssue(parsed.error);
    return { kind: 'skipped', reason: `metadata is not defaultable at ${path}: ${message}` };
  }
  const raw = input as Record<string, unknown> & { metadata: Record<string, unknown> };
  const meta = parsed.data.metadata;
  const warnings: string[] = [];
  const changes = defaultMaps(meta.annotations ?? undefined, meta.labels ?? undefined, warnings);
  if (changes.annotations === undefined && changes.labels === undefined) {
    return { kind: 'defaulted', object: raw, patch: [], warnings };
  }
  const before = pick({ annotations: meta.annotations, labels: meta.labels });
  const after = { ...before, ...changes };
  const patch = fjp.compare(before, after).map((op) => ({ ...op, path: `/metadata${op.path}` }));
  const object = { ...raw, metadata: { ...raw.metadata, ...changes } };
  return { kind: 'defaulted', object, patch, warnings };
}
