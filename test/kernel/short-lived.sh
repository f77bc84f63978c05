#!/bin/bash
# ShortLived beside the plain-DNAT stand-in for kube-proxy (topology.sh): every assertion
# reads the node's own conntrack table and checks that the traffic arrived whole. Sourced by
# scenarios.sh after topology_up and lib.sh.
#   10.96.0.20  ShortLived, default timeout (5 s)        10.96.0.30  ShortLived, conntrack-timeout 2m
#   10.96.0.40  unhinted (the kernel's timeouts)          svc-a       ShortLived: IPv6 fd00:96::10, NodePort 10.0.1.1:30053
short() { write_service $DIR $1 $2 "flowhint.dev/traffic-hint: ShortLived$3" "${4:-}"; }
# Entries in the node's table for an original destination ($1 proto, $2 address, $3 port).
entries() { nsx $NODE conntrack -L -p $1 -d $2 --dport $3 2>/dev/null | grep -c "dport=$3 "; }
# The seconds left on the first such entry.
ttl() { nsx $NODE conntrack -L -p $1 -d $2 --dport $3 2>/dev/null | awk 'NR == 1 { print $3 }'; }
udp_once() { nsx $CLIENT node test/kernel/traffic.ts udp-check $1 $2 3 > /dev/null; }

