#!/bin/bash
# `npm run bench:dataplane`: one VM run under icount (lib.sh), so every figure is work per
# instruction and repeats within 1 %. A benchmark: it prints figures and asserts nothing (the
# gate in gate.sh holds the promise in CI). Each configuration is measured twice in a row; the
# report gives the spread between the two. Then the scale series: 10, 1,000 and 10,000 hinted
# Services in flowhint's maps, kube-proxy's rules sized alike.
# BENCH_SECS (default 2) sets the seconds (of guest time) per measurement.
set -u
cd "$(dirname "$0")/../../.."
. test/kernel/icount/lib.sh
SECS=${BENCH_SECS:-2}
SAMPLES=/tmp/bench-samples.txt; : > $SAMPLES
STARTED=$(date +%s); WALL0=$(cat /proc/uptime | cut -d' ' -f1)
icount_up

# $1 path label, $2 mode, workloads...: each measured twice, one sample line each.
measure() {
  local label=$1 m=$2; shift 2
  local line=""
  for w in "$@"; do
    for rep in 1 2; do
      local v=$(w_$w)
      # A failed measurement is recorded as one: the report never folds it into a ratio.
      if [ -n "$v" ]; then echo "$label $w $m $v" >> $SAMPLES; else echo "$label $w $m failed" >> $SAMPLES; echo "# $label $m $w: FAILED"; fi
      line="$line $w=$(printf '%.0f' "${v:-0}")"
    done
  done
  echo "# $label $m:$line"
}

ALL="udp_pps tcp rr crr"
path_up floor; mode_up none; measure floor none $ALL
# No conntrack on the floor: its entries would show here.
echo "# floor: $(nsx $NODE conntrack -C 2> /dev/null || echo 0) conntrack entries on the node after its traffic"

path_up kpnft 1000
for m in none unhinted hinted; do mode_up $m; measure kpnft $m $ALL; done
for m in inherent handwritten; do mode_up $m; measure kpnft $m udp_pps tcp crr; done
for m in bare nocounter; do mode_up $m; measure kpnft $m udp_pps; done

path_up kpipt 1000
for m in none hinted; do mode_up $m; measure kpipt $m udp_pps tcp; done
mode_up unhinted; measure kpipt unhinted udp_pps

path_up dnat
for m in none hinted; do mode_up $m; measure dnat $m tcp; done

# Scale: n hinted Services in flowhint's maps beside the measured one, kube-proxy with n more.
for n in 10 1000 10000; do
  label=kpnft$([ $n = 10000 ] && echo 10k || ([ $n = 1000 ] && echo 1k || echo $n))
  t0=$(date +%s); path_up kpnft $n; echo "# $label: kube-proxy's rules for $n more Services loaded in $(( $(date +%s) - t0 )) guest s"
  for m in unhinted hinted; do t0=$(date +%s); mode_up $m $n; echo "# $label $m: programmed in $(( $(date +%s) - t0 )) guest s"; measure $label $m udp_pps; done
done
reset_flowhint; clear_node

echo "# ${SECS}s of guest time per measurement, $(( $(date +%s) - STARTED )) guest s in all"
mkdir -p .cache && cp $SAMPLES .cache/bench-samples.txt
node bench/dataplane-report.ts $SAMPLES --svg docs/dataplane.svg --markdown docs/dataplane.md \
  --header "Measured $(date -u +%Y-%m-%d) in the project's VM (Debian kernel $(uname -r), nft $(nft --version | awk '{ print $2 }')), ${SECS} s of guest time per measurement."
