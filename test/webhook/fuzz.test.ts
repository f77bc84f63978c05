/**
 * Hostile input over real HTTPS, generated with fast-check: malformed and truncated JSON,
 * wrong types at every field, huge and deeply nested values, unicode and control
 * characters, keys needing ~0/~1, duplicate keys, absent request or uid. Every answer must
 * be a valid AdmissionReview for the same uid, or a 4xx JSON error; the server keeps serving.
 *
 * The server is the real `flowhint webhook` process, run with the deployed container's
 * NODE_OPTIONS, so that its RSS (from /proc, as the kubelet sees it) is the server's alone.
 * Eight rounds of the corpus, each with its own seed; the first rounds warm up (JIT, heap
 * sizing). A leak grows RSS in proportion to the requests, so the second half of the run
 * (4,800 requests) may add at most 16 MiB: that catches anything leaking more than about
 * 3.5 KiB per request. Smaller leaks need a targeted test (https.test.ts has one for metric
 * labels, found while looking into this run's RSS).
 */
import t from 'tap';
import fc from 'fast-check';
import { Agent } from 'node:https';
import { post, review, tempCerts } from '../helpers/admission.ts';
import { rssMiB, startWebhookChild, stopChild } from '../helpers/child.ts';
import { HINT, completeService } from '../helpers/services.ts';

const RUNS = 1200;
const SEEDS = Array.from({ length: Number(process.env.FUZZ_ROUNDS ?? 8) }, (_, i) => 4963 + i);
/** What the second half of the rounds may add to RSS. */
const RSS_ALLOWANCE_MIB = 16;
const { dir, bundle } = await tempCerts();
const server = await startWebhookChild(`${dir}/tls.crt`, `${dir}/tls.key`, dir);
t.teardown(() => stopChild(server.child));
const agent = new Agent({ keepAlive: true, ca: bundle.caCert });
t.teardown(() => agent.destroy());

const anyJson = fc.jsonValue({ maxDepth: 4 });
const nasty = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom(
    '~0',
    '~1',
    'a/b',
    '~',
    '/',
    '\u0000',
    '\u2028',
    '"}',
    '\\',
    '__proto__x',
    'LongLived',
    ' longlived ',
    '',
  ),
  fc.string({ minLength: 5000, maxLength: 20000 }),
);
const stringMap = fc.dictionary(nasty, nasty, { maxKeys: 5 });
/** A Service whose every field may be of the wrong type. */
const service = fc.record(
  {
    apiVersion: fc.oneof(fc.constant('v1'), anyJson),
    kind: fc.oneof(fc.constant('Service'), anyJson),
    metadata: fc.oneof(
      fc.record(
        {
          name: fc.oneof(nasty, anyJson),
          namespace: fc.oneof(nasty, anyJson),
          annotations: fc.oneof(
            stringMap.map((m) => ({ ...m, [HINT]: 'longlived' })),
            anyJson,
          ),
          labels: fc.oneof(stringMap, anyJson),
        },
        { requiredKeys: [] },
      ),
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
    kind: fc.oneof(
      { weight: 4, arbitrary: fc.constant({ group: '', version: 'v1', kind: 'Service' }) },
      { weight: 1, arbitrary: anyJson },
    ),
    operation: fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('CREATE', 'UPDATE', 'DELETE', 'CONNECT') },
      { weight: 1, arbitrary: anyJson },
    ),
    subResource: fc.oneof(fc.constant(undefined), anyJson),
    object: fc.oneof(service, anyJson),
    oldObject: fc.oneof(service, fc.constant(null), anyJson),
    dryRun: fc.oneof({ weight: 4, arbitrary: fc.boolean() }, { weight: 1, arbitrary: anyJson }),
  },
  { requiredKeys: ['uid'] },
);
const body = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({ apiVersion: fc.constant('admission.k8s.io/v1'), kind: fc.constant('AdmissionReview'), request })
      .map((r) => JSON.stringify(r)),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({ apiVersion: anyJson, kind: anyJson, request: fc.oneof(request, anyJson) }, { requiredKeys: [] })
      .map((r) => JSON.stringify(r)),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constant(JSON.stringify(review({ object: completeService({ annotations: { [HINT]: 'x' } }) }))),
        fc.nat(),
      )
      .map(([s, n]) => s.slice(0, n % s.length)),
  },
  { weight: 1, arbitrary: fc.nat({ max: 20000 }).map((n) => `${'['.repeat(n)}${']'.repeat(n % 3 === 0 ? n : 0)}`) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
  // Duplicate keys: the last one wins in JSON.parse, as in Go's decoder.
  {
    weight: 1,
    arbitrary: fc
      .uuid()
      .map(
        (u) =>
          `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"${u}","uid":"${u}","operation":"CREATE","object":{"metadata":{"annotations":{"${HINT}":"a","${HINT}":" longlived"}}},"kind":{"group":"","version":"v1","kind":"Service"}}}`,
      ),
  },
);

