#!/bin/bash
# Shared by the icount gate (gate.sh, in `npm run test:kernel`) and `npm run bench:dataplane`
# (bench.sh): run inside the VM under `-icount shift=0,sleep=off` with one vCPU (vm.ts), where
# guest time counts executed instructions. A throughput measured here is work per instruction:
# 1e9 / (packets per second) is instructions per packet for the whole path (client, node and
# server share the one vCPU), and it repeats within 1 % however busy the host is.
#
# Paths (what programs the Services on the node):
#   kpnft  kube-proxy's nftables mode (test/helpers/kube-proxy.ts), FILLER more Services
#   kpipt  kube-proxy's iptables mode (iptables-nft), the same Services
#   dnat   the plain DNAT stand-in (topology.sh)
#   floor  no rules on the node at all (no conntrack either): the client sends to the server's
#          own address; what forwarding costs without netfilter
# Modes (what flowhint does):
#   none         no flowhint
#   hinted       the measured Service LongLived, by `flowhint agent --once`
#   unhinted     the measured Service not hinted; another LongLived and another ShortLived, so
#                every chain of flowhint's table is there (the worst case for others)
#   handwritten  "offload every established connection" by hand: the mechanism's limit
#   nocounter    hinted, with --no-flowtable-counter
#   bare         a flowtable on the devices and an empty forward base chain at filter + 10
#   inherent     the same with one rule testing one conntrack field (never true): the least a
#                per-connection choice in a forward chain costs
# Each workload prints one number (higher is better) or nothing if it failed:
#   tcp (iperf3, Mbit/s), udp_pps (iperf3 64-byte datagrams, packets received a second),
#   rr (sockperf TCP ping-pong, transactions a second), crr (crr.py: a new TCP connection per
#   64-byte exchange, connections a second).
set -u
. test/kernel/topology.sh
# The scenarios' helpers: DIR, STATE, LOGS, FH, agent_once, and the TAP checks gate.sh uses.
. test/kernel/lib.sh
SECS=${BENCH_SECS:-3}
mkdir -p /tmp/icount
VIP=10.96.7.10; OTHER=10.96.7.20; SHORT=10.96.7.30; SERVER_ADDR=10.0.2.2
PORTS_JSON='{"name": "iperf", "protocol": "TCP", "port": 5201, "targetPort": 5201}, {"name": "iperf-udp", "protocol": "UDP", "port": 5201, "targetPort": 5201},
    {"name": "rr", "protocol": "TCP", "port": 11111, "targetPort": 11111}, {"name": "crr", "protocol": "TCP", "port": 7001, "targetPort": 7001}'

# The topology, the servers, and a warm-up: with one vCPU, anything still starting (Node takes
# about 10 guest seconds to start from 9p) or compiling its first connections would run inside
# the first measurements. So wait until every server listens, then send each workload once to
# the server's own address (nothing measured), so the servers' first-use work is behind us.
# $@: the workloads to warm up (default all; rr needs sockperf).
icount_up() {
  local workloads=${*:-tcp udp_pps rr crr} want=2 i
  topology_up
  if [[ " $workloads " == *" rr "* ]]; then nsx $SERVER sockperf server --tcp -i 0.0.0.0 -p 11111 --daemonize > /dev/null 2>&1; want=$((want + 1)); fi
  if [[ " $workloads " == *" crr "* ]]; then
    nsx $SERVER python3 test/kernel/icount/crr.py server 7001 & want=$((want + 1))
    nsx $CLIENT sysctl -qw net.ipv4.tcp_tw_reuse=1
  fi
  nsx $NODE nft list table ip kubeproxy > /tmp/icount/dnat.nft
  for i in $(seq 600); do
    [ "$(nsx $SERVER ss -Hltn 'sport = :7000 or sport = :5201 or sport = :11111 or sport = :7001' | wc -l)" -ge $want ] && break
    sleep 0.5
  done
  local secs=$SECS
  TARGET=$SERVER_ADDR SECS=1
  for w in $workloads; do w_$w > /dev/null; done
  SECS=$secs
}

