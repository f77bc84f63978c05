/**
 * The hint API's vocabulary: keys, values and limits. One truth for the webhook,
 * the agent, the ValidatingAdmissionPolicy and the docs.
 *
 * The value set is an extensible enum: adding a hint (say `ShortLived`) is one entry in
 * HINTS. Everything else (defaulting, validation, messages, the agent's reader) is derived
 * from this table.
 */

export const DOMAIN = 'flowhint.dev';
export const HINT_ANNOTATION = `${DOMAIN}/traffic-hint`;
export const THRESHOLD_ANNOTATION = `${DOMAIN}/offload-after-packets`;
/** The mirror label: written only by defaulting, so it marks a validated hint. Agents select on it. */
export const HINT_LABEL = `${DOMAIN}/traffic-hint`;

export interface HintSpec {
  /** Whether Services carrying this hint get their connections offloaded to the flowtable. */
  readonly offload: boolean;
  /** Whether `offload-after-packets` is meaningful with this hint. */
  readonly acceptsThreshold: boolean;
  readonly description: string;
}

export const HINTS = {
  LongLived: {
    offload: true,
    acceptsThreshold: true,
    description: 'long-lived, high-volume connections: offload established flows to the flowtable',
  },
} as const satisfies Record<string, HintSpec>;

export type TrafficHint = keyof typeof HINTS;
export const HINT_VALUES = Object.keys(HINTS) as readonly TrafficHint[];

export function isTrafficHint(value: string): value is TrafficHint {
  return Object.hasOwn(HINTS, value);
}

/** Case- and whitespace-insensitive lookup used by defaulting: `" longlived "` -> `LongLived`. */
export function canonicalHint(value: string): TrafficHint | undefined {
  const wanted = value.trim().toLowerCase();
  return HINT_VALUES.find((v) => v.toLowerCase() === wanted);
}

/** Threshold bounds, inclusive. Absent means the agent's default. */
export const THRESHOLD_MIN = 0;
export const THRESHOLD_MAX = 1_000_000;
export const DEFAULT_THRESHOLD = 20;
/** The canonical decimal form: no sign, no leading zeros, no whitespace. */
export const THRESHOLD_PATTERN = /^(0|[1-9][0-9]{0,6})$/;

/** Field paths in the form Kubernetes uses for map keys in `details.causes[].field`. */
export const FIELD = {
  hint: `metadata.annotations[${HINT_ANNOTATION}]`,
  threshold: `metadata.annotations[${THRESHOLD_ANNOTATION}]`,
  label: `metadata.labels[${HINT_LABEL}]`,
  type: 'spec.type',
  clusterIP: 'spec.clusterIP',
  ports: 'spec.ports',
} as const;