nsx $NODE nft add rule ip kubeproxy pre ip daddr 10.0.1.1 udp dport 30053 dnat to 10.0.2.2:7000
rm -f $DIR/*.yaml
short svc-b 10.96.0.20 ""
short svc-t 10.96.0.30 ', flowhint.dev/conntrack-timeout: "2m"'
write_service $DIR svc-bad 10.96.0.40 ""
svc_a ""; sed -i 's/" longlived"/ShortLived/' $DIR/svc-a.yaml
nsx $NODE conntrack -F 2>/dev/null
check "short-lived: agent --once with ShortLived Services exits 0" agent_once
S=$(state_json)
check "short-lived: status shows each ShortLived Service with its timeout" [ "$(echo "$S" | jq -r '[.services[] | "\(.service):\(.hint):\(.timeoutSeconds)"] | join(",")')" = "demo/svc-a:ShortLived:5,demo/svc-b:ShortLived:5,demo/svc-t:ShortLived:120" ]
check "short-lived: ct timeout support reported" [ "$(echo "$S" | jq -r .node.conntrackTimeout.supported)" = true ]

# The ShortLived exchange last, so its 5 s are still running when it is read (each exchange
# starts node under emulation, a few seconds).
check "short-lived: UDP to the unhinted Service arrives whole" udp_once 10.96.0.40 53
check "short-lived: UDP to the 2m Service arrives whole" udp_once 10.96.0.30 53
check "short-lived: UDP over IPv6 arrives whole" udp_once fd00:96::10 53
check "short-lived: UDP to the NodePort arrives whole" udp_once 10.0.1.1 30053
check "short-lived: a UDP exchange to a ShortLived Service arrives whole" udp_once 10.96.0.20 53
T0=$(date +%s); T=$(ttl udp 10.96.0.20 53)
echo "# ShortLived UDP entry: ${T}s to live; unhinted: $(ttl udp 10.96.0.40 53)s; 2m: $(ttl udp 10.96.0.30 53)s"
check "short-lived: the ShortLived UDP entry has at most 5 s to live ($T)" [ "${T:-99}" -le 5 ]
check "short-lived: flowhint status counts a ShortLived Service's conntrack entries" [ "$(status_json | jq -r '.services[] | select(.service == "demo/svc-t") | .conntrackEntries')" -ge 1 ]
sleep $(( T0 + 7 - $(date +%s) > 0 ? T0 + 7 - $(date +%s) : 0 ))
check "short-lived: after timeout + 2 s the ShortLived UDP entry is gone" [ "$(entries udp 10.96.0.20 53)" -eq 0 ]
check "short-lived: IPv6 entry gone too" [ "$(entries udp fd00:96::10 53)" -eq 0 ]
check "short-lived: NodePort entry gone too" [ "$(entries udp 10.0.1.1 30053)" -eq 0 ]
check "short-lived: the same exchange to an unhinted Service is still there" [ "$(entries udp 10.96.0.40 53)" -ge 1 ]
sleep 3
check "short-lived: the conntrack-timeout 2m entry is still there after 10 s" [ "$(entries udp 10.96.0.30 53)" -ge 1 ]

# TCP: a closed connection's TIME_WAIT is cut short; an idle open one is never.
check "short-lived: a short TCP exchange to the unhinted Service arrives whole" nsx $CLIENT node test/kernel/traffic.ts tcp-check 10.96.0.40 7000 1 20000
# The ShortLived one last, as for UDP: its 5 s are still running when it is read.
check "short-lived: the same to the ShortLived Service" nsx $CLIENT node test/kernel/traffic.ts tcp-check 10.96.0.20 7000 1 20000
sleep 1
# Read once: on a loaded host (a VM beside others) the few seconds left can run out between
# two reads, and an entry already gone has had at most 5 s (the unhinted one keeps ~120 s: 112).
T=$(ttl tcp 10.96.0.20 7000)
echo "# TCP after close: $(nsx $NODE conntrack -L -p tcp -d 10.96.0.20 --dport 7000 2>/dev/null | awk '{print $3, $4}' | head -2 | tr '\n' ' ')/ unhinted: $(nsx $NODE conntrack -L -p tcp -d 10.96.0.40 --dport 7000 2>/dev/null | awk '{print $3, $4}' | head -1)"
check "short-lived: the closed ShortLived connection sits in its closing state with at most 5 s left (${T:-gone})" [ "${T:-0}" -le 5 ]
sleep 6
check "short-lived: and is gone within timeout + 2 s" [ "$(entries tcp 10.96.0.20 7000)" -eq 0 ]
check "short-lived: the unhinted one is still in TIME_WAIT" [ "$(entries tcp 10.96.0.40 7000)" -ge 1 ]
P=/tmp/idle; mkdir -p $P; rm -f $P/*
nsx $CLIENT node test/kernel/traffic.ts tcp 10.96.0.20 7000 5 5 $P & IDLE=$!
for _ in $(seq 100); do [ -e $P/phase1 ] && break; sleep 0.2; done
sleep 16
check "short-lived: an idle open TCP connection keeps its entry for 3 x the timeout (ESTABLISHED)" bash -c "ip netns exec $NODE conntrack -L -p tcp -d 10.96.0.20 --dport 7000 2>/dev/null | grep -q ESTABLISHED"
touch $P/go
for _ in $(seq 100); do [ -e $P/phase2 ] && break; sleep 0.2; done
check "short-lived: and still carries data after it" [ -e $P/phase2 ]
kill $IDLE 2>/dev/null; wait $IDLE 2>/dev/null

# Switching the hint: the right mechanism for new connections each time.
write_service $DIR svc-b 10.96.0.20 'flowhint.dev/traffic-hint: LongLived'
check "short-lived: switched to LongLived, agent --once" agent_once
bulk $CLIENT 10.96.0.20 6 -p 80; sleep 4
check "short-lived -> LongLived: a bulk TCP connection is offloaded" is_offloaded "dst=10.96.0.20" "dport=80"
wait $BULK; RC=$?
check "short-lived -> LongLived: and completes" [ $RC -eq 0 ]
udp_once 10.96.0.20 53; sleep 7
check "short-lived -> LongLived: a UDP entry keeps the kernel's timeout" [ "$(entries udp 10.96.0.20 53)" -ge 1 ]
nsx $NODE conntrack -F 2>/dev/null
short svc-b 10.96.0.20 ""
check "short-lived: switched back to ShortLived, agent --once" agent_once
bulk $CLIENT 10.96.0.20 6 -p 80; sleep 4
check "LongLived -> short-lived: a bulk TCP connection is not offloaded" not_offloaded "dst=10.96.0.20" "dport=80"
wait $BULK; RC=$?
check "LongLived -> short-lived: and completes" [ $RC -eq 0 ]
udp_once 10.96.0.20 53; sleep 7
check "LongLived -> short-lived: a new UDP entry is gone after timeout + 2 s" [ "$(entries udp 10.96.0.20 53)" -eq 0 ]
rm -f $DIR/*.yaml
