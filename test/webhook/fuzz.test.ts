/**
 * Hostile input over real HTTPS, generated with fast-check: malformed and truncated JSON,
 * wrong types at every field, huge and deeply nested values, unicode and control
 * characters, keys needing ~0/~1, duplicate keys, absent request or uid. Every answer must
 * be a valid AdmissionReview for the same uid, or a 4xx JSON error; the server keeps serving.
 */
import t from 'tap';
import fc from 'fast-check';
import { Agent } from 'node:https';
import { startWebhook } from '../../webhook/server.ts';
import { silentLogger } from '../../lib/log.ts';
import { post, review, tempCerts } from '../helpers/admission.ts';
import { HINT, completeService } from '../helpers/services.ts';

const RUNS = 1200;
const { dir, bundle } = await tempCerts();
const server = await startWebhook({ certFile: `${dir}/tls.crt`, keyFile: `${dir}/tls.key`, host: '127.0.0.1', port: 0, logger: silentLogger() });
t.teardown(() => server.close());
const agent = new Agent({ keepAlive: true, ca: bundle.caCert });
t.teardown(() => agent.destroy());

const anyJson = fc.jsonValue({ maxDepth: 4 });
const nasty = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.constantFrom('~0', '~1', 'a/b', '~', '/', '\u0000', '\u2028', '"}', '\\', '__proto__x', 'LongLived', ' longlived ', ''), fc.string({ minLength: 5000, maxLength: 20000 }));
const stringMap = fc.dictionary(nasty, nasty, { maxKeys: 5 });
/** A Service whose every field may be of the wrong type. */
const service = fc.record(
  {
    apiVersion: fc.oneof(fc.constant('v1'), anyJson),
    kind: fc.oneof(fc.constant('Service'), anyJson),
    metadata: fc.oneof(
      fc.record({ name: fc.oneof(nasty, anyJson), namespace: fc.oneof(nasty, anyJson), annotations: fc.oneof(stringMap.map((m) => ({ ...m, [HINT]: 'longlived' })), anyJson), labels: fc.oneof(stringMap, anyJson) }, { requiredKeys: [] }),
      anyJson,
    ),
    spec: fc.oneof(fc.constant(completeService().spec), anyJson),
    status: anyJson,
  },
  { requiredKeys: [] },
);
const request = fc.record(
  {
    uid: fc.oneof({ weight: 8, arbitrary: fc.uuid() }, { weight: 1, arbitrary: anyJson }),
    kind: fc.oneof({ weight: 4, arbitrary: fc.constant({ group: '', version: 'v1', kind: 'Service' }) }, { weight: 1, arbitrary: anyJson }),
    operation: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('CREATE', 'UPDATE', 'DELETE', 'CONNECT') }, { weight: 1, arbitrary: anyJson }),
    subResource: fc.oneof(fc.constant(undefined), anyJson),
    object: fc.oneof(service, anyJson),
    oldObject: fc.oneof(service, fc.constant(null), anyJson),
    dryRun: fc.oneof({ weight: 4, arbitrary: fc.boolean() }, { weight: 1, arbitrary: anyJson }),
  },
  { requiredKeys: ['uid'] },
);
const body = fc.oneof(
  { weight: 6, arbitrary: fc.record({ apiVersion: fc.constant('admission.k8s.io/v1'), kind: fc.constant('AdmissionReview'), request }).map((r) => JSON.stringify(r)) },
  { weight: 1, arbitrary: fc.record({ apiVersion: anyJson, kind: anyJson, request: fc.oneof(request, anyJson) }, { requiredKeys: [] }).map((r) => JSON.stringify(r)) },
  { weight: 1, arbitrary: fc.tuple(fc.constant(JSON.stringify(review({ object: completeService({ annotations: { [HINT]: 'x' } }) }))), fc.nat()).map(([s, n]) => s.slice(0, n % s.length)) },
  { weight: 1, arbitrary: fc.nat({ max: 20000 }).map((n) => `${'['.repeat(n)}${']'.repeat(n % 3 === 0 ? n : 0)}`) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
  // Duplicate keys: the last one wins in JSON.parse, as in Go's decoder.
  { weight: 1, arbitrary: fc.uuid().map((u) => `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"${u}","uid":"${u}","operation":"CREATE","object":{"metadata":{"annotations":{"${HINT}":"a","${HINT}":" longlived"}}},"kind":{"group":"","version":"v1","kind":"Service"}}}`) },
);

t.test(`${RUNS} hostile requests: a valid AdmissionReview or a 4xx JSON error, never a crash`, async (t) => {
  const rss: number[] = [];
  let reviews = 0;
  let errors = 0;
  const codes = new Map<string, number>();
  await fc.assert(
    fc.asyncProperty(body, async (text) => {
      const r = await post(server.url, '/mutate', text, { ca: bundle.caCert, agent });
      if (r.status === 200) {
        reviews += 1;
        const sent = JSON.parse(text) as { request: { uid: string } };
        const resp = r.json?.response;
        if (r.json?.apiVersion !== 'admission.k8s.io/v1' || r.json?.kind !== 'AdmissionReview' || resp?.uid !== sent.request.uid || typeof resp.allowed !== 'boolean') return false;
        if (resp.patch !== undefined && (resp.patchType !== 'JSONPatch' || !Array.isArray(JSON.parse(Buffer.from(resp.patch, 'base64').toString())))) return false;
      } else {
        errors += 1;
        codes.set(String(r.json?.code), (codes.get(String(r.json?.code)) ?? 0) + 1);
        if (r.status < 400 || r.status >= 500 || typeof r.json?.code !== 'string') return false;
      }
      if ((reviews + errors) % 200 === 0) rss.push(Math.round(process.memoryUsage().rss / 1048576));
      return true;
    }),
    { numRuns: RUNS, seed: 4963 },
  );
  t.ok(reviews > RUNS / 10 && errors > RUNS / 10, `${reviews} reviews, ${errors} 4xx errors`);
  t.comment(`4xx codes: ${JSON.stringify([...codes])}`);
  t.comment(`RSS (MiB, test process with the server in it) every 200 requests: ${rss.join(' ')}`);
  const ok = await post(server.url, '/validate', JSON.stringify(review({ object: completeService() })), { ca: bundle.caCert, agent });
  t.equal(ok.status, 200, 'still serving');
});
