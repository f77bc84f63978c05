/**
 * Traffic with a known packet count, for threshold scenarios (iperf3 does the bulk ones).
 *   node traffic.ts server PORT                      TCP and UDP echo on PORT
 *   node traffic.ts tcp HOST PORT N1 N2 DIR          N1 round trips, write DIR/phase1, wait for
 *                                                    DIR/go, N2 more, write DIR/phase2, hold open;
 *                                                    each phase file holds the bytes echoed so far
 *   node traffic.ts udp HOST PORT N HOLD_S [DONE]    N datagram round trips (then writes DONE if
 *                                                    given), then keep sending one a second for
 *                                                    HOLD_S seconds; fails unless every datagram
 *                                                    was answered
 *   node traffic.ts tcp-check HOST PORT N BYTES      N connections (4 at a time), each sends BYTES
 *                                                    random bytes and must get exactly them back
 *   node traffic.ts udp-check HOST PORT N            N datagrams on one socket, each with its own
 *                                                    payload, each answered with it within 2 s
 *   node traffic.ts udp-rate HOST PORT RATE SECS     RATE exchanges a second for SECS seconds, each
 *                                                    from a new socket (a new source port), as DNS
 *                                                    clients do; prints sent and answered
 *   node traffic.ts udp-tag ADDR PORT TAG            UDP server on ADDR:PORT answering every datagram
 *                                                    with TAG (which endpoint answered)
 *   node traffic.ts udp-watch HOST PORT SECS         one datagram every 100 ms on one socket (one
 *                                                    flow) for SECS seconds; prints `EPOCH_MS:TAG`
 *                                                    per answer, then `sent N answered M`
 *   node traffic.ts crr HOST PORT SECS               short connections for SECS seconds, one after
 *                                                    another: connect, send 64 bytes, read their
 *                                                    echo, close; prints connections per second
 *   node traffic.ts connect HOST PORT MS             one TCP connect; prints connected, refused,
 *                                                    timeout (no answer in MS) or the error code
 *   node traffic.ts late-server PORT DELAY_S         TCP on PORT that reads until the client's FIN,
 *                                                    waits DELAY_S, then answers every byte and closes
 *   node traffic.ts half-close HOST PORT BYTES       one connection: send BYTES random bytes,
 *                                                    shutdown(SHUT_WR), read the late answer until
 *                                                    the server's FIN; it must be exactly those bytes
 *   node traffic.ts first-closer PORT                TCP on PORT that echoes each connection's first
 *                                                    BYTES bytes (a 4-byte length, then them) and
 *                                                    closes first (its side then holds TIME_WAIT)
 *   node traffic.ts from-port HOST PORT SRC SPORT BYTES  one connection from SRC:SPORT to the
 *                                                    first-closer: BYTES random bytes, read them back
 *                                                    until its FIN; prints the connect time in ms
 * The checks exit 0 only if every byte came back whole, and print one line saying what arrived.
 * Each round trip is one small write answered by its echo, so it is at least two packets.
 */
