/**
 * The reader the agent uses: Service -> effective hint, or the reason it is unusable.
 *
 * It re-checks with the same validation the webhook runs, and also requires the mirror
 * label: the label is written only by defaulting, so a Service without it was not admitted
 * through flowhint (the agent selects on it, and `flowhint backfill` writes it).
 */
import {
  DEFAULT_THRESHOLD,
  DEFAULT_TIMEOUT_SECONDS,
  HINT_ANNOTATION,
  HINT_LABEL,
  THRESHOLD_ANNOTATION,
  TIMEOUT_ANNOTATION,
  isTrafficHint,
  timeoutSeconds,
  type TrafficHint,
} from './keys.ts';
import { Service, firstIssue, serviceKey } from './service.ts';
import type { ErrorCode } from '../lib/errors.ts';
import { explainErrors, validateService, type ValidationCode } from './validation.ts';

export interface EffectiveHint {
  /** `namespace/name`: for logs, metrics and status; hashed before it reaches nft. */
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  readonly hint: TrafficHint;
  /** The Service's own threshold; `undefined` means the agent's `--offload-after-packets`. */
  readonly offloadAfterPackets: number | undefined;
  /** ShortLived: the Service's own conntrack timeout in seconds; `undefined` means `--short-lived-timeout`. */
  readonly conntrackTimeoutSeconds: number | undefined;
  readonly service: Service;
}

export type UnusableCode = ValidationCode | Extract<ErrorCode, 'FH_NOT_HINTED' | 'FH_NOT_ADMITTED'>;

export type ReadResult =
  | { readonly usable: true; readonly hint: EffectiveHint }
  | { readonly usable: false; readonly key: string; readonly code: UnusableCode; readonly reason: string };

export function readHint(object: unknown): ReadResult {
  const parsed = Service.safeParse(object);
  if (!parsed.success) {
    const { path, message } = firstIssue(parsed.error);
    return {
      usable: false,
      key: '<unreadable>',
      code: 'FH_SERVICE_UNREADABLE',
      reason: `not a readable Service: ${path}: ${message}`,
    };
  }
  const service = parsed.data;
  const key = serviceKey(service.metadata);
  const annotations = service.metadata.annotations ?? {};
  const value = annotations[HINT_ANNOTATION];
  if (value === undefined)
    return { usable: false, key, code: 'FH_NOT_HINTED', reason: `no ${HINT_ANNOTATION} annotation` };
  const { errors } = validateService(service);
  const first = errors[0];
  if (first !== undefined) {
    return { usable: false, key, code: first.code, reason: explainErrors(errors) };
  }
  if (service.metadata.labels?.[HINT_LABEL] === undefined) {
    return {
      usable: false,
      key,
      code: 'FH_NOT_ADMITTED',
      reason: `label ${HINT_LABEL} is missing: the Service was not admitted by flowhint's webhook; run \`flowhint backfill\``,
    };
  }
  if (!isTrafficHint(value))
    return { usable: false, key, code: 'FH_HINT_UNSUPPORTED', reason: `unsupported hint ${value}` };
  const threshold = annotations[THRESHOLD_ANNOTATION];
  const timeout = annotations[TIMEOUT_ANNOTATION];
  return {
    usable: true,
    hint: {
      key,
      namespace: service.metadata.namespace ?? 'default',
      name: service.metadata.name ?? '',
      hint: value,
      offloadAfterPackets: threshold === undefined ? undefined : Number(threshold),
      conntrackTimeoutSeconds: timeout === undefined ? undefined : timeoutSeconds(timeout),
      service,
    },
  };
}

/** The conntrack timeout the agent programs for a ShortLived hint, in seconds. */
export function effectiveTimeout(hint: EffectiveHint, agentDefault: number = DEFAULT_TIMEOUT_SECONDS): number {
  return hint.conntrackTimeoutSeconds ?? agentDefault;
}

/** The threshold the agent programs for a hint. */
export function effectiveThreshold(hint: EffectiveHint, agentDefault: number = DEFAULT_THRESHOLD): number {
  return hint.offloadAfterPackets ?? agentDefault;
}
