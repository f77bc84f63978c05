/**
 * The webhook's fastify transport: HTTPS, body limits, error mapping, metrics and one log
 * line per decision. Decisions themselves are made by review.ts.
 */
import { STATUS_CODES } from 'node:http';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import type { Logger } from 'pino';
import { BadReviewError, mutate, parseReview, validate, type Decision } from './review.ts';
import { createWebhookMetrics, operationLabel, type WebhookMetrics } from './metrics.ts';
import { silentLogger } from '../lib/log.ts';
import type { ErrorCode } from '../lib/errors.ts';

/**
 * 4 MiB. An AdmissionReview for UPDATE carries two Services (object and oldObject); each is
 * bounded by etcd's default request limit of 1.5 MiB, so two fit with about 1 MiB for the
 * envelope. A typical hinted Service review is 3-6 KiB.
 */
export const DEFAULT_BODY_LIMIT = 4 * 1024 * 1024;

export interface TlsMaterial {
  cert: string | Buffer;
  key: string | Buffer;
}

export interface BuildAppOptions {
  /** Serve HTTPS with this material; omit for `inject()` tests. */
  tls?: TlsMaterial;
  logger?: Logger;
  metrics?: WebhookMetrics;
  bodyLimit?: number;
  /** Readiness, e.g. "TLS material is loaded". Defaults to ready. */
  isReady?: () => boolean;
}

interface ErrorBody {
  statusCode: number;
  code: ErrorCode;
  error: string;
  message: string;
}

function errorBody(statusCode: number, code: ErrorCode, message: string): ErrorBody {
  return { statusCode, code, error: STATUS_CODES[statusCode] ?? 'Error', message };
}

/**
 * fastify's own error codes in the catalogue's (after fastify's AVVIO_ERRORS_MAP): clients
 * and metrics see only catalogue codes; the log keeps fastify's code too.
 */
const FASTIFY_ERRORS: Readonly<Record<string, readonly [status: number, code: ErrorCode, message: string]>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [
    413,
    'FH_BODY_TOO_LARGE',
    'request body exceeds the limit; AdmissionReviews of two Services fit well within it',
  ],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [400, 'FH_NOT_JSON', 'content-type must be application/json'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'FH_MALFORMED_JSON', 'request body is not valid JSON'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'FH_MALFORMED_JSON', 'request body is not valid JSON'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'FH_BAD_REQUEST', 'request body size does not match Content-Length'],
  FST_ERR_BAD_URL: [400, 'FH_BAD_REQUEST', 'the URL is not valid; use POST /mutate or POST /validate'],
};

/** Map transport errors onto the webhook's contract: 400 for anything malformed, 413 too large. */
function mapError(err: FastifyError | BadReviewError): ErrorBody {
  if (err instanceof BadReviewError) return errorBody(400, err.code, err.message);
  const known = FASTIFY_ERRORS[err.code];
  if (known) return errorBody(...known);
  const status = err.statusCode ?? 500;
  if (status >= 400 && status < 500) return errorBody(status, 'FH_BAD_REQUEST', err.message);
  return errorBody(500, 'FH_INTERNAL', 'internal error; see the webhook log');
}

export function buildApp(options: BuildAppOptions = {}): FastifyInstance {
  const log = options.logger ?? silentLogger();
  const metrics = options.metrics ?? createWebhookMetrics({ defaultMetrics: false });
  const isReady = options.isReady ?? (() => true);
  const tls = options.tls;
  const sendError = (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    const body = mapError(err);
    metrics.badRequests.inc({ code: body.code });
    const fastifyCode = err.code;
    if (body.statusCode >= 500) req.log.error({ err, url: req.url, fastifyCode }, 'webhook request failed');
    else req.log.warn({ code: body.code, fastifyCode, url: req.url, message: body.message }, 'bad webhook request');
    void reply.code(body.statusCode).send(body);
  };
  const app = Fastify({
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- it picks fastify's logger type parameter, which the returned instance's type needs.
    loggerInstance: log as FastifyBaseLogger,
    // One line per admission decision (below), not fastify's two per request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    // The API server gives a webhook at most 30 s (ours: 5 s); nothing legitimate is slower.
    requestTimeout: 10_000,
    keepAliveTimeout: 30_000,
    return503OnClosing: true,
    // A URL fastify cannot decode goes through the same mapping as every other error.
    frameworkErrors: (err, req, reply) => sendError(err, req, reply),
    ...(tls
      ? {
          https: {
            cert: tls.cert,
            key: tls.key,
            minVersion: 'TLSv1.2' as const,
            // A TCP connection that never finishes its handshake: 5 s, not Node's 120 s.
            handshakeTimeout: 5_000,
            // Slow headers are cut off after 5 s (slowloris). Node enforces these timeouts on
            // its connection sweep, every 30 s by default: sweep every second instead.
            headersTimeout: 5_000,
            connectionsCheckingInterval: 1_000,
          },
        }
      : {}),
  });

  // AdmissionReviews are JSON; fastify's default text/plain parser would accept anything else.
  app.removeContentTypeParser('text/plain');

  app.setErrorHandler((err: FastifyError, req, reply) => sendError(err, req, reply));
  app.setNotFoundHandler((req, reply) => {
    reply
      .code(404)
      .send(errorBody(404, 'FH_NOT_FOUND', `no route ${req.method} ${req.url}; use POST /mutate or POST /validate`));
  });

  app.get('/healthz', async () => ({ ok: true }));
  app.get('/readyz', async (_req, reply) => {
    const ready = isReady();
    reply.code(ready ? 200 : 503);
    return { ok: ready };
  });

  const route = (webhook: 'mutate' | 'validate', decide: (r: ReturnType<typeof parseReview>) => Decision) => {
    app.post(`/${webhook}`, async (req) => {
      const started = process.hrtime.bigint();
      const request = parseReview(req.body);
      const decision = decide(request);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const allowed = String(decision.review.response.allowed);
      metrics.requests.inc({ webhook, operation: operationLabel(decision.operation), allowed });
      metrics.requestDuration.observe({ webhook }, seconds);
      for (const code of decision.codes ?? []) metrics.rejections.inc({ code });
      req.log.info(
        {
          webhook,
          uid: request.uid,
          service: decision.service,
          operation: decision.operation,
          dryRun: request.dryRun ?? false,
          decision: decision.outcome,
          ...(decision.patch ? { patch: decision.patch } : {}),
          ...(decision.note ? { note: decision.note } : {}),
          ...(decision.review.response.warnings ? { warnings: decision.review.response.warnings } : {}),
          durationMs: Math.round(seconds * 1e6) / 1e3,
        },
        'admission decision',
      );
      return decision.review;
    });
  };
  route('mutate', mutate);
  route('validate', validate);
  return app;
}
