/** admit: default, then validate, then explain; what the file source and backfill use. */
import t from 'tap';
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
  t.ok(r.patch.length > 0);
  t.ok(
    r.patch.every((op) => op.path.startsWith('/metadata/')),
    'the patch touches only the owned maps',
  );
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
