/**
 * A ShortLived policy never lengthens a timeout and never shortens a state in which a side
 * may still send (issue 32). Expectations are written out by hand from the kernel's
 * defaults (nf_conntrack_proto_tcp.c, Linux 6.1) and kube-proxy's sysctls
 * (pkg/proxy/conntrack: established 86400 s, close_wait 3600 s).
 */
import t from 'tap';
import {
  KERNEL_TIMEOUTS,
  nodeTimeoutsKey,
  parseNodeTimeouts,
  sameTimeouts,
  shortPolicy,
  timeoutObjectName,
  timeoutSysctls,
  type NodeTimeouts,
} from '../../../agent/state/timeout-policy.ts';

/** A node as kube-proxy leaves it. */
const KUBE_PROXY: NodeTimeouts = {
  tcp: { ...KERNEL_TIMEOUTS.tcp, established: 86400, close_wait: 3600 },
  udp: KERNEL_TIMEOUTS.udp,
};

t.test('TCP: every state listed; only last_ack, time_wait and close shortened', async (t) => {
  t.same(shortPolicy('tcp', 5, KUBE_PROXY), {
    syn_sent: 120,
    syn_recv: 60,
    established: 86400,
    fin_wait: 120,
    close_wait: 3600,
    last_ack: 5,
    time_wait: 5,
    close: 5,
    syn_sent2: 120,
    retrans: 300,
    unack: 300,
  });
});

t.test('never longer than the node: a ShortLived timeout above a state keeps the node value', async (t) => {
  const p = shortPolicy('tcp', 60, KUBE_PROXY);
  t.equal(p.last_ack, 30, 'last_ack is 30 s on the node: 60 would lengthen it');
  t.equal(p.close, 10);
  t.equal(p.time_wait, 60);
  const u = shortPolicy('udp', 600, { tcp: KERNEL_TIMEOUTS.tcp, udp: { unreplied: 30, replied: 180 } });
  t.same(u, { unreplied: 30, replied: 180 }, 'UDP: 600 s would lengthen both');
  t.same(shortPolicy('udp', 5, KERNEL_TIMEOUTS), { unreplied: 5, replied: 5 });
});

t.test('the node sysctls, read from sysctl output', async (t) => {
  t.equal(timeoutSysctls().length, 12, 'ten TCP states with a sysctl (not syn_sent2) and two UDP');
  t.ok(timeoutSysctls().includes('net.netfilter.nf_conntrack_tcp_timeout_max_retrans'));
  t.ok(timeoutSysctls().includes('net.netfilter.nf_conntrack_udp_timeout_stream'));
  const text = [
    'net.netfilter.nf_conntrack_tcp_timeout_established = 86400',
    'net.netfilter.nf_conntrack_tcp_timeout_close_wait = 3600',
    'net.netfilter.nf_conntrack_tcp_timeout_max_retrans = 200',
    'net.netfilter.nf_conntrack_tcp_timeout_unacknowledged = 250',
    'net.netfilter.nf_conntrack_udp_timeout_stream = 180',
    'net.netfilter.nf_conntrack_tcp_timeout_time_wait = 0',
    'net.netfilter.nf_conntrack_tcp_timeout_syn_sent = 12x',
  ].join('\n');
  const { timeouts, missing } = parseNodeTimeouts(text);
  t.equal(timeouts.tcp.established, 86400);
  t.equal(timeouts.tcp.close_wait, 3600);
  t.equal(timeouts.tcp.retrans, 200, 'max_retrans is the retrans state');
  t.equal(timeouts.tcp.unack, 250, 'unacknowledged is the unack state');
  t.equal(timeouts.udp.replied, 180, 'udp_timeout_stream is the replied state');
  t.equal(timeouts.udp.unreplied, 30, 'missing: the kernel default');
  t.equal(timeouts.tcp.time_wait, 120, 'zero is not a timeout: the kernel default');
  t.equal(timeouts.tcp.syn_sent, 120, 'not a number: the kernel default');
  t.equal(timeouts.tcp.syn_sent2, 120, 'syn_sent2 has no sysctl');
  t.same(
    missing.sort(),
    [
      'nf_conntrack_tcp_timeout_close',
      'nf_conntrack_tcp_timeout_fin_wait',
      'nf_conntrack_tcp_timeout_last_ack',
      'nf_conntrack_tcp_timeout_syn_recv',
      'nf_conntrack_tcp_timeout_syn_sent',
      'nf_conntrack_tcp_timeout_time_wait',
      'nf_conntrack_udp_timeout',
    ],
    'each unread sysctl is named',
  );
  t.same(parseNodeTimeouts('').timeouts, KERNEL_TIMEOUTS, 'nothing read: all defaults');
  const edges = parseNodeTimeouts(
    [
      '  net.netfilter.nf_conntrack_tcp_timeout_close = 7  ',
      'net.netfilter.nf_conntrack_tcp_timeout_syn_recv=9',
      'net.netfilter.nf_conntrack_tcp_timeout_established = 2147483647',
      'net.netfilter.nf_conntrack_tcp_timeout_close_wait = 2147483648',
      'xnet.netfilter.nf_conntrack_tcp_timeout_fin_wait = 11',
      'net.netfilter.nf_conntrack_tcp_timeout_last_ack = 12 s',
    ].join('\n'),
  ).timeouts.tcp;
  t.equal(edges.close, 7, 'surrounding spaces');
  t.equal(edges.syn_recv, 9, 'no spaces around =');
  t.equal(edges.established, 2147483647, 'the largest the kernel takes');
  t.equal(edges.close_wait, 60, 'beyond it: the default');
  t.equal(edges.fin_wait, 120, 'another key that merely ends the same: the default');
  t.equal(edges.last_ack, 30, 'trailing text: the default');
});

t.test("the object's name carries the node's timeouts", async (t) => {
  const chain = 's4_6d53b9b3ff92e3a2';
  const a = timeoutObjectName(chain, KERNEL_TIMEOUTS);
  const b = timeoutObjectName(chain, KUBE_PROXY);
  t.match(a, /^c4_[0-9a-f]{16}$/);
  t.match(timeoutObjectName('s6_52d32caa01dbc629', KUBE_PROXY), /^c6_[0-9a-f]{16}$/);
  t.not(a, b, 'a sysctl change makes a new object');
  t.equal(timeoutObjectName(chain, { tcp: { ...KUBE_PROXY.tcp }, udp: { ...KUBE_PROXY.udp } }), b, 'same values: same');
  t.not(timeoutObjectName('s4_0000000000000001', KUBE_PROXY), b, 'another chain: another object');
  t.not(
    timeoutObjectName(chain, { tcp: KERNEL_TIMEOUTS.tcp, udp: { unreplied: 30, replied: 180 } }),
    a,
    'UDP values count too',
  );
  t.ok(sameTimeouts(KUBE_PROXY, { tcp: { ...KUBE_PROXY.tcp }, udp: KUBE_PROXY.udp }));
  t.notOk(sameTimeouts(KUBE_PROXY, KERNEL_TIMEOUTS));
  t.equal(nodeTimeoutsKey(KERNEL_TIMEOUTS), '120,60,432000,120,60,30,120,10,120,300,300,30,120');
});
