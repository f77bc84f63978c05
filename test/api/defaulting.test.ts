import t from 'tap';
import fjp from 'fast-json-patch';
import {
  applyDefaults,
  canonicalThreshold,
  canonicalTimeout,
  timeoutSeconds,
  validateService,
} from '../../api/index.ts';
import { HINT, THRESHOLD, TIMEOUT, completeService, placeholderService } from '../helpers/services.ts';

const base = { 'example.com/owner': 'team-a' };

function defaulted(input: unknown) {
  const r = applyDefaults(input);
  if (r.kind !== 'defaulted') throw new Error(`expected defaulted, got ${r.reason}`);
  return r;
}

t.test('canonical forms (table)', async (t) => {
  const cases: Array<
    [
      string,
      Record<string, string> | undefined,
      Record<string, string> | undefined,
      Record<string, string> | undefined,
      Record<string, string> | undefined,
    ]
  > = [
    // name, annotations in, labels in, annotations out, labels out
    [
      'canonical value gets the mirror label',
      { [HINT]: 'LongLived' },
      {},
      { [HINT]: 'LongLived' },
      { [HINT]: 'LongLived' },
    ],
    ['lower case + whitespace', { [HINT]: ' longlived ' }, {}, { [HINT]: 'LongLived' }, { [HINT]: 'LongLived' }],
    ['upper case', { [HINT]: 'LONGLIVED' }, {}, { [HINT]: 'LongLived' }, { [HINT]: 'LongLived' }],
    ['tabs and newline', { [HINT]: '\tLongLived\n' }, {}, { [HINT]: 'LongLived' }, { [HINT]: 'LongLived' }],
    [
      'threshold trimmed',
      { [HINT]: 'LongLived', [THRESHOLD]: ' 1000 ' },
      {},
      { [HINT]: 'LongLived', [THRESHOLD]: '1000' },
      { [HINT]: 'LongLived' },
    ],
    [
      'threshold leading zeros',
      { [HINT]: 'LongLived', [THRESHOLD]: '0042' },
      {},
      { [HINT]: 'LongLived', [THRESHOLD]: '42' },
      { [HINT]: 'LongLived' },
    ],
    [
      'threshold zero stays',
      { [HINT]: 'LongLived', [THRESHOLD]: '000' },
      {},
      { [HINT]: 'LongLived', [THRESHOLD]: '0' },
      { [HINT]: 'LongLived' },
    ],
    [
      'non-numeric threshold only trimmed',
      { [HINT]: 'LongLived', [THRESHOLD]: ' ten ' },
      {},
      { [HINT]: 'LongLived', [THRESHOLD]: 'ten' },
      { [HINT]: 'LongLived' },
    ],
    [
      'ShortLived canonicalized like LongLived',
      { [HINT]: ' shortLIVED ' },
      {},
      { [HINT]: 'ShortLived' },
      { [HINT]: 'ShortLived' },
    ],
    [
      'timeout: whitespace, unit case, leading zeros',
      { [HINT]: 'ShortLived', [TIMEOUT]: ' 05S ' },
      {},
      { [HINT]: 'ShortLived', [TIMEOUT]: '5s' },
      { [HINT]: 'ShortLived' },
    ],
    [
      'timeout: the unit is kept (120s stays 120s)',
      { [HINT]: 'ShortLived', [TIMEOUT]: '120s' },
      {},
      { [HINT]: 'ShortLived', [TIMEOUT]: '120s' },
      { [HINT]: 'ShortLived' },
    ],
    [
      'timeout: minutes lower-cased',
      { [HINT]: 'ShortLived', [TIMEOUT]: '2M' },
      {},
      { [HINT]: 'ShortLived', [TIMEOUT]: '2m' },
      { [HINT]: 'ShortLived' },
    ],
    [
      'timeout: not a duration, only trimmed',
      { [HINT]: 'ShortLived', [TIMEOUT]: ' soon ' },
      {},
      { [HINT]: 'ShortLived', [TIMEOUT]: 'soon' },
      { [HINT]: 'ShortLived' },
    ],
    ['unknown hint left for validation, label untouched', { [HINT]: 'Bogus' }, {}, { [HINT]: 'Bogus' }, {}],
    ['hint removed: label removed', {}, { [HINT]: 'LongLived' }, {}, {}],
    [
      'stale label corrected',
      { [HINT]: 'LongLived' },
      { [HINT]: 'Other' },
      { [HINT]: 'LongLived' },
      { [HINT]: 'LongLived' },
    ],
    ['unhinted: nothing', {}, {}, {}, {}],
  ];
  for (const [name, annIn, labIn, annOut, labOut] of cases) {
    const svc = completeService({ annotations: { ...base, ...annIn }, labels: { app: 'web', ...labIn } });
    const r = defaulted(svc);
    t.same(
      r.object.metadata,
      { ...svc.metadata, annotations: { ...base, ...annOut }, labels: { app: 'web', ...labOut } },
      name,
    );
    // The patch applies cleanly to the input and yields exactly the defaulted object.
    const applied = fjp.applyPatch(structuredClone(svc), r.patch, true, false).newDocument;
    t.same(applied, r.object, `${name}: patch round trip`);
  }
});

t.test('no change means no patch and the same object', async (t) => {
  const svc = completeService({ annotations: { [HINT]: 'LongLived' }, labels: { [HINT]: 'LongLived' } });
  const r = defaulted(svc);
  t.same(r.patch, []);
  t.equal(r.object, svc);
});

t.test('defaulting warns once about normalisation', async (t) => {
  const r = defaulted(completeService({ annotations: { [HINT]: ' longlived' } }));
  t.equal(r.warnings.length, 1);
  t.match(r.warnings[0], /defaulted to "LongLived"/);
});

