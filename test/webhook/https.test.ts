/** The webhook over real HTTPS, as the API server calls it. */
import t from 'tap';
import { Agent } from 'node:https';
import { connect } from 'node:tls';
import fjp from 'fast-json-patch';
import { startWebhook } from '../../webhook/server.ts';
import { silentLogger } from '../../lib/log.ts';
import { decodePatch, post, review, tempCerts } from '../helpers/admission.ts';
import { HINT, THRESHOLD, TIMEOUT, completeService, hinted, placeholderService } from '../helpers/services.ts';

const { dir, bundle } = await tempCerts();
const server = await startWebhook({
  certFile: `${dir}/tls.crt`,
  keyFile: `${dir}/tls.key`,
  host: '127.0.0.1',
  port: 0,
  metricsPort: 0,
  logger: silentLogger(),
});
t.teardown(() => server.close());
const agent = new Agent({ keepAlive: true, ca: bundle.caCert });
t.teardown(() => agent.destroy());
const ca = bundle.caCert;
const send = (path: string, body: unknown, contentType?: string) =>
  post(server.url, path, typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body), {
    ca,
    agent,
    ...(contentType ? { contentType } : {}),
  });

async function admit(object: Record<string, any>, oldObject?: Record<string, any>) {
  const operation = oldObject ? 'UPDATE' : 'CREATE';
  const m = await send('/mutate', review({ operation, object, ...(oldObject ? { oldObject } : {}) }));
  t.equal(m.status, 200);
  const patched = fjp.applyPatch(
    structuredClone(object),
    decodePatch(m.json.response) as fjp.Operation[],
    true,
    false,
  ).newDocument;
  const v = await send('/validate', review({ operation, object: patched, ...(oldObject ? { oldObject } : {}) }));
  t.equal(v.status, 200);
  return { mutate: m.json.response, validate: v.json.response, object: patched };
}

t.test('round trip: mutate, apply the patch, validate (table)', async (t) => {
  const cases: Array<[string, Record<string, any>, boolean, Record<string, string> | undefined]> = [
    ['canonical', hinted('LongLived', {}, null), true, { app: 'web', [HINT]: 'LongLived' }],
    [
      'defaulted case/whitespace',
      completeService({ annotations: { [HINT]: ' longlived ' } }),
      true,
      { app: 'web', [HINT]: 'LongLived' },
    ],
    [
      'threshold',
      completeService({ annotations: { [HINT]: 'LongLived', [THRESHOLD]: ' 1000' } }),
      true,
      { app: 'web', [HINT]: 'LongLived' },
    ],
    ['no maps at all', completeService({ annotations: undefined, labels: undefined }), true, undefined],
    [
      'annotations but no labels map',
      completeService({ annotations: { [HINT]: 'LONGLIVED' }, labels: undefined }),
      true,
      { [HINT]: 'LongLived' },
    ],
    ['label spoofed without hint: removed by mutate', completeService({ labels: { [HINT]: 'LongLived' } }), true, {}],
    ['unknown value', completeService({ annotations: { [HINT]: 'Turbo' } }), false, { app: 'web' }],
    [
      'threshold out of range',
      completeService({ annotations: { [HINT]: 'LongLived', [THRESHOLD]: '1000001' } }),
      false,
      { app: 'web', [HINT]: 'LongLived' },
    ],
    ['threshold without hint', completeService({ annotations: { [THRESHOLD]: '5' } }), false, { app: 'web' }],
    [
      'headless',
      completeService({ annotations: { [HINT]: 'LongLived' }, clusterIP: 'None', type: 'ClusterIP' }),
      false,
      { app: 'web', [HINT]: 'LongLived' },
    ],
    [
      'ShortLived and its timeout defaulted',
      completeService({ annotations: { [HINT]: ' shortlived', [TIMEOUT]: ' 05S ' } }),
      true,
      { app: 'web', [HINT]: 'ShortLived' },
    ],
    [
      'ShortLived with conntrack-timeout 2m',
      completeService({ annotations: { [HINT]: 'ShortLived', [TIMEOUT]: '2m' } }),
      true,
      { app: 'web', [HINT]: 'ShortLived' },
    ],
    [
      'conntrack-timeout out of range',
      completeService({ annotations: { [HINT]: 'ShortLived', [TIMEOUT]: '11m' } }),
      false,
      { app: 'web', [HINT]: 'ShortLived' },
    ],
    [
      'conntrack-timeout without ShortLived',
      completeService({ annotations: { [HINT]: 'LongLived', [TIMEOUT]: '5s' } }),
      false,
      { app: 'web', [HINT]: 'LongLived' },
    ],
    [
      'keys needing ~0 and ~1',
      completeService({ annotations: { 'x~y/z': '1', [HINT]: 'longLIVED' }, labels: { 'a/b~c': '2' } }),
      true,
      { 'a/b~c': '2', [HINT]: 'LongLived' },
    ],
  ];
  for (const [name, object, allowed, labels] of cases) {
    const r = await admit(object);
    t.equal(r.validate.allowed, allowed, `${name}: ${r.validate.status?.message ?? 'allowed'}`);
    t.same(r.object.metadata.labels, labels, `${name}: labels after patch`);
    t.notOk(r.validate.patch, `${name}: validate never patches`);
    if (!allowed) {
      t.equal(r.validate.status.code, 422);
      t.equal(r.validate.status.reason, 'Invalid');
      t.ok(r.validate.status.details.causes.length > 0);
    }
  }
});

