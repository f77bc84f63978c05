import t from 'tap';
import { intake, type IntakeEvent } from '../../../agent/state/intake.ts';
import { svc } from '../../helpers/agent.ts';

const up = (object: Record<string, unknown>): IntakeEvent => {
  const meta = object.metadata as { namespace: string; name: string };
  return { type: 'upsert', key: `${meta.namespace}/${meta.name}`, object };
};
const unhinted = (name: string) => {
  const o = svc({ name });
  const meta = o.metadata as { annotations: Record<string, string>; labels: Record<string, string> };
  meta.annotations = {};
  meta.labels = {};
  return o;
};

t.test('usable, unhinted, unusable and deleted Services', async (t) => {
  const b = intake(
    [
      up(svc({ name: 'good', clusterIPs: ['10.96.0.1'], ports: [{ port: 80, protocol: 'TCP' }] })),
      up(unhinted('plain')),
      up(svc({ name: 'bad', hint: 'Turbo' })),
      { type: 'delete', key: 'default/gone' },
    ],
    { threshold: 20 },
  );
  t.same([...b.updates.keys()], ['default/good', 'default/plain', 'default/bad', 'default/gone']);
  const good = b.updates.get('default/good');
  t.match(good, { key: 'default/good', hint: 'LongLived', threshold: 20 }, 'the default threshold');
  t.same(good?.vips, [{ family: 'ip', addr: '10.96.0.1' }]);
  t.equal(b.updates.get('default/plain'), undefined, 'unhinted: nothing to program');
  t.equal(b.updates.get('default/bad'), undefined, 'unusable: nothing to program');
  t.equal(b.updates.get('default/gone'), undefined, 'deleted: nothing to program');
  t.same([...b.refused.keys()], ['default/bad'], 'only the unusable one is refused');
  t.equal(b.refused.get('default/bad')?.code, 'FH_HINT_UNSUPPORTED');
  t.same(
    [...b.cleared].sort(),
    ['default/gone', 'default/good', 'default/plain'],
    'the others clear any earlier refusal',
  );
});

t.test('within a batch, the last event for a Service decides', async (t) => {
  const fixed = intake([up(svc({ name: 'x', hint: 'Turbo' })), up(svc({ name: 'x', threshold: '7' }))], {
    threshold: 20,
  });
  t.same([...fixed.refused.keys()], [], 'refused, then fixed: not refused');
  t.same([...fixed.cleared], ['default/x']);
  t.equal(fixed.updates.get('default/x')?.threshold, 7, 'its own threshold');
  const broken = intake([up(svc({ name: 'x' })), up(svc({ name: 'x', hint: 'Turbo' }))], { threshold: 20 });
  t.same([...broken.refused.keys()], ['default/x'], 'fine, then broken: refused');
  t.same([...broken.cleared], []);
  t.equal(broken.updates.get('default/x'), undefined);
  const deleted = intake([up(svc({ name: 'x', hint: 'Turbo' })), { type: 'delete', key: 'default/x' }], {
    threshold: 20,
  });
  t.same([...deleted.refused.keys()], [], 'refused, then deleted: not refused');
  t.same([...deleted.cleared], ['default/x']);
});

t.test('ShortLived takes the default timeout unless it sets its own', async (t) => {
  const b = intake(
    [up(svc({ name: 'dns', hint: 'ShortLived' })), up(svc({ name: 'own', hint: 'ShortLived', timeout: '9s' }))],
    { threshold: 20, timeout: 5 },
  );
  t.equal(b.updates.get('default/dns')?.timeout, 5);
  t.equal(b.updates.get('default/own')?.timeout, 9);
});
