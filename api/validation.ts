/**
 * Validation: which hinted Services may be stored.
 *
 * Only canonical values are accepted (defaulting writes them). Each error carries the field
 * path in the form Kubernetes uses for `details.causes[].field`, a stable code, and a message
 * that names the key, the value given and what is allowed.
 *
 * With the old object (UPDATE), validation ratchets as Kubernetes' own validation does: an
 * error that the stored object already had, on flowhint fields the update leaves unchanged,
 * becomes a warning. Installing flowhint into a cluster whose Services already carry a bad
 * hint then does not block their unrelated updates; the agent still never programs them.
 */
import {
  FIELD,
  HINTS,
  HINT_ANNOTATION,
  HINT_LABEL,
  HINT_VALUES,
  THRESHOLD_ANNOTATION,
  THRESHOLD_MAX,
  THRESHOLD_MIN,
  THRESHOLD_PATTERN,
  TIMEOUT_ANNOTATION,
  TIMEOUT_MAX_SECONDS,
  TIMEOUT_MIN_SECONDS,
  canonicalHint,
  isTrafficHint,
  timeoutSeconds,
} from './keys.ts';
import type { ErrorCode } from '../lib/errors.ts';
import { Service, firstIssue, isOffloadable, portProtocol, quoteValue, type StringMap } from './service.ts';

/** Kubernetes' `metav1.CauseType` values that flowhint uses. */
export type CauseType = 'FieldValueNotSupported' | 'FieldValueInvalid' | 'FieldValueForbidden';

/** The catalogue's codes for hint validation (lib/errors.ts says what each means). */
export type ValidationCode = Extract<
  ErrorCode,
  | 'FH_SERVICE_UNREADABLE'
  | 'FH_HINT_UNSUPPORTED'
  | 'FH_THRESHOLD_INVALID'
  | 'FH_THRESHOLD_WITHOUT_HINT'
  | 'FH_TIMEOUT_INVALID'
  | 'FH_TIMEOUT_WITHOUT_SHORTLIVED'
  | 'FH_NO_VIRTUAL_IP'
  | 'FH_LABEL_WITHOUT_HINT'
  | 'FH_LABEL_MISMATCH'
>;

export interface FieldError {
  readonly field: string;
  readonly type: CauseType;
  readonly code: ValidationCode;
  readonly message: string;
}

export interface ValidationResult {
  readonly errors: FieldError[];
  readonly warnings: string[];
}

const ALLOWED = HINT_VALUES.map((v) => `"${v}"`).join(', ');

function owned(annotations: StringMap | null | undefined, labels: StringMap | null | undefined) {
  return {
    hint: annotations?.[HINT_ANNOTATION],
    threshold: annotations?.[THRESHOLD_ANNOTATION],
    timeout: annotations?.[TIMEOUT_ANNOTATION],
    label: labels?.[HINT_LABEL],
  };
}

function timeoutErrors(hint: string | undefined, timeout: string | undefined): FieldError[] {
  if (timeout === undefined) return [];
  const errors: FieldError[] = [];
  if (hint === undefined || (isTrafficHint(hint) && !HINTS[hint].shortTimeout)) {
    errors.push({
      field: FIELD.timeout,
      type: 'FieldValueForbidden',
      code: 'FH_TIMEOUT_WITHOUT_SHORTLIVED',
      message: `${TIMEOUT_ANNOTATION} is only meaningful with ${HINT_ANNOTATION}: ShortLived; ${hint === undefined ? 'add the hint or remove the timeout' : `it does nothing for ${quoteValue(hint, 30)}: remove the timeout`}`,
    });
  }
  if (timeoutSeconds(timeout) === undefined) {
    errors.push({
      field: FIELD.timeout,
      type: 'FieldValueInvalid',
      code: 'FH_TIMEOUT_INVALID',
      message: `${TIMEOUT_ANNOTATION}: invalid value ${quoteValue(timeout)}; must be a whole number of seconds or minutes ("5s", "2m") from ${TIMEOUT_MIN_SECONDS}s to ${TIMEOUT_MAX_SECONDS / 60}m`,
    });
  }
  return errors;
}

