/** admit: default, then validate, then explain; what the file source and backfill use. */
import t from 'tap';
import fjp from 'fast-json-patch';
import { admit } from '../../api/index.ts';

const service = (annotations: Record<string, string>, labels: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'web', namespace: 'demo', annotations, labels, futureField: { kept: true } },
  spec: { clusterIP: '10.96.0.10', ports: [{ port: 80 }] },
});

t.test('a hinted Service is defaulted (canonical value, mirror label) with the patch that does it', async (t) => {
  const r = admit(service({ 'flowhint.dev/traffic-hint': 'longlived' }));
  if (!r.ok) return t.fail(r.reason);
  t.match(r.object, {
    metadata: {
      annotations: { 'flowhint.dev/traffic-hint': 'LongLived' },
      labels: { 'flowhint.dev/traffic-hint': 'LongLived' },
      futureField: { kept: true },
    },
  });
  t.same(
    r.patch,
    [
      { op: 'add', path: '/metadata/labels/flowhint.dev~1traffic-hint', value: 'LongLived' },
      { op: 'replace', path: '/metadata/annotations/flowhint.dev~1traffic-hint', value: 'LongLived' },
    ],
    'the patch: the canonical value and the mirror label, nothing else',
  );
  const input = service({ 'flowhint.dev/traffic-hint': 'longlived' });
  t.same(
    fjp.applyPatch(input, r.patch, true, false).newDocument,
    r.object,
    'the patch turns the input into the object',
  );
  const unlabelled = service({ 'flowhint.dev/traffic-hint': 'LongLived' });
  delete (unlabelled.metadata as { labels?: unknown }).labels;
  const l = admit(unlabelled);
  if (!l.ok) return t.fail(l.reason);
  t.same(
    l.patch,
    [{ op: 'add', path: '/metadata/labels', value: { 'flowhint.dev/traffic-hint': 'LongLived' } }],
    'no labels at all: the map is added',
  );
  const done = admit(
    service({ 'flowhint.dev/traffic-hint': 'LongLived' }, { 'flowhint.dev/traffic-hint': 'LongLived' }),
  );
  t.same(done.ok && done.patch, [], 'canonical already: no patch');
});

t.test('an invalid one is refused with the first code and every field explained', async (t) => {
  const r = admit(
    service({
      'flowhint.dev/traffic-hint': 'LongLived',
      'flowhint.dev/offload-after-packets': 'many',
      'flowhint.dev/conntrack-timeout': '5s',
    }),
  );
  t.equal(r.ok, false);
  if (r.ok) return;
  t.equal(r.code, 'FH_THRESHOLD_INVALID');
  t.match(r.reason, /offload-after-packets.*; .*conntrack-timeout/, 'both errors, field: message; field: message');
});

t.test('an unreadable object is refused, not thrown', async (t) => {
  const r = admit({ metadata: { annotations: 'no' } });
  t.match(r, { ok: false, code: 'FH_SERVICE_UNREADABLE' });
});

t.test('an unhinted Service passes unchanged', async (t) => {
  const r = admit(service({}));
  t.match(r, { ok: true, patch: [] });
});

t.test('admit: the warnings of defaulting and of validation, in that order', async (t) => {
  const s = service({ 'flowhint.dev/traffic-hint': 'longlived' });
  s.spec.ports = [{ port: 80 }, { port: 9, protocol: 'SCTP' } as { port: number }];
  const r = admit(s);
  t.same(r.ok && r.warnings, [
    'flowhint.dev/traffic-hint: "longlived" defaulted to "LongLived"',
    'flowhint: SCTP port(s) 9 are not offloaded; flowtables handle only TCP and UDP',
  ]);
});
