/**
 * Every error the webhook answers carries a catalogue code (lib/errors.ts), never one of
 * fastify's own FST_* codes: in the body clients read and in the metric's label.
 */
import t from 'tap';
import { buildApp } from '../../webhook/app.ts';
import { createWebhookMetrics } from '../../webhook/metrics.ts';
import { ERRORS } from '../../lib/errors.ts';

const json = { 'content-type': 'application/json' };
const cases: Array<{
  what: string;
  url: string;
  headers: Record<string, string>;
  payload: string;
  status: number;
  code: string;
}> = [
  {
    what: 'a URL fastify cannot decode',
    url: '/mutate%',
    headers: json,
    payload: '{}',
    status: 400,
    code: 'FH_BAD_REQUEST',
  },
  {
    what: 'a body shorter than its Content-Length',
    url: '/mutate',
    headers: { ...json, 'content-length': '5' },
    payload: '{"a":1,"b":2}',
    status: 400,
    code: 'FH_BAD_REQUEST',
  },
  {
    what: 'a body that is not JSON',
    url: '/validate',
    headers: json,
    payload: '{',
    status: 400,
    code: 'FH_MALFORMED_JSON',
  },
  { what: 'an empty JSON body', url: '/validate', headers: json, payload: '', status: 400, code: 'FH_MALFORMED_JSON' },
  {
    what: 'another content type',
    url: '/mutate',
    headers: { 'content-type': 'text/xml' },
    payload: '<a/>',
    status: 400,
    code: 'FH_NOT_JSON',
  },
  {
    what: 'a body over the limit',
    url: '/mutate',
    headers: json,
    payload: `{"x":"${'a'.repeat(2048)}"}`,
    status: 413,
    code: 'FH_BODY_TOO_LARGE',
  },
];

t.test('fastify errors are answered with catalogue codes', async (t) => {
  const metrics = createWebhookMetrics({ defaultMetrics: false });
  const app = buildApp({ metrics, bodyLimit: 1024 });
  t.teardown(() => app.close());
  for (const c of cases) {
    const r = await app.inject({ method: 'POST', url: c.url, headers: c.headers, payload: c.payload });
    const body = r.json<{ code: string; statusCode: number }>();
    t.equal(r.statusCode, c.status, `${c.what}: status`);
    t.equal(body.code, c.code, c.what);
    t.ok(body.code in ERRORS, `${c.what}: ${body.code} is in the catalogue`);
  }
  const exposition = await metrics.registry.getSingleMetricAsString('flowhint_webhook_bad_requests_total');
  const labels = [...exposition.matchAll(/code="([^"]+)"/g)].map((m) => m[1]);
  t.ok(labels.length > 0, 'errors were counted');
  t.same(
    labels.filter((c) => !(c! in ERRORS)),
    [],
    'the metric holds catalogue codes only',
  );
});
