#!/bin/bash
# Device churn (issue 32): veths created and deleted in the node every 100 ms, as short-lived
# Job pods do, while hints change. Every hint change is programmed, no sync fails, and a
# transfer offloaded before the churn completes with every byte. How long each change took
# is printed, measured from the agent's own log, never checked: wall-clock time in a TCG VM
# on a shared host says nothing about a node (a change takes the agent 1-5 s here even
# without churn). Sourced by scenarios.sh (svc-t, 10.96.0.30 threshold 1000, is LongLived then).
#   10.96.0.20 svc-b: its hint changed six times    10.96.0.30 svc-t: the transfer
# A change's time runs from just before the manifest is written to the `synced` line that
# names svc-b (or a full sync), both on the VM's clock.
CLOG=$LOGS/agent-churn.log; : > $CLOG
ip netns exec $NODE $FH agent --services-dir $DIR --state-dir $STATE >> $CLOG 2>&1 & A=$!
wait_agent $A
bulk $CLIENT 10.96.0.30 60 -p 80 -J; sleep 5
check "churn: a transfer is offloaded before the churn" is_offloaded "dst=10.96.0.30" "dport=80"

# The status document's view of svc-b: hint:threshold:timeout, or none.
svc_b() { jq -r '[.services[] | select(.service == "demo/svc-b") | "\(.hint):\(.threshold):\(.timeoutSeconds // "-")"] | .[0] // "none"' $STATE/status.json 2>/dev/null; }
# Milliseconds from $1 to the first sync after it that programmed svc-b; empty if none yet.
synced_after() {
  jq -Rr --argjson t0 "$1" 'def ms: (sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601) * 1000 + (capture("\\.(?<f>[0-9]{3})").f | tonumber);
    fromjson? | select(.msg == "synced") | (.time | ms) as $t
    | select($t >= $t0 and (.kind == "full" or ((.changed // []) | index("demo/svc-b")))) | $t - $t0' $CLOG | head -n 1
}
WRONG=""; TIMES=""
change() {
  local label=$1 want=$2 annotations=$3 t0 took=""
  t0=$(date +%s%3N)
  write_service $DIR svc-b 10.96.0.20 "$annotations"
  for _ in $(seq 120); do sleep 0.5; took=$(synced_after $t0); [ -n "$took" ] && [ "$(svc_b)" = "$want" ] && break; done
  echo "# $label: svc-b -> $want programmed in ${took:-never} ms (status: $(svc_b))"
  [ -n "$took" ] || grep '"synced"' $CLOG | tail -n 3 | cut -c1-300 | sed 's/^/#   /'
  [ "$(svc_b)" = "$want" ] || WRONG="$WRONG $want:status=$(svc_b)"
  TIMES="$TIMES ${took:-never}"
}
# Without churn first, for comparison.
change quiet LongLived:20:- 'flowhint.dev/traffic-hint: LongLived'
change quiet none ''
QUIET=$TIMES; WRONG=""; TIMES=""

# One `ip -batch` in the node reads the churn as it is written: each 100 ms one veth pair is
# created and the one before deleted, so each lives about 100 ms, less than the agent's 2 s
# host poll: polls list devices that are gone by the time the sync runs.
rm -f /tmp/churn-stop /tmp/churn-count
(
  i=0
  while [ ! -e /tmp/churn-stop ]; do
    i=$((i+1))
    echo "link add fhc$i type veth peer name fhcp$i"; echo "link set fhc$i up"; echo "link set fhcp$i up"
    [ $i -gt 1 ] && echo "link del fhc$((i-1))"
    echo $i > /tmp/churn-count
    sleep 0.1
  done
) | ip netns exec $NODE ip -force -batch - > /dev/null 2>&1 & CHURN=$!
sleep 4
change churn LongLived:20:- 'flowhint.dev/traffic-hint: LongLived'
change churn LongLived:50:- 'flowhint.dev/traffic-hint: LongLived, flowhint.dev/offload-after-packets: "50"'
change churn ShortLived:20:5 'flowhint.dev/traffic-hint: ShortLived, flowhint.dev/conntrack-timeout: "5s"'
change churn none ''
change churn LongLived:20:- 'flowhint.dev/traffic-hint: LongLived'
change churn none ''
touch /tmp/churn-stop; wait $CHURN
COUNT=$(cat /tmp/churn-count 2>/dev/null || echo 0)
nsx $NODE ip link del fhc$COUNT 2>/dev/null
RETRIES=$(grep -c 'retrying once with the current list' $CLOG)
echo "# churn: $COUNT veth pairs created and deleted; $RETRIES transactions retried after a veth vanished; ms per hint change:$TIMES (quiet:$QUIET)"
check "churn: every hint change programmed (${WRONG:-all six})" [ -z "$WRONG" ]
check "churn: no sync failed ($(grep -c '"msg":"sync failed' $CLOG) failed)" [ "$(grep -c '"msg":"sync failed' $CLOG)" -eq 0 ]
check "churn: the veths did churn (at least 30 pairs: $COUNT)" [ "$COUNT" -ge 30 ]
wait $BULK; RC=$?
check "churn: the transfer completes, every byte" iperf_ok $BULKLOG $RC 1000000
for _ in $(seq 20); do [ "$(jq -r '.devices | join(",")' $STATE/status.json)" = n0,n1 ] && break; sleep 0.5; done
check "churn: afterwards the flowtable holds the node's devices only" bash -c "ip netns exec $NODE nft list flowtable inet flowhint fastpath | grep -q 'devices = { n0, n1 }'"
check "churn: the last sync succeeded" [ "$(jq -r .lastSync.ok $STATE/status.json)" = true ]
kill -TERM $A; wait $A
check "churn: the agent exits 0 on SIGTERM" [ $? -eq 0 ]
cat $CLOG >> $LOGS/agent-long.log
