#!/bin/bash
# `npm run bench:dataplane`: one VM run under icount (lib.sh), so every figure is work per
# instruction. A benchmark: it prints figures and asserts nothing (the gate in gate.sh holds
# the promise in CI). Each configuration is measured twice in a row; the report gives the
# spread between the two.
#
# By default it measures what issue 35's targets and the CI gate's ratios need, in about a
# quarter of an hour: the floor (UDP, TCP); kube-proxy's nftables path with 1,000 more Services
# in every mode the ratios name (UDP, TCP, CRR); the scale series at 10 and 10,000 hinted
# Services (UDP). BENCH_FULL=1 measures the whole matrix (request/response, the bare and
# no-counter modes, kube-proxy's iptables mode, the plain DNAT path, 1,000 in the scale
# series) and rewrites docs/dataplane.md and docs/dataplane.svg; the default run leaves the
# page alone, its ratios outside the subset are null.
# BENCH_SECS (default 2) sets the seconds (of guest time) per measurement.
set -u
cd "$(dirname "$0")/../../.."
. test/kernel/icount/lib.sh
SECS=${BENCH_SECS:-2}
FULL=${BENCH_FULL:-0}
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

if [ "$FULL" = 1 ]; then ALL="udp_pps tcp rr crr"; FLOOR=$ALL; SIZES="10 1000 10000"; else ALL="udp_pps tcp crr"; FLOOR="udp_pps tcp"; SIZES="10 10000"; fi
echo "# bench: $([ "$FULL" = 1 ] && echo "the full matrix (BENCH_FULL=1)" || echo "what the targets need (BENCH_FULL=1 for the full matrix)")"
path_up floor; mode_up none; measure floor none $FLOOR
# No conntrack on the floor: its entries would show here.
echo "# floor: $(nsx $NODE conntrack -C 2> /dev/null || echo 0) conntrack entries on the node after its traffic"

path_up kpnft 1000
for m in none unhinted hinted; do mode_up $m; measure kpnft $m $ALL; done
for m in inherent handwritten; do mode_up $m; measure kpnft $m udp_pps tcp crr; done
if [ "$FULL" = 1 ]; then
  for m in bare nocounter; do mode_up $m; measure kpnft $m udp_pps; done

  path_up kpipt 1000
  for m in none hinted; do mode_up $m; measure kpipt $m udp_pps tcp; done
  mode_up unhinted; measure kpipt unhinted udp_pps

  path_up dnat
  for m in none hinted; do mode_up $m; measure dnat $m tcp; done
fi

# Scale: n hinted Services in flowhint's maps beside the measured one, kube-proxy with n more.
for n in $SIZES; do
  label=kpnft$([ $n = 10000 ] && echo 10k || ([ $n = 1000 ] && echo 1k || echo $n))
  t0=$(date +%s); path_up kpnft $n; echo "# $label: kube-proxy's rules for $n more Services loaded in $(( $(date +%s) - t0 )) guest s"
  for m in unhinted hinted; do t0=$(date +%s); mode_up $m $n; echo "# $label $m: programmed in $(( $(date +%s) - t0 )) guest s"; measure $label $m udp_pps; done
done
reset_flowhint; clear_node

echo "# ${SECS}s of guest time per measurement, $(( $(date +%s) - STARTED )) guest s in all"
mkdir -p .cache && cp $SAMPLES .cache/bench-samples.txt
HEADER="Measured $(date -u +%Y-%m-%d) in the project's VM (Debian kernel $(uname -r), nft $(nft --version | awk '{ print $2 }')), ${SECS} s of guest time per measurement."
if [ "$FULL" = 1 ]; then
  node bench/dataplane-report.ts $SAMPLES --svg docs/dataplane.svg --markdown docs/dataplane.md --header "$HEADER" bench_full=1
else
  node bench/dataplane-report.ts $SAMPLES bench_full=0
fi
