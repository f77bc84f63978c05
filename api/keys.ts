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
export const TIMEOUT_ANNOTATION = `${DOMAIN}/conntrack-timeout`;
/** The mirror label: written only by defaulting, so it marks a validated hint. Agents select on it. */
export const HINT_LABEL = `${DOMAIN}/traffic-hint`;

export interface HintSpec {
  /** Whether Services carrying this hint get their connections offloaded to the flowtable. */
  readonly offload: boolean;
  /** Whether `offload-after-packets` is meaningful with this hint. */
  readonly acceptsThreshold: boolean;
  /** Whether the Service's new connections get a short conntrack timeout policy. */
  readonly shortTimeout: boolean;
  readonly description: string;
}

export const HINTS = {
  LongLived: {
    offload: true,
    acceptsThreshold: true,
    shortTimeout: false,
    description: 'long-lived, high-volume connections: offload established flows to the flowtable',
  },
  ShortLived: {
    offload: false,
    acceptsThreshold: false,
    shortTimeout: true,
    description: 'many short exchanges (DNS, request/response): free their conntrack entries early (conntrack-timeout)',
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

/**
 * `conntrack-timeout`: a Kubernetes-style duration, an integer and one unit of s or m (h parses
 * but an hour is never in range, so messages never offer it),
 * from 1 s to 10 m. Canonical: no whitespace, lower-case unit, no leading zeros; the unit is
 * kept as written (`"120s"` stays `"120s"`).
 */
export const TIMEOUT_MIN_SECONDS = 1;
export const TIMEOUT_MAX_SECONDS = 600;
export const DEFAULT_TIMEOUT_SECONDS = 5;
export const TIMEOUT_PATTERN = /^[1-9][0-9]{0,5}[smh]$/;
const UNIT_SECONDS = { s: 1, m: 60, h: 3600 } as const;

/** `" 05S "` -> `"5s"`. Anything that is not digits and a unit once trimmed is returned trimmed. */
export function canonicalTimeout(value: string): string {
  const m = /^0*([0-9]+)\s*([smhSMH])$/.exec(value.trim());
  if (!m) return value.trim();
  return `${m[1] ?? ''}${(m[2] ?? '').toLowerCase()}`;
}

/** Seconds of a canonical, in-range duration; `undefined` for anything else. */
export function timeoutSeconds(value: string): number | undefined {
  if (!TIMEOUT_PATTERN.test(value)) return undefined;
  const seconds = Number(value.slice(0, -1)) * UNIT_SECONDS[value.slice(-1) as keyof typeof UNIT_SECONDS];
  return seconds >= TIMEOUT_MIN_SECONDS && seconds <= TIMEOUT_MAX_SECONDS ? seconds : undefined;
}

/** Field paths in the form Kubernetes uses for map keys in `details.causes[].field`. */
export const FIELD = {
  hint: `metadata.annotations[${HINT_ANNOTATION}]`,
  threshold: `metadata.annotations[${THRESHOLD_ANNOTATION}]`,
  timeout: `metadata.annotations[${TIMEOUT_ANNOTATION}]`,
  label: `metadata.labels[${HINT_LABEL}]`,
  type: 'spec.type',
  clusterIP: 'spec.clusterIP',
  ports: 'spec.ports',
} as const;
