/**
 * The CEL in the manifests, evaluated with a CEL library: the ValidatingAdmissionPolicy and
 * api/validation.ts must both decide each case as docs/api.md says, and the webhooks'
 * matchConditions must send exactly the Services that carry a flowhint key. Webhook, policy
 * and match conditions cannot drift apart unnoticed.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { loadAll } from 'js-yaml';
import { run } from '@bufbuild/cel';
import { toCel } from './helpers/cel.ts';
import { validateService } from '../api/index.ts';
import { HINT, THRESHOLD, TIMEOUT, completeService, hinted } from './helpers/services.ts';

type Obj = Record<string, any>;
const docs = (f: string) =>
  (loadAll(readFileSync(new URL(`../manifests/base/${f}`, import.meta.url), 'utf8')) as Obj[]).filter(Boolean);
const policy = docs('admission-policy.yaml').find((d) => d.kind === 'ValidatingAdmissionPolicy')!.spec;
const hooks = docs('webhook-configurations.yaml').map((d) => d.webhooks[0]);

function cel(expr: string, vars: Record<string, unknown>): boolean {
  const r = run(expr, vars as never);
  if (typeof r !== 'boolean') throw new Error(`${expr} gave ${JSON.stringify(r)}`);
  return r;
}

/** Whether the policy admits the object: match conditions, variables, then validations. */
function policyAllows(object: Obj, oldObject: Obj | null): boolean {
  const base = { object: toCel(object), oldObject: toCel(oldObject) };
  if (!policy.matchConditions.every((m: Obj) => cel(m.expression, base))) return true;
  const variables = new Map<string, unknown>();
  for (const v of policy.variables) variables.set(v.name, run(v.expression, { ...base, variables } as never));
  return policy.validations.every((v: Obj) => cel(v.expression, { ...base, variables }));
}

const withSpec = (spec: Obj) => ({ ...hinted(), spec });
const cases: Array<[string, Obj, Obj | null]> = [
  ['canonical hint', hinted(), null],
  ['threshold 0', hinted('LongLived', { [THRESHOLD]: '0' }), null],
  ['threshold max', hinted('LongLived', { [THRESHOLD]: '1000000' }), null],
  ['threshold too big', hinted('LongLived', { [THRESHOLD]: '1000001' }), null],
  ['threshold negative', hinted('LongLived', { [THRESHOLD]: '-1' }), null],
  ['threshold leading zero', hinted('LongLived', { [THRESHOLD]: '05' }), null],
  ['threshold untrimmed', hinted('LongLived', { [THRESHOLD]: ' 5' }), null],
  ['threshold exponent', hinted('LongLived', { [THRESHOLD]: '1e3' }), null],
  ['threshold empty', hinted('LongLived', { [THRESHOLD]: '' }), null],
  ['threshold without hint', completeService({ annotations: { [THRESHOLD]: '10' } }), null],
  ['unknown value', hinted('Turbo', {}, 'Turbo'), null],
  ['non-canonical value', hinted('longlived', {}, 'longlived'), null],
  ['empty value', hinted('', {}, ''), null],
  ['label without hint', completeService({ labels: { [HINT]: 'LongLived' } }), null],
  ['label differs', hinted('LongLived', {}, 'Other'), null],
  ['ExternalName', withSpec({ type: 'ExternalName', externalName: 'db.example.com' }), null],
  ['headless', withSpec({ type: 'ClusterIP', clusterIP: 'None', ports: [{ port: 80 }] }), null],
  [
    'SCTP only (a warning, allowed)',
    withSpec({ clusterIP: '10.96.0.9', ports: [{ port: 9, protocol: 'SCTP' }] }),
    null,
  ],
  ['unhinted', completeService(), null],
  ['no maps', completeService({ annotations: undefined, labels: undefined }), null],
  ['ShortLived', hinted('ShortLived'), null],
  ...[
    '1s',
    '5s',
    '59s',
    '99s',
    '100s',
    '599s',
    '600s',
    '601s',
    '0s',
    '1m',
    '2m',
    '10m',
    '11m',
    '1h',
    '05s',
    '5S',
    ' 5s',
    '5',
    '',
    '1.5s',
    '999s',
    '1000s',
  ].map((d): [string, Obj, Obj | null] => [
    `ShortLived, timeout ${JSON.stringify(d)}`,
    hinted('ShortLived', { [TIMEOUT]: d }),
    null,
  ]),
  ['timeout with LongLived', hinted('LongLived', { [TIMEOUT]: '5s' }), null],
  ['timeout without hint', completeService({ annotations: { [TIMEOUT]: '5s' } }), null],
  ['threshold with ShortLived', hinted('ShortLived', { [THRESHOLD]: '10' }), null],
  [
    'UPDATE: unchanged bad timeout (ratchet)',
    { ...hinted('ShortLived', { [TIMEOUT]: '1h' }), spec: { ...hinted().spec, selector: { app: 'v2' } } },
    hinted('ShortLived', { [TIMEOUT]: '1h' }),
  ],
  [
    'UPDATE: timeout changed to invalid',
    hinted('ShortLived', { [TIMEOUT]: '1h' }),
    hinted('ShortLived', { [TIMEOUT]: '5s' }),
  ],
  ['UPDATE: hint removed', completeService(), hinted()],
  [
    'UPDATE: unchanged pre-existing bad hint (ratchet)',
    { ...hinted('Turbo', {}, null), spec: { ...hinted().spec, selector: { app: 'v2' } } },
    hinted('Turbo', {}, null),
  ],
  ['UPDATE: good hint made bad', hinted('Turbo', {}, 'Turbo'), hinted()],
  [
    'UPDATE: threshold changed to invalid',
    hinted('LongLived', { [THRESHOLD]: 'x' }),
    hinted('LongLived', { [THRESHOLD]: '5' }),
  ],
];

