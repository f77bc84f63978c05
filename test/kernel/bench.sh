#!/bin/bash
# `npm run bench:dataplane`: one VM run, the same topology as the scenarios, iperf3 through a
# Service address. Modes alternate within each repetition (none, hinted, unhinted,
# handwritten) and medians are quoted. A benchmark: it prints figures, it asserts nothing.
# It is emulated (TCG), so only the ratios mean anything.
set -u
cd "$(dirname "$0")/../.."
. test/kernel/topology.sh
REPS=${BENCH_REPS:-5}; SECS=${BENCH_SECS:-6}
DIR=/run/fh/services; STATE=/run/fh/state
mkdir -p $DIR $STATE
FH="node bin/flowhint.ts"
topology_up

agent_once() { ip netns exec $NODE $FH agent --services-dir $DIR --once --state-dir $STATE > /dev/null 2>&1 || echo "# agent --once failed"; }
reset() { rm -f $DIR/*.yaml; ip netns exec $NODE nft delete table inet flowhint 2>/dev/null; ip netns exec $NODE nft delete table inet hand 2>/dev/null; ip netns exec $NODE conntrack -F 2>/dev/null; true; }
mode_none() { reset; }
mode_hinted() { reset; write_service $DIR svc-a 10.96.0.10 'flowhint.dev/traffic-hint: LongLived'; agent_once; }
mode_unhinted() {
  reset
  write_service $DIR svc-a 10.96.0.10 ''
  # flowhint is active on the node, for another Service.
  write_service $DIR svc-t 10.96.0.30 'flowhint.dev/traffic-hint: LongLived'
  agent_once
}
mode_handwritten() {
  reset
  ip netns exec $NODE nft -f - <<'NFT'
table inet hand {
  flowtable f { hook ingress priority filter; devices = { n0, n1 }; counter; }
  chain fwd_all { type filter hook forward priority filter; policy accept; ct state established flow add @f; }
}
NFT
}
measure() {
  ip netns exec $CLIENT iperf3 -c 10.96.0.10 -p 80 -t $SECS -J 2>/dev/null | jq -r '.end.sum_received.bits_per_second // 0'
}

declare -A R
MODES="none hinted unhinted handwritten"
for rep in $(seq $REPS); do
  for m in $MODES; do
    mode_$m
    bps=$(measure)
    R[$m]="${R[$m]:-} $bps"
    echo "# rep $rep $m: $(awk -v b="$bps" 'BEGIN { printf "%.0f Mbit/s", b / 1e6 }')"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
declare -A M
for m in $MODES; do M[$m]=$(echo "${R[$m]}" | median); echo "$m: median $(awk -v b="${M[$m]}" 'BEGIN { printf "%.0f", b / 1e6 }') Mbit/s over $REPS x ${SECS}s"; done

# ShortLived: peak conntrack entries under DNS-like load. RATE exchanges a second for USECS
# seconds to one Service, each from a new source port; the node's live entries (`conntrack -L`,
# which skips expired ones) sampled continuously. Unhinted (flowhint present, the Service not
# hinted) against ShortLived with the default 5 s, interleaved. The kernel keeps such a UDP
# entry 30 s. The kernel's own count (`conntrack -C`) is printed beside it: it also holds
# expired entries until something reaps them (conntrack's garbage collector, a lookup, an
# insert into a full table, or a dump like the sampler's own `conntrack -L`). Sampled with
# `-C` alone, the ShortLived count lagged to 5,400-7,300 under emulation.
RATE=${BENCH_UDP_RATE:-500}; USECS=${BENCH_UDP_SECS:-20}; UROUNDS=${BENCH_UDP_ROUNDS:-2}
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
awk -v h="${M[hinted]}" -v w="${M[handwritten]}" -v u="${M[unhinted]}" -v n="${M[none]}" -v ps="${PK[shortlived]}" -v pu="${PK[unhinted]}" \
  'BEGIN { printf "{\"hinted_vs_handwritten\": %.3f, \"unhinted_vs_none\": %.3f, \"hinted_vs_none\": %.3f, \"conntrack_peak_shortlived_vs_unhinted\": %.3f}\n", h / w, u / n, h / n, (pu > 0 ? ps / pu : 0) }'
