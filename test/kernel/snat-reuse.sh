#!/bin/bash
# ShortLived under masquerade (issue 32): reconnects from a fixed client port, SNAT'd to the
# node's address, to a backend that closes first (so the backend holds TIME_WAIT for 60 s).
# Two client addresses use the same source port one after the other, 7 s apart: after the
# first connection's conntrack entry is gone, masquerade may give the second one the same
# SNAT 4-tuple, still in the backend's TIME_WAIT. Every byte must arrive either way; the
# connect times say whether the reuse costs a SYN retransmit. Sourced by scenarios.sh after
# short-lived-node.sh (short(), kp_sysctls).
#   10.96.0.20 ShortLived 5 s, 10.96.0.40 unhinted: tcp/7002 -> 10.0.2.2:7002, masqueraded
nsx $SERVER node test/kernel/traffic.ts first-closer 7002 & FIRST=$!
nsx $CLIENT ip addr add 10.0.1.3/24 dev c0
nsx $NODE nft add rule ip kubeproxy pre ip daddr '{ 10.96.0.20, 10.96.0.40 }' tcp dport 7002 dnat to 10.0.2.2:7002
nsx $NODE nft add chain ip kubeproxy post '{ type nat hook postrouting priority srcnat; }'
nsx $NODE nft add rule ip kubeproxy post ip daddr 10.0.2.2 tcp dport 7002 masquerade
kp_sysctls 86400 3600
SNAT_PORT='  - {name: snat, port: 7002, protocol: TCP}'
rm -f $DIR/*.yaml
short svc-b 10.96.0.20 "" "$SNAT_PORT"
write_service $DIR svc-bad 10.96.0.40 "" "$SNAT_PORT"
check "SNAT reuse: agent --once" agent_once
sleep 1

# One round through $1: 6 connections from 10.0.1.2:$2.. , then 7 s later 6 from 10.0.1.3 with
# the same ports. Prints what arrived and sets REUSED (second connections SNAT'd to the 4-tuple
# of a first one, which the backend still holds in TIME_WAIT) and RETRIED (second connections
# with more packets than any first one: a SYN retransmitted after the backend refused it).
run_round() {
  local vip=$1 base=$2 log=$3 pids=() first second
  : > $log
  for p in $(seq $base $((base + 5))); do nsx $CLIENT node test/kernel/traffic.ts from-port $vip 7002 10.0.1.2 $p 1000 >> $log & pids+=($!); done
  wait "${pids[@]}"; pids=()
  first=$(nsx $NODE conntrack -L -p tcp --dport 7002 -d $vip 2>/dev/null)
  sleep 7
  echo "# $(nsx $SERVER ss -Htan state time-wait '( sport = :7002 )' | wc -l) backend sockets in TIME_WAIT; entries to $vip left: $(nsx $NODE conntrack -L -p tcp --dport 7002 -d $vip 2>/dev/null | wc -l)"
  for p in $(seq $base $((base + 5))); do nsx $CLIENT node test/kernel/traffic.ts from-port $vip 7002 10.0.1.3 $p 1000 >> $log & pids+=($!); done
  wait "${pids[@]}"
  second=$(nsx $NODE conntrack -L -p tcp --dport 7002 -d $vip 2>/dev/null | grep 'src=10.0.1.3')
  echo "$second" | sed 's/^/#   /'
  # The SNAT port is the reply tuple's dport (the last dport=); the original packets the first packets=.
  REUSED=$(echo "$second" | awk '{ for (i = 1; i <= NF; i++) { if ($i ~ /^sport=/ && !s) s = substr($i, 7); if ($i ~ /^dport=/) d = substr($i, 7) } if (s == d) n++; s = "" } END { print n + 0 }')
  local most=$(echo "$first" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^packets=/) { print substr($i, 9); break } }' | sort -n | tail -n 1)
  RETRIED=$(echo "$second" | awk -v most="${most:-0}" '{ for (i = 1; i <= NF; i++) if ($i ~ /^packets=/) { if (substr($i, 9) + 0 > most + 0) n++; break } } END { print n + 0 }')
  sed 's/^/#   /' $log
}
for kind in unhinted short; do
  [ $kind = unhinted ] && run_round 10.96.0.40 41000 $LOGS/snat-$kind.log || run_round 10.96.0.20 42000 $LOGS/snat-$kind.log
  WHOLE=$(grep -c ': connected in [0-9]* ms, whole' $LOGS/snat-$kind.log)
  echo "# SNAT reuse ($kind): $WHOLE of 12 connections whole; $REUSED of 6 reconnects got a 4-tuple still in the backend's TIME_WAIT; $RETRIED of 6 needed a SYN retransmit"
  check "SNAT reuse ($kind): every reconnect from a fixed port delivers every byte ($WHOLE of 12)" [ "$WHOLE" -eq 12 ]
  [ $kind = short ] && check "SNAT reuse (short): the 5 s time_wait let masquerade reuse the backend's TIME_WAIT 4-tuples ($REUSED of 6), the case under test" [ "$REUSED" -ge 1 ]
done
kill $FIRST 2>/dev/null; wait $FIRST 2>/dev/null
nsx $NODE nft delete chain ip kubeproxy post 2>/dev/null || { nsx $NODE nft flush chain ip kubeproxy post; nsx $NODE nft delete chain ip kubeproxy post; }
nsx $CLIENT ip addr del 10.0.1.3/24 dev c0
kp_sysctls 432000 60
rm -f $DIR/*.yaml
