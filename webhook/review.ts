/**
 * AdmissionReview in, AdmissionReview out: the webhook's pure core. No I/O; the fastify
 * transport in app.ts only moves bytes and records what this decides.
 *
 * - `/mutate` runs api/ defaulting and answers a JSON Patch only when something changes.
 * - `/validate` runs api/ validation and never patches.
 * - DELETE/CONNECT, subresources and objects that are not core/v1 Services are allowed
 *   unpatched. `dryRun` needs no special case: neither path has side effects.
 */
import { z } from 'zod';
import type { Operation } from 'fast-json-patch';
import {
  applyDefaults,
  explainErrors,
  firstIssue,
  serviceKey,
  validateService,
  type FieldError,
} from '../api/index.ts';
import { FlowhintError } from '../lib/errors.ts';

export const ADMISSION_API_VERSION = 'admission.k8s.io/v1';
/** Kubernetes truncates longer warnings; keep ours within its recommendation. */
export const MAX_WARNING_LENGTH = 120;

const GroupVersionKind = z.looseObject({ group: z.string(), version: z.string(), kind: z.string() });

export const AdmissionRequest = z.looseObject({
  uid: z.string().min(1),
  kind: GroupVersionKind.nullish(),
  subResource: z.string().nullish(),
  name: z.string().nullish(),
  namespace: z.string().nullish(),
  operation: z.string().nullish(),
  object: z.unknown(),
  oldObject: z.unknown(),
  dryRun: z.boolean().nullish(),
});
export type AdmissionRequest = z.infer<typeof AdmissionRequest>;

export const AdmissionReview = z.looseObject({
  apiVersion: z.literal(ADMISSION_API_VERSION),
  kind: z.literal('AdmissionReview'),
  request: AdmissionRequest,
});

export interface Status {
  metadata: Record<string, never>;
  status: 'Failure';
  code: 422;
  reason: 'Invalid';
  message: string;
  details: { name?: string; kind: 'services'; causes: Array<{ reason: string; message: string; field: string }> };
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: Status;
  patchType?: 'JSONPatch';
  patch?: string;
  warnings?: string[];
}

export interface ReviewOut {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: 'AdmissionReview';
  response: AdmissionResponse;
}

export type Outcome = 'patched' | 'allowed' | 'warned' | 'rejected' | 'skipped';

export interface Decision {
  readonly review: ReviewOut;
  readonly outcome: Outcome;
  /** For the decision log line: never the object itself. */
  readonly service: string;
  readonly operation: string;
  readonly patch?: Operation[];
  readonly note?: string;
  /** Rejections: the stable codes of the errors (a bounded set, safe as metric labels). */
  readonly codes?: readonly string[];
}

export class BadReviewError extends FlowhintError {
  readonly statusCode = 400;
  constructor(message: string) {
    super('FH_BAD_REVIEW', message);
  }
}

/** Parse a request body into a request, or throw a BadReviewError saying what to fix. */
export function parseReview(body: unknown): AdmissionRequest {
  const parsed = AdmissionReview.safeParse(body);
  if (parsed.success) return parsed.data.request;
  const { path, message } = firstIssue(parsed.error);
  throw new BadReviewError(
    `expected an ${ADMISSION_API_VERSION} AdmissionReview with request.uid: ${path === '<root>' ? 'body' : path}: ${message}; set admissionReviewVersions: [v1] in the webhook configuration`,
  );
}

/** Printable and at most MAX_WARNING_LENGTH characters, as Kubernetes asks of warnings. */
export function sanitizeWarning(w: string): string {
  // eslint-disable-next-line no-control-regex -- matching control characters is the point: they are replaced.
  const printable = w.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ');
  return printable.length <= MAX_WARNING_LENGTH ? printable : `${printable.slice(0, MAX_WARNING_LENGTH - 1)}…`;
}

function isServiceWrite(req: AdmissionRequest): boolean {
  const k = req.kind;
  const isService = k?.group === '' && k.version === 'v1' && k.kind === 'Service';
  const write = req.operation === 'CREATE' || req.operation === 'UPDATE';
  return isService && write && !req.subResource;
}

function describe(req: AdmissionRequest): string {
  const meta = (req.object as { metadata?: { name?: unknown; generateName?: unknown } } | null)?.metadata;
  const name = req.name || (typeof meta?.name === 'string' ? meta.name : null);
  const generateName = typeof meta?.generateName === 'string' ? meta.generateName : null;
  return serviceKey({ namespace: req.namespace ?? null, name, generateName });
}

function envelope(response: AdmissionResponse): ReviewOut {
  return { apiVersion: ADMISSION_API_VERSION, kind: 'AdmissionReview', response };
}

function withWarnings(response: AdmissionResponse, warnings: string[]): AdmissionResponse {
  return warnings.length === 0 ? response : { ...response, warnings: warnings.map(sanitizeWarning) };
}

export function mutate(req: AdmissionRequest): Decision {
  const service = describe(req);
  const operation = req.operation ?? '';
  if (!isServiceWrite(req))
    return { review: envelope({ uid: req.uid, allowed: true }), outcome: 'skipped', service, operation };
  const result = applyDefaults(req.object);
  if (result.kind === 'skipped') {
    // Not ours to reject: the API server's own validation will refuse a malformed object.
    return {
      review: envelope({ uid: req.uid, allowed: true }),
      outcome: 'skipped',
      service,
      operation,
      note: result.reason,
    };
  }
  if (result.patch.length === 0) {
    return {
      review: envelope(withWarnings({ uid: req.uid, allowed: true }, result.warnings)),
      outcome: 'allowed',
      service,
      operation,
    };
  }
  const patch = Buffer.from(JSON.stringify(result.patch)).toString('base64');
  const response = withWarnings({ uid: req.uid, allowed: true, patchType: 'JSONPatch', patch }, result.warnings);
  return { review: envelope(response), outcome: 'patched', service, operation, patch: result.patch };
}

function denial(service: string, name: string | undefined, errors: FieldError[]): Status {
  const causes = errors.map((e) => ({ reason: e.type, message: e.message, field: e.field }));
  const message = `Service ${service} is invalid: ${explainErrors(errors)}`;
  return {
    metadata: {},
    status: 'Failure',
    code: 422,
    reason: 'Invalid',
    message,
    details: { ...(name ? { name } : {}), kind: 'services', causes },
  };
}

export function validate(req: AdmissionRequest): Decision {
  const service = describe(req);
  const operation = req.operation ?? '';
  if (!isServiceWrite(req))
    return { review: envelope({ uid: req.uid, allowed: true }), outcome: 'skipped', service, operation };
  const old = req.operation === 'UPDATE' ? req.oldObject : undefined;
  const { errors, warnings } = validateService(req.object, old);
  if (errors.length > 0) {
    const status = denial(service, req.name ?? undefined, errors);
    return {
      review: envelope(withWarnings({ uid: req.uid, allowed: false, status }, warnings)),
      outcome: 'rejected',
      service,
      operation,
      note: errors.map((e) => e.code).join(','),
      codes: [...new Set(errors.map((e) => e.code))],
    };
  }
  const outcome: Outcome = warnings.length > 0 ? 'warned' : 'allowed';
  return { review: envelope(withWarnings({ uid: req.uid, allowed: true }, warnings)), outcome, service, operation };
}
