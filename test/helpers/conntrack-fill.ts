/**
 * A busy conntrack table in a scratch network namespace, for tests and benchmarks: `count`
 * real entries, UDP from one socket to many (address, port) pairs in 10.0.0.0/8, which the
 * caller has made local (`ip addr add 10.0.0.1/8 dev lo`): nothing listens, so each datagram
 * leaves one UNREPLIED entry (the ICMP error it draws is only RELATED), and
 * `nf_conntrack_udp_timeout` raised keeps them. The first min(2,000, count) go to Services'
 * ClusterIPs (`serviceVip(i)`, UDP 53), so a mark rule can make them flowhint's.
 *
 * `node test/helpers/conntrack-fill.ts --conntrack-fill COUNT SERVICES` runs it where it is started
 * (`ip netns exec NS ...`); `fillConntrackIn(ns, count, services)` does that.
 */
import { execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';

/** Service i's ClusterIP. */
export const serviceVip = (i: number) => `10.96.${Math.floor(i / 256) % 256}.${i % 256}`;
/** Entries to Services' ClusterIPs. */
export const TO_SERVICES = 2000;

/** Here (started inside the namespace): `count` UDP entries, the first TO_SERVICES of them to Services. */
export async function fill(count: number, services: number): Promise<void> {
  const sock = createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, r));
  const marked = Math.min(TO_SERVICES, count);
  const send = (addr: string, port: number) =>
    new Promise<void>((res) => sock.send(Buffer.from('x'), port, addr, () => res()));
  // To the Services' ClusterIPs, UDP 53, from as many source ports as it takes.
  const socks = [sock];
  for (let i = 0; i < marked; i++) {
    const s = (socks[Math.floor(i / services)] ??= createSocket('udp4'));
    await new Promise<void>((res) => s.send(Buffer.from('x'), 53, serviceVip(i % services), () => res()));
  }
  // The rest: 10.200.0.0/16 by 4 ports (262,144 pairs), in batches so sends overlap.
  const pending: Promise<void>[] = [];
  for (let i = 0; i < count - marked; i++) {
    pending.push(
      send(`10.${200 + Math.floor(i / 262144)}.${Math.floor(i / 256) % 256}.${i % 256}`, 1000 + ((i >> 16) % 4)),
    );
    if (pending.length >= 256) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  for (const s of socks) s.close();
}

const FILL = '--conntrack-fill';

/** The namespace's table filled (see above), and the count it holds after. */
export function fillConntrackIn(ns: string, count: number, services: number): number {
  const sh = (...a: string[]) => execFileSync('ip', ['netns', 'exec', ns, ...a], { encoding: 'utf8' });
  sh('sysctl', '-qw', 'net.netfilter.nf_conntrack_udp_timeout=3600');
  sh(process.execPath, new URL(import.meta.url).pathname, FILL, String(count), String(services));
  return Number(sh('conntrack', '-C').trim());
}

// Run as a program only when asked by name: bench:agent bundles this module into its children.
if (process.argv[1] === new URL(import.meta.url).pathname && process.argv[2] === FILL)
  await fill(Number(process.argv[3]), Number(process.argv[4]));
