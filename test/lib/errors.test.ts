/**
 * The error catalogue: every FH_ code the sources use is in it, and docs/operations.md's "Error codes"
 * table is the catalogue, row for row.
 */
import t from 'tap';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ERRORS, FlowhintError, errorMessage, httpStatus } from '../../lib/errors.ts';

const root = new URL('../../', import.meta.url).pathname;

function sources(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    return statSync(join(root, path)).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : [];
  });
}

t.test('every code in the sources is in the catalogue', async (t) => {
  const used = new Set<string>();
  for (const dir of ['api', 'agent', 'webhook', 'lib', 'certs', 'bin']) {
    for (const file of sources(dir))
      for (const m of readFileSync(join(root, file), 'utf8').matchAll(/\bFH_[A-Z_]*[A-Z]\b/g)) used.add(m[0]);
  }
  used.delete('FH_MANIFEST'); // the FH_MANIFEST_* family, named in a comment
  const unknown = [...used].filter((c) => !(c in ERRORS));
  t.same(unknown, [], 'no code outside the catalogue');
  t.ok(used.size >= 25, `${used.size} codes in use`);
});

t.test('docs/operations.md lists the catalogue, row for row', async (t) => {
  const page = readFileSync(join(root, 'docs/operations.md'), 'utf8');
  const from = page.indexOf('## Error codes');
  const section = page.slice(from, page.indexOf('\n## ', from + 1));
  const rows = [...section.matchAll(/^\| `(FH_[A-Z_]+)` \| (\d) \| (.*) \|$/gm)].map((m) => [
    m[1],
    Number(m[2]),
    m[3]!.replace(/\\\|/g, '|'),
  ]);
  t.same(
    rows,
    Object.entries(ERRORS).map(([code, e]) => [code, e.exit, e.help]),
  );
});

t.test('exit status comes from the catalogue', async (t) => {
  t.equal(new FlowhintError('FH_USAGE', 'x').exitCode, 2, 'usage mistakes exit 2');
  t.equal(new FlowhintError('FH_HELP', 'x').exitCode, 0);
  t.equal(new FlowhintError('FH_NFT_FAILED', 'x').exitCode, 1);
});

t.test('a catalogue error is named FlowhintError and carries its code', async (t) => {
  const e = new FlowhintError('FH_USAGE', 'x');
  t.equal(e.name, 'FlowhintError');
  t.equal(e.code, 'FH_USAGE');
  t.ok(e instanceof Error);
});

t.test('errorMessage and httpStatus read what a failure carries', async (t) => {
  t.equal(errorMessage(new Error('boom')), 'boom');
  t.equal(errorMessage('plain'), 'plain');
  t.equal(httpStatus({ code: 404, body: '{}' }), 404, "client-node's ApiException: its HTTP status");
  t.equal(httpStatus(Object.assign(new Error('x'), { code: 'ECONNREFUSED' })), undefined, 'a system error has none');
  t.equal(httpStatus(new FlowhintError('FH_USAGE', 'x')), undefined, 'nor a catalogue error');
  t.equal(httpStatus(null), undefined);
  t.equal(httpStatus(undefined), undefined);
});