t.test('absent maps: the whole map is added', async (t) => {
  const svc = completeService({ annotations: { [HINT]: 'longlived' }, labels: undefined });
  const r = defaulted(svc);
  t.same(r.patch, [
    { op: 'replace', path: '/metadata/annotations/flowhint.dev~1traffic-hint', value: 'LongLived' },
    { op: 'add', path: '/metadata/labels', value: { [HINT]: 'LongLived' } },
  ]);
  const noAnnotations = completeService({ annotations: undefined, labels: undefined });
  t.same(defaulted(noAnnotations).patch, [], 'no annotations map at all: nothing to do');
  const nullLabels = completeService({ annotations: { [HINT]: 'LongLived' } });
  nullLabels.metadata.labels = null;
  const n = defaulted(nullLabels);
  t.same(fjp.applyPatch(structuredClone(nullLabels), n.patch).newDocument.metadata.labels, { [HINT]: 'LongLived' });
});

t.test('keys needing ~0 and ~1 stay escaped correctly', async (t) => {
  const svc = completeService({
    annotations: { 'a~b/c': 'x', [HINT]: 'LONGLIVED' },
    labels: { 'weird~key/with/slashes': 'y', [HINT]: 'stale' },
  });
  const r = defaulted(svc);
  for (const op of r.patch) t.match(op.path, /^\/metadata\/(annotations|labels)\/flowhint\.dev~1traffic-hint$/);
  const applied = fjp.applyPatch(structuredClone(svc), r.patch, true, false).newDocument;
  t.same(applied.metadata.annotations, { 'a~b/c': 'x', [HINT]: 'LongLived' });
  t.same(applied.metadata.labels, { 'weird~key/with/slashes': 'y', [HINT]: 'LongLived' });
});

t.test('every field it does not own is untouched (placeholder fixture)', async (t) => {
  const svc = placeholderService();
  svc.metadata.annotations[HINT] = ' LongLived ';
  const before = JSON.stringify(svc);
  const r = defaulted(svc);
  t.equal(JSON.stringify(svc), before, 'input not mutated');
  for (const op of r.patch) t.match(op.path, /^\/metadata\/(annotations|labels)\//);
  const { metadata: a, ...restA } = r.object;
  const { metadata: b, ...restB } = svc;
  t.equal(JSON.stringify(restA), JSON.stringify(restB), 'spec and status byte for byte');
  const { annotations: _a1, labels: _l1, ...metaA } = a as Record<string, unknown>;
  const { annotations: _a2, labels: _l2, ...metaB } = b;
  t.same(metaA, metaB);
});

t.test('maps that are not string maps are skipped, never thrown on', async (t) => {
  for (const bad of [
    null,
    42,
    'x',
    [],
    {},
    { metadata: null },
    { metadata: { annotations: { [HINT]: 7 } } },
    { metadata: { labels: [1] } },
  ]) {
    const r = applyDefaults(bad);
    t.equal(r.kind, 'skipped', JSON.stringify(bad));
  }
});

t.test('defaulting then validation round trip accepts every defaultable input', async (t) => {
  for (const v of ['LongLived', 'longlived', ' LONGLIVED\t']) {
    for (const threshold of [undefined, ' 0 ', '1000000', '007']) {
      const ann: Record<string, string> = { [HINT]: v };
      if (threshold !== undefined) ann[THRESHOLD] = threshold;
      const svc = completeService({ annotations: ann, labels: { app: 'x', [HINT]: 'spoof' } });
      const r = defaulted(svc);
      const result = fjp.applyPatch(structuredClone(svc), r.patch).newDocument;
      t.same(validateService(result).errors, [], `${JSON.stringify(v)} ${JSON.stringify(threshold)}`);
    }
  }
});

t.test('canonicalThreshold', async (t) => {
  t.equal(canonicalThreshold(' 12 '), '12');
  t.equal(canonicalThreshold('0000'), '0');
  t.equal(canonicalThreshold('-5'), '-5');
  t.equal(canonicalThreshold('1e3'), '1e3');
});

t.test('canonical forms: whole values only, leading zeros and spacing dropped, the unit lower-cased', async (t) => {
  const thresholds: Array<[string, string]> = [
    [' 0042 ', '42'],
    ['a42', 'a42'],
    ['42a', '42a'],
  ];
  for (const [given, want] of thresholds) t.equal(canonicalThreshold(given), want, JSON.stringify(given));
  const timeouts: Array<[string, string]> = [
    [' 05S ', '5s'],
    ['5 s', '5s'],
    ['0005m', '5m'],
    ['120s', '120s'],
    ['x5s', 'x5s'],
    ['5sx', '5sx'],
    ['5xs', '5xs'],
    ['1 2s', '1 2s'],
  ];
  for (const [given, want] of timeouts) t.equal(canonicalTimeout(given), want, JSON.stringify(given));
  const seconds: Array<[string, number | undefined]> = [
    ['1s', 1],
    ['600s', 600],
    ['601s', undefined],
    ['10m', 600],
    ['11m', undefined],
    ['1h', undefined],
    ['0s', undefined],
    ['5sx', undefined],
    ['x5s', undefined],
  ];
  for (const [given, want] of seconds) t.equal(timeoutSeconds(given), want, JSON.stringify(given));
});

t.test('an object without readable metadata is skipped, saying where', async (t) => {
  t.match(applyDefaults(null), { kind: 'skipped', reason: /^metadata is not defaultable at <root>: / });
  t.match(applyDefaults({ metadata: { annotations: { [HINT]: 5 } } }), {
    kind: 'skipped',
    reason: /^metadata is not defaultable at metadata\.annotations\.flowhint\.dev\/traffic-hint: /,
  });
});
