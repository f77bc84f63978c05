#!/bin/bash
# The data-plane promise, held in CI (`npm run test:kernel`, its second VM): under icount
# (lib.sh) instruction counts are deterministic, so they can gate. Beside kube-proxy's
# nftables ruleset with 1,000 more Services, every mode measured in this one run (two rounds, below):
#   - traffic to an unhinted Service, with flowhint's whole table present (another Service
#     LongLived, another ShortLived), costs at most 1 % more than the inherent cost of the
#     mechanism (a flowtable on the devices and a forward chain with one conntrack test,
#     measured here, never a constant);
#   - a hinted Service costs at most 2 % more than the hand-written global offload;
#   - hinted flows are offloaded and unhinted ones are not, and every transfer completed.
# Ratios are throughputs (higher is faster): unhinted/inherent >= 0.99, hinted/handwritten >= 0.98.
#
# Two rounds (GATE_ROUNDS), the second in reverse order, and each mode's best of its rounds.
# Under icount a disturbance (a kernel worker, a timer, a late page fault) only ever adds
# instructions, so the best is the path's own cost. One round per mode was not enough: in
# one CI run (stop 43) a single TCP sample of the unhinted mode came 1.3 % low (0.9869 against
# 0.997-0.998 in every other run, in-boot repeats within 0.5 %), and failed the 1 % gate. The
# spread between rounds is printed per mode, so a noisy run is seen, never averaged away.
set -u
cd "$(dirname "$0")/../../.."
. test/kernel/icount/lib.sh
SECS=${BENCH_SECS:-3}
icount_up udp_pps tcp
echo "# topology up"
path_up kpnft 1000
MODES="none inherent unhinted hinted handwritten"
ROUNDS=${GATE_ROUNDS:-2}
# V: each mode's best over the rounds; LOW: its worst (0 if any transfer failed).
declare -A V LOW
for r in $(seq $ROUNDS); do
  order=$MODES
  [ $((r % 2)) -eq 0 ] && order=$(tr ' ' '\n' <<<"$MODES" | tac | tr '\n' ' ')
  for m in $order; do
    mode_up $m || notok "gate: $m: flowhint programmed the node (round $r)"
    for w in udp_pps tcp; do
      v=$(w_$w)
      [ -n "$v" ] || v=0
      echo "# round $r: $m $w $v"
      V[$m.$w]=$(awk -v a="${V[$m.$w]:-0}" -v b="$v" 'BEGIN { print (b > a ? b : a) }')
      LOW[$m.$w]=$(awk -v a="${LOW[$m.$w]:-$v}" -v b="$v" 'BEGIN { print (b < a ? b : a) }')
    done
    # After the measurements, not during them: the UDP flow's conntrack entry is still there.
    case $m in
      hinted) check "gate: hinted: the UDP flow was offloaded (round $r)" [ "$(offloaded_now)" -gt 0 ] ;;
      unhinted) check "gate: unhinted: nothing was offloaded (round $r)" [ "$(offloaded_now)" -eq 0 ] ;;
    esac
  done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }'; }
at_least() { awk -v r="$1" -v min="$2" 'BEGIN { exit !(r >= min) }'; }
SPREAD=0
for w in udp_pps tcp; do
  for m in $MODES; do
    check "gate: $m: $w measured in every round (every transfer completed)" at_least "${LOW[$m.$w]}" 1
    sp=$(awk -v hi="${V[$m.$w]}" -v lo="${LOW[$m.$w]}" 'BEGIN { printf "%.4f", (hi > 0 ? 1 - lo / hi : 0) }')
    echo "# $w: $m best ${V[$m.$w]}, spread between rounds $sp"
    SPREAD=$(awk -v a=$SPREAD -v b=$sp 'BEGIN { print (b > a ? b : a) }')
  done
  r=$(ratio ${V[unhinted.$w]} ${V[inherent.$w]})
  echo "# $w: unhinted/none $(ratio ${V[unhinted.$w]} ${V[none.$w]}), inherent/none $(ratio ${V[inherent.$w]} ${V[none.$w]}), unhinted/inherent $r"
  check "gate: $w: unhinted traffic within 1 % of the inherent cost (unhinted/inherent $r >= 0.99)" at_least $r 0.99
  r=$(ratio ${V[hinted.$w]} ${V[handwritten.$w]})
  echo "# $w: hinted/none $(ratio ${V[hinted.$w]} ${V[none.$w]}), hinted/handwritten $r"
  check "gate: $w: hinted traffic within 2 % of the hand-written offload (hinted/handwritten $r >= 0.98)" at_least $r 0.98
done
echo "{\"gate_rounds\":$ROUNDS,\"gate_max_round_spread\":$SPREAD,\"gate_udp_pps_unhinted_vs_inherent\":$(ratio ${V[unhinted.udp_pps]} ${V[inherent.udp_pps]}),\"gate_tcp_unhinted_vs_inherent\":$(ratio ${V[unhinted.tcp]} ${V[inherent.tcp]}),\"gate_udp_pps_hinted_vs_handwritten\":$(ratio ${V[hinted.udp_pps]} ${V[handwritten.udp_pps]}),\"gate_tcp_hinted_vs_handwritten\":$(ratio ${V[hinted.tcp]} ${V[handwritten.tcp]})}"
finish
