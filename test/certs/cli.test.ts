/** `flowhint certs`: usage mistakes exit 2 with one line and a code, never a stack trace. */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
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
