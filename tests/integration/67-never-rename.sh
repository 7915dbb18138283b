#!/usr/bin/env bash
# 67-never-rename.sh - a never rule cannot be laundered by moving the file.
# A never rule for fs.read:W/secret/file; a human rule for fs.read and
# fs.write on /**.  The agent gets an fs.write elevation that the never rule
# does not meet, then tries to rename the file (or its directory) to a name
# no never rule names and read it there with a second elevation.  Found by
# the red team (tests/redteam/README.md, F7): the read printed the secret.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
W="$T_TMP/data"; S="$T_TMP/st"; mkdir -p "$W/secret" "$W/pub" "$T_TMP/ws"
echo "the secret" >"$W/secret/file"; echo "plain" >"$W/secret/other"; echo decoy >"$W/pub/decoy"
chmod -R a+rwX "$W"
cat >"$T_TMP/p.conf" <<EOT
defaults = { request_expiry = 20; };
tiers = { high = { requestable = (
  { caps = [ "fs.read:$W/secret/file" ]; approval = "never"; },
  { caps = [ "fs.read:/**", "fs.write:/**", "fs.delete:/**" ]; approval = "human"; max_ttl = 60; }
); }; };
EOT
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start a1 --tier high --workspace "$T_TMP/ws"
approve_next() {
	local r=
	for _ in $(seq 100); do
		r=$("$CTL" --state "$S" --json pending | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(d[0]["rid"] if d else "")')
		[ -n "$r" ] && break; sleep 0.1
	done
	"$CTL" --state "$S" approve "$r" >/dev/null
}
elevate() { # CAP
	agent_send a1 "capcall request '$1' --ttl 30 --reason test"
	local n=$ASEQ
	approve_next
	agent_wait a1 "$n"
}
rename() { agent_do a1 "python3 -c 'import capbroker; capbroker.Client().rename(\"$1\", \"$2\")'"; }

agent_do a1 "capcall request 'fs.read:$W/secret/file' --ttl 30 --reason direct"
t_is "a direct request for the never file is refused at once (77)" "$ARC" 77
elevate "fs.write:$W/**"
t_is "an fs.write elevation the never rule does not meet is approved" "$ARC" 0
rename "$W/secret/file" "$W/pub/file"
t_ok "renaming the never file away is refused" test "$ARC" -ne 0
t_ok "... and it is still where it was" test -f "$W/secret/file"
rename "$W/secret" "$W/pub/moved"
t_ok "renaming the directory above it is refused" test "$ARC" -ne 0
t_ok "... and it is still where it was" test -d "$W/secret"
rename "$W/pub/decoy" "$W/secret/file"
t_ok "renaming another file onto the never file is refused" test "$ARC" -ne 0
t_is "... which still holds what it held" "$(cat "$W/secret/file")" "the secret"
elevate "fs.delete:$W/**"
t_is "an fs.delete elevation is approved" "$ARC" 0
agent_do a1 "capcall fs.delete $W/secret/file"
t_is "deleting the never file with it is refused (77)" "$ARC" 77
t_ok "... and it is still there" test -f "$W/secret/file"
rename "$W/secret/other" "$W/pub/other"
t_is "a neighbour the never rule does not name still moves" "$ARC" 0
elevate "fs.read:$W/pub/*"
agent_do a1 "capcall fs.read $W/pub/file"
t_ok "and no elevation reads the secret under another name" test "$ARC" -ne 0
t_ok "... nothing of it reached the agent" sh -c "! printf '%s' \"\$1\" | grep -q 'the secret'" sh "$AOUT"
grep -q '"op":"fs.rename".*"decision":"deny"' "$S/audit.jsonl"
t_ok "the refused renames are audited as denials" test $? -eq 0
t_done
