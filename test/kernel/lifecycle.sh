# Sourced by scenarios.sh: a hinted connection through its whole flowtable life (issue 33:
# on sid's 7.2 such a connection was once seen not offloaded before an idle period).
# Offloaded at its first packets, idle past the flowtable's timeout (the kernel's
# nf_flowtable_tcp_timeout, 30 s by default), when the flowtable hands it back to conntrack;
# busy again, its next packets take the classic path, meet flowhint's rule and are offloaded
# again. Every round trip must be answered, before and after. Needs svc-a hinted LongLived
# without a threshold and the echo server behind 10.96.0.10 tcp/7000 (scenarios.sh).
LC=/tmp/lifecycle; mkdir -p $LC; rm -f $LC/*
FT_TIMEOUT=$(nsx $NODE sysctl -n net.netfilter.nf_flowtable_tcp_timeout 2>/dev/null || echo 30)
echo "# lifecycle: nf_flowtable_tcp_timeout $FT_TIMEOUT s"
nsx $CLIENT node test/kernel/traffic.ts tcp 10.96.0.10 7000 50 200 $LC & LCT=$!
for _ in $(seq 150); do [ -e $LC/phase1 ] && break; sleep 0.2; done
lc_echoed() { [ -e "$LC/$1" ] && [ "$(cat "$LC/$1")" = "$2" ]; }
check "lifecycle: 50 round trips, every one answered" lc_echoed phase1 50
check "lifecycle: offloaded while busy" is_offloaded "dst=10.96.0.10" "dport=7000"
sleep $((FT_TIMEOUT + 10))
echo "# lifecycle: after $((FT_TIMEOUT + 10)) s idle: $(nsx $NODE conntrack -L -p tcp -d 10.96.0.10 --dport 7000 2>/dev/null | grep -c ESTABLISHED) established entry"
check "lifecycle: idle past the flowtable timeout: handed back to conntrack" not_offloaded "dst=10.96.0.10" "dport=7000"
check "lifecycle: idle: the connection's entry is still there" bash -c "ip netns exec $NODE conntrack -L -p tcp -d 10.96.0.10 --dport 7000 2>/dev/null | grep -q ESTABLISHED"
touch $LC/go
for _ in $(seq 300); do [ -e $LC/phase2 ] && break; sleep 0.2; done
check "lifecycle: busy again: 200 more round trips, every one answered" lc_echoed phase2 250
check "lifecycle: busy again: offloaded again" is_offloaded "dst=10.96.0.10" "dport=7000"
kill $LCT 2>/dev/null; wait $LCT 2>/dev/null
