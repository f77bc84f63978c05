/** `flowhint certs`: usage mistakes exit 2 with one line and a code, never a stack trace. */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function certs(...args: string[]) {
  const r = spawnSync(process.execPath, ['bin/flowhint.ts', 'certs', ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

t.test('usage mistakes: exit 2, FH_USAGE, one line', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-certs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, args, message] of [
    [
      'no name at all',
      ['--out', dir],
      /^flowhint: FH_USAGE: at least one --dns-name \(or --service, or --ip\) is needed\n$/,
    ],
    [
      'a bad --ip',
      ['--out', dir, '--ip', '1.2.3.999'],
      /^flowhint: FH_USAGE: --ip: not an IP address: "1\.2\.3\.999"\n$/,
    ],
  ] as const) {
    const r = certs(...args);
    t.equal(r.code, 2, `${name}: exit 2`);
    t.match(r.err, message, `${name}: ${r.err}`);
    t.same(readdirSync(dir), [], `${name}: nothing written`);
  }
});

t.test('a good call writes the four files and prints the caBundle', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-certs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const r = certs('--out', dir, '--service', 'flowhint-webhook', '--namespace', 'flowhint-system');
  t.equal(r.code, 0, r.err);
  t.same(readdirSync(dir).sort(), ['ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
  t.match(Buffer.from(r.out.trim(), 'base64').toString(), /^-----BEGIN CERTIFICATE-----/);
});

t.test('an existing CA is kept with --reuse-ca, replaced only with --force, never silently', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-certs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.equal(certs('--out', dir, '--dns-name', 'a.example').code, 0);
  const ca = readFileSync(join(dir, 'ca.crt'), 'utf8');
  const again = certs('--out', dir, '--dns-name', 'a.example');
  t.equal(again.code, 1, 'a second run without a choice stops');
  t.match(again.err, /^flowhint: FH_CERTS_EXIST: .* already holds a CA \(ca\.key\); pass --reuse-ca .* or --force/);
  t.equal(readFileSync(join(dir, 'ca.crt'), 'utf8'), ca, 'and leaves the CA as it was');
  t.equal(certs('--out', dir, '--dns-name', 'a.example', '--reuse-ca').code, 0);
  t.equal(readFileSync(join(dir, 'ca.crt'), 'utf8'), ca, '--reuse-ca keeps it');
  t.equal(certs('--out', dir, '--dns-name', 'a.example', '--force').code, 0);
  t.not(readFileSync(join(dir, 'ca.crt'), 'utf8'), ca, '--force replaces it');
});

t.test('bad DNS names and an --out that is a file: one coded line each, no stack trace', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'flowhint-certs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const bad of ['bad name!', 'UPPER.case', 'dash-.example', 'a..b']) {
    const r = certs('--out', join(dir, 'x'), '--dns-name', bad);
    t.equal(r.code, 2, `${bad}: exit 2`);
    t.match(r.err, /^flowhint: FH_USAGE: --dns-name: ".*" is not a DNS name/, bad);
  }
  writeFileSync(join(dir, 'file'), 'not a directory');
  const r = certs('--out', join(dir, 'file'), '--dns-name', 'a.example');
  t.equal(r.code, 1);
  t.match(r.err, /^flowhint: FH_CERTS_IO: --out .* is a file, not a directory/);
  t.notMatch(r.err, /\n\s+at /);
});
