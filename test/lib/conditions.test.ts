/** Conditions: a line when a condition's state changes, none while it stays. */
import t from 'tap';
import { Conditions } from '../../lib/conditions.ts';

t.test('changed() is true for a first state and each change, false while it stays', async (t) => {
  const c = new Conditions();
  t.same(
    [
      c.changed('flowtable', 'missing'),
      c.changed('flowtable', 'missing'),
      c.changed('acct', 'off'),
      c.changed('flowtable', 'ok'),
      c.changed('flowtable', 'ok'),
      c.changed('flowtable', 'missing'),
      c.changed('acct', 'off'),
    ],
    [true, false, true, true, false, true, false],
  );
});
