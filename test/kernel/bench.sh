#!/bin/bash
# `npm run bench:dataplane`: one VM run, the scenarios' topology (client <-> node <-> server).
# A benchmark: it prints figures, it asserts nothing. It is emulated (TCG), so only the ratios
# mean anything, and rounds of the same mode spread by ±20 %: modes interleave within each
# round, every ratio gets a 95 % bootstrap interval (bench/dataplane-report.ts).
#
# Paths (what programs the Service on the node):
#   dnat   the plain DNAT stand-in (topology.sh), 10.96.0.10 tcp/80 -> :5201
#   kpnft  kube-proxy's nftables mode, 1,000 more Services loaded (test/helpers/kube-proxy.ts)
#   kpipt  kube-proxy's iptables mode (iptables-nft), the same Services
# Modes: none (no flowhint), hinted, unhinted (flowhint present, another Service hinted),
#   handwritten ("offload every established connection": the mechanism's limit), and on kpnft
#   nocounter (hinted, flowtable without the `counter` flag; tcp and udp_pps only).
# Workloads: tcp (one iperf3 stream), tcp4 (4 streams), udp_pps (64-byte UDP, packets a second
#   received), rr (sockperf TCP ping-pong, transactions a second), crr (a new TCP connection
#   per 64-byte exchange, connections a second).
# Then ShortLived: peak conntrack entries under DNS-like load, unhinted vs ShortLived.
# BENCH_ROUNDS (default 7) and BENCH_SECS (default 2) shorten it.
set -u
cd "$(dirname "$0")/../.."
. test/kernel/topology.sh
ROUNDS=${BENCH_ROUNDS:-7}; SECS=${BENCH_SECS:-2}
DIR=/run/fh/services; STATE=/run/fh/state
mkdir -p $DIR $STATE
FH="node bin/flowhint.ts"
SAMPLES=/tmp/bench-samples.txt; : > $SAMPLES
STARTED=$(date +%s)
topology_up
nsx $SERVER sockperf server --tcp -i 0.0.0.0 -p 11111 --daemonize > /dev/null 2>&1
nsx $NODE nft list table ip kubeproxy > /tmp/plain-dnat.nft

agent_once() { ip netns exec $NODE $FH agent --services-dir $DIR --once --state-dir $STATE "$@" > /dev/null 2>&1 || echo "# agent --once failed"; }

# --- paths ---------------------------------------------------------------------------------
VIP=10.96.7.10; OTHER=10.96.7.20
cat > /tmp/bench-spec.json <<'JSON'
{"podCIDR": "10.0.2.0/24", "serviceCIDR": "10.96.0.0/12", "nodeIPs": ["10.0.1.1"], "filler": 1000,
 "services": [
  {"namespace": "demo", "name": "bench", "clusterIP": "10.96.7.10", "endpoints": ["10.0.2.2"], "ports": [
    {"name": "iperf", "protocol": "TCP", "port": 5201, "targetPort": 5201}, {"name": "iperf-udp", "protocol": "UDP", "port": 5201, "targetPort": 5201},
    {"name": "rr", "protocol": "TCP", "port": 11111, "targetPort": 11111}, {"name": "echo", "protocol": "TCP", "port": 7000, "targetPort": 7000}]},
  {"namespace": "demo", "name": "other", "clusterIP": "10.96.7.20", "endpoints": ["10.0.2.2"], "ports": [{"name": "echo", "protocol": "TCP", "port": 7000, "targetPort": 7000}]}
 ]}
JSON
node test/helpers/kube-proxy.ts nft /tmp/bench-spec.json > /tmp/bench-kp.nft
node test/helpers/kube-proxy.ts iptables /tmp/bench-spec.json > /tmp/bench-kp.iptables
clear_paths() { for t in "ip kubeproxy" "ip kube-proxy" "ip filter" "ip nat"; do nsx $NODE nft delete table $t 2>/dev/null; done; true; }
path_dnat() { clear_paths; nsx $NODE nft -f /tmp/plain-dnat.nft; }
path_kpnft() { clear_paths; nsx $NODE nft -f /tmp/bench-kp.nft; }
path_kpipt() { clear_paths; nsx $NODE iptables-restore < /tmp/bench-kp.iptables; }

