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
  t.match(f.stderr, /^flowhint: FH_USAGE: unknown flag --once-timout; did you mean --once-timeout\?/);
});

t.test('closest: within two edits, else nothing', async (t) => {
  t.equal(closest('stauts', ['status', 'agent']), 'status');
  t.equal(closest('--port', ['--port', '--host']), '--port');
  t.equal(closest('xyz', ['status', 'agent']), undefined);
});

const COMMANDS = ['agent', 'status', 'cleanup', 'webhook', 'backfill', 'certs', 'demo', 'explain'];

t.test(
  "every command's --help has a Flags section: each flag of the synopsis, described, with its default",
  async (t) => {
    for (const command of COMMANDS) {
      const r = cli(command, '--help');
      t.equal(r.status, 0, `${command} --help exits 0`);
      const [synopsis = '', flags = ''] = r.stdout.split('\nFlags:\n');
      t.ok(flags.length > 0, `${command}: a Flags section`);
      const rows = new Map(
        [...flags.matchAll(/^ {2}(?:-[a-z], | {4})--([a-z-]+)(?: [A-Z]+)? {2,}(.+)$/gm)].map((m) => [
          m[1] ?? '',
          m[2] ?? '',
        ]),
      );
      t.ok(rows.has('help'), `${command}: --help itself`);
      const inSynopsis = new Set([...synopsis.matchAll(/--([a-z-]+)/g)].map((m) => m[1] ?? ''));
      for (const flag of inSynopsis) {
        const row = rows.get(flag);
        t.ok(row !== undefined && row.length > 10, `${command}: --${flag} is described under Flags`);
        // A default the synopsis shows (`[--port 8443]`) is the one Flags gives.
        const shown = new RegExp(`\\[--${flag} ([0-9a-z/][^\\]| ]*)\\]`).exec(synopsis)?.[1];
        if (shown !== undefined && row !== undefined) {
          t.ok(
            row.endsWith(`(default ${/^[0-9]+$/.test(shown) ? shown : JSON.stringify(shown)})`),
            `${command}: --${flag} default ${shown}`,
          );
        }
      }
      t.same(
        [...rows.keys()].filter((f) => f !== 'help' && !inSynopsis.has(f)),
        [],
        `${command}: no flag under Flags that the synopsis leaves out`,
      );
    }
  },
);

t.test('a bad value is refused in words, naming the flag', async (t) => {
  const r = cli('agent', '--offload-after-packets', 'abc', '--services-dir', '/tmp');
  t.equal(r.status, 2);
  t.match(
    r.stderr,
    /^flowhint: FH_USAGE: --offload-after-packets: "abc" is not a whole number from 0 to 1000000\nRun 'flowhint agent --help' for its flags\.\n$/,
  );
  const p = cli('webhook', '--cert', 'c', '--key', 'k', '--port', '70000');
  t.match(p.stderr, /^flowhint: FH_USAGE: --port: "70000" is not a whole number from 0 to 65535\n/);
});

t.test('a missing required flag is named in words', async (t) => {
  const r = cli('webhook', '--key', 'k');
  t.equal(r.status, 2);
  t.match(r.stderr, /^flowhint: FH_USAGE: --cert is required\n/);
});
