#!/bin/bash
# The data-plane promise, held in CI (`npm run test:kernel`, its second VM): under icount
# (lib.sh) instruction counts are deterministic, so they can gate. Beside kube-proxy's
# nftables ruleset with 1,000 more Services, one measurement per mode in this one run:
#   - traffic to an unhinted Service, with flowhint's whole table present (another Service
#     LongLived, another ShortLived), costs at most 1 % more than the inherent cost of the
#     mechanism (a flowtable on the devices and a forward chain with one conntrack test,
#     measured here, never a constant);
#   - a hinted Service costs at most 2 % more than the hand-written global offload;
#   - hinted flows are offloaded and unhinted ones are not, and every transfer completed.
# Ratios are throughputs (higher is faster): unhinted/inherent >= 0.99, hinted/handwritten >= 0.98.
set -u
cd "$(dirname "$0")/../../.."
. test/kernel/icount/lib.sh
SECS=${BENCH_SECS:-3}
icount_up udp_pps tcp
echo "# topology up"
path_up kpnft 1000
declare -A V
for m in none inherent unhinted hinted handwritten; do
  mode_up $m || notok "gate: $m: flowhint programmed the node"
  for w in udp_pps tcp; do
    V[$m.$w]=$(w_$w)
    [ -n "${V[$m.$w]}" ] || V[$m.$w]=0
    echo "# $m $w ${V[$m.$w]}"
  done
  # After the measurements, not during them: the UDP flow's conntrack entry is still there.
  case $m in
    hinted) check "gate: hinted: the UDP flow was offloaded" [ "$(offloaded_now)" -gt 0 ] ;;
    unhinted) check "gate: unhinted: nothing was offloaded" [ "$(offloaded_now)" -eq 0 ] ;;
  esac
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }'; }
at_least() { awk -v r="$1" -v min="$2" 'BEGIN { exit !(r >= min) }'; }
for w in udp_pps tcp; do
  for m in none inherent unhinted hinted handwritten; do check "gate: $m: $w measured (the transfer completed)" at_least "${V[$m.$w]}" 1; done
  r=$(ratio ${V[unhinted.$w]} ${V[inherent.$w]})
  echo "# $w: unhinted/none $(ratio ${V[unhinted.$w]} ${V[none.$w]}), inherent/none $(ratio ${V[inherent.$w]} ${V[none.$w]}), unhinted/inherent $r"
  check "gate: $w: unhinted traffic within 1 % of the inherent cost (unhinted/inherent $r >= 0.99)" at_least $r 0.99
  r=$(ratio ${V[hinted.$w]} ${V[handwritten.$w]})
  echo "# $w: hinted/none $(ratio ${V[hinted.$w]} ${V[none.$w]}), hinted/handwritten $r"
  check "gate: $w: hinted traffic within 2 % of the hand-written offload (hinted/handwritten $r >= 0.98)" at_least $r 0.98
done
echo "{\"gate_udp_pps_unhinted_vs_inherent\":$(ratio ${V[unhinted.udp_pps]} ${V[inherent.udp_pps]}),\"gate_tcp_unhinted_vs_inherent\":$(ratio ${V[unhinted.tcp]} ${V[inherent.tcp]}),\"gate_udp_pps_hinted_vs_handwritten\":$(ratio ${V[hinted.udp_pps]} ${V[handwritten.udp_pps]}),\"gate_tcp_hinted_vs_handwritten\":$(ratio ${V[hinted.tcp]} ${V[handwritten.tcp]})}"
finish