/** One round of the corpus; false from the property fails the test with the counterexample. */
async function round(
  seed: number,
  counts: { reviews: number; errors: number; codes: Map<string, number> },
  rss: number[],
): Promise<void> {
  await fc.assert(
    fc.asyncProperty(body, async (text) => {
      const r = await post(server.url, '/mutate', text, { ca: bundle.caCert, agent });
      if (r.status === 200) {
        counts.reviews += 1;
        const sent = JSON.parse(text) as { request: { uid: string } };
        const resp = r.json?.response;
        if (
          r.json?.apiVersion !== 'admission.k8s.io/v1' ||
          r.json?.kind !== 'AdmissionReview' ||
          resp?.uid !== sent.request.uid ||
          typeof resp.allowed !== 'boolean'
        )
          return false;
        if (
          resp.patch !== undefined &&
          (resp.patchType !== 'JSONPatch' || !Array.isArray(JSON.parse(Buffer.from(resp.patch, 'base64').toString())))
        )
          return false;
      } else {
        counts.errors += 1;
        counts.codes.set(String(r.json?.code), (counts.codes.get(String(r.json?.code)) ?? 0) + 1);
        if (r.status < 400 || r.status >= 500 || typeof r.json?.code !== 'string') return false;
      }
      if ((counts.reviews + counts.errors) % 200 === 0) rss.push(Math.round(rssMiB(server.child.pid!)));
      return true;
    }),
    { numRuns: RUNS, seed },
  );
}

t.test(
  `${SEEDS.length} x ${RUNS} hostile requests: a valid AdmissionReview or a 4xx JSON error, never a crash; RSS stable`,
  async (t) => {
    const counts = { reviews: 0, errors: 0, codes: new Map<string, number>() };
    const rss: number[] = [];
    const afterRound: number[] = [];
    for (const seed of SEEDS) {
      await round(seed, counts, rss);
      afterRound.push(rssMiB(server.child.pid!));
    }
    const total = SEEDS.length * RUNS;
    t.ok(
      counts.reviews > total / 10 && counts.errors > total / 10,
      `${counts.reviews} reviews, ${counts.errors} 4xx errors`,
    );
    t.equal(server.child.exitCode, null, 'the server process is still running');
    t.comment(`4xx codes: ${JSON.stringify([...counts.codes])}`);
    t.comment(`webhook RSS (MiB) every 200 requests: ${rss.join(' ')}`);
    const half = Math.floor(SEEDS.length / 2) - 1;
    const growth = afterRound.at(-1)! - afterRound[half]!;
    t.ok(
      growth <= RSS_ALLOWANCE_MIB,
      `RSS after rounds 1..${SEEDS.length}: ${afterRound.map((x) => x.toFixed(1)).join(', ')} MiB; the second half added ${growth.toFixed(1)} MiB (allowed ${RSS_ALLOWANCE_MIB})`,
    );
    const ok = await post(server.url, '/validate', JSON.stringify(review({ object: completeService() })), {
      ca: bundle.caCert,
      agent,
    });
    t.equal(ok.status, 200, 'still serving');
  },
);
