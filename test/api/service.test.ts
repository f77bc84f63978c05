/** The small helpers every message uses: Service keys, quoted values, zod's first issue. */
import t from 'tap';
import { z } from 'zod';
import { firstIssue, quoteValue, readHint, serviceKey } from '../../api/index.ts';

t.test('serviceKey: namespace/name, generateName with a star, defaults spelled out', async (t) => {
  t.equal(serviceKey({ namespace: 'shop', name: 'web' }), 'shop/web');
  t.equal(serviceKey({ namespace: 'shop', generateName: 'web-' }), 'shop/web-*');
  t.equal(serviceKey({ namespace: '', name: null, generateName: '' }), 'default/<unnamed>');
  t.equal(serviceKey({}), 'default/<unnamed>');
});

t.test('quoteValue: JSON-quoted, 40 characters then an ellipsis, invisible characters escaped', async (t) => {
  t.equal(quoteValue('x'.repeat(40)), `"${'x'.repeat(40)}"`);
  t.equal(quoteValue('x'.repeat(41)), `"${'x'.repeat(40)}…"`);
  t.equal(quoteValue('abc', 2), '"ab…"');
  t.equal(quoteValue('a\u0085b\u2028c\n'), '"a\\u0085b\\u2028c\\n"');
});

t.test('firstIssue: the path of the first problem, <root> for the value itself', async (t) => {
  const r = z.object({ a: z.object({ b: z.number() }) }).safeParse({ a: { b: 'x' } });
  t.same(!r.success && firstIssue(r.error), {
    path: 'a.b',
    message: 'Invalid input: expected number, received string',
  });
  const root = z.number().safeParse('x');
  t.equal(!root.success && firstIssue(root.error).path, '<root>');
});

t.test('readHint: an unreadable object is named as such', async (t) => {
  t.match(readHint(null), {
    usable: false,
    key: '<unreadable>',
    code: 'FH_SERVICE_UNREADABLE',
    reason: /^not a readable Service: <root>: /,
  });
});