import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { existsSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

const [mode, a, b, c, d, e] = process.argv.slice(2);

if (mode === 'server') {
  const port = Number(a);
  createServer((s) => {
    s.setNoDelay(true);
    s.on('data', (x) => s.write(x));
    s.on('error', () => {});
  }).listen(port, '::');
  const u = createSocket({ type: 'udp6' });
  u.on('message', (m, r) => u.send(m, r.port, r.address));
  u.bind(port, '::');
} else if (mode === 'late-server') {
  const [port, delayMs] = [Number(a), Number(b) * 1000];
  createServer({ allowHalfOpen: true }, (s) => {
    const got: Buffer[] = [];
    s.on('data', (x) => got.push(x));
    s.on('end', () => void sleep(delayMs).then(() => s.end(Buffer.concat(got))));
    s.on('error', () => s.destroy());
  }).listen(port, '::');
} else if (mode === 'first-closer') {
  createServer({ allowHalfOpen: true }, (s) => {
    let got = Buffer.alloc(0);
    s.on('data', (x) => {
      got = Buffer.concat([got, x]);
      if (got.length >= 4 && got.length >= 4 + got.readUInt32BE(0)) s.end(got.subarray(4, 4 + got.readUInt32BE(0)));
    });
    s.on('error', () => s.destroy());
  }).listen(Number(a), '::');
} else if (mode === 'from-port') {
  const [host, port, localAddress, localPort, bytes] = [a!, Number(b), c!, Number(d), Number(e)];
  const sent = randomBytes(bytes);
  const got: Buffer[] = [];
  const started = Date.now();
  let connectMs = -1;
  const s = createConnection({ host, port, localAddress, localPort, allowHalfOpen: true });
  const outcome = await new Promise<string>((resolve) => {
    const timer = setTimeout(() => resolve('no answer in 30 s'), 30_000);
    s.on('connect', () => {
      connectMs = Date.now() - started;
      const length = Buffer.alloc(4);
      length.writeUInt32BE(bytes);
      s.write(Buffer.concat([length, sent]));
    });
    s.on('data', (x) => got.push(x));
    s.on('end', () => resolve('closed'));
    s.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    s.on('close', () => clearTimeout(timer));
  });
  s.end();
  const whole = Buffer.concat(got).equals(sent);
  console.log(
    `from-port ${localAddress}:${localPort}: connected in ${connectMs} ms, ${whole ? 'whole' : 'NOT whole'} (${outcome})`,
  );
  process.exit(whole ? 0 : 1);
} else if (mode === 'half-close') {
  const [host, port, bytes] = [a!, Number(b), Number(c)];
  const sent = randomBytes(bytes);
  const got: Buffer[] = [];
  const s = createConnection({ host, port, allowHalfOpen: true });
  const outcome = await new Promise<string>((resolve) => {
    const timer = setTimeout(() => resolve('no answer in 60 s'), 60_000);
    s.on('connect', () => s.end(sent));
    s.on('data', (x) => got.push(x));
    s.on('end', () => resolve('closed'));
    s.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    s.on('close', () => clearTimeout(timer));
  });
  s.destroy();
  const back = Buffer.concat(got);
  const whole = back.equals(sent);
  console.log(
    `half-close: sent ${bytes} bytes, got ${back.length} back after the half-close (${outcome}): ${whole ? 'whole' : 'NOT whole'}`,
  );
  process.exit(whole ? 0 : 1);
} else if (mode === 'tcp') {
  const [host, port, n1, n2, dir] = [a!, Number(b), Number(c), Number(d), e!];
  const s = createConnection({ host, port });
  s.setNoDelay(true);
  let pending: (() => void) | undefined;
  let back = 0;
  s.on('data', (d: Buffer) => {
    back += d.length;
    pending?.();
  });
  await new Promise((r) => s.once('connect', r));
  const trip = () =>
    new Promise<void>((r) => {
      pending = r;
      s.write('x');
    });
  for (let i = 0; i < n1; i++) await trip();
  writeFileSync(`${dir}/phase1`, `${back}\n`);
  while (!existsSync(`${dir}/go`)) await sleep(100);
  for (let i = 0; i < n2; i++) await trip();
  writeFileSync(`${dir}/phase2`, `${back}\n`);
  await sleep(120_000);
} else if (mode === 'udp') {
  const [host, port, n, hold, done] = [a!, Number(b), Number(c), Number(d), e];
  const u = createSocket({ type: host.includes(':') ? 'udp6' : 'udp4' });
  let pending: (() => void) | undefined;
  let [sent, answered] = [0, 0];
  u.on('message', () => {
    answered += 1;
    pending?.();
  });
  // A refused datagram (ICMP port unreachable on a connected socket) is one not answered.
  u.on('error', () => {});
  u.connect(port, host);
  await new Promise((r) => u.once('connect', r));
  const send = () => {
    sent += 1;
    u.send('x');
  };
  for (let i = 0; i < n; i++)
    await new Promise<void>((r) => {
      pending = r;
      send();
      setTimeout(r, 500);
    });
  pending = undefined;
  if (done) writeFileSync(done, `${answered}\n`);
  for (let i = 0; i < hold; i++) {
    send();
    await sleep(1000);
  }
  // Late answers still count: every datagram must come back.
  for (let w = 0; w < 20 && answered < sent; w++) await sleep(100);
  u.close();
  console.log(`udp ${host}:${port}: sent ${sent} answered ${answered}`);
  process.exit(answered === sent ? 0 : 1);
} else if (mode === 'tcp-check') {
  const [host, port, n, bytes] = [a!, Number(b), Number(c), Number(d)];
  /** One connection: send `bytes` random bytes, read until as many came back or 20 s passed. */
  const one = () =>
    new Promise<boolean>((resolve) => {
      const sent = randomBytes(bytes);
      const got: Buffer[] = [];
      let len = 0;
      const s = createConnection({ host, port });
      const done = (ok: boolean) => {
        clearTimeout(timer);
        s.destroy();
        resolve(ok);
      };
      const timer = setTimeout(() => done(false), 20_000);
      s.on('connect', () => s.write(sent));
      s.on('data', (x: Buffer) => {
        got.push(x);
        len += x.length;
        if (len >= bytes) done(Buffer.concat(got).equals(sent));
      });
      s.on('error', () => done(false));
      s.on('close', () => done(len === bytes && Buffer.concat(got).equals(sent)));
    });
  let whole = 0;
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < n) {
        next += 1;
        if (await one()) whole += 1;
      }
    }),
  );
  console.log(`tcp-check ${host}:${port}: ${whole}/${n} connections echoed ${bytes} bytes whole`);
  process.exit(whole === n ? 0 : 1);
} else if (mode === 'udp-check') {
  const [host, port, n] = [a!, Number(b), Number(c)];
  const u = createSocket({ type: host.includes(':') ? 'udp6' : 'udp4' });
  let expect: Buffer | undefined;
  let pending: ((ok: boolean) => void) | undefined;
  u.on('message', (m) => pending?.(expect !== undefined && m.equals(expect)));
  u.connect(port, host);
  await new Promise((r) => u.once('connect', r));
  let whole = 0;
  for (let i = 0; i < n; i++) {
    expect = Buffer.from(`${i}:${randomBytes(24).toString('hex')}`);
    const payload = expect;
    const ok = await new Promise<boolean>((r) => {
      const timer = setTimeout(() => r(false), 2_000);
      pending = (x) => {
        clearTimeout(timer);
        r(x);
      };
      u.send(payload);
    });
    if (ok) whole += 1;
  }
  u.close();
  console.log(`udp-check ${host}:${port}: ${whole}/${n} datagrams answered whole`);
  process.exit(whole === n ? 0 : 1);
} else if (mode === 'udp-rate') {
  const [host, port, rate, secs] = [a!, Number(b), Number(c), Number(d)];
  const family = host.includes(':') ? 'udp6' : 'udp4';
  let sent = 0;
  let answered = 0;
  const started = Date.now();
  const pending = new Set<ReturnType<typeof createSocket>>();
  const one = () => {
    const u = createSocket({ type: family });
    pending.add(u);
    const done = () => {
      pending.delete(u);
      u.close();
    };
    const timer = setTimeout(done, 2_000);
    u.on('message', () => {
      answered += 1;
      clearTimeout(timer);
      done();
    });
    u.on('error', () => {
      clearTimeout(timer);
      done();
    });
    u.send(`q${sent}`, port, host);
    sent += 1;
  };
  // Paced by the clock, so a slow tick catches up: exactly RATE x SECS exchanges.
  while (Date.now() - started < secs * 1000) {
    const due = Math.min(rate * secs, Math.floor(((Date.now() - started) / 1000) * rate));
    while (sent < due) one();
    await sleep(10);
  }
  while (pending.size > 0) await sleep(50);
  console.log(
    `udp-rate ${host}:${port}: ${sent} sent, ${answered} answered in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
} else if (mode === 'udp-tag') {
  const [addr, port, tag] = [a!, Number(b), c!];
  const u = createSocket({ type: addr.includes(':') ? 'udp6' : 'udp4' });
  u.on('message', (_m, r) => u.send(tag, r.port, r.address));
  u.bind(port, addr);
} else if (mode === 'udp-watch') {
  const [host, port, secs] = [a!, Number(b), Number(c)];
  const u = createSocket({ type: host.includes(':') ? 'udp6' : 'udp4' });
  let answered = 0;
  u.on('message', (m) => {
    answered += 1;
    console.log(`${Date.now()}:${m.toString()}`);
  });
  u.connect(port, host);
  await new Promise((r) => u.once('connect', r));
  let sent = 0;
  const until = Date.now() + secs * 1000;
  while (Date.now() < until) {
    u.send('?');
    sent += 1;
    await sleep(100);
  }
  await sleep(500);
  u.close();
  console.log(`sent ${sent} answered ${answered}`);
} else if (mode === 'crr') {
  const [host, port, secs] = [a!, Number(b), Number(c)];
  const payload = Buffer.alloc(64, 'x');
  const one = () =>
    new Promise<boolean>((resolve) => {
      const s = createConnection({ host, port });
      s.setNoDelay(true);
      let got = 0;
      const done = (ok: boolean) => {
        clearTimeout(timer);
        s.end();
        s.on('error', () => {});
        resolve(ok);
      };
      const timer = setTimeout(() => done(false), 2_000);
      s.on('connect', () => s.write(payload));
      s.on('data', (x: Buffer) => {
        got += x.length;
        if (got >= payload.length) done(true);
      });
      s.on('error', () => done(false));
    });
  const started = Date.now();
  let ok = 0;
  let failed = 0;
  while (Date.now() - started < secs * 1000) {
    if (await one()) ok += 1;
    else failed += 1;
  }
  console.log(
    `crr ${host}:${port}: ${ok} connections whole, ${failed} failed, ${(ok / ((Date.now() - started) / 1000)).toFixed(1)} per second`,
  );
} else if (mode === 'connect') {
  const [host, port, ms] = [a!, Number(b), Number(c)];
  const s = createConnection({ host, port });
  const result = await new Promise<string>((resolve) => {
    const timer = setTimeout(() => resolve('timeout'), ms);
    s.on('connect', () => resolve('connected'));
    s.on('error', (err: NodeJS.ErrnoException) =>
      resolve(err.code === 'ECONNREFUSED' ? 'refused' : (err.code ?? 'error')),
    );
    s.on('close', () => clearTimeout(timer));
  });
  s.destroy();
  console.log(result);
  process.exit(0);
} else {
  process.stderr.write(
    'usage: traffic.ts server PORT | tcp HOST PORT N1 N2 DIR | udp HOST PORT N HOLD_S | tcp-check HOST PORT N BYTES | udp-check HOST PORT N | udp-rate HOST PORT RATE SECS | udp-tag ADDR PORT TAG | udp-watch HOST PORT SECS | crr HOST PORT SECS | connect HOST PORT MS | late-server PORT DELAY_S | half-close HOST PORT BYTES | first-closer PORT | from-port HOST PORT SRC SPORT BYTES\n',
  );
  process.exit(2);
}
