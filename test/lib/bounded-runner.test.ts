/** The bounded-frequency runner: bursts batched, one run at a time, backoff after failures. */
import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { Backoff } from '../../lib/backoff.ts';
import { BoundedRunner } from '../../lib/bounded-runner.ts';

function make(results: boolean[], minIntervalMs = 30) {
  const runs: number[] = [];
  let running = 0;
  let overlap = false;
  const start = Date.now();
  const runner = new BoundedRunner({
    minIntervalMs,
    backoff: new Backoff({ initialMs: 300, maxMs: 300, jitter: 0 }),
    run: async () => {
      running += 1;
      if (running > 1) overlap = true;
      runs.push(Date.now() - start);
      await sleep(5);
      running -= 1;
      return results.shift() ?? true;
    },
  });
  return { runner, runs, overlap: () => overlap };
}

t.test('nothing runs before start; a burst of requests is one run', async (t) => {
  const { runner, runs, overlap } = make([]);
  for (let i = 0; i < 10; i++) runner.request();
  await sleep(20);
  t.equal(runs.length, 0, 'not started');
  runner.start();
  await sleep(60);
  t.equal(runs.length, 1, 'ten requests, one run');
  for (let i = 0; i < 10; i++) {
    runner.request();
    await sleep(2);
  }
  await sleep(100);
  t.ok(runs.length >= 2 && runs.length < 11, `ten spread requests: ${runs.length - 1} more run(s)`);
  const gaps = runs.slice(1).map((r, i) => r - runs[i]!);
  t.ok(
    gaps.every((g) => g >= 29),
    `runs at least the minimum interval apart (${gaps.join(', ')} ms)`,
  );
  t.notOk(overlap(), 'never two at once');
  await runner.stop();
});

t.test('a failed run is retried after the backoff, even if requests arrive meanwhile', async (t) => {
  const { runner, runs } = make([false, true]);
  runner.start();
  runner.request();
  await sleep(20);
  t.equal(runs.length, 1);
  runner.request();
  runner.request();
  await sleep(40);
  t.equal(runs.length, 1, 'requests wait for the backoff');
  for (let i = 0; i < 200 && runs.length < 2; i++) await sleep(10);
  t.equal(runs.length, 2, 'the retry');
  t.ok(runs[1]! - runs[0]! >= 295, `after the backoff (${runs[1]! - runs[0]!} ms)`);
  await sleep(100);
  t.equal(runs.length, 2, 'a success without new requests does not run again');
  await runner.stop();
});

t.test('stop waits for the run in flight and runs nothing after', async (t) => {
  const { runner, runs } = make([]);
  runner.start();
  runner.request();
  await sleep(2);
  await runner.stop();
  const n = runs.length;
  runner.request();
  await sleep(60);
  t.equal(runs.length, n);
});
