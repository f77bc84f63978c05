/** The shared backoff: doubling, capped, jittered within ±20 %, and when it starts over. */
import t from 'tap';
import { Backoff } from '../../lib/backoff.ts';
import { fakeClock } from '../helpers/fake-clock.ts';

t.test('doubles up to the cap; no jitter at the midpoint', async (t) => {
  const b = new Backoff({ initialMs: 100, maxMs: 1000 }, () => 0.5);
  t.same(
    [1, 2, 3, 4, 5, 6].map(() => b.next(0)),
    [100, 200, 400, 800, 1000, 1000],
  );
  b.succeeded();
  t.equal(b.next(0), 100, 'a success starts over');
});

t.test('a cap that is not a power of two of the start is reached, not passed', async (t) => {
  const b = new Backoff({ initialMs: 300, maxMs: 1000, jitter: 0 });
  t.same(
    [1, 2, 3, 4].map(() => b.next(0)),
    [300, 600, 1000, 1000],
  );
});

t.test('jitter stays within ±20 % by default, and within the fraction given', async (t) => {
  t.equal(new Backoff({ initialMs: 1000, maxMs: 1000 }, () => 0).next(0), 800);
  t.equal(new Backoff({ initialMs: 1000, maxMs: 1000 }, () => 0.999999).next(0), 1200);
  t.equal(new Backoff({ initialMs: 1000, maxMs: 1000 }, () => 0.25).next(0), 900);
  t.equal(new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0.5 }, () => 0).next(0), 500);
  t.equal(new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0 }, () => 0).next(0), 1000);
  const b = new Backoff({ initialMs: 1000, maxMs: 8000 });
  for (let i = 0; i < 200; i++) {
    const base = Math.min(1000 * 2 ** Math.min(i, 3), 8000);
    const d = b.next(0);
    if (d < base * 0.8 || d > base * 1.2) t.fail(`attempt ${i + 1}: ${d} ms is outside ${base} ms ± 20 %`);
  }
});

t.test('with resetMs, only a quiet period starts over', async (t) => {
  const b = new Backoff({ initialMs: 100, maxMs: 10_000, resetMs: 60_000 }, () => 0.5);
  t.equal(b.next(0), 100);
  b.succeeded();
  t.equal(b.next(1_000), 200, 'a success in between does not reset');
  t.equal(b.next(2_000), 400);
  t.equal(b.next(62_000), 800, 'exactly resetMs after the last failure is not yet quiet');
  t.equal(b.next(122_001), 100, 'a minute and a millisecond without failures is');
});

t.test('without an explicit time, next() reads its clock', async (t) => {
  const fake = fakeClock(5_000);
  const b = new Backoff({ initialMs: 100, maxMs: 10_000, resetMs: 1_000, jitter: 0, clock: fake.clock });
  t.equal(b.next(), 100);
  await fake.tick(500);
  t.equal(b.next(), 200, 'half a second later: still backing off');
  await fake.tick(1_001);
  t.equal(b.next(), 100, 'after a quiet second: starts over');
});
