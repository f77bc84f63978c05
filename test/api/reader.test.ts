import t from 'tap';
import { effectiveThreshold, readHint } from '../../api/index.ts';
import { HINT, THRESHOLD, completeService, hinted } from '../helpers/services.ts';

t.test('usable hint', async (t) => {
  const r = readHint(hinted('LongLived', { [THRESHOLD]: '1000' }));
  t.ok(r.usable);
  if (!r.usable) return;
  t.equal(r.hint.key, 'shop/web');
  t.equal(r.hint.hint, 'LongLived');
  t.equal(r.hint.offloadAfterPackets, 1000);
  t.equal(effectiveThreshold(r.hint, 20), 1000);
  const d = readHint(hinted());
  t.ok(d.usable && effectiveThreshold(d.hint, 33) === 33, 'absent threshold means the agent default');
});

t.test('unusable, with the reason (table)', async (t) => {
  const cases: Array<[string, unknown, string]> = [
    ['not an object', 'nope', 'FH_SERVICE_UNREADABLE'],
    ['no hint', completeService(), 'FH_NOT_HINTED'],
    ['bad value', hinted('Bogus', {}, 'Bogus'), 'FH_HINT_UNSUPPORTED'],
    ['bad threshold', hinted('LongLived', { [THRESHOLD]: '-3' }), 'FH_THRESHOLD_INVALID'],
    ['headless', { ...hinted(), spec: { clusterIP: 'None' } }, 'FH_NO_VIRTUAL_IP'],
    ['label missing: not admitted', hinted('LongLived', {}, null), 'FH_NOT_ADMITTED'],
    [
      'label mismatch',
      completeService({ annotations: { [HINT]: 'LongLived' }, labels: { [HINT]: 'x' } }),
      'FH_LABEL_MISMATCH',
    ],
  ];
  for (const [name, svc, code] of cases) {
    const r = readHint(svc);
    t.equal(r.usable, false, name);
    if (!r.usable) {
      t.equal(r.code, code, `${name}: ${r.reason}`);
      t.ok(r.reason.length > 0);
    }
  }
});
