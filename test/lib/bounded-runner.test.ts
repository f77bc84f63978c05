/**
 * The bounded-frequency runner's timing rules, exactly, on a fake clock: a burst is one run;
 * the interval counts from the end of a run; never two at once; after a failure the backoff's
 * delay, which requests cannot shorten; nothing after stop.
 */
import t from 'tap';
import { Backoff } from '../../lib/backoff.ts';
import { BoundedRunner } from '../../lib/bounded-runner.ts';
import { fakeClock } from '../helpers/fake-clock.ts';

const MIN_INTERVAL = 30;
const RUN_TAKES = 20;
const BACKOFF = 300;

/** A runner whose runs take RUN_TAKES ms and return `results` in turn (then true). */
function make(results: (boolean | 'throw')[] = []) {
  const fake = fakeClock();
  const starts: number[] = [];
  let running = 0;
  let maxRunning = 0;
  const runner = new BoundedRunner({
    minIntervalMs: MIN_INTERVAL,
    backoff: new Backoff({ initialMs: BACKOFF, maxMs: 4 * BACKOFF, jitter: 0, clock: fake.clock }),
    clock: fake.clock,
    run: async () => {
      starts.push(fake.now());
      running += 1;
      maxRunning = Math.max(maxRunning, running);
      await fake.sleep(RUN_TAKES);
      running -= 1;
      const r = results.shift() ?? true;
      if (r === 'throw') throw new Error('run failed');
      return r;
    },
  });
  /** Request at each of `times` (absolute, ascending), then let time run to `until`. */
  const requestAt = async (times: number[], until: number) => {
    for (const at of times) {
      await fake.tick(at - fake.now());
      runner.request();
    }
    await fake.tick(until - fake.now());
  };
  return { fake, runner, starts, requestAt, maxRunning: () => maxRunning };
}

t.test('nothing runs before start; then a burst of requests is one run, at once', async (t) => {
  const { fake, runner, starts } = make();
  for (let i = 0; i < 10; i++) runner.request();
  await fake.tick(1_000);
  t.same(starts, [], 'not started');
  runner.start();
  await fake.tick(0);
  t.same(starts, [1_000], 'ten requests before start: one run when it starts');
  await fake.tick(1_000);
  t.same(starts, [1_000], 'and no other');
});

t.test('start without requests runs nothing', async (t) => {
  const { fake, runner, starts } = make();
  runner.start();
  await fake.tick(1_000);
  t.same(starts, []);
});

t.test('the interval counts from the end of a run, not its start', async (t) => {
  const { runner, starts, requestAt, maxRunning } = make();
  runner.start();
  // Run 1: 0-20. A request at 5 (during it) waits for its end: 20 + 30 = 50 (from the
  // start it would be 30). Run 2: 50-70; a request at 80 comes 10 ms after its end: 100.
  await requestAt([0, 5, 80], 1_000);
  t.same(starts, [0, 50, 100]);
  t.equal(maxRunning(), 1, 'never two at once');
});

t.test('requests spread over a run and the interval after it are one run', async (t) => {
  const { runner, starts, requestAt } = make();
  runner.start();
  await requestAt([0, 1, 10, 19, 20, 21, 35, 49], 1_000);
  t.same(starts, [0, 50]);
});

t.test('a request long after the last run runs at once', async (t) => {
  const { runner, starts, requestAt } = make();
  runner.start();
  await requestAt([0, 500], 1_000);
  t.same(starts, [0, 500]);
});

t.test('a failed run is retried after the backoff from its end; requests cannot shorten it', async (t) => {
  const { runner, starts, requestAt } = make([false, true]);
  runner.start();
  // Run 1 fails at 20: retry at 20 + 300 = 320, whatever is requested between.
  await requestAt([0, 25, 100, 319], 2_000);
  t.same(starts, [0, 320], 'the retry, and no run after a success without new requests');
});

t.test('the backoff doubles over consecutive failures and starts over after a success', async (t) => {
  const { runner, starts, requestAt } = make([false, 'throw', true, false]);
  runner.start();
  // 0-20 fails: 320. 320-340 throws (a failure too): 340 + 600 = 940. 940-960 succeeds.
  // A request at 2000: 2000-2020 fails: after a success the delay is the initial one again, 2320.
  await requestAt([0, 2_000], 3_000);
  t.same(starts, [0, 320, 940, 2_000, 2_320]);
});

t.test('stop cancels a scheduled run, waits for the one in flight, and runs nothing after', async (t) => {
  const { fake, runner, starts, requestAt } = make();
  runner.start();
  await requestAt([0, 5], 30); // run 2 is due at 50
  await runner.stop();
  await fake.tick(1_000);
  t.same(starts, [0], 'the run due at 50 never came');

  const second = make();
  second.runner.start();
  second.runner.request();
  await second.fake.tick(5); // a run in flight until 20
  let stopped = false;
  const stopping = second.runner.stop().then(() => (stopped = true));
  await second.fake.tick(10);
  t.notOk(stopped, 'stop waits for the run in flight');
  await second.fake.tick(10);
  await stopping;
  t.ok(stopped);
  second.runner.request();
  await second.fake.tick(1_000);
  t.same(second.starts, [0], 'a request after stop runs nothing');
});

t.test('idle: nothing running and nothing asked for; a failed run waiting for its retry is not idle', async (t) => {
  const { fake, runner } = make([false]);
  t.ok(runner.idle, 'new');
  runner.request();
  t.notOk(runner.idle, 'asked for, before start');
  runner.start();
  await fake.tick(RUN_TAKES / 2);
  t.notOk(runner.idle, 'running');
  await fake.tick(RUN_TAKES);
  t.notOk(runner.idle, 'the run failed: its retry is asked for');
  await fake.tick(BACKOFF + RUN_TAKES);
  t.ok(runner.idle, 'the retry succeeded');
  runner.request();
  await fake.tick(RUN_TAKES / 2);
  runner.request();
  t.notOk(runner.idle, 'running, and asked for again');
  await fake.tick(RUN_TAKES);
  t.notOk(runner.idle, 'the run that was asked for meanwhile is next');
  await fake.tick(MIN_INTERVAL + RUN_TAKES);
  t.ok(runner.idle, 'done');
});
