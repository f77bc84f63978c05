/**
 * What a ShortLived `ct timeout` policy holds (pure), and the node's own conntrack timeouts
 * it starts from.
 *
 * A `ct timeout` object replaces the node's timeouts for the connections it is set on, and
 * nft fills every state the policy does not list with nft's built-in defaults (established:
 * five days), not with the node's sysctls. So the policy lists every state:
 * - each state it does not shorten takes the node's current value (its
 *   `net.netfilter.nf_conntrack_*_timeout*` sysctl), so an idle ShortLived connection lives
 *   exactly as long as any other on the node (kube-proxy sets established to 86400 s);
 * - it shortens only the states in which neither side may still send: TCP `last_ack`,
 *   `time_wait` and `close`, never `fin_wait` or `close_wait` (a half-closed connection
 *   still carries data one way: kubernetes/kubernetes#32551 is why kube-proxy raised
 *   `close_wait` to an hour); UDP both states;
 * - a shortened state takes min(the Service's seconds, the node's value): never longer.
 *
 * The node's values are part of the object's identity (timeoutObjectName): a kernel object
 * cannot be changed in place, so a sysctl change makes a new object, and a full sync
 * replaces the old one.
 */
import { shortHash, type Proto } from './address.ts';

export const TCP_STATES = [
  'syn_sent',
  'syn_recv',
  'established',
  'fin_wait',
  'close_wait',
  'last_ack',
  'time_wait',
  'close',
  'syn_sent2',
  'retrans',
  'unack',
] as const;
export const UDP_STATES = ['unreplied', 'replied'] as const;
export type TcpState = (typeof TCP_STATES)[number];
export type UdpState = (typeof UDP_STATES)[number];

/** The node's timeouts in seconds, per nft state name. */
export interface NodeTimeouts {
  readonly tcp: Readonly<Record<TcpState, number>>;
  readonly udp: Readonly<Record<UdpState, number>>;
}

/**
 * The kernel's defaults (nf_conntrack_proto_tcp.c and _udp.c, Linux 6.1; also what nft puts
 * in a policy's unlisted states, and what `nft list` leaves out of a policy).
 */
export const KERNEL_TIMEOUTS: NodeTimeouts = {
  tcp: {
    syn_sent: 120,
    syn_recv: 60,
    established: 432000,
    fin_wait: 120,
    close_wait: 60,
    last_ack: 30,
    time_wait: 120,
    close: 10,
    syn_sent2: 120,
    retrans: 300,
    unack: 300,
  },
  udp: { unreplied: 30, replied: 120 },
};

/**
 * The sysctl behind each state (`net.netfilter.` + this). `syn_sent2` (simultaneous open)
 * has none: the kernel's 120 s is fixed.
 */
export const TIMEOUT_SYSCTLS: {
  readonly tcp: Readonly<Record<TcpState, string | undefined>>;
  readonly udp: Readonly<Record<UdpState, string>>;
} = {
  tcp: {
    syn_sent: 'nf_conntrack_tcp_timeout_syn_sent',
    syn_recv: 'nf_conntrack_tcp_timeout_syn_recv',
    established: 'nf_conntrack_tcp_timeout_established',
    fin_wait: 'nf_conntrack_tcp_timeout_fin_wait',
    close_wait: 'nf_conntrack_tcp_timeout_close_wait',
    last_ack: 'nf_conntrack_tcp_timeout_last_ack',
    time_wait: 'nf_conntrack_tcp_timeout_time_wait',
    close: 'nf_conntrack_tcp_timeout_close',
    syn_sent2: undefined,
    retrans: 'nf_conntrack_tcp_timeout_max_retrans',
    unack: 'nf_conntrack_tcp_timeout_unacknowledged',
  },
  udp: { unreplied: 'nf_conntrack_udp_timeout', replied: 'nf_conntrack_udp_timeout_stream' },
};

/** The states a ShortLived policy shortens: those in which no side may still send. */
export const SHORTENED: { readonly tcp: readonly TcpState[]; readonly udp: readonly UdpState[] } = {
  tcp: ['last_ack', 'time_wait', 'close'],
  udp: ['unreplied', 'replied'],
};

/** Every sysctl name to read, `net.netfilter.`-qualified. */
export function timeoutSysctls(): string[] {
  const names = [...Object.values(TIMEOUT_SYSCTLS.tcp), ...Object.values(TIMEOUT_SYSCTLS.udp)];
  return names.filter((n): n is string => n !== undefined).map((n) => `net.netfilter.${n}`);
}

/**
 * The node's timeouts from `sysctl NAME...` output (`key = value` lines). A state whose
 * sysctl is missing or unreadable keeps the kernel's default and is named in `missing`.
 */
export function parseNodeTimeouts(text: string): { timeouts: NodeTimeouts; missing: string[] } {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const [, name, value] = /^net\.netfilter\.(\w+)\s*=\s*(\d+)$/.exec(line.trim()) ?? [];
    if (name && Number(value) > 0 && Number(value) <= 2 ** 31 - 1) values.set(name, Number(value));
  }
  const missing: string[] = [];
  const pick = <S extends string>(
    sysctls: Readonly<Record<S, string | undefined>>,
    defaults: Readonly<Record<S, number>>,
  ) =>
    Object.fromEntries(
      (Object.keys(sysctls) as S[]).map((s) => {
        const name = sysctls[s];
        const v = name === undefined ? undefined : values.get(name);
        if (name !== undefined && v === undefined) missing.push(name);
        return [s, v ?? defaults[s]];
      }),
    ) as Record<S, number>;
  const timeouts = {
    tcp: pick(TIMEOUT_SYSCTLS.tcp, KERNEL_TIMEOUTS.tcp),
    udp: pick(TIMEOUT_SYSCTLS.udp, KERNEL_TIMEOUTS.udp),
  };
  return { timeouts, missing };
}

/** The policy for a ShortLived (protocol, seconds) on a node with these timeouts: every state listed. */
export function shortPolicy(proto: Proto, seconds: number, node: NodeTimeouts): Record<string, number> {
  const base: Readonly<Record<string, number>> = proto === 'tcp' ? node.tcp : node.udp;
  const shortened: readonly string[] = proto === 'tcp' ? SHORTENED.tcp : SHORTENED.udp;
  return Object.fromEntries(
    Object.entries(base).map(([state, v]) => [state, shortened.includes(state) ? Math.min(seconds, v) : v]),
  );
}

/** A stable text of the node's timeouts (what the object's identity depends on). */
export function nodeTimeoutsKey(node: NodeTimeouts): string {
  return [...TCP_STATES.map((s) => node.tcp[s]), ...UDP_STATES.map((s) => node.udp[s])].join(',');
}

/**
 * The ct timeout object set by ShortLived chain `chain` (`s4_`/`s6_` + hash): `c4_`/`c6_` +
 * a hash of the chain and the node's timeouts.
 */
export function timeoutObjectName(chain: string, node: NodeTimeouts): string {
  return `c${chain.slice(1, 3)}${shortHash(`${chain}|${nodeTimeoutsKey(node)}`)}`;
}

/** Whether two sets of node timeouts are the same. */
export function sameTimeouts(a: NodeTimeouts, b: NodeTimeouts): boolean {
  return nodeTimeoutsKey(a) === nodeTimeoutsKey(b);
}
