/** The shared backoff: doubling, capped, jittered within ±20 %, and when it starts over. */
import t from 'tap';
import { Backoff } from '../../lib/backoff.ts';

t.test('doubles up to the cap; no jitter at the midpoint', async (t) => {
  const b = new Backoff({ initialMs: 100, maxMs: 1000 }, () => 0.5);
  t.same(
    [1, 2, 3, 4, 5, 6].map(() => b.next(0)),
    [100, 200, 400, 800, 1000, 1000],
  );
  b.succeeded();
  t.equal(b.next(0), 100, 'a success starts over');
});

t.test('jitter stays within ±20 %', async (t) => {
  t.equal(new Backoff({ initialMs: 1000, maxMs: 1000 }, () => 0).next(0), 800);
  t.equal(new Backoff({ initialMs: 1000, maxMs: 1000 }, () => 0.999999).next(0), 1200);
});

t.test('with resetMs, only a quiet period starts over', async (t) => {
  const b = new Backoff({ initialMs: 100, maxMs: 10_000, resetMs: 60_000 }, () => 0.5);
  t.equal(b.next(0), 100);
  b.succeeded();
  t.equal(b.next(1_000), 200, 'a success in between does not reset');
  t.equal(b.next(2_000), 400);
  t.equal(b.next(70_000), 100, 'a minute without failures does');
});
