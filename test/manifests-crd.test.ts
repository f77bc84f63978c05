/**
 * The FlowhintNode CRD (manifests/base/crd.yaml; the schema test validates it as a
 * CustomResourceDefinition object, the manifests test that the base builds it): a structural schema the API server accepts, printer
 * columns that point at fields the schema has, and the same schema as the zod one the
 * agent writes and `flowhint explain` reads with (api/flowhint-node.ts).
 */
import t from 'tap';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { readFileSync } from 'node:fs';
import { load } from 'js-yaml';
import { z } from 'zod';
import {
  FlowhintNodeStatus,
  NODE_GROUP,
  NODE_KIND,
  NODE_PLURAL,
  NODE_VERSION,
  NOT_OFFLOADABLE_MAX,
} from '../api/index.ts';

type Schema = {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  required?: string[];
  enum?: string[];
  minimum?: number;
  maxItems?: number;
  format?: string;
  additionalProperties?: unknown;
  description?: string;
};
type Obj = Record<string, any>;

// The file as written (test/manifests.test.ts checks that the base builds it unchanged in scope).
const crd = load(readFileSync(new URL('../manifests/base/crd.yaml', import.meta.url), 'utf8')) as Obj;
const version = crd.spec.versions[0] as Obj;
const root = version.schema.openAPIV3Schema as Schema;
const statusSchema = root.properties!.status!;

t.test('named and scoped as the agent and explain address it', async (t) => {
  t.equal(crd.metadata.name, `${NODE_PLURAL}.${NODE_GROUP}`);
  t.equal(crd.metadata.namespace, undefined);
  t.match(crd.spec, { group: NODE_GROUP, scope: 'Cluster', names: { kind: NODE_KIND, plural: NODE_PLURAL } });
  t.equal(crd.spec.versions.length, 1);
  t.match(version, { name: NODE_VERSION, served: true, storage: true, subresources: { status: {} } });
});

/** Every violation of the structural-schema rules the API server enforces for v1 CRDs. */
function structuralIssues(s: Schema, path: string): string[] {
  const out: string[] = [];
  if (!s.type) out.push(`${path}: no type`);
  if (s.properties && s.additionalProperties !== undefined) out.push(`${path}: properties and additionalProperties`);
  if (s.type === 'array' && !s.items) out.push(`${path}: array without items`);
  if (s.type !== 'object' && s.properties) out.push(`${path}: properties on a ${s.type}`);
  for (const r of s.required ?? []) if (!s.properties?.[r]) out.push(`${path}: required ${r} is not a property`);
  for (const [k, v] of Object.entries(s.properties ?? {})) out.push(...structuralIssues(v, `${path}.${k}`));
  if (s.items) out.push(...structuralIssues(s.items, `${path}[]`));
  return out;
}

t.test('a structural schema', async (t) => {
  t.strictSame(structuralIssues(root, ''), []);
  t.strictSame(root.properties!.metadata, { type: 'object' }, 'metadata: only type object is allowed');
  t.strictSame(structuralIssues({ type: 'object', properties: { a: {} } }, ''), ['.a: no type'], 'the check can fail');
});

/** The schema at a printer column's JSONPath (simple `.a.b` paths, as the columns use). */
function at(path: string): Schema | undefined {
  let s: Schema | undefined = root;
  for (const part of path.split('.').slice(1)) s = s?.properties?.[part];
  return s;
}

t.test('printer columns: the ones asked for, each at a field of the right type', async (t) => {
  const columns = version.additionalPrinterColumns as Array<{
    name: string;
    type: string;
    jsonPath: string;
    priority?: number;
  }>;
  const wide = columns.filter((c) => !c.priority).map((c) => c.name);
  t.strictSame(wide, [
    'Support',
    'Kube-Proxy',
    'Services',
    'Refused',
    'Not-Offloadable',
    'Last-Sync',
    'Heartbeat',
    'Age',
  ]);
  for (const c of columns) {
    if (c.jsonPath === '.metadata.creationTimestamp') {
      t.equal(c.type, 'date', c.name);
      continue;
    }
    const s = at(c.jsonPath);
    t.ok(s, `${c.name}: ${c.jsonPath} is in the schema`);
    const expected = c.type === 'date' ? ['string', 'date-time'] : [c.type, undefined];
    t.strictSame([s?.type, c.type === 'date' ? s?.format : undefined], expected, `${c.name}: ${c.type}`);
  }
  t.equal(at('.status.services.nope'), undefined, 'a missing path is found missing');
});