/**
 * What each case must get, written from docs/api.md's rules, not from api/: both the policy
 * and api/validation.ts are compared with it.
 */
const ALLOWED_TIMEOUTS = new Set(['1s', '5s', '59s', '99s', '100s', '599s', '600s', '1m', '2m', '10m']);
const ALLOWED = new Set([
  'canonical hint',
  'threshold 0',
  'threshold max',
  'SCTP only (a warning, allowed)',
  'unhinted',
  'no maps',
  'ShortLived',
  ...[...ALLOWED_TIMEOUTS].map((d) => `ShortLived, timeout ${JSON.stringify(d)}`),
  'UPDATE: unchanged bad timeout (ratchet)',
  'UPDATE: hint removed',
  'UPDATE: unchanged pre-existing bad hint (ratchet)',
]);

t.test('the ValidatingAdmissionPolicy and api/ decide each case as docs/api.md says', async (t) => {
  const names = new Set(cases.map(([name]) => name));
  t.same(
    [...ALLOWED].filter((n) => !names.has(n)),
    [],
    'every case named as allowed is in the table',
  );
  t.ok(names.size > ALLOWED.size + 20, 'and most of the table is refused');
  for (const [name, object, old] of cases) {
    const want = ALLOWED.has(name) ? 'allowed' : 'rejected';
    const api = validateService(object, old ?? undefined).errors.length === 0 ? 'allowed' : 'rejected';
    t.equal(api, want, `api/: ${name}: ${want}`);
    t.equal(policyAllows(object, old) ? 'allowed' : 'rejected', want, `policy: ${name}: ${want}`);
  }
});

t.test('matchConditions send exactly the Services carrying a flowhint key', async (t) => {
  const carries = (o: Obj | null) =>
    !!o &&
    (HINT in (o.metadata.annotations ?? {}) ||
      THRESHOLD in (o.metadata.annotations ?? {}) ||
      TIMEOUT in (o.metadata.annotations ?? {}) ||
      HINT in (o.metadata.labels ?? {}));
  for (const [name, object, old] of cases) {
    for (const hook of hooks) {
      const sent = hook.matchConditions.every((m: Obj) =>
        cel(m.expression, { object: toCel(object), oldObject: toCel(old) }),
      );
      t.equal(sent, carries(object) || carries(old), `${hook.name} ${name}`);
    }
  }
});
