#!/bin/bash
# Only the families in use (issue 32), sourced by scenarios.sh before cleanup: on a node whose
# hints are all IPv4, flowhint registers no IPv6 NAT hook. A registered NAT hook binds every
# connection of its family, which sets the connection's IPS_SRC_NAT_DONE (0x80) or
# IPS_DST_NAT_DONE (0x100) status bit; a probe table counts, after NAT, each family's packets
# whose connection has either bit. The node's other IPv6 NAT tables (kube-proxy's, the
# hand-written DNAT) are removed first, so flowhint's would be the only one.
for t6 in $(nsx $NODE nft list tables ip6 | awk '{ print $3 }'); do
  [ "$t6" = flowhint ] || nsx $NODE nft delete table ip6 "$t6"
done
rm -f $DIR/*.yaml
write_service $DIR fam-long 10.96.0.20 "flowhint.dev/traffic-hint: LongLived"
short fam-short 10.96.0.40 ""
check "families: agent --once with IPv4 hints only" agent_once
check "families: the ip table has its NAT chains" bash -c "ip netns exec $NODE nft list table ip flowhint | grep -q 'type nat hook prerouting'"
check "families: the ip6 table has no base chain" bash -c "! ip netns exec $NODE nft list table ip6 flowhint | grep -q hook"
nsx $NODE ip link set lo up
nsx $NODE nft -f - <<'NFT'
table inet natprobe {
  chain in {
    type filter hook input priority 200; policy accept;
    meta nfproto ipv4 ct status & 0x180 != 0 counter
    meta nfproto ipv6 ct status & 0x180 != 0 counter
    meta nfproto ipv6 ct status & 0x180 == 0 counter
  }
}
NFT
nsx $NODE conntrack -F > /dev/null 2>&1
nsx $NODE bash -c 'echo x > /dev/udp/127.0.0.1/9; echo x > /dev/udp/::1/9'
PROBE=$(nsx $NODE nft list table inet natprobe | grep -o 'packets [0-9]*' | awk '{ printf "%s ", $2 }')
echo "# families: packets after NAT (IPv4 bound, IPv6 bound, IPv6 unbound): $PROBE"
read -r P4 P6 P6FREE <<< "$PROBE"
check "families: IPv4 connections are bound by NAT (the probe sees it)" [ "${P4:-0}" -gt 0 ]
check "families: no IPv6 connection is bound: no IPv6 NAT hook" [ "${P6:-1}" -eq 0 ]
check "families: and the IPv6 packet did arrive" [ "${P6FREE:-0}" -gt 0 ]
nsx $NODE nft delete table inet natprobe
