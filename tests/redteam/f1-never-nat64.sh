#!/usr/bin/env bash
# F1: a never rule for an IPv4 address/range is not met by the same address in
# its NAT64 / IPv4-compatible / -translated IPv6 spelling: the request reaches a
# human (not refused at once), and once approved the connect is ALLOWED by the
# policy (never rules are re-checked family-sensitively).
# Run from the tree: bash tests/redteam/f1-never-nat64.sh
cd "$(dirname "$0")/../.." && . tests/lib.sh && . tests/integration/admin_lib.sh
S="$T_TMP/st"; mkdir -p "$T_TMP/ws"
cat >"$T_TMP/p.conf" <<EOT
defaults = { request_expiry = 20; };
tiers = { medium = { requestable = (
  { caps = [ "net.connect:93.184.216.0/24:*" ]; approval = "never"; },
  { caps = [ "net.connect:*:*" ]; approval = "human"; max_ttl = 60; }
); }; };
EOT
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start a1 --tier medium --workspace "$T_TMP/ws"
agent_do a1 "capcall request net.connect:93.184.216.34:443 --ttl 30 --reason plain"
echo "plain IPv4 request: rc=$ARC  ($AOUT)"
for spelled in "[64:ff9b::5db8:d822]:443" "[::5db8:d822]:443" "[::ffff:0:5db8:d822]:443"; do
  agent_send a1 "capcall request 'net.connect:$spelled' --ttl 30 --reason nat64 && capcall net.connect '$spelled' </dev/null"
  N=$ASEQ
  for i in $(seq 50); do RID=$("$CTL" --state "$S" --json pending | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[0]["rid"] if d else "")'); [ -n "$RID" ] && break; sleep 0.2; done
  echo "request net.connect:$spelled reached a human: rid=$RID (expected: refused at once, 77)"
  "$CTL" --state "$S" approve "$RID" >/dev/null
  agent_wait a1 "$N"
  echo "  connect rc=$ARC out=$(echo "$AOUT" | tr '\n' ' ')"
done
grep '"op":"net.connect"' "$S/audit.jsonl" | grep -o '"resource":"[^"]*".*"decision":"[a-z]*","reason":"[^"]*"' | sed 's/"tid[^,]*,//'
