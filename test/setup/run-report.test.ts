/**
 * test/kernel/run-report.ts: what `npm run test:kernel` repeats at the end of its output.
 */
import t from 'tap';
import {
  DIGEST_FAILED_CHECKS,
  DIGEST_LINES,
  EARLY_SECS,
  diedAtStart,
  failureDigest,
  withWallTime,
} from '../kernel/run-report.ts';

const console_ = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}`);

t.test('a failed run: its failed checks first, then its last lines', async (t) => {
  const out = [
    'stage2: kernel 7.2.13',
    'ok 1 - topology',
    'not ok 2 - agent --once exits 0',
    ...console_(100),
    'not ok 3 - x',
    'FLOWHINT_EXIT=1',
    '',
  ].join('\r\n');
  const d = failureDigest(out).split('\n');
  t.same(d.slice(0, 3), ['not ok 2 - agent --once exits 0', 'not ok 3 - x', '...']);
  t.equal(d.length, 3 + 40, 'the last 40 lines, the trailing blank one not counted');
  t.equal(d.at(-1), 'FLOWHINT_EXIT=1');
  t.equal(d.at(-2), 'not ok 3 - x');
  t.equal(d[3], 'line 63');
  t.equal(DIGEST_LINES, 40);
});

t.test('a run that died early: the whole of it, no failed checks to list', async (t) => {
  t.equal(
    failureDigest('stage2: kernel 7.2\nbash: test/kernel/scenarios.sh: Input/output error\n'),
    'stage2: kernel 7.2\nbash: test/kernel/scenarios.sh: Input/output error',
  );
  t.equal(failureDigest(''), '');
});

t.test('at most 20 failed checks are listed, the first ones', async (t) => {
  const out = Array.from({ length: 30 }, (_, i) => `not ok ${i + 1} - c${i + 1}`).join('\n');
  const d = failureDigest(out).split('\n');
  t.equal(d.indexOf('...'), 20);
  t.equal(d[0], 'not ok 1 - c1');
  t.equal(d[19], 'not ok 20 - c20');
  t.equal(DIGEST_FAILED_CHECKS, 20);
  t.notOk(d.slice(0, 20).includes('not ok 21 - c21'));
  t.equal(d.length, 21 + 30, 'then the last lines, which are all 30 here');
  t.notOk(failureDigest('# not ok in a comment\nok 1').includes('...'), 'only lines that start with "not ok"');
});

t.test('a benchmark line gains the run wall time; anything else is left as it is', async (t) => {
  t.same(JSON.parse(withWallTime('{"a":1,"b":null}', 912)), { a: 1, b: null, run_wall_s: 912 });
  t.equal(withWallTime('{"a":1', 5), '{"a":1');
  t.equal(withWallTime('[1,2]', 5), '[1,2]');
  t.equal(withWallTime('null', 5), 'null');
  t.equal(withWallTime('"x"', 5), '"x"');
});

t.test(
  'a run that died at its start (no check passed, within 90 s) is retried; a failed scenario is not',
  async (t) => {
    t.ok(diedAtStart({ code: 1, passed: 0, failed: 1, secs: 8 }), 'stop 46 CI: sid, 0 passed, 1 failed, 8 s');
    t.ok(diedAtStart({ code: 125, passed: 0, failed: 1, secs: 89 }), 'no exit status at all (boot failure)');
    t.notOk(diedAtStart({ code: 1, passed: 0, failed: 1, secs: EARLY_SECS }), 'at 90 s: a scenario that ran');
    t.notOk(diedAtStart({ code: 1, passed: 1, failed: 1, secs: 8 }), 'a check passed: the scenario itself failed');
    t.notOk(diedAtStart({ code: 0, passed: 0, failed: 0, secs: 8 }), 'a passing run with no checks (a benchmark)');
    t.ok(diedAtStart({ code: 0, passed: 0, failed: 1, secs: 8 }), 'exit 0 but a failure counted');
    t.equal(EARLY_SECS, 90);
  },
);
