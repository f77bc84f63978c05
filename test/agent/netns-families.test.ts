/**
 * Only the families in use (issue 32): a NAT chain registers its family's NAT hook, and a
 * registered NAT hook gives every connection of that family a NAT binding (null bindings,
 * source-port clash remapping). On a node whose hints are all IPv4, flowhint must register
 * no IPv6 NAT hook, and the other way round. The real agent in a scratch namespace on this
 * machine's kernel; what NAT saw is read from the connections themselves: the kernel sets a
 * connection's IPS_SRC_NAT_DONE (0x80) and IPS_DST_NAT_DONE (0x100) status bits when a NAT
 * hook has bound it, and a probe table of the test's own counts, after NAT, the packets of
 * each family whose connection has either bit, and those with neither.
 */
import t from 'tap';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setup, yaml } from '../helpers/netns-agent.ts';
import type { Netns } from '../helpers/netns.ts';

/** The test's own table: counters at input, after NAT (priority 200), per family and NAT state. */
const PROBE = `table inet natprobe {
  chain in {
    type filter hook input priority 200; policy accept;
    meta nfproto ipv4 ct status & 0x180 != 0 counter
    meta nfproto ipv4 ct status & 0x180 == 0 counter
    meta nfproto ipv6 ct status & 0x180 != 0 counter
    meta nfproto ipv6 ct status & 0x180 == 0 counter
  }
}
`;

/**
 * Packets seen since the last call: [IPv4 bound, IPv4 unbound, IPv6 bound, IPv6 unbound]
 * (nft 1.0.6 cannot reset a rule's counter: differences of the totals).
 */
function counter(ns: Netns): () => number[] {
  let last = [0, 0, 0, 0];
  return () => {
    const text = ns.sh('nft', 'list', 'table', 'inet', 'natprobe');
    const now = [...text.matchAll(/counter packets (\d+)/g)].map((m) => Number(m[1]));
    const since = now.map((n, i) => n - (last[i] ?? 0));
    last = now;
    return since;
  };
}

/** One new UDP connection of each family over loopback (to a closed port: the packet still meets input). */
function traffic(ns: Netns, port: number): void {
  ns.sh('conntrack', '-F');
  ns.sh('bash', '-c', `echo x > /dev/udp/127.0.0.1/${port}; echo x > /dev/udp/::1/${port}`);
}

const v6 = (name: string, ip: string, hint = 'LongLived') => `apiVersion: v1
kind: Service
metadata:
  name: ${name}
  namespace: demo
  annotations: {flowhint.dev/traffic-hint: ${hint}}
spec:
  clusterIP: ${ip}
  clusterIPs: [${ip}]
  ipFamilies: [IPv6]
  ports: [{port: 80, protocol: TCP}]
`;

t.test('an IPv4-only node gets no IPv6 NAT hook from flowhint, and an IPv6 hint gets it', async (t) => {
  const { ns, dir, make } = setup(t);
  writeFileSync(join(dir, 'probe.nft'), PROBE);
  ns.sh('nft', '-f', join(dir, 'probe.nft'));
  rmSync(join(dir, 'probe.nft'));
  const counts = counter(ns);
  writeFileSync(join(dir, 'a.yaml'), yaml('a', '10.96.0.10'));
  writeFileSync(join(dir, 's.yaml'), yaml('s', '10.96.0.53').replace('LongLived', 'ShortLived'));
  const { agent, source } = make();
  await agent.prepare();
  t.ok((await agent.sync()).ok);
  traffic(ns, 9);
  const [v4bound, , v6bound, v6free] = counts();
  t.ok((v4bound ?? 0) > 0, 'IPv4 hints: IPv4 connections are bound by the IPv4 NAT hook (the probe sees NAT)');
  t.equal(v6bound, 0, 'no IPv6 connection is bound: no IPv6 NAT hook');
  t.ok((v6free ?? 0) > 0, 'and the IPv6 packet did arrive');
  t.notMatch(ipv6Table(ns), /hook/, 'no IPv6 base chain at all');

  writeFileSync(join(dir, 'b.yaml'), v6('b', 'fd00:96::10'));
  await source.rescan();
  t.equal((await agent.sync()).kind, 'full', 'the first IPv6 hint changes the shape: a full sync');
  traffic(ns, 10);
  const [, , bound6] = counts();
  t.ok((bound6 ?? 0) > 0, 'an IPv6 hint: now IPv6 connections are bound');

  rmSync(join(dir, 'a.yaml'));
  rmSync(join(dir, 's.yaml'));
  await source.rescan();
  t.ok((await agent.sync()).ok);
  traffic(ns, 11);
  const [bound4, free4, b6] = counts();
  t.equal(bound4, 0, 'the IPv4 hints gone: no IPv4 NAT hook left');
  t.ok((free4 ?? 0) > 0);
  t.ok((b6 ?? 0) > 0, 'the IPv6 one stays');
  await agent.stop();
});

/** `nft list table ip6 flowhint`, or '' if there is none. */
function ipv6Table(ns: Netns): string {
  try {
    return ns.sh('nft', 'list', 'table', 'ip6', 'flowhint');
  } catch {
    return '';
  }
}
