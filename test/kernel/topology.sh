#!/bin/bash
# Three network namespaces, client <-> node <-> server, joined by veths; the node plays
# kube-proxy with plain DNAT rules at prerouting priority dstnat. Sourced by scenarios.sh
# and test/kernel/icount/lib.sh inside the VM.
#
#   client  c0 10.0.1.2/24 fd01::2/64 ── n0 10.0.1.1 fd01::1  node  n1 10.0.2.1 fd02::1 ── s0 10.0.2.2 fd02::2  server
#
# Service addresses (DNAT'd by the node to the server):
#   10.96.0.10, fd00:96::10, 192.0.2.100 (LB ingress)  tcp/80 udp/53 -> :5201 / :7000
#   10.0.1.1:30080 (NodePort)                          tcp -> :5201
#   10.96.0.20 (unhinted), 10.96.0.30 (threshold), 10.96.0.40 (invalid hint)
#   tcp/80 -> :5201, tcp/7000 -> :7000, udp/53 -> :7000 on all of them
set -u
NODE=node; CLIENT=client; SERVER=server
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

topology_up() {
  for ns in $CLIENT $NODE $SERVER; do ip netns add $ns; nsx $ns ip link set lo up; done
  ip link add c0 netns $CLIENT type veth peer name n0 netns $NODE
  ip link add s0 netns $SERVER type veth peer name n1 netns $NODE
  nsx $CLIENT ip addr add 10.0.1.2/24 dev c0; nsx $CLIENT ip addr add fd01::2/64 dev c0 nodad
  nsx $NODE ip addr add 10.0.1.1/24 dev n0; nsx $NODE ip addr add fd01::1/64 dev n0 nodad
  nsx $NODE ip addr add 10.0.2.1/24 dev n1; nsx $NODE ip addr add fd02::1/64 dev n1 nodad
  nsx $SERVER ip addr add 10.0.2.2/24 dev s0; nsx $SERVER ip addr add fd02::2/64 dev s0 nodad
  for pair in "$CLIENT c0" "$NODE n0" "$NODE n1" "$SERVER s0"; do set -- $pair; nsx $1 ip link set $2 up; done
  nsx $CLIENT ip route add default via 10.0.1.1; nsx $CLIENT ip -6 route add default via fd01::1
  nsx $SERVER ip route add default via 10.0.2.1; nsx $SERVER ip -6 route add default via fd02::1
  nsx $NODE sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
  kube_proxy_up
  nsx $SERVER iperf3 -s -D -p 5201 --logfile /tmp/iperf3-server.log
  nsx $SERVER node test/kernel/traffic.ts server 7000 & SERVER_TRAFFIC=$!
  sleep 1
}

# What kube-proxy does, minimally: DNAT in prerouting at priority dstnat.
kube_proxy_up() {
  nsx $NODE nft -f - <<'NFT'
table ip kubeproxy {
  chain pre {
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr { 10.96.0.10, 10.96.0.20, 10.96.0.30, 10.96.0.40, 192.0.2.100 } tcp dport 80 dnat to 10.0.2.2:5201
    ip daddr { 10.96.0.10, 10.96.0.20, 10.96.0.30, 10.96.0.40, 192.0.2.100 } tcp dport 7000 dnat to 10.0.2.2:7000
    ip daddr { 10.96.0.10, 10.96.0.20, 10.96.0.30, 10.96.0.40, 192.0.2.100 } udp dport 53 dnat to 10.0.2.2:7000
    ip daddr 10.0.1.1 tcp dport 30080 dnat to 10.0.2.2:5201
  }
}
table ip6 kubeproxy {
  chain pre {
    type nat hook prerouting priority dstnat; policy accept;
    ip6 daddr fd00:96::10 tcp dport 80 dnat to [fd02::2]:5201
    ip6 daddr fd00:96::10 udp dport 53 dnat to [fd02::2]:7000
  }
}
NFT
}

# Service manifests. $1 dir, $2 name, $3 clusterIP, extra YAML for metadata.annotations on stdin-less args.
write_service() {
  local dir=$1 name=$2 ip=$3 annotations=$4 extra=${5:-}
  cat > "$dir/$name.yaml" <<YAML
apiVersion: v1
kind: Service
metadata:
  name: $name
  namespace: demo
  annotations: {$annotations}
spec:
  type: ClusterIP
  clusterIP: $ip
  clusterIPs: [$ip]
  ports:
  - {name: http, port: 80, protocol: TCP}
  - {name: echo, port: 7000, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP}
$extra
YAML
}
