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
reset
awk -v h="${M[hinted]}" -v w="${M[handwritten]}" -v u="${M[unhinted]}" -v n="${M[none]}" \
  'BEGIN { printf "{\"hinted_vs_handwritten\": %.3f, \"unhinted_vs_none\": %.3f, \"hinted_vs_none\": %.3f}\n", h / w, u / n, h / n }'
