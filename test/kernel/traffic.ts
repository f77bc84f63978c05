/**
 * Traffic with a known packet count, for threshold scenarios (iperf3 does the bulk ones).
 *   node traffic.ts server PORT                      TCP and UDP echo on PORT
 *   node traffic.ts tcp HOST PORT N1 N2 DIR          N1 round trips, touch DIR/phase1, wait for
 *                                                    DIR/go, N2 more, touch DIR/phase2, hold open
 *   node traffic.ts udp HOST PORT N HOLD_S           N datagram round trips, then keep sending one
 *                                                    a second for HOLD_S seconds
 * Each round trip is one small write answered by its echo, so it is at least two packets.
 */
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
} else if (mode === 'tcp') {
  const [host, port, n1, n2, dir] = [a!, Number(b), Number(c), Number(d), e!];
  const s = createConnection({ host, port });
  s.setNoDelay(true);
  let pending: (() => void) | undefined;
  s.on('data', () => pending?.());
  await new Promise((r) => s.once('connect', r));
  const trip = () => new Promise<void>((r) => { pending = r; s.write('x'); });
  for (let i = 0; i < n1; i++) await trip();
  writeFileSync(`${dir}/phase1`, '');
  while (!existsSync(`${dir}/go`)) await sleep(100);
  for (let i = 0; i < n2; i++) await trip();
  writeFileSync(`${dir}/phase2`, '');
  await sleep(120_000);
} else if (mode === 'udp') {
  const [host, port, n, hold] = [a!, Number(b), Number(c), Number(d)];
  const u = createSocket({ type: host.includes(':') ? 'udp6' : 'udp4' });
  let pending: (() => void) | undefined;
  u.on('message', () => pending?.());
  u.connect(port, host);
  await new Promise((r) => u.once('connect', r));
  for (let i = 0; i < n; i++) await new Promise<void>((r) => { pending = r; u.send('x'); setTimeout(r, 500); });
  for (let i = 0; i < hold; i++) { u.send('x'); await sleep(1000); }
  u.close();
} else {
  process.stderr.write('usage: traffic.ts server PORT | tcp HOST PORT N1 N2 DIR | udp HOST PORT N HOLD_S\n');
  process.exit(2);
}
