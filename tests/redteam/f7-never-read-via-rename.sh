#!/usr/bin/env bash
# F7: never rules are judged per operation; an approved fs.write elevation
# (which the never rule for fs.read does not meet) renames the never file to
# a neighbour name, and an fs.read elevation for the neighbour (which does
# not meet the never rule either) reads it.
cd "$(dirname "$0")/../.." && . tests/lib.sh && . tests/integration/admin_lib.sh
W="$T_TMP/data"; S="$T_TMP/st"; mkdir -p "$W/secret" "$W/pub" "$T_TMP/ws"
echo "the secret" >"$W/secret/file"; chmod -R a+rwX "$W"
cat >"$T_TMP/p.conf" <<EOT
defaults = { request_expiry = 20; };
tiers = { high = { requestable = (
  { caps = [ "fs.read:$W/secret/file" ]; approval = "never"; },
  { caps = [ "fs.read:/**", "fs.write:/**" ]; approval = "human"; max_ttl = 60; }
); }; };
EOT
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start a1 --tier high --workspace "$T_TMP/ws"
approve_next() { local r; for i in $(seq 50); do r=$("$CTL" --state "$S" --json pending | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[0]["rid"] if d else "")'); [ -n "$r" ] && break; sleep 0.2; done; echo "  human sees: $("$CTL" --state "$S" pending | sed -n 2p)"; "$CTL" --state "$S" approve "$r" >/dev/null; }
agent_do a1 "capcall request 'fs.read:$W/secret/file' --ttl 30 --reason direct"; echo "direct read request: rc=$ARC (never rule)"
agent_send a1 "capcall request 'fs.write:$W/**' --ttl 30 --reason 'tidy data'"; N=$ASEQ; approve_next; agent_wait a1 $N; echo "fs.write elevation: rc=$ARC"
agent_do a1 "python3 -c 'import capbroker; capbroker.Client().rename(\"$W/secret/file\", \"$W/pub/file\")'"; echo "rename: rc=$ARC $AOUT"
agent_send a1 "capcall request 'fs.read:$W/pub/*' --ttl 30 --reason 'read pub'"; N=$ASEQ; approve_next; agent_wait a1 $N; echo "fs.read pub elevation: rc=$ARC"
agent_do a1 "capcall fs.read $W/pub/file"; echo "read: rc=$ARC -> $AOUT"