/** The parts of a JSON schema both sides state (no descriptions, zod's integer bounds, patterns). */
function shape(s: Schema & { maximum?: number; pattern?: string; $schema?: string }): object {
  return {
    type: s.type,
    ...(s.enum ? { enum: [...s.enum].sort() } : {}),
    ...(s.required ? { required: [...s.required].sort() } : {}),
    ...(s.minimum === undefined ? {} : { minimum: s.minimum }),
    ...(s.maxItems === undefined ? {} : { maxItems: s.maxItems }),
    ...(s.format ? { format: s.format } : {}),
    ...(s.items ? { items: shape(s.items) } : {}),
    ...(s.properties
      ? { properties: Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, shape(v)])) }
      : {}),
  };
}

t.test('the CRD status schema is the zod schema', async (t) => {
  const fromZod = z.toJSONSchema(FlowhintNodeStatus, { io: 'input' }) as Schema;
  t.strictSame(shape(statusSchema), shape(fromZod));
  t.equal(statusSchema.properties!.notOffloadable!.maxItems, NOT_OFFLOADABLE_MAX);
});

t.test('statuses: what the API server would accept, zod accepts, and the reverse', async (t) => {
  const ajv = new Ajv({ strict: false });
  addFormats.default(ajv);
  const validate = ajv.compile(statusSchema);
  const good = {
    agentVersion: '0.1.0',
    support: { offload: 'Degraded', reason: 'r', conntrackTimeouts: 'Supported' },
    kubeProxy: { mode: 'ipvs', meaning: 'm' },
    services: { hinted: 2, programmed: 1, refused: 1, offloadedConnections: 0 },
    notOffloadable: [{ kind: 'IPVSPort', service: 'a/b', target: '10.0.0.1 tcp/80', reason: 'r' }],
    notOffloadableTotal: 1,
    lastSync: { time: '2026-12-05T00:00:00.000Z', kind: 'devices', result: 'Failed', error: 'e' },
  };
  const cases: Array<[string, unknown]> = [
    ['complete', good],
    [
      'no lastSync, no offloaded count',
      { ...good, lastSync: undefined, services: { hinted: 0, programmed: 0, refused: 0 } },
    ],
    ['a support value outside the enum', { ...good, support: { ...good.support, offload: 'Maybe' } }],
    ['a negative count', { ...good, services: { ...good.services, refused: -1 } }],
    ['a fractional count', { ...good, notOffloadableTotal: 1.5 }],
    ['a missing reason', { ...good, support: { offload: 'Supported', conntrackTimeouts: 'Supported' } }],
    ['an unknown kube-proxy mode', { ...good, kubeProxy: { mode: 'userspace', meaning: 'm' } }],
    ['too many entries', { ...good, notOffloadable: Array(NOT_OFFLOADABLE_MAX + 1).fill(good.notOffloadable[0]) }],
    ['an entry kind outside the enum', { ...good, notOffloadable: [{ kind: 'Other', target: 't', reason: 'r' }] }],
    ['a time that is not RFC 3339', { ...good, lastSync: { ...good.lastSync, time: 'yesterday' } }],
    ['a time with an offset', { ...good, lastSync: { ...good.lastSync, time: '2026-12-05T01:00:00+01:00' } }],
    ['no version', { ...good, agentVersion: undefined }],
  ];
  const accepted = (v: unknown) => [validate(JSON.parse(JSON.stringify(v))), FlowhintNodeStatus.safeParse(v).success];
  for (const [what, v] of cases) {
    const [api, zod] = accepted(v);
    t.equal(api, zod, `${what}: the CRD ${api ? 'accepts' : 'refuses'}, zod ${zod ? 'accepts' : 'refuses'}`);
  }
  t.strictSame(accepted(good), [true, true]);
  t.strictSame(accepted(cases[2]![1]), [false, false]);
});