t.test('UPDATE: removing the hint removes the label; old object is sent', async (t) => {
  const old = hinted();
  const next = completeService({ labels: { app: 'web', [HINT]: 'LongLived' } });
  const r = await admit(next, old);
  t.same(r.object.metadata.labels, { app: 'web' });
  t.equal(r.validate.allowed, true);
});

t.test('the placeholder fixture (every field, not yet validated) survives mutate untouched', async (t) => {
  const svc = placeholderService();
  svc.metadata.annotations[HINT] = 'longlived';
  const m = await send('/mutate', review({ object: svc }));
  const patch = decodePatch(m.json.response) as fjp.Operation[];
  const out = fjp.applyPatch(structuredClone(svc), patch).newDocument;
  const strip = (o: Record<string, any>) => {
    const c = structuredClone(o);
    delete c.metadata.annotations[HINT];
    delete c.metadata.labels[HINT];
    return JSON.stringify(c);
  };
  t.equal(strip(out), strip(svc), 'byte for byte outside the owned keys');
  const v = await send('/validate', review({ object: out }));
  t.equal(v.status, 200, 'validate answers even for placeholder values');
});

t.test('hostile bodies get 4xx JSON and the server answers the next good request', async (t) => {
  const good = JSON.stringify(review({ object: hinted() }));
  let deep = '';
  for (let i = 0; i < 100_000; i++) deep += '[';
  const cases: Array<[string, string | Buffer, number, string, string?]> = [
    ['malformed', '{"apiVersion":', 400, 'FH_MALFORMED_JSON'],
    ['truncated', good.slice(0, good.length / 2), 400, 'FH_MALFORMED_JSON'],
    ['empty', '', 400, 'FH_MALFORMED_JSON'],
    ['not an object', '"hello"', 400, 'FH_BAD_REVIEW'],
    ['wrong kind', JSON.stringify({ apiVersion: 'v1', kind: 'Service' }), 400, 'FH_BAD_REVIEW'],
    ['missing uid', JSON.stringify({ ...JSON.parse(good), request: { operation: 'CREATE' } }), 400, 'FH_BAD_REVIEW'],
    [
      'deeply nested',
      `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":${deep}`,
      400,
      'FH_MALFORMED_JSON',
    ],
    ['non-JSON content type', good, 400, 'FH_NOT_JSON', 'text/plain'],
    ['huge', Buffer.alloc(5 * 1024 * 1024, 'a'), 413, 'FH_BODY_TOO_LARGE'],
  ];
  for (const [name, body, status, code, contentType] of cases) {
    const r = await send('/mutate', body, contentType).catch((err: unknown) => ({
      status: -1,
      json: { code: err instanceof Error ? err.message : String(err) },
    }));
    t.equal(r.status, status, `${name}: status`);
    t.equal(r.json?.code, code, `${name}: code`);
    const next = await send('/validate', good);
    t.equal(next.status, 200, `${name}: next good request served`);
  }
});

