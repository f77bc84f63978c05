import t from 'tap';
import { Refusals } from '../../../agent/state/refusals.ts';

t.test('a refusal is news the first time, when it changes, and when it comes back after a fix', async (t) => {
  const r = new Refusals();
  t.equal(r.refuse('demo/a', { code: 'FH_X', reason: 'bad' }), true, 'first time');
  t.equal(r.refuse('demo/a', { code: 'FH_X', reason: 'bad' }), false, 'the same refusal again');
  t.equal(r.refuse('demo/a', { code: 'FH_X', reason: 'worse' }), true, 'another reason');
  t.equal(r.refuse('demo/a', { code: 'FH_Y', reason: 'worse' }), true, 'another code');
  t.equal(
    r.refuse('demo/a', { code: 'FH_Y', reason: 'worse', where: 'a.yaml#0' }),
    false,
    'where it was found is not part of it',
  );
  r.clear('demo/a');
  t.same(r.list(), [], 'cleared: not listed');
  t.equal(r.refuse('demo/a', { code: 'FH_Y', reason: 'worse' }), true, 'refused again after a fix');
});

t.test('the list holds the Services refused now, sorted, without where', async (t) => {
  const r = new Refusals();
  r.refuse('z/b', { code: 'FH_B', reason: 'b', where: 'b.yaml#1' });
  r.refuse('a/c', { code: 'FH_C', reason: 'c' });
  r.refuse('m/d', { code: 'FH_D', reason: 'd' });
  r.clear('m/d');
  r.clear('never/refused');
  t.same(r.list(), [
    { service: 'a/c', code: 'FH_C', reason: 'c' },
    { service: 'z/b', code: 'FH_B', reason: 'b' },
  ]);
});
