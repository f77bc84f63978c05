import t from 'tap';
import { mutate, parseReview, sanitizeWarning, validate } from '../../webhook/review.ts';
import { decodePatch, review } from '../helpers/admission.ts';
import { HINT, THRESHOLD, completeService, hinted } from '../helpers/services.ts';

t.test('parseReview rejects what is not a v1 AdmissionReview with a uid', async (t) => {
  const good = review({ object: hinted() });
  t.equal(parseReview(good).uid, good.request.uid);
  const bad: Array<[string, unknown]> = [
    ['null', null],
    ['array', []],
    ['no request', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }],
    ['v1beta1', { ...good, apiVersion: 'admission.k8s.io/v1beta1' }],
    ['wrong kind', { ...good, kind: 'Service' }],
    ['no uid', { ...good, request: { ...good.request, uid: undefined } }],
    ['empty uid', { ...good, request: { ...good.request, uid: '' } }],
    ['uid not a string', { ...good, request: { ...good.request, uid: 5 } }],
  ];
  for (const [name, body] of bad) {
    t.throws(() => parseReview(body), { code: 'FH_BAD_REVIEW', statusCode: 400 }, name);
  }
  t.throws(() => parseReview({ ...good, request: { ...good.request, uid: undefined } }), /request\.uid/);
});

t.test('mutate: CREATE of a defaultable hint answers a JSON Patch with the uid', async (t) => {
  const d = mutate(parseReview(review({ object: completeService({ annotations: { [HINT]: ' longlived' } }) })));
  t.equal(d.outcome, 'patched');
  const r = d.review.response;
  t.equal(r.uid, '705ab4f5-6393-11e8-b7cc-42010a800002');
  t.equal(r.allowed, true);
  t.equal(r.patchType, 'JSONPatch');
  t.same(
    new Set(decodePatch(r).map((op) => JSON.stringify(op))),
    new Set(
      [
        { op: 'replace', path: '/metadata/annotations/flowhint.dev~1traffic-hint', value: 'LongLived' },
        { op: 'add', path: '/metadata/labels/flowhint.dev~1traffic-hint', value: 'LongLived' },
      ].map((op) => JSON.stringify(op)),
    ),
  );
  t.match(r.warnings, [/defaulted to "LongLived"/]);
  t.equal(d.review.apiVersion, 'admission.k8s.io/v1');
  t.equal(d.review.kind, 'AdmissionReview');
});

t.test('mutate: nothing to change means no patch fields at all', async (t) => {
  const r = mutate(parseReview(review({ object: hinted() }))).review.response;
  t.same(r, { uid: r.uid, allowed: true });
});

t.test('allowed unpatched: DELETE, CONNECT, subresources, other kinds', async (t) => {
  const cases = [
    review({ operation: 'DELETE', object: null, oldObject: completeService({ annotations: { [HINT]: 'x' } }) }),
    review({ operation: 'CONNECT', object: completeService({ annotations: { [HINT]: 'x' } }) }),
    review({ subResource: 'status', object: completeService({ annotations: { [HINT]: 'x' } }) }),
    review({
      kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
      object: { metadata: { annotations: { [HINT]: 'x' } } },
    }),
    review({
      kind: { group: 'example.com', version: 'v1', kind: 'Service' },
      object: { metadata: { annotations: { [HINT]: 'x' } } },
    }),
  ];
  for (const c of cases) {
    for (const decide of [mutate, validate]) {
      const d = decide(parseReview(c));
      t.same(d.review.response, { uid: c.request.uid, allowed: true });
      t.equal(d.outcome, 'skipped');
    }
  }
});

t.test('mutate never crashes on objects the API server has not validated yet', async (t) => {
  const objects: unknown[] = [
    null,
    'x',
    7,
    [],
    {},
    { metadata: 5 },
    { metadata: { annotations: 'x' } },
    { metadata: { annotations: { [HINT]: 1 } } },
  ];
  for (const object of objects) {
    const d = mutate(parseReview(review({ object })));
    t.same(d.review.response, { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true }, JSON.stringify(object));
  }
});

