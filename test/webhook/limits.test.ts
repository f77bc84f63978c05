/** Connection limits: a slowloris does not hold a connection open, oversized headers are refused. */
import t from 'tap';
import { connect } from 'node:tls';
import { startWebhook } from '../../webhook/server.ts';
import { silentLogger } from '../../lib/log.ts';
import { post, review, tempCerts } from '../helpers/admission.ts';
import { hinted } from '../helpers/services.ts';

const { dir, bundle } = await tempCerts();
const server = await startWebhook({ certFile: `${dir}/tls.crt`, keyFile: `${dir}/tls.key`, host: '127.0.0.1', port: 0, logger: silentLogger() });
t.teardown(() => server.close());
const u = new URL(server.url);

function open() {
  return new Promise<ReturnType<typeof connect>>((resolve, reject) => {
    const s = connect({ host: u.hostname, port: Number(u.port), ca: bundle.caCert }, () => resolve(s));
    s.on('error', reject);
  });
}

t.test('slow headers: the server closes the connection; others are served meanwhile', async (t) => {
  const slow = await open();
  const closed = new Promise<string>((resolve) => {
    let data = '';
    slow.on('data', (c: Buffer) => (data += c.toString()));
    slow.on('close', () => resolve(data));
  });
  slow.write('POST /mutate HTTP/1.1\r\nHost: x\r\n');
  const drip = setInterval(() => slow.write('X-Slow: 1\r\n'), 500);
  const good = await post(server.url, '/validate', JSON.stringify(review({ object: hinted() })), { ca: bundle.caCert });
  t.equal(good.status, 200, 'a normal request is served while the slow one drips');
  const answer = await Promise.race([closed, new Promise<string>((r) => setTimeout(() => r('still open'), 20_000))]);
  clearInterval(drip);
  t.not(answer, 'still open', 'the slow connection was cut (headers timeout)');
  slow.destroy();
});

t.test('oversized headers are refused with a 4xx', async (t) => {
  const s = await open();
  const reply = new Promise<string>((resolve) => {
    let data = '';
    s.on('data', (c: Buffer) => (data += c.toString()));
    s.on('close', () => resolve(data));
    s.on('error', () => resolve(data));
  });
  s.write(`POST /mutate HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`);
  t.match(await reply, /^HTTP\/1\.1 431 /);
});
