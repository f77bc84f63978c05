/**
 * Certificate rotation while requests run, with Kubernetes' Secret-volume layout: files are
 * symlinks through `..data`, which is swapped atomically to a new timestamped directory.
 */
import t from 'tap';
import { X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, rename, symlink, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateCerts } from '../../certs/generate.ts';
import { startWebhook } from '../../webhook/server.ts';
import { silentLogger } from '../../lib/log.ts';
import { post, review } from '../helpers/admission.ts';
import { hinted } from '../helpers/services.ts';
import autocannon from 'autocannon';
import { eventually } from '../helpers/eventually.ts';

const root = await mkdtemp(join(tmpdir(), 'flowhint-rotate-'));
t.teardown(() => rm(root, { recursive: true, force: true }));
const first = await generateCerts({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
const ca = { cert: first.caCert, key: first.caKey };
let generation = 0;

async function publish(b: { cert: string; key: string }): Promise<string> {
  generation += 1;
  const dataDir = `..${generation}`;
  await mkdir(join(root, dataDir));
  await writeFile(join(root, dataDir, 'tls.crt'), b.cert);
  await writeFile(join(root, dataDir, 'tls.key'), b.key);
  await symlink(dataDir, join(root, '..data_tmp'));
  await rename(join(root, '..data_tmp'), join(root, '..data'));
  return new X509Certificate(b.cert).fingerprint256;
}

let expected = await publish(first);
await symlink('..data/tls.crt', join(root, 'tls.crt'));
await symlink('..data/tls.key', join(root, 'tls.key'));

const server = await startWebhook({
  certFile: join(root, 'tls.crt'),
  keyFile: join(root, 'tls.key'),
  host: '127.0.0.1',
  port: 0,
  metricsPort: 0,
  logger: silentLogger(),
  certPollMs: 500,
});
t.teardown(() => server.close());

t.test('rotations under load: new handshakes see the new certificate, no request fails', async (t) => {
  const body = JSON.stringify(review({ object: hinted() }));
  let stop = false;
  let ok = 0;
  const failures: string[] = [];
  const seen = new Set<string>();
  const worker = async () => {
    while (!stop) {
      try {
        // agent:false: every request is a fresh TLS handshake.
        const r = await post(server.url, '/validate', body, { ca: first.caCert });
        if (r.status === 200 && r.json?.response?.allowed === true) ok += 1;
        else failures.push(`status ${r.status}`);
        if (r.peerFingerprint) seen.add(r.peerFingerprint);
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
  };
  const workers = [worker(), worker(), worker(), worker()];
  const rotations = 5;
  for (let i = 0; i < rotations; i++) {
    const next = await generateCerts({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], ca });
    expected = await publish(next);
    await eventually(`rotation ${i + 1}: new handshakes present the new certificate`, () => seen.has(expected));
  }
  stop = true;
  await Promise.all(workers);
  t.same(failures, [], `no failed request out of ${ok}`);
  t.ok(ok > rotations * 5, `requests ran throughout (${ok})`);
  const metrics = await (await fetch(`${server.metricsUrl}/metrics`)).text();
  t.match(metrics, new RegExp(`flowhint_webhook_cert_reloads_total\\{result="ok"\\} ${rotations}\\b`));
});

t.test('a broken pair keeps the previous certificate', async (t) => {
  const other = await generateCerts({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], ca });
  const mismatched = { cert: other.cert, key: first.key };
  await publish(mismatched);
  await server.reloader.check();
  const r = await post(server.url, '/healthz', '', { ca: first.caCert, method: 'GET' });
  t.equal(r.status, 200);
  t.equal(r.peerFingerprint, expected, 'still serving the last good certificate');
  const metrics = await (await fetch(`${server.metricsUrl}/metrics`)).text();
  t.match(metrics, /flowhint_webhook_cert_reloads_total\{result="error"\} [1-9]/);
});

t.test('the expiry gauge follows the certificate being served, not a broken pair', async (t) => {
  const expiry = async () =>
    Number(
      /^flowhint_webhook_certificate_expiry_timestamp_seconds (\S+)$/m.exec(
        await (await fetch(`${server.metricsUrl}/metrics`)).text(),
      )?.[1],
    );
  const year = Date.now() / 1000 + 365 * 86_400;
  t.ok(Math.abs((await expiry()) - year) < 3600, 'at start: the first certificate, valid for 365 days');
  const short = await generateCerts({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], ca, days: 3 });
  expected = await publish(short);
  const threeDays = Date.now() / 1000 + 3 * 86_400;
  await eventually('reloaded: the 3-day certificate', async () => Math.abs((await expiry()) - threeDays) < 600);
  await publish({ cert: first.cert, key: short.key });
  await server.reloader.check();
  t.ok(Math.abs((await expiry()) - threeDays) < 600, 'a broken pair: the gauge keeps the served certificate');
  expected = await publish(short);
});

t.test('10 rotations during a steady autocannon run: 0 failed requests', async (t) => {
  const reloads = async () =>
    Number(
      /flowhint_webhook_cert_reloads_total\{result="ok"\} (\d+)/.exec(
        await (await fetch(`${server.metricsUrl}/metrics`)).text(),
      )?.[1] ?? 0,
    );
  const before = await reloads();
  const run = autocannon({
    url: `${server.url}/mutate`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(review({ object: hinted() })),
    connections: 8,
    duration: 8,
    tlsOptions: { ca: first.caCert },
  });
  for (let i = 0; i < 10; i++) {
    await sleep(600);
    expected = await publish(await generateCerts({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], ca }));
    await eventually(`reload ${i + 1}`, async () => (await reloads()) >= before + i + 1);
  }
  const result = await run;
  t.equal(await reloads(), before + 10, '10 reloads');
  t.equal(result.errors, 0, 'no connection errors');
  t.equal(result.timeouts, 0, 'no timeouts');
  t.equal(result.non2xx, 0, 'no non-2xx answers');
  t.ok(result.requests.total > 100, `${result.requests.total} requests during the rotations`);
  const r = await post(server.url, '/healthz', '', { ca: first.caCert, method: 'GET' });
  t.equal(r.peerFingerprint, expected, 'a new handshake presents the last certificate');
});
