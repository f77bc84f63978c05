/** The webhook's Prometheus metrics, all prefixed `flowhint_webhook_`. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { registerBuildInfo } from '../lib/version.ts';

export interface WebhookMetrics {
  registry: Registry;
  requests: Counter<'webhook' | 'operation' | 'allowed'>;
  requestDuration: Histogram<'webhook'>;
  certReloads: Counter<'result'>;
  certificateExpiry: Gauge;
  badRequests: Counter<'code'>;
  rejections: Counter<'code'>;
}

const OPERATIONS = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);

/**
 * The `operation` label. The request's operation is the sender's string: used as a label
 * as-is, every distinct value would add a time series for good (memory that grows with
 * hostile requests, and a scrape that grows with it). So anything but the four
 * Kubernetes operations is `other`.
 */
export function operationLabel(operation: string): string {
  return OPERATIONS.has(operation) ? operation : operation === '' ? 'unknown' : 'other';
}

export function createWebhookMetrics(options: { defaultMetrics?: boolean } = {}): WebhookMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  registerBuildInfo(registry);
  const m: WebhookMetrics = {
    registry,
    requests: new Counter({
      name: 'flowhint_webhook_requests_total',
      help: 'Admission requests answered, by webhook (mutate/validate), operation and whether allowed.',
      labelNames: ['webhook', 'operation', 'allowed'],
      registers: [registry],
    }),
    requestDuration: new Histogram({
      name: 'flowhint_webhook_request_duration_seconds',
      help: "Time from an AdmissionReview received to its answer sent, by webhook; the buckets reach the API server's 30 s webhook timeout.",
      labelNames: ['webhook'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    certReloads: new Counter({
      name: 'flowhint_webhook_cert_reloads_total',
      help: 'Serving certificate reloads, by result (ok: swapped in; error: kept the previous one).',
      labelNames: ['result'],
      registers: [registry],
    }),
    certificateExpiry: new Gauge({
      name: 'flowhint_webhook_certificate_expiry_timestamp_seconds',
      help: 'When the certificate being served expires (its notAfter, Unix time); set at start and at each reload. Alert on it minus time().',
      registers: [registry],
    }),
    badRequests: new Counter({
      name: 'flowhint_webhook_bad_requests_total',
      help: 'Requests answered with a 4xx error instead of an AdmissionReview, by error code.',
      labelNames: ['code'],
      registers: [registry],
    }),
    rejections: new Counter({
      name: 'flowhint_webhook_rejections_total',
      help: 'Hints rejected by /validate, by stable error code (a Service with two errors counts under both).',
      labelNames: ['code'],
      registers: [registry],
    }),
  };
  // Series exist before their first event, so rate() and absent() work from the first scrape.
  for (const webhook of ['mutate', 'validate']) {
    m.requestDuration.zero({ webhook });
    for (const operation of ['CREATE', 'UPDATE'])
      for (const allowed of ['true', 'false']) m.requests.inc({ webhook, operation, allowed }, 0);
  }
  return m;
}
