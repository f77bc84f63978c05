#!/bin/bash
# Asymmetric routing (issue 32): the client's packets reach the node on n0, and the node's
# route back to the client leaves another uplink, n4. The packet that offloads a connection
# gives its own direction its real route, and the other direction a route looked up bound
# to the interface it came in on: offloaded by a client packet (in on n0), the replies
# would leave n0, against the node's routes (measured before the fix: 204 MB out n0, 80 kB
# out n4). flowhint offloads only from a packet whose sender's route back leaves the
# interface it came in on (`fib saddr . iif oif exists`): here a server packet (in on n1,
# its sender routed back out n1), which gives both directions their real routes.
#   client 10.0.9.2 (on lo) -> c0/n0 -> node -> server     replies: node n4 10.0.4.1 -> c4 10.0.4.2
#   10.96.0.60 svc-asym LongLived, tcp/80 -> 10.0.2.2:5201
ip link add c4 netns $CLIENT type veth peer name n4 netns $NODE
nsx $CLIENT ip addr add 10.0.4.2/24 dev c4; nsx $NODE ip addr add 10.0.4.1/24 dev n4
nsx $CLIENT ip link set c4 up; nsx $NODE ip link set n4 up
nsx $CLIENT ip addr add 10.0.9.2/32 dev lo
nsx $CLIENT ip route add 10.96.0.60/32 via 10.0.1.1 dev c0 src 10.0.9.2
nsx $NODE ip route add 10.0.9.0/24 via 10.0.4.2 dev n4
# The client takes replies on c4 and does not answer ARP for 10.0.9.2 on c0 (as a host behind
# a router would not); the node accepts the client's packets on n0 (loose reverse path).
nsx $CLIENT sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.c0.rp_filter=0 net.ipv4.conf.c4.rp_filter=0 net.ipv4.conf.c0.arp_ignore=1
nsx $NODE sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.n0.rp_filter=0 net.ipv4.conf.n4.rp_filter=0
nsx $NODE nft add rule ip kubeproxy pre ip daddr 10.96.0.60 tcp dport 80 dnat to 10.0.2.2:5201
write_service $DIR svc-asym 10.96.0.60 'flowhint.dev/traffic-hint: LongLived'
check "asymmetric: agent --once (n4 joins the flowtable)" agent_once
check "asymmetric: n4 is a flowtable device" bash -c "ip netns exec $NODE nft list flowtable inet flowhint fastpath | grep -q n4"

tx() { nsx $NODE cat /sys/class/net/$1/statistics/tx_bytes; }
N0=$(tx n0); N4=$(tx n4)
bulk $CLIENT 10.96.0.60 10 -p 80 -R -B 10.0.9.2 -J; sleep 5
echo "# asymmetric: offloaded now: $(offloaded "src=10.0.9.2" "dport=80") connection(s)"
wait $BULK; RC=$?
GOT=$(jq -r '.end.sum_received.bytes // 0' $BULKLOG 2>/dev/null)
D0=$(( $(tx n0) - N0 )); D4=$(( $(tx n4) - N4 ))
echo "# asymmetric: received ${GOT:-0} bytes; node sent $D4 bytes on n4, $D0 on n0"
check "asymmetric: the transfer completes, every byte" iperf_ok $BULKLOG $RC 1000000
check "asymmetric: the replies left n4, as the node's routes say (${D4} bytes)" [ "$D4" -ge "${GOT:-1}" ]
check "asymmetric: none of them left n0 (${D0} bytes)" [ "$D0" -lt $(( ${GOT:-0} / 10 + 100000 )) ]

bulk $CLIENT 10.96.0.60 8 -p 80 -R -B 10.0.1.2 -J; sleep 4
check "asymmetric: a symmetric connection to the same Service is offloaded" is_offloaded "src=10.0.1.2" "dst=10.96.0.60"
wait $BULK; RC=$?
check "asymmetric: and completes, every byte" iperf_ok $BULKLOG $RC 1000000

nsx $NODE ip route del 10.0.9.0/24; nsx $CLIENT ip route del 10.96.0.60/32; nsx $CLIENT ip addr del 10.0.9.2/32 dev lo
nsx $CLIENT ip link del c4
rm -f $DIR/svc-asym.yaml
