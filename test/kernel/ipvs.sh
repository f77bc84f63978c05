#!/bin/bash
# kube-proxy's IPVS mode beside hinted Services (issue: hinted IPVS connections broke).
# Sourced by scenarios.sh after topology_up and lib.sh. Set up as kube-proxy does it: the
# Service addresses on a dummy `kube-ipvs0` (down, NOARP), one NAT ("Masq") virtual service
# per address and port, and net.ipv4.vs.conntrack=1. The Service is hinted; every exchange
# must arrive whole and none may be offloaded, while a DNAT'd hinted Service on the same node
# still is.
IPVS4=10.96.2.10; IPVS6=fd00:96::2:10
modprobe ip_vs && modprobe ip_vs_rr
nsx $NODE sysctl -qw net.ipv4.vs.conntrack=1
nsx $NODE ip link add kube-ipvs0 type dummy
nsx $NODE ip addr add $IPVS4/32 dev kube-ipvs0
nsx $NODE ip addr add $IPVS6/128 dev kube-ipvs0 nodad
for vip in $IPVS4 "[$IPVS6]"; do
  case $vip in \[*) pod="[fd02::2]" ;; *) pod=10.0.2.2 ;; esac
  nsx $NODE ipvsadm -A -t $vip:80 -s rr;   nsx $NODE ipvsadm -a -t $vip:80 -r $pod:5201 -m
  nsx $NODE ipvsadm -A -t $vip:7000 -s rr; nsx $NODE ipvsadm -a -t $vip:7000 -r $pod:7000 -m
  nsx $NODE ipvsadm -A -u $vip:53 -s rr;   nsx $NODE ipvsadm -a -u $vip:53 -r $pod:7000 -m
done
cat > $DIR/svc-ipvs.yaml <<YAML
apiVersion: v1
kind: Service
metadata: {name: svc-ipvs, namespace: demo, annotations: {flowhint.dev/traffic-hint: LongLived}}
spec:
  type: ClusterIP
  clusterIP: $IPVS4
  clusterIPs: [$IPVS4, "$IPVS6"]
  ipFamilies: [IPv4, IPv6]
  ipFamilyPolicy: RequireDualStack
  ports:
  - {name: http, port: 80, protocol: TCP}
  - {name: echo, port: 7000, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP}
YAML
svc_a ""
check "ipvs: agent --once with an IPVS-served hinted Service exits 0" agent_once
echo "# ipvs: $(nsx $NODE ipvsadm -Ln | tr -s ' ' | tr '\n' ';')"

IPERF=$LOGS/iperf-ipvs.json
nsx $CLIENT timeout 40 iperf3 -c $IPVS4 -p 80 -t 6 -J > $IPERF 2>&1; RC=$?
echo "# ipvs: iperf3 exit $RC, $(jq -r '"\(.end.sum_received.bytes // 0) bytes received, \(.error // "no error")"' $IPERF 2>/dev/null)"
# iperf3 -J exits 0 even when its control socket was reset: the error is in the JSON.
check "ipvs: an iperf3 TCP stream through the IPVS virtual service completes without error" [ $RC -eq 0 ] && [ "$(jq -r '.error // "none"' $IPERF 2>/dev/null)" = none ]
check "ipvs: and its data arrived" [ "$(jq -r '.end.sum_received.bytes // 0' $IPERF 2>/dev/null)" -gt 1000000 ]
check "ipvs: 40 TCP connections echo 100 kB each, whole" nsx $CLIENT node test/kernel/traffic.ts tcp-check $IPVS4 7000 40 100000
check "ipvs: a UDP virtual service answers 200 datagrams on one flow, whole" nsx $CLIENT node test/kernel/traffic.ts udp-check $IPVS4 53 200
check "ipvs: IPv6 virtual service, 10 TCP connections echo 100 kB each, whole" nsx $CLIENT node test/kernel/traffic.ts tcp-check $IPVS6 7000 10 100000
check "ipvs: IPv6 UDP virtual service, 100 datagrams whole" nsx $CLIENT node test/kernel/traffic.ts udp-check $IPVS6 53 100
udp_flow $CLIENT $IPVS4 53 40 8
check "ipvs: no IPVS connection was offloaded" bash -c "! ip netns exec $NODE conntrack -L 2>/dev/null | grep -F '[OFFLOAD]' | grep -qE 'dst=($IPVS4|$IPVS6) '"
check "ipvs: UDP past the threshold: every datagram answered" wait $U

# Beside it, on the same node, the DNAT'd hinted Service still offloads.
bulk $CLIENT 10.96.0.10 8 -p 80 -J; sleep 4
check "ipvs: beside it, a DNAT'd hinted Service is still offloaded" is_offloaded "dst=10.96.0.10" "dport=80"
wait $BULK; RC=$?
check "ipvs: and its stream completes" [ $RC -eq 0 ]

# Said in status: each IPVS port, with the reason.
S=$(state_json)
WANT="$IPVS4 tcp/80 ipvs,$IPVS4 tcp/7000 ipvs,$IPVS4 udp/53 ipvs,$IPVS6 tcp/80 ipvs,$IPVS6 tcp/7000 ipvs,$IPVS6 udp/53 ipvs"
GOT=$(echo "$S" | jq -r '[.services[] | select(.service == "demo/svc-ipvs") | .notOffloaded[]? | "\(.address) \(.proto)/\(.port) \(.reason)"] | join(",")')
check "ipvs: status --json lists every IPVS port of demo/svc-ipvs with reason ipvs ($GOT)" [ "$GOT" = "$WANT" ]
check "ipvs: status --json lists nothing for the DNAT'd demo/svc-a" [ "$(echo "$S" | jq -r '[.services[] | select(.service == "demo/svc-a") | .notOffloaded // [] | length] | add')" = 0 ]
check "ipvs: status finds kube-proxy's ipvs mode (kube-ipvs0)" [ "$(echo "$S" | jq -r .node.kubeProxyMode)" = ipvs ]
check "ipvs: flowhint status says it in words" bash -c "ip netns exec $NODE $FH status --state-dir $STATE | grep -q 'not offloaded: $IPVS4 tcp/80, .*: ipvs: an IPVS virtual service'"

nsx $NODE ipvsadm -C
nsx $NODE ip link del kube-ipvs0
rm -f $DIR/svc-ipvs.yaml