# --- modes ---------------------------------------------------------------------------------
# $1 name, $2 address, $3 hint ('' for none); the path decides the ports.
svc() {
  local ports
  if [ $PATH_NOW = dnat ]; then ports='[{name: http, port: 80, protocol: TCP}]'
  else ports='[{name: iperf, port: 5201, protocol: TCP}, {name: iperf-udp, port: 5201, protocol: UDP}, {name: rr, port: 11111, protocol: TCP}, {name: echo, port: 7000, protocol: TCP}]'; fi
  cat > $DIR/$1.yaml <<YAML
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: demo, annotations: {${3:+flowhint.dev/traffic-hint: $3}}}
spec: {type: ClusterIP, clusterIP: $2, clusterIPs: [$2], ports: $ports}
YAML
}
reset() { rm -f $DIR/*.yaml; nsx $NODE nft delete table inet flowhint 2>/dev/null; nsx $NODE nft delete table inet hand 2>/dev/null; nsx $NODE conntrack -F 2>/dev/null; true; }
mode_none() { reset; }
mode_hinted() { reset; svc bench $TARGET LongLived; agent_once; }
# The flowtable `counter` flag off (`--no-flowtable-counter`): what keeping byte counts costs.
mode_nocounter() { reset; svc bench $TARGET LongLived; agent_once --no-flowtable-counter; }
mode_unhinted() { reset; svc bench $TARGET ''; svc other $OTHER_NOW LongLived; agent_once; }
mode_handwritten() {
  reset
  nsx $NODE nft -f - <<'NFT'
table inet hand {
  flowtable f { hook ingress priority filter; devices = { n0, n1 }; counter; }
  chain fwd_all { type filter hook forward priority filter; policy accept; ct state established flow add @f; }
}
NFT
}

# --- workloads: each prints one number (higher is better), or nothing if it failed ---------
w_tcp() { nsx $CLIENT timeout $((SECS + 30)) iperf3 -c $TARGET -p $TPORT -t $SECS -J 2>/dev/null | jq -r 'select(.error == null) | .end.sum_received.bits_per_second'; }
w_tcp4() { nsx $CLIENT timeout $((SECS + 30)) iperf3 -c $TARGET -p $TPORT -P 4 -t $SECS -J 2>/dev/null | jq -r 'select(.error == null) | .end.sum_received.bits_per_second'; }
w_udp_pps() { nsx $CLIENT timeout $((SECS + 30)) iperf3 -c $TARGET -p 5201 -u -l 64 -b 0 -t $SECS -J 2>/dev/null | jq -r 'select(.error == null) | (.end.sum.packets - .end.sum.lost_packets) / .end.sum.seconds'; }
w_rr() { nsx $CLIENT timeout $((SECS + 30)) sockperf ping-pong --tcp -i $TARGET -p 11111 -t $SECS 2>/dev/null | sed -nE 's/.*\[Valid Duration\] RunTime=([0-9.]+) sec.*ReceivedMessages=([0-9]+).*/\2 \1/p' | awk '{ if ($2 > 0) printf "%.1f\n", $1 / $2 }'; }
w_crr() { nsx $CLIENT timeout $((SECS + 30)) node test/kernel/traffic.ts crr $TARGET 7000 $SECS 2>/dev/null | sed -nE 's/.* ([0-9.]+) per second$/\1/p'; }

declare -A WORKLOADS=([dnat]="tcp" [kpnft]="tcp tcp4 udp_pps rr crr" [kpipt]="tcp udp_pps")
declare -A MODES=([dnat]="none hinted" [kpnft]="none hinted unhinted handwritten nocounter" [kpipt]="none hinted")
for round in $(seq $ROUNDS); do
  for p in kpnft kpipt dnat; do
    PATH_NOW=$p; path_$p
    if [ $p = dnat ]; then TARGET=10.96.0.10; TPORT=80; OTHER_NOW=10.96.0.30; else TARGET=$VIP; TPORT=5201; OTHER_NOW=$OTHER; fi
    line=""
    # Rotate the mode order each round, so no mode always follows the same one.
    modes=(${MODES[$p]}); n=${#modes[@]}
    for i in $(seq 0 $((n - 1))); do
      m=${modes[$(( (i + round) % n ))]}
      mode_$m
      for w in ${WORKLOADS[$p]}; do
        [ $m = nocounter ] && [ $w != tcp ] && [ $w != udp_pps ] && continue
        v=$(w_$w)
        if [ -n "$v" ]; then echo "$p $w $m $v" >> $SAMPLES; else echo "# round $round $p $m $w: no result"; fi
        line="$line $m/$w=$(printf '%.0f' "${v:-0}")"
      done
    done
    echo "# round $round $p:$line"
  done
done
reset; path_dnat

# --- ShortLived: peak conntrack entries under DNS-like load --------------------------------
# RATE exchanges a second for USECS seconds to one Service, each from a new source port; the
# node's live entries (`conntrack -L`, which skips expired ones) sampled continuously.
# Unhinted (flowhint present, the Service not hinted) against ShortLived with the default 5 s,
# interleaved. The kernel keeps such a UDP entry 30 s. The kernel's own count (`conntrack -C`)
# is printed beside it: it also holds expired entries until something reaps them (conntrack's
# garbage collector, a lookup, an insert into a full table, or a dump like the sampler's own
# `conntrack -L`). Sampled with `-C` alone, the ShortLived count lagged to 5,400-7,300.
RATE=${BENCH_UDP_RATE:-500}; USECS=${BENCH_UDP_SECS:-20}; UROUNDS=${BENCH_UDP_ROUNDS:-2}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
peak() {
  reset
  if [ "$1" = shortlived ]; then write_service $DIR svc-b 10.96.0.20 'flowhint.dev/traffic-hint: ShortLived'
  else write_service $DIR svc-b 10.96.0.20 ''; write_service $DIR svc-t 10.96.0.30 'flowhint.dev/traffic-hint: ShortLived'; fi
  agent_once
  ip netns exec $NODE conntrack -F 2>/dev/null
  ip netns exec $CLIENT node test/kernel/traffic.ts udp-rate 10.96.0.20 53 $RATE $USECS > /tmp/udp-rate.log 2>&1 & local P=$! max=0 maxc=0 c n=0
  while kill -0 $P 2>/dev/null; do
    c=$(ip netns exec $NODE conntrack -L 2>/dev/null | grep -c .)
    [ "$c" -gt "$max" ] && max=$c
    c=$(ip netns exec $NODE conntrack -C 2>/dev/null || echo 0)
    [ "$c" -gt "$maxc" ] && maxc=$c
    n=$((n + 1))
  done
  wait $P
  echo "# $1: peak $max live entries ($n samples; the kernel's count, expired ones included, peaked at $maxc); $(cat /tmp/udp-rate.log)" >&2
  echo $max
}
declare -A PK
for rep in $(seq $UROUNDS); do
  for m in unhinted shortlived; do PK[$m]="${PK[$m]:-} $(peak $m)"; done
done
for m in unhinted shortlived; do PK[$m]=$(echo "${PK[$m]}" | median); echo "conntrack peak, $m: median $(printf %.0f "${PK[$m]}") entries over $UROUNDS x ${USECS}s at $RATE/s"; done
reset
echo "# $ROUNDS rounds x ${SECS}s per measurement, $(( $(date +%s) - STARTED ))s in all"
# The samples are kept (git-ignored) so the report and plot can be redrawn on the host.
mkdir -p .cache && cp $SAMPLES .cache/bench-samples.txt
node bench/dataplane-report.ts $SAMPLES --svg dataplane.svg conntrack_peak_shortlived_vs_unhinted=$(awk -v s="${PK[shortlived]}" -v u="${PK[unhinted]}" 'BEGIN { print (u > 0 ? s / u : 0) }')