# kube-proxy's rules for the three Services and $1 more, rendered once per size.
kp_rules() {
  local n=$1
  [ -f /tmp/icount/kp-$n.nft ] && return 0
  cat > /tmp/icount/spec-$n.json <<JSON
{"podCIDR": "10.0.2.0/24", "serviceCIDR": "10.96.0.0/12", "nodeIPs": ["10.0.1.1"], "filler": $n,
 "services": [
  {"namespace": "demo", "name": "bench", "clusterIP": "$VIP", "endpoints": ["$SERVER_ADDR"], "ports": [$PORTS_JSON]},
  {"namespace": "demo", "name": "other", "clusterIP": "$OTHER", "endpoints": ["$SERVER_ADDR"], "ports": [$PORTS_JSON]},
  {"namespace": "demo", "name": "short", "clusterIP": "$SHORT", "endpoints": ["$SERVER_ADDR"], "ports": [$PORTS_JSON]}
 ]}
JSON
  node test/helpers/kube-proxy.ts nft /tmp/icount/spec-$n.json > /tmp/icount/kp-$n.nft
  node test/helpers/kube-proxy.ts iptables /tmp/icount/spec-$n.json > /tmp/icount/kp-$n.iptables
}

clear_node() { nsx $NODE nft flush ruleset; nsx $NODE conntrack -F > /dev/null 2>&1; true; }
# $1 path, $2 kube-proxy's extra Services. Sets TARGET (the measured Service's address).
path_up() {
  clear_node
  TARGET=$VIP
  case $1 in
    kpnft) kp_rules $2 && nsx $NODE nft -f /tmp/icount/kp-$2.nft ;;
    kpipt) kp_rules $2 && nsx $NODE iptables-restore < /tmp/icount/kp-$2.iptables ;;
    dnat) nsx $NODE nft -f /tmp/icount/dnat.nft; TARGET=10.96.0.10 ;;
    floor) TARGET=$SERVER_ADDR ;;
  esac
}

# A Service manifest: $1 name, $2 address, $3 hint ('' for none), $4 file (default $DIR/$1.yaml).
svc() {
  local file=${4:-$DIR/$1.yaml} ports
  if [ "$TARGET" = 10.96.0.10 ]; then ports='[{name: iperf, port: 80, protocol: TCP}, {name: iperf-udp, port: 53, protocol: UDP}]'
  else ports='[{name: iperf, port: 5201, protocol: TCP}, {name: iperf-udp, port: 5201, protocol: UDP}, {name: rr, port: 11111, protocol: TCP}, {name: crr, port: 7001, protocol: TCP}]'; fi
  cat >> $file <<YAML
---
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: demo, annotations: {${3:+flowhint.dev/traffic-hint: $3}}}
spec: {type: ClusterIP, clusterIP: $2, clusterIPs: [$2], ports: $ports}
YAML
}
# $1 how many more hinted Services in flowhint's maps (10.112.x.y; kube-proxy has no rules for
# them). Written once per size and copied: a mode change needs the same manifests again.
many() {
  local n=$1 i=0 f=/tmp/icount/many-$1.yaml
  if [ ! -f $f ]; then
    while [ $i -lt $n ]; do
      printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: m%d, namespace: many, annotations: {flowhint.dev/traffic-hint: LongLived}}\nspec: {type: ClusterIP, clusterIP: 10.112.%d.%d, clusterIPs: [10.112.%d.%d], ports: [{port: 80, protocol: TCP}, {port: 53, protocol: UDP}]}\n' \
        $i $((i / 250)) $((i % 250 + 1)) $((i / 250)) $((i % 250 + 1))
      i=$((i + 1))
    done > $f.tmp && mv $f.tmp $f
  fi
  cp $f $DIR/many.yaml
}

