/** The `flowhint` entry point: the version, and "did you mean" for a mistyped command or flag. */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { closest } from '../../lib/cli.ts';

const cli = (...args: string[]) =>
  spawnSync(process.execPath, ['bin/flowhint.ts', ...args], { encoding: 'utf8', timeout: 30_000 });
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

t.test("flowhint version and --version print package.json's version", async (t) => {
  for (const v of ['version', '--version']) {
    const r = cli(v);
    t.equal(r.status, 0);
    t.equal(r.stdout, `flowhint ${pkg.version} (node ${process.version})\n`);
  }
});

t.test('a mistyped command or flag: exit 2, FH_USAGE, and the closest name', async (t) => {
  const c = cli('agnet');
  t.equal(c.status, 2);
  t.match(c.stderr, /^flowhint: FH_USAGE: unknown command "agnet"; did you mean "agent"\?/);
  const far = cli('frobnicate');
  t.match(far.stderr, /^flowhint: FH_USAGE: unknown command "frobnicate"\n/, 'no guess when nothing is close');
  const f = cli('agent', '--once-timout', '3');
  t.equal(f.status, 2);
  t.match(f.stderr, /^flowhint: FH_USAGE: Unknown option '--once-timout'; did you mean --once-timeout\?/);
});

t.test('closest: within two edits, else nothing', async (t) => {
  t.equal(closest('stauts', ['status', 'agent']), 'status');
  t.equal(closest('--port', ['--port', '--host']), '--port');
  t.equal(closest('xyz', ['status', 'agent']), undefined);
});
