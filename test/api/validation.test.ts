import t from 'tap';
import { HINT_VALUES, explainErrors, validateService } from '../../api/index.ts';
import { HINT, THRESHOLD, TIMEOUT, completeService, hinted } from '../helpers/services.ts';

t.test('valid hinted and unhinted Services', async (t) => {
  t.same(validateService(hinted()), { errors: [], warnings: [] }, 'hint + mirror label');
  t.same(validateService(hinted('LongLived', { [THRESHOLD]: '0' })).errors, [], 'threshold 0');
  t.same(validateService(hinted('LongLived', { [THRESHOLD]: '1000000' })).errors, [], 'threshold max');
  t.same(validateService(completeService()), { errors: [], warnings: [] }, 'unhinted');
  t.same(
    validateService(hinted('ShortLived')),
    { errors: [], warnings: [] },
    'ShortLived without a timeout (the agent default)',
  );
  for (const d of ['1s', '5s', '120s', '600s', '2m', '10m'])
    t.same(validateService(hinted('ShortLived', { [TIMEOUT]: d })).errors, [], `ShortLived, conntrack-timeout ${d}`);
  t.same(validateService(completeService({ annotations: undefined, labels: undefined })).errors, [], 'no maps');
});

t.test('every invalid value, with field, code and message (table)', async (t) => {
  const cases: Array<{ name: string; svc: Record<string, any>; field: string; code: string; message: RegExp }> = [
    {
      name: 'unknown value',
      svc: hinted('Bogus', {}, 'Bogus'),
      field: `metadata.annotations[${HINT}]`,
      code: 'FH_HINT_UNSUPPORTED',
      message: /flowhint\.dev\/traffic-hint: unsupported value "Bogus"; supported values: "LongLived", "ShortLived"$/,
    },
    {
      name: 'non-canonical ShortLived',
      svc: hinted('shortlived', {}, 'shortlived'),
      field: `metadata.annotations[${HINT}]`,
      code: 'FH_HINT_UNSUPPORTED',
      message: /write "ShortLived"/,
    },
    {
      name: 'threshold with ShortLived',
      svc: hinted('ShortLived', { [THRESHOLD]: '10' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_WITHOUT_HINT',
      message:
        /offload-after-packets is not meaningful with flowhint\.dev\/traffic-hint: ShortLived; remove the threshold/,
    },
    {
      name: 'timeout without hint',
      svc: completeService({ annotations: { [TIMEOUT]: '5s' } }),
      field: `metadata.annotations[${TIMEOUT}]`,
      code: 'FH_TIMEOUT_WITHOUT_SHORTLIVED',
      message:
        /conntrack-timeout is only meaningful with flowhint\.dev\/traffic-hint: ShortLived; add the hint or remove the timeout/,
    },
    {
      name: 'timeout with LongLived',
      svc: hinted('LongLived', { [TIMEOUT]: '5s' }),
      field: `metadata.annotations[${TIMEOUT}]`,
      code: 'FH_TIMEOUT_WITHOUT_SHORTLIVED',
      message: /it does nothing for "LongLived": remove the timeout$/,
    },
    ...['0s', '601s', '11m', '1h', '5', '5S', ' 5s', '05s', '5ms', '1.5s', '-5s', '', 'P5S'].map((d) => ({
      name: `timeout ${JSON.stringify(d)}`,
      svc: hinted('ShortLived', { [TIMEOUT]: d }),
      field: `metadata.annotations[${TIMEOUT}]`,
      code: 'FH_TIMEOUT_INVALID',
      message: new RegExp(
        `^flowhint\\.dev/conntrack-timeout: invalid value ${JSON.stringify(d).replace(/[.*+?^$()|[\]\\]/g, '\\$&')}; must be a whole number of seconds or minutes \\("5s", "2m"\\) from 1s to 10m$`,
      ),
    })),
    {
      name: 'empty value',
      svc: hinted('', {}, null),
      field: `metadata.annotations[${HINT}]`,
      code: 'FH_HINT_UNSUPPORTED',
      message: /unsupported value ""/,
    },
    {
      name: 'non-canonical case',
      svc: hinted('longlived', {}, 'longlived'),
      field: `metadata.annotations[${HINT}]`,
      code: 'FH_HINT_UNSUPPORTED',
      message: /write "LongLived"/,
    },
    {
      name: 'threshold negative',
      svc: hinted('LongLived', { [THRESHOLD]: '-1' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_INVALID',
      message: /invalid value "-1"; must be a decimal integer from 0 to 1000000/,
    },
    {
      name: 'threshold too big',
      svc: hinted('LongLived', { [THRESHOLD]: '1000001' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_INVALID',
      message: /"1000001"/,
    },
    {
      name: 'threshold huge',
      svc: hinted('LongLived', { [THRESHOLD]: '99999999999999999999' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_INVALID',
      message: /must be a decimal integer/,
    },
    {
      name: 'threshold float',
      svc: hinted('LongLived', { [THRESHOLD]: '1.5' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_INVALID',
      message: /"1\.5"/,
    },
    {
      name: 'threshold exponent',
      svc: hinted('LongLived', { [THRESHOLD]: '1e3' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_INVALID',
      message: /"1e3"/,
    },
    {
      name: 'threshold hex',
      svc: hinted('LongLived', { [THRESHOLD]: '0x10' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_INVALID',
      message: /"0x10"/,
    },
    {
      name: 'threshold untrimmed',
      svc: hinted('LongLived', { [THRESHOLD]: ' 5' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_INVALID',
      message: /" 5"/,
    },
    {
      name: 'threshold leading zero',
      svc: hinted('LongLived', { [THRESHOLD]: '05' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_INVALID',
      message: /"05"/,
    },
    {
      name: 'threshold empty',
      svc: hinted('LongLived', { [THRESHOLD]: '' }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_INVALID',
      message: /""/,
    },
    {
      name: 'threshold without hint',
      svc: completeService({ annotations: { [THRESHOLD]: '10' } }),
      field: `metadata.annotations[${THRESHOLD}]`,
      code: 'FH_THRESHOLD_WITHOUT_HINT',
      message: /only meaningful with flowhint\.dev\/traffic-hint: LongLived/,
    },
    {
      name: 'label spoofed without hint',
      svc: completeService({ labels: { [HINT]: 'LongLived' } }),
      field: `metadata.labels[${HINT}]`,
      code: 'FH_LABEL_WITHOUT_HINT',
      message: /set the annotation instead of the label/,
    },
    {
      name: 'label differs',
      svc: hinted('LongLived', {}, 'Other'),
      field: `metadata.labels[${HINT}]`,
      code: 'FH_LABEL_MISMATCH',
      message: /"Other" must equal/,
    },
    {
      name: 'ExternalName',
      svc: { ...hinted(), spec: { type: 'ExternalName', externalName: 'db.example.com' } },
      field: 'spec.type',
      code: 'FH_NO_VIRTUAL_IP',
      message: /ExternalName: there is no virtual IP to accelerate/,
    },
    {
      name: 'headless',
      svc: { ...hinted(), spec: { type: 'ClusterIP', clusterIP: 'None', ports: [{ port: 80 }] } },
      field: 'spec.clusterIP',
      code: 'FH_NO_VIRTUAL_IP',
      message: /headless Service \(clusterIP: None\)/,
    },
    {
      name: 'unreadable spec',
      svc: { ...hinted(), spec: { ports: [{ port: 'eighty' }] } },
      field: 'spec.ports.0.port',
      code: 'FH_SERVICE_UNREADABLE',
      message: /cannot read the Service at spec\.ports\.0\.port/,
    },
  ];
  for (const c of cases) {
    const { errors } = validateService(c.svc);
    t.equal(errors.length, 1, `${c.name}: one error (${JSON.stringify(errors)})`);
    t.equal(errors[0]?.field, c.field, `${c.name}: field`);
    t.equal(errors[0]?.code, c.code, `${c.name}: code`);
    t.match(errors[0]?.message, c.message, `${c.name}: message`);
  }
});

t.test('several errors are all reported', async (t) => {
  const svc = hinted('Bogus', { [THRESHOLD]: 'x' }, 'Other');
  t.same(
    validateService(svc).errors.map((e) => e.code),
    ['FH_HINT_UNSUPPORTED', 'FH_THRESHOLD_INVALID', 'FH_LABEL_MISMATCH'],
  );
});

t.test('hostile values are quoted, escaped and bounded in messages', async (t) => {
  const svc = hinted('x"\n\u0000\u2028' + 'A'.repeat(5000), {}, null);
  const [e] = validateService(svc).errors;
  t.ok(e);
  // eslint-disable-next-line no-control-regex -- the test is that no control character gets through.
  t.notMatch(e!.message, /[\n\u0000\u2028]/);
  t.ok(e!.message.length < 300, `message bounded: ${e!.message.length}`);
});

t.test('warnings: SCTP and no TCP/UDP port', async (t) => {
  const sctp = hinted();
  sctp.spec.ports = [
    { port: 80, protocol: 'TCP' },
    { port: 9999, protocol: 'SCTP' },
  ];
  const r = validateService(sctp);
  t.same(r.errors, []);
  t.equal(r.warnings.length, 1);
  t.match(r.warnings[0], /SCTP port\(s\) 9999 are not offloaded/);
  const onlySctp = hinted();
  onlySctp.spec.ports = [{ port: 9999, protocol: 'SCTP' }];
  t.equal(validateService(onlySctp).warnings.length, 2);
  const noPorts = hinted();
  delete noPorts.spec.ports;
  t.match(validateService(noPorts).warnings, [/no TCP or UDP port/]);
  const defaultProtocol = hinted();
  defaultProtocol.spec.ports = [{ port: 53 }];
  t.same(validateService(defaultProtocol).warnings, [], 'absent protocol means TCP');
  for (const w of [...r.warnings, ...validateService(onlySctp).warnings]) t.ok(w.length <= 120, `≤120: ${w}`);
});

t.test('UPDATE ratchets errors the stored object already had, on unchanged hint fields', async (t) => {
  const old = hinted('Bogus', {}, null);
  const updated = structuredClone(old);
  updated.spec.selector = { app: 'web-v2' };
  const r = validateService(updated, old);
  t.same(r.errors, [], 'unrelated update of a pre-existing bad hint is allowed');
  t.match(r.warnings, [/existing invalid hint kept and not offloaded \(FH_HINT_UNSUPPORTED\)/]);
  const changed = hinted('Bogus2', {}, null);
  t.equal(validateService(changed, old).errors.length, 1, 'changing the hint to another bad value is rejected');
  t.equal(validateService(old, hinted()).errors.length, 1, 'making a good hint bad is rejected');
  const ext = { ...hinted(), spec: { type: 'ExternalName', externalName: 'x.example' } };
  t.equal(validateService(ext, hinted()).errors.length, 1, 'turning a hinted Service into ExternalName is rejected');
});

t.test('UPDATE ratchets conntrack-timeout as it does the other keys', async (t) => {
  const old = hinted('ShortLived', { [TIMEOUT]: '1h' });
  const updated = structuredClone(old);
  updated.spec.selector = { app: 'web-v2' };
  const r = validateService(updated, old);
  t.same(r.errors, [], 'an unchanged bad timeout does not block an unrelated update');
  t.match(r.warnings, [/existing invalid hint kept and not offloaded \(FH_TIMEOUT_INVALID\)/]);
  t.same(
    validateService(hinted('ShortLived', { [TIMEOUT]: '2h' }), old).errors.map((e) => e.code),
    ['FH_TIMEOUT_INVALID'],
    'changing it to another bad value is rejected',
  );
  t.same(
    validateService(hinted('ShortLived', { [TIMEOUT]: '1h' }), hinted('ShortLived', { [TIMEOUT]: '5s' })).errors.map(
      (e) => e.code,
    ),
    ['FH_TIMEOUT_INVALID'],
    'making a good timeout bad is rejected',
  );
});

t.test('the value set is the extensible enum', async (t) => {
  t.same([...HINT_VALUES], ['LongLived', 'ShortLived']);
});

t.test('warnings: SCTP ports (the first five named), no TCP or UDP port at all', async (t) => {
  const sctp = hinted();
  sctp.spec.ports = [1, 2, 3, 4, 5, 6, 7].map((port) => ({ port, protocol: 'SCTP' }));
  t.same(validateService(sctp), {
    errors: [],
    warnings: [
      'flowhint: SCTP port(s) 1,2,3,4,5 are not offloaded; flowtables handle only TCP and UDP',
      'flowhint: the Service has no TCP or UDP port, so nothing of it will be offloaded',
    ],
  });
  const mixed = hinted();
  mixed.spec.ports = [{ port: 9, protocol: 'SCTP' }, { port: 80 }];
  t.same(validateService(mixed).warnings, [
    'flowhint: SCTP port(s) 9 are not offloaded; flowtables handle only TCP and UDP',
  ]);
  const headless = hinted();
  headless.spec.clusterIP = 'None';
  headless.spec.clusterIPs = ['None'];
  headless.spec.ports = [];
  const r = validateService(headless);
  t.same(
    r.errors.map((e) => e.code),
    ['FH_NO_VIRTUAL_IP'],
  );
  t.same(r.warnings, [], 'refused: no warning about ports on top');
});

t.test('a parameter without the hint is judged alone, not the Service it sits on', async (t) => {
  const s = completeService({ annotations: { [THRESHOLD]: '10' } });
  s.spec.clusterIP = 'None';
  s.spec.clusterIPs = ['None'];
  t.same(
    validateService(s).errors.map((e) => e.code),
    ['FH_THRESHOLD_WITHOUT_HINT'],
  );
});

t.test('ratcheting keeps the warnings of the update and needs every owned key unchanged', async (t) => {
  const stored = hinted('LongLived', { [THRESHOLD]: 'many' });
  stored.spec.ports = [{ port: 80 }, { port: 9, protocol: 'SCTP' }];
  const updated = structuredClone(stored);
  updated.spec.selector = { app: 'web-v2' };
  t.same(validateService(updated, stored), {
    errors: [],
    warnings: [
      'flowhint: SCTP port(s) 9 are not offloaded; flowtables handle only TCP and UDP',
      'flowhint: existing invalid hint kept and not offloaded (FH_THRESHOLD_INVALID); fix it',
    ],
  });
  const badLabel = hinted('LongLived', {}, 'Other');
  const relabelled = hinted('LongLived', {}, 'Another');
  t.same(
    validateService(relabelled, badLabel).errors.map((e) => e.code),
    ['FH_LABEL_MISMATCH'],
    'a changed (still wrong) label is not ratcheted',
  );
  const same = structuredClone(badLabel);
  same.spec.selector = { app: 'web-v2' };
  t.same(validateService(same, badLabel).errors, [], 'the same wrong label is');
});

t.test('explainErrors and an unreadable object', async (t) => {
  t.equal(
    explainErrors([
      { field: 'a', type: 'FieldValueInvalid', code: 'FH_THRESHOLD_INVALID', message: 'one' },
      { field: 'b', type: 'FieldValueInvalid', code: 'FH_TIMEOUT_INVALID', message: 'two' },
    ]),
    'a: one; b: two',
  );
  t.same(validateService(null).warnings, [], 'unreadable: an error, no warnings');
});