t.test('health, readiness, 404 and metrics', async (t) => {
  const get = (path: string) => post(server.url, path, '', { ca, agent, method: 'GET' });
  t.equal((await get('/healthz')).status, 200);
  t.equal((await get('/readyz')).status, 200);
  const nf = await get('/nope');
  t.equal(nf.status, 404);
  t.equal(nf.json.code, 'FH_NOT_FOUND');
  const res = await fetch(`${server.metricsUrl}/metrics`);
  const text = await res.text();
  t.match(text, /flowhint_webhook_requests_total\{webhook="mutate",operation="CREATE",allowed="true"\} \d+/);
  t.match(text, /flowhint_webhook_requests_total\{webhook="validate",operation="CREATE",allowed="false"\} \d+/);
  t.match(text, /flowhint_webhook_request_duration_seconds_bucket/);
  t.match(text, /flowhint_webhook_bad_requests_total\{code="FH_MALFORMED_JSON"\}/);
  // The table test above rejects one Service per code: each counted once, under its own code.
  const rejected = [...text.matchAll(/^flowhint_webhook_rejections_total\{code="([A-Z_]+)"\} (\d+)$/gm)]
    .map((m) => `${m[1]}=${m[2]}`)
    .sort();
  t.same(
    rejected,
    [
      'FH_HINT_UNSUPPORTED=1',
      'FH_NO_VIRTUAL_IP=1',
      'FH_THRESHOLD_INVALID=1',
      'FH_THRESHOLD_WITHOUT_HINT=1',
      'FH_TIMEOUT_INVALID=1',
      'FH_TIMEOUT_WITHOUT_SHORTLIVED=1',
    ],
    'rejected hints counted by code',
  );
  t.match(text, /process_resident_memory_bytes/);
});

t.test("the sender's operation string never becomes a metric label: bounded series", async (t) => {
  for (let i = 0; i < 50; i++) {
    const body = review({ object: hinted() });
    body.request.operation = `HOSTILE-${i}-${'x'.repeat(i * 100)}`;
    t.equal((await send('/mutate', body)).status, 200, `operation ${i} answered`);
  }
  const text = await (await fetch(`${server.metricsUrl}/metrics`)).text();
  const operations = new Set(
    [...text.matchAll(/flowhint_webhook_requests_total\{[^}]*operation="([^"]*)"/g)].map((m) => m[1]),
  );
  t.notOk(text.includes('HOSTILE'), 'no label carries the sent value');
  t.ok(
    [...operations].every((o) => ['CREATE', 'UPDATE', 'DELETE', 'CONNECT', 'other', 'unknown'].includes(o!)),
    `operation labels: ${[...operations].map((o) => o!.slice(0, 20)).join(', ')}`,
  );
  t.ok(operations.has('other'));
});

t.test('TLS 1.1 and below are refused', async (t) => {
  const u = new URL(server.url);
  const err = await new Promise<Error | undefined>((resolve) => {
    const s = connect(
      {
        host: u.hostname,
        port: Number(u.port),
        ca,
        maxVersion: 'TLSv1.1',
        minVersion: 'TLSv1',
        ciphers: 'DEFAULT@SECLEVEL=0',
      },
      () => {
        s.destroy();
        resolve(undefined);
      },
    );
    s.on('error', resolve);
  });
  t.ok(err, `handshake refused: ${err?.message}`);
  const ok = await new Promise<string>((resolve, reject) => {
    const s = connect(
      { host: u.hostname, port: Number(u.port), ca, minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' },
      () => {
        resolve(s.getProtocol() ?? '');
        s.destroy();
      },
    );
    s.on('error', reject);
  });
  t.equal(ok, 'TLSv1.2');
});
