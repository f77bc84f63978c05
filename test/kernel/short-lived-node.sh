#!/bin/bash
# ShortLived on a node set as kube-proxy sets it (pkg/proxy/conntrack: established one day,
# close_wait one hour; issue 32): a ShortLived connection never lives longer than any other
# on the node, and a half-closed one keeps working. Sourced by scenarios.sh after
# short-lived.sh (whose short() and ttl helpers it uses).
#   10.96.0.20  ShortLived 5 s        10.96.0.40  unhinted
#   tcp/7001 on both -> 10.0.2.2:7001, a server that answers 8 s after the client's FIN
kp_sysctls() {
  nsx $NODE sysctl -qw net.netfilter.nf_conntrack_tcp_timeout_established=$1 net.netfilter.nf_conntrack_tcp_timeout_close_wait=$2
}
# The seconds left on the ESTABLISHED entry to ($1 address, $2 port).
ttl_established() { nsx $NODE conntrack -L -p tcp -d $1 --dport $2 2>/dev/null | awk '$4 == "ESTABLISHED" { print $3; exit }'; }

kp_sysctls 86400 3600
nsx $SERVER node test/kernel/traffic.ts late-server 7001 8 & LATE=$!
nsx $NODE nft add rule ip kubeproxy pre ip daddr '{ 10.96.0.20, 10.96.0.40 }' tcp dport 7001 dnat to 10.0.2.2:7001
LATE_PORT='  - {name: late, port: 7001, protocol: TCP}'
rm -f $DIR/*.yaml
short svc-b 10.96.0.20 "" "$LATE_PORT"
write_service $DIR svc-bad 10.96.0.40 "" "$LATE_PORT"
nsx $NODE conntrack -F 2>/dev/null
check "kube-proxy sysctls: agent --once with a ShortLived Service" agent_once
check "kube-proxy sysctls: the policy carries the node's established and close_wait" bash -c "ip netns exec $NODE nft list table ip flowhint | grep -q 'established : 86400, close_wait : 3600, last_ack : 5, time_wait : 5, close : 5'"

P=/tmp/idle-kp; mkdir -p $P; rm -f $P/*
nsx $CLIENT node test/kernel/traffic.ts tcp 10.96.0.20 7000 5 5 $P & IDLE=$!
for _ in $(seq 100); do [ -e $P/phase1 ] && break; sleep 0.2; done
# Until the last echo is acknowledged the entry holds the 300 s of unacknowledged data.
for _ in $(seq 25); do T=$(ttl_established 10.96.0.20 7000); [ "${T:-0}" -gt 300 ] && break; sleep 0.2; done
echo "# idle ShortLived ESTABLISHED: ${T:-none} s to live (node: 86400)"
check "kube-proxy sysctls: an idle ShortLived connection has at most the node's 86400 s (${T:-none})" [ "${T:-999999}" -le 86400 ]
check "kube-proxy sysctls: and more than the ShortLived timeout (${T:-none})" [ "${T:-0}" -gt 3600 ]
touch $P/go
for _ in $(seq 100); do [ -e $P/phase2 ] && break; sleep 0.2; done
check "kube-proxy sysctls: and it still carries data" [ -e $P/phase2 ]
kill $IDLE 2>/dev/null; wait $IDLE 2>/dev/null

# The client sends its request and shuts down its side; the answer comes 8 s later, with the
# entry in CLOSE_WAIT longer than the ShortLived 5 s.
check "half-closed: through the unhinted Service every byte arrives" nsx $CLIENT node test/kernel/traffic.ts half-close 10.96.0.40 7001 1000
check "half-closed: through the ShortLived Service every byte arrives" nsx $CLIENT node test/kernel/traffic.ts half-close 10.96.0.20 7001 1000
kill $LATE 2>/dev/null; wait $LATE 2>/dev/null
kp_sysctls 432000 60
rm -f $DIR/*.yaml