function hintErrors(hint: string | undefined, threshold: string | undefined, label: string | undefined): FieldError[] {
  const errors: FieldError[] = [];
  if (hint !== undefined && !isTrafficHint(hint)) {
    const canonical = canonicalHint(hint);
    errors.push({
      field: FIELD.hint,
      type: 'FieldValueNotSupported',
      code: 'FH_HINT_UNSUPPORTED',
      message:
        `${HINT_ANNOTATION}: unsupported value ${quoteValue(hint)}; supported values: ${ALLOWED}` +
        (canonical ? ` (write "${canonical}": validation accepts only the canonical form)` : ''),
    });
  }
  if (threshold !== undefined) {
    if (hint === undefined) {
      errors.push({
        field: FIELD.threshold,
        type: 'FieldValueForbidden',
        code: 'FH_THRESHOLD_WITHOUT_HINT',
        message: `${THRESHOLD_ANNOTATION} is only meaningful with ${HINT_ANNOTATION}: LongLived; add the hint or remove the threshold`,
      });
    } else if (isTrafficHint(hint) && !HINTS[hint].acceptsThreshold) {
      errors.push({
        field: FIELD.threshold,
        type: 'FieldValueForbidden',
        code: 'FH_THRESHOLD_WITHOUT_HINT',
        message: `${THRESHOLD_ANNOTATION} is not meaningful with ${HINT_ANNOTATION}: ${hint}; remove the threshold`,
      });
    }
    if (!THRESHOLD_PATTERN.test(threshold) || Number(threshold) > THRESHOLD_MAX) {
      errors.push({
        field: FIELD.threshold,
        type: 'FieldValueInvalid',
        code: 'FH_THRESHOLD_INVALID',
        message: `${THRESHOLD_ANNOTATION}: invalid value ${quoteValue(threshold)}; must be a decimal integer from ${THRESHOLD_MIN} to ${THRESHOLD_MAX}, e.g. "1000"`,
      });
    }
  }
  if (label !== undefined) {
    if (hint === undefined) {
      errors.push({
        field: FIELD.label,
        type: 'FieldValueForbidden',
        code: 'FH_LABEL_WITHOUT_HINT',
        message: `label ${HINT_LABEL} is written by flowhint from the ${HINT_ANNOTATION} annotation; set the annotation instead of the label`,
      });
    } else if (label !== hint) {
      errors.push({
        field: FIELD.label,
        type: 'FieldValueInvalid',
        code: 'FH_LABEL_MISMATCH',
        message: `label ${HINT_LABEL} ${quoteValue(label)} must equal the ${HINT_ANNOTATION} annotation ${quoteValue(hint)}; remove the label, flowhint writes it`,
      });
    }
  }
  return errors;
}

function applicability(service: Service): { errors: FieldError[]; warnings: string[] } {
  const errors: FieldError[] = [];
  const warnings: string[] = [];
  const spec = service.spec ?? {};
  if (spec.type === 'ExternalName') {
    errors.push({
      field: FIELD.type,
      type: 'FieldValueForbidden',
      code: 'FH_NO_VIRTUAL_IP',
      message: `${HINT_ANNOTATION} cannot apply to type ExternalName: there is no virtual IP to accelerate; remove the hint`,
    });
  } else if (spec.clusterIP === 'None') {
    errors.push({
      field: FIELD.clusterIP,
      type: 'FieldValueForbidden',
      code: 'FH_NO_VIRTUAL_IP',
      message: `${HINT_ANNOTATION} cannot apply to a headless Service (clusterIP: None): there is no virtual IP to accelerate; remove the hint`,
    });
  }
  const ports = spec.ports ?? [];
  const sctp = ports.filter((p) => portProtocol(p) === 'SCTP').map((p) => p.port);
  if (sctp.length > 0) {
    warnings.push(
      `flowhint: SCTP port(s) ${sctp.slice(0, 5).join(',')} are not offloaded; flowtables handle only TCP and UDP`,
    );
  }
  if (errors.length === 0 && !ports.some((p) => isOffloadable(portProtocol(p)))) {
    warnings.push('flowhint: the Service has no TCP or UDP port, so nothing of it will be offloaded');
  }
  return { errors, warnings };
}

function validateOne(object: unknown): ValidationResult {
  const parsed = Service.safeParse(object);
  if (!parsed.success) {
    const { path, message } = firstIssue(parsed.error);
    return {
      errors: [
        {
          field: path,
          type: 'FieldValueInvalid',
          code: 'FH_SERVICE_UNREADABLE',
          message: `cannot read the Service at ${path}: ${message}`,
        },
      ],
      warnings: [],
    };
  }
  const meta = parsed.data.metadata;
  const { hint, threshold, timeout, label } = owned(meta.annotations, meta.labels);
  if (hint === undefined && threshold === undefined && timeout === undefined && label === undefined)
    return { errors: [], warnings: [] };
  const errors = [...hintErrors(hint, threshold, label), ...timeoutErrors(hint, timeout)];
  const warnings: string[] = [];
  if (hint !== undefined) {
    const more = applicability(parsed.data);
    errors.push(...more.errors);
    warnings.push(...more.warnings);
  }
  return { errors, warnings };
}

function ownedOf(object: unknown) {
  const parsed = Service.safeParse(object);
  return parsed.success ? owned(parsed.data.metadata.annotations, parsed.data.metadata.labels) : undefined;
}

/** Field errors as one sentence: `field: message; field: message`. */
export function explainErrors(errors: readonly FieldError[]): string {
  return errors.map((e) => `${e.field}: ${e.message}`).join('; ');
}

/** Validate a Service, optionally against the stored object it replaces (UPDATE). */
export function validateService(object: unknown, oldObject?: unknown): ValidationResult {
  const result = validateOne(object);
  if (oldObject === undefined || oldObject === null || result.errors.length === 0) return result;
  const now = ownedOf(object);
  const before = ownedOf(oldObject);
  const unchanged =
    now !== undefined &&
    before !== undefined &&
    now.hint === before.hint &&
    now.threshold === before.threshold &&
    now.timeout === before.timeout &&
    now.label === before.label;
  if (!unchanged) return result;
  const oldCodes = new Set(validateOne(oldObject).errors.map((e) => `${e.field}|${e.code}`));
  const errors: FieldError[] = [];
  const warnings = [...result.warnings];
  for (const e of result.errors) {
    if (oldCodes.has(`${e.field}|${e.code}`))
      warnings.push(`flowhint: existing invalid hint kept and not offloaded (${e.code}); fix it`);
    else errors.push(e);
  }
  return { errors, warnings };
}