# Back to the node as it was without flowhint, including conntrack accounting (off by
# default; the agent turns it on, because `ct packets` needs it, and that is part of its cost).
reset_flowhint() {
  rm -f $DIR/*.yaml
  for f in inet ip ip6; do nsx $NODE nft delete table $f flowhint 2> /dev/null; done
  nsx $NODE nft delete table inet hand 2> /dev/null
  nsx $NODE sysctl -qw net.netfilter.nf_conntrack_acct=0 2> /dev/null
  nsx $NODE conntrack -F > /dev/null 2>&1
  true
}
HAND='flowtable f { hook ingress priority filter; devices = { n0, n1 }; counter; }'
# $1 mode, $2 how many more hinted Services (default 0).
mode_up() {
  reset_flowhint
  [ "${2:-0}" -gt 0 ] && many $2
  case $1 in
    none) ;;
    hinted) svc bench $TARGET LongLived && agent_once ;;
    nocounter) svc bench $TARGET LongLived && agent_once --no-flowtable-counter ;;
    unhinted) svc bench $TARGET '' && svc other $OTHER LongLived && svc short $SHORT ShortLived && agent_once ;;
    handwritten) printf 'table inet hand {\n%s\nchain forward_all { type filter hook forward priority filter; policy accept; ct state established flow add @f; }\n}\n' "$HAND" | nsx $NODE nft -f - ;;
    bare) printf 'table inet hand {\n%s\nchain forward_all { type filter hook forward priority filter + 10; policy accept; }\n}\n' "$HAND" | nsx $NODE nft -f - ;;
    inherent) printf 'table inet hand {\n%s\nchain forward_all { type filter hook forward priority filter + 10; policy accept; ct mark & 0x80000000 != 0 flow add @f; }\n}\n' "$HAND" | nsx $NODE nft -f - ;;
  esac
}

# Workloads. The Service ports are the endpoints' ports (5201, 11111, 7001), except on the
# plain DNAT path (tcp/80 -> 5201, udp/53 -> 7000: the echo server, so UDP there is echoed).
w_tcp() { local p=5201; [ "$TARGET" = 10.96.0.10 ] && p=80; nsx $CLIENT timeout $((SECS * 20 + 60)) iperf3 -c $TARGET -p $p -t $SECS -J 2> /dev/null | jq -r 'select(.error == null) | .end.sum_received.bits_per_second / 1e6'; }
w_udp_pps() { [ "$TARGET" = 10.96.0.10 ] && return 0; nsx $CLIENT timeout $((SECS * 20 + 60)) iperf3 -c $TARGET -p 5201 -u -l 64 -b 0 -t $SECS -J 2> /dev/null | jq -r 'select(.error == null) | (.end.sum.packets - .end.sum.lost_packets) / .end.sum.seconds'; }
w_rr() { nsx $CLIENT timeout $((SECS * 20 + 60)) sockperf ping-pong --tcp -i $TARGET -p 11111 -t $SECS 2> /dev/null | sed -nE 's/.*\[Valid Duration\] RunTime=([0-9.]+) sec.*ReceivedMessages=([0-9]+).*/\2 \1/p' | awk '{ if ($2 > 0) printf "%.1f\n", $1 / $2 }'; }
# Connections per busy second (crr.py: guest time the vCPU was idle is not work). Nothing is
# printed for a sample with a failed connection or any TCP segment retransmitted in the
# client's or the server's namespace: a failure, never a slower sample.
crr_client() { nsx $CLIENT timeout $(($1 * 20 + 90)) python3 test/kernel/icount/crr.py client $TARGET 7001 $1; }
retrans() { nsx $1 awk '$1 == "Tcp:" && $2 ~ /^[0-9]+$/ { print $13 }' /proc/net/snmp; }
w_crr() {
  local c0 s0 out
  c0=$(retrans $CLIENT); s0=$(retrans $SERVER)
  out=$(crr_client $SECS 2> /dev/null)
  [ "$(retrans $CLIENT)" = "$c0" ] && [ "$(retrans $SERVER)" = "$s0" ] || return 0
  sed -nE 's/.*: [1-9][0-9]* connections whole, 0 failed, [0-9]+ stalled, [0-9.]+ per second, ([0-9.]+) per busy second .*/\1/p' <<<"$out"
}

# Offloaded connections to the measured Service right now (conntrack's [OFFLOAD] entries).
offloaded_now() { nsx $NODE conntrack -L 2> /dev/null | grep '\[OFFLOAD\]' | grep -c "dst=$TARGET "; }
