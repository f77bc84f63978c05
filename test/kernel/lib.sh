#!/bin/bash
# Helpers for the real-kernel scenarios (sourced by scenarios.sh and the scenario files it
# runs): TAP-style checks, the agent in the node namespace, and conntrack queries.
PASS=0; FAIL=0; N=0
ok() { N=$((N+1)); PASS=$((PASS+1)); echo "ok $N - $*"; }
notok() {
  N=$((N+1)); FAIL=$((FAIL+1)); echo "not ok $N - $*"
  # What the kernel saw, so a failure is readable from CI's output alone.
  ip netns exec $NODE conntrack -L 2>/dev/null | sed 's/^/#   conntrack: /' | head -20
  [ -n "${BULKLOG:-}" ] && [ -f "$BULKLOG" ] && tail -n 5 "$BULKLOG" | sed 's/^/#   iperf3: /'
}
check() { local desc=$1; shift; if "$@"; then ok "$desc"; else notok "$desc"; fi; }

DIR=/run/fh/services; STATE=/run/fh/state; LOGS=/tmp/fh-logs
mkdir -p $DIR $STATE $LOGS
FH="node bin/flowhint.ts"
# One `agent --once`; its output goes to agent.log, and to CI's output when it fails.
# Exit 139 is node itself killed by SIGSEGV, which V8's JIT does now and then under qemu's TCG
# (once in CI, 2026-12-07: the first agent of 6.1's scenarios; docs/kube-proxy.md, "Kernels"):
# that run is said, counted in SEGV_RUNS (printed by finish) and made once more; a second
# crash in a row fails like any other exit.
SEGV_RUNS=0
agent_once() {
  local rc try
  for try in 1 2; do
    nsx $NODE $FH agent --services-dir $DIR --once --state-dir $STATE "$@" > $LOGS/once.log 2>&1; rc=$?
    cat $LOGS/once.log >> $LOGS/agent.log
    [ $rc -eq 139 ] && [ $try -eq 1 ] || break
    SEGV_RUNS=$((SEGV_RUNS + 1))
    echo "# agent --once: node died of SIGSEGV (exit 139; V8 under qemu TCG); running it once more"
  done
  [ $rc -eq 0 ] || { echo "# agent --once exited $rc:"; tail -n 20 $LOGS/once.log | cut -c1-400 | sed 's/^/#   /'; }
  return $rc
}
status_json() { nsx $NODE $FH status --json --state-dir $STATE; }
offloaded() { nsx $NODE conntrack -L 2>/dev/null | grep '\[OFFLOAD\]' | grep -- "$1" | grep -c -- "$2"; }
is_offloaded() { [ "$(offloaded "$1" "$2")" -gt 0 ]; }
not_offloaded() { [ "$(offloaded "$1" "$2")" -eq 0 ]; }
# Offloaded within 5 s: polled, never a fixed sleep (a VM sharing the host starts node late).
eventually_offloaded() { for _ in $(seq 25); do is_offloaded "$1" "$2" && return 0; sleep 0.2; done; return 1; }
# One UDP flow from $1 to $2 port $3 in the background ($4 round trips, then one datagram a
# second for $5 s; `traffic.ts udp`), returning once its round trips are done (or it ended,
# or 120 s passed); sets U. `wait $U` fails unless every datagram was answered.
udp_flow() {
  local done=$LOGS/udp-$RANDOM.done
  nsx $1 node test/kernel/traffic.ts udp $2 $3 $4 $5 $done & U=$!
  for _ in $(seq 600); do [ -e $done ] && return 0; kill -0 $U 2>/dev/null || return 1; sleep 0.2; done
  return 1
}
# The status file, as `flowhint status --json` shows it minus the live conntrack counts.
state_json() { cat $STATE/status.json; }
# Until the agent with pid $1 has written its status after a sync.
wait_agent() { for _ in $(seq 300); do [ "$(jq -r .pid $STATE/status.json 2>/dev/null)" = "$1" ] && return 0; sleep 0.2; done; echo "# agent $1 did not sync"; return 1; }

# An iperf3 -J run ($1 its JSON, $2 its exit code) completed with no error and more than $3
# bytes received (iperf3 -J exits 0 even when its control socket was reset: the error is in the JSON).
iperf_ok() { [ "$2" -eq 0 ] && [ "$(jq -r '.error // "none"' "$1" 2>/dev/null)" = none ] && [ "$(jq -r '.end.sum_received.bytes // 0' "$1" 2>/dev/null)" -gt "$3" ]; }

# Bulk TCP through an address for $3 seconds in the background; sets BULK.
bulk() { local ns=$1 target=$2 secs=$3; shift 3; BULKLOG=$LOGS/iperf-$RANDOM.log; ip netns exec $ns iperf3 -c "$target" "$@" -t "$secs" > $BULKLOG 2>&1 & BULK=$!; }

# The closing lines: the plan and the plain "N passed, N failed" CI reads.
finish() {
  [ $SEGV_RUNS -eq 0 ] || echo "# node died of SIGSEGV in $SEGV_RUNS agent --once run(s), each run again (agent_once)"
  echo "1..$N"
  echo "$PASS passed, $FAIL failed"
  [ $FAIL -eq 0 ]
}