t.test('validate: denial is 422 Invalid with causes naming the field', async (t) => {
  const d = validate(parseReview(review({ object: hinted('Bogus', {}, 'LongLived') })));
  t.equal(d.outcome, 'rejected');
  const r = d.review.response;
  t.equal(r.allowed, false);
  t.notOk(r.patch);
  t.notOk(r.patchType);
  t.equal(r.status?.code, 422);
  t.equal(r.status?.reason, 'Invalid');
  t.equal(r.status?.status, 'Failure');
  t.same(r.status?.details.causes, [
    {
      reason: 'FieldValueNotSupported',
      field: 'metadata.annotations[flowhint.dev/traffic-hint]',
      message: 'flowhint.dev/traffic-hint: unsupported value "Bogus"; supported values: "LongLived", "ShortLived"',
    },
    {
      reason: 'FieldValueInvalid',
      field: 'metadata.labels[flowhint.dev/traffic-hint]',
      message:
        'label flowhint.dev/traffic-hint "LongLived" must equal the flowhint.dev/traffic-hint annotation "Bogus"; remove the label, flowhint writes it',
    },
  ]);
  t.match(r.status?.message, /^Service shop\/web is invalid: metadata\.annotations\[flowhint\.dev\/traffic-hint\]: /);
  t.equal(r.status?.details.name, 'web');
});

t.test('validate: UPDATE uses oldObject; dryRun is handled like any request', async (t) => {
  const old = hinted();
  const removed = completeService();
  t.equal(
    validate(parseReview(review({ operation: 'UPDATE', object: removed, oldObject: old }))).review.response.allowed,
    true,
    'removing the hint',
  );
  const spoof = completeService({ labels: { [HINT]: 'LongLived' } });
  t.equal(
    validate(parseReview(review({ operation: 'UPDATE', object: spoof, oldObject: old }))).review.response.allowed,
    false,
    'label kept without annotation',
  );
  const dry = validate(parseReview(review({ object: hinted('Bogus'), dryRun: true }))).review.response;
  t.match(dry, {
    uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
    allowed: false,
    status: { code: 422, reason: 'Invalid' },
  });
  t.equal(dry.status?.details.causes[0]?.field, 'metadata.annotations[flowhint.dev/traffic-hint]', 'dryRun: denied');
  const dryMutate = mutate(
    parseReview(review({ object: completeService({ annotations: { [HINT]: 'longlived' } }), dryRun: true })),
  ).review.response;
  t.same(
    decodePatch(dryMutate),
    [
      { op: 'add', path: '/metadata/labels/flowhint.dev~1traffic-hint', value: 'LongLived' },
      { op: 'replace', path: '/metadata/annotations/flowhint.dev~1traffic-hint', value: 'LongLived' },
    ],
    'dryRun: patched',
  );
});

t.test('validate: UPDATE ratchets against oldObject; CREATE and a changed hint do not', async (t) => {
  // A Service stored before flowhint was installed, with a threshold that is not a number.
  const stored = () => hinted('LongLived', { 'flowhint.dev/offload-after-packets': 'many' });
  const relabelled = stored();
  relabelled.metadata.labels = { ...relabelled.metadata.labels, app: 'shop' };
  const update = validate(parseReview(review({ operation: 'UPDATE', object: relabelled, oldObject: stored() })));
  t.equal(update.review.response.allowed, true, 'an unrelated update of the stored object is allowed');
  t.same(update.review.response.warnings, [
    'flowhint: existing invalid hint kept and not offloaded (FH_THRESHOLD_INVALID); fix it',
  ]);
  t.equal(update.outcome, 'warned');
  const create = validate(parseReview(review({ operation: 'CREATE', object: relabelled, oldObject: stored() })));
  t.equal(create.review.response.allowed, false, 'CREATE ignores an oldObject');
  const worse = stored();
  worse.metadata.annotations['flowhint.dev/offload-after-packets'] = 'lots';
  t.equal(
    validate(parseReview(review({ operation: 'UPDATE', object: worse, oldObject: stored() }))).review.response.allowed,
    false,
    'a changed invalid value is not ratcheted',
  );
  const fromValid = validate(
    parseReview(review({ operation: 'UPDATE', object: relabelled, oldObject: hinted('LongLived') })),
  );
  t.equal(fromValid.review.response.allowed, false, 'an error the stored object did not have is not ratcheted');
  const noOld = validate(parseReview(review({ operation: 'UPDATE', object: relabelled, oldObject: null })));
  t.equal(noOld.review.response.allowed, false, 'an UPDATE without oldObject is validated alone');
});

