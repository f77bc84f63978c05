/** Running host tools: whole output, and output streamed line by line (never held whole). */
import t from 'tap';
import { makeRunner } from '../../lib/exec.ts';

const run = makeRunner();

t.test('whole: stdout, stderr and the exit code; a missing command is 127', async (t) => {
  const r = await run(['sh', '-c', 'echo out; echo err >&2; exit 3']);
  t.same(r, { code: 3, stdout: 'out\n', stderr: 'err\n' });
  t.equal((await run(['flowhint-no-such-command'])).code, 127);
});

t.test('lines: every line once, in order, across chunk boundaries and a last line without newline', async (t) => {
  const got: string[] = [];
  // 20,000 lines of uneven length arrive in many pipe chunks; the last has no newline.
  const script =
    'BEGIN { for (i = 0; i < 20000; i++) { s = ""; for (j = 0; j < i % 97; j++) s = s "x"; print "line " i " " s }; printf "tail" }';
  const r = await run.lines!(['awk', script], (l) => got.push(l), { timeoutMs: 60_000 });
  t.equal(r.code, 0);
  t.equal(r.stdout, '', 'stdout is never collected');
  t.equal(got.length, 20_001);
  const expected = (i: number) => `line ${i} ${'x'.repeat(i % 97)}`;
  const wrong = got.slice(0, 20_000).findIndex((l, i) => l !== expected(i));
  t.equal(wrong, -1, wrong >= 0 ? `line ${wrong}: ${got[wrong]}` : 'every line as printed');
  t.equal(got.at(-1), 'tail');
});

t.test('lines: a prefix (ip netns exec …) is applied; a timeout kills and says so', async (t) => {
  const echoPrefixed = makeRunner(['env', 'FH_X=1']);
  const got: string[] = [];
  await echoPrefixed.lines!(['sh', '-c', 'echo $FH_X'], (l) => got.push(l));
  t.same(got, ['1']);
  const slow = await run.lines!(['sleep', '5'], () => undefined, { timeoutMs: 200 });
  t.equal(slow.code, 124);
  t.match(slow.stderr, /sleep: timed out after 200 ms/);
});
