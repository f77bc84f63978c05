/**
 * Connection limits: slowloris connections (one, and 200 at once) are cut and do not starve
 * normal requests; a dripped body is cut by the request timeout; oversized headers get 431;
 * quiet connections are closed (no TLS handshake: 5 s, no request: 5 s, idle keep-alive: 30 s).
 */
import t from 'tap';
import { createConnection, type Socket } from 'node:net';
import { connect } from 'node:tls';
import { startWebhook } from '../../webhook/server.ts';
import { silentLogger } from '../../lib/log.ts';
import { post, review, tempCerts } from '../helpers/admission.ts';
import { hinted } from '../helpers/services.ts';

const { dir, bundle } = await tempCerts();
const server = await startWebhook({
  certFile: `${dir}/tls.crt`,
  keyFile: `${dir}/tls.key`,
  host: '127.0.0.1',
  port: 0,
  logger: silentLogger(),
});
t.teardown(() => server.close());
const u = new URL(server.url);

function open() {
  return new Promise<ReturnType<typeof connect>>((resolve, reject) => {
    const s = connect({ host: u.hostname, port: Number(u.port), ca: bundle.caCert }, () => resolve(s));
    s.on('error', reject);
  });
}

/** Everything the server sends on `s`, once it closes the connection. */
function received(s: Socket): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    s.on('data', (c: Buffer) => (data += c.toString()));
    s.on('close', () => resolve(data));
    s.on('error', () => resolve(data));
  });
}

t.test('slow headers: the server closes the connection; others are served meanwhile', async (t) => {
  const slow = await open();
  const closed = received(slow);
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
  const reply = received(s);
  s.write(`POST /mutate HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`);
  t.match(await reply, /^HTTP\/1\.1 431 /);
});

/**
 * Resolves with how long the server took to close `s` (ms), or -1 after `limitMs`. Reads
 * whatever comes: a paused socket never sees the server's FIN.
 */
function closedWithin(s: Socket, limitMs: number): Promise<number> {
  const start = Date.now();
  s.resume();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(-1), limitMs);
    s.on('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - start);
    });
    s.on('error', () => {});
  });
}

t.test('200 slowloris connections at once do not starve the server; all are cut', async (t) => {
  const slow = await Promise.all(Array.from({ length: 200 }, () => open()));
  const drips = slow.map((s) => {
    s.write('POST /mutate HTTP/1.1\r\nHost: x\r\n');
    return setInterval(() => s.write('X-Slow: 1\r\n'), 500);
  });
  const cut = slow.map((s) => closedWithin(s, 30_000));
  let served = 0;
  for (let i = 0; i < 20; i++) {
    const r = await post(server.url, '/validate', JSON.stringify(review({ object: hinted() })), { ca: bundle.caCert });
    if (r.status === 200) served += 1;
  }
  t.equal(served, 20, 'every normal request was served while 200 connections dripped headers');
  const times = await Promise.all(cut);
  drips.forEach(clearInterval);
  t.equal(times.filter((ms) => ms < 0).length, 0, 'all 200 slow connections were cut by the server');
  t.comment(`slowloris connections cut after ${Math.min(...times)}-${Math.max(...times)} ms`);
});

t.test('a body dripped after complete headers is cut by the request timeout', async (t) => {
  const s = await open();
  const reply = received(s);
  s.write('POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{');
  const drip = setInterval(() => s.write(' '), 500);
  const done = closedWithin(s, 30_000);
  const ms = await done;
  clearInterval(drip);
  const got = await reply;
  t.comment(`cut after ${ms} ms; the server sent ${JSON.stringify(got.slice(0, 40))}`);
  // The request timeout is 10 s (app.ts), swept every second: not before, and not much after.
  t.ok(ms >= 9_000 && ms < 20_000, `cut by the 10 s request timeout: ${ms} ms`);
  t.match(got, /^HTTP\/1\.1 408 /, 'answered 408 Request Timeout before closing');
});

t.test(
  'connections that go quiet are closed: no TLS handshake, a handshake and nothing, an idle keep-alive',
  async (t) => {
    const tcp = createConnection(Number(u.port), u.hostname);
    const silent = await open();
    const idle = await open();
    const closed = [closedWithin(tcp, 60_000), closedWithin(silent, 60_000), closedWithin(idle, 60_000)];
    idle.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    const [tcpMs, silentMs, idleMs] = await Promise.all(closed);
    t.ok(tcpMs! > 0, `a TCP connection that never starts TLS is cut (handshake timeout): ${tcpMs} ms`);
    t.ok(silentMs! > 0, `a connection that never sends a request is cut (headers timeout): ${silentMs} ms`);
    t.ok(idleMs! > 0, `an idle keep-alive connection is closed (keep-alive timeout): ${idleMs} ms`);
  },
);