t.test('warnings are printable and at most 120 characters', async (t) => {
  t.equal(sanitizeWarning('a\nb\u0000c'), 'a b c');
  const long = sanitizeWarning('x'.repeat(500));
  t.equal(long.length, 120);
  const svc = hinted();
  svc.spec.ports = [{ port: 1, protocol: 'SCTP' }];
  const w = validate(parseReview(review({ object: svc }))).review.response.warnings ?? [];
  t.equal(w.length, 2);
  for (const x of w) t.ok(x.length <= 120);
});

t.test('parseReview says where the body is wrong and what to set', async (t) => {
  t.throws(() => parseReview(null), {
    message:
      'expected an admission.k8s.io/v1 AdmissionReview with request.uid: body: Invalid input: expected object, received null; set admissionReviewVersions: [v1] in the webhook configuration',
  });
  const good = review({ object: hinted() });
  t.throws(() => parseReview({ ...good, request: { ...good.request, uid: '' } }), {
    message: /^expected an admission\.k8s\.io\/v1 AdmissionReview with request\.uid: request\.uid: /,
  });
  t.throws(() => parseReview({ ...good, request: { ...good.request, kind: { group: '', version: 'v1' } } }), {
    message: /request\.kind\.kind/,
  });
});

t.test('sanitizeWarning: 120 characters kept whole, 121 cut to 119 and an ellipsis', async (t) => {
  t.equal(sanitizeWarning('x'.repeat(120)), 'x'.repeat(120));
  t.equal(sanitizeWarning('x'.repeat(121)), `${'x'.repeat(119)}…`);
});

t.test('only core v1 Services are judged; the Service is named from the request or the object', async (t) => {
  const bad = () => completeService({ annotations: { [HINT]: 'x' } });
  for (const kind of [
    { group: 'example.com', version: 'v1', kind: 'Service' },
    { group: '', version: 'v2', kind: 'Service' },
    { group: '', version: 'v1', kind: 'Services' },
  ]) {
    const d = validate(parseReview(review({ kind, object: bad() })));
    t.equal(d.outcome, 'skipped', `${kind.group}/${kind.version} ${kind.kind}`);
  }
  const unnamed = review({ object: bad() });
  unnamed.request.name = '';
  t.equal(validate(parseReview(unnamed)).service, 'shop/web', 'an empty request name: from metadata.name');
  const d = validate(parseReview(review({ object: hinted('Turbo', { [THRESHOLD]: 'x' }, null) })));
  t.same(
    [d.outcome, d.note, d.codes],
    ['rejected', 'FH_HINT_UNSUPPORTED,FH_THRESHOLD_INVALID', ['FH_HINT_UNSUPPORTED', 'FH_THRESHOLD_INVALID']],
  );
  const sctp = hinted();
  sctp.spec.ports = [{ port: 80 }, { port: 9, protocol: 'SCTP' }];
  t.equal(validate(parseReview(review({ object: sctp }))).outcome, 'warned');
  t.equal(validate(parseReview(review({ object: hinted() }))).outcome, 'allowed');
});
