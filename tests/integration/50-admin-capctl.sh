#!/usr/bin/env bash
# 50-admin-capctl.sh - capctl against a real `capbroker serve`: finding the
# socket and the exit codes; an unauthorised peer refused by SO_PEERCRED
# even when the file modes let it in, and audited; issue / list / revoke;
# a grant beyond the tier ceiling; revocation cascading through tokens an
# agent derived; sandboxes and kill; keys; --json that parses.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W/docs"
echo "doc content" >"$W/docs/a.txt"
err() { cat "$T_TMP/err"; }
out() { cat "$T_TMP/out"; }
isjson() { "$PYTHON" -c 'import json, sys; json.load(open(sys.argv[1]))' "$1"; }

# -- without a broker ---------------------------------------------------------
t_exit "no socket named anywhere: 69" 69 env -u CAPBROKER_SOCKET "$CTL" list
t_match "... and says how to name one" "$(err)" "no admin socket"
t_exit "nothing listening at --socket: 69" 69 "$CTL" --socket "$T_TMP/none.sock" list
t_exit "no command: 64" 64 "$CTL"
t_exit "unknown command: 64" 64 "$CTL" --state "$S" frobnicate
t_exit "issue without --cap: 64" 64 "$CTL" --state "$S" issue --sandbox a1
t_exit "a malformed capability is refused before connecting: 4" 4 \
	"$CTL" --state "$S" issue --sandbox a1 --cap fs.read:etc/passwd
t_match "... saying why" "$(err)" "bad capability 'fs.read:etc/passwd': path is not absolute"
t_exit "revoke of something that is not a token id: 64" 64 "$CTL" --state "$S" revoke 1234
t_exit "approve without an id: 64" 64 "$CTL" --state "$S" approve
t_exit "--help: 0" 0 "$CTL" --help
t_match "--help prints the usage" "$(out)" "^usage: capctl"

# -- the admin socket -----------------------------------------------------------
srv_start "$S"
t_ok "capbroker serve answers capctl status" "$CTL" --state "$S" status
t_is "the state directory is closed to others (0700)" "$(stat -c %a "$S")" 700
t_is "the admin socket is 0600" "$(stat -c %a "$S/admin.sock")" 600
t_ok "CAPBROKER_SOCKET names the socket" env CAPBROKER_SOCKET="$S/admin.sock" "$CTL" status
t_ok "--socket names the socket" "$CTL" --socket "$S/admin.sock" status
"$CTL" --state "$S" --json status >"$T_TMP/status.json"
t_is "status --json gives the state directory" "$(jget 'd["state"]' <"$T_TMP/status.json")" "$S"

# -- an unauthorised peer -------------------------------------------------------
# Open the modes for this test only, so that only SO_PEERCRED stands in the way.
chmod 0711 "$T_TMP" "$S"
t_exit "nobody, socket 0600: permission denied (3)" 3 \
	runuser -u nobody -- "$PUB/capctl" --socket "$S/admin.sock" list
chmod 0666 "$S/admin.sock"
t_exit "nobody, socket 0666: refused by the broker (3)" 3 \
	runuser -u nobody -- "$PUB/capctl" --socket "$S/admin.sock" list
t_match "... which closed the connection without a reply" "$(err)" \
	"permission denied: the broker closed the connection without a reply"
t_is "... and nothing was listed" "$(out)" ""
t_exit "nobody cannot issue either (3)" 3 \
	runuser -u nobody -- "$PUB/capctl" --socket "$S/admin.sock" issue --sandbox a1 --cap "fs.read:$W/**"
t_exit "nobody cannot watch for requests (3)" 3 \
	runuser -u nobody -- "$PUB/capctl" --socket "$S/admin.sock" watch
chmod 0600 "$S/admin.sock"
chmod 0700 "$S"
chmod 0755 "$T_TMP"
wait_for 200 at_least 3 "$S/audit.jsonl" '"op":"admin.refused","decision":"deny".*"actor":"uid:65534"'
n=$(grep -c '"op":"admin.refused","decision":"deny".*"actor":"uid:65534"' "$S/audit.jsonl")
t_is "each refusal is in the audit log with the peer's uid" "$n" 3

# -- issue / list / revoke --------------------------------------------------------
agent_start a1 --tier medium --workspace "$W"
t_is "a medium-tier agent runs under the daemon" "$ARC" 0
t_exit "issue to an unknown sandbox: 2" 2 "$CTL" --state "$S" issue --sandbox nosuch --cap "fs.read:$W/**"
t_match "... saying so" "$(err)" "no running sandbox 'nosuch'"
t_exit "issue beyond the tier ceiling: 5" 5 "$CTL" --state "$S" issue --sandbox a1 --cap fs.read:/etc/passwd
t_match "... refused with 'exceeds policy'" "$(err)" "exceeds policy"
t_exit "one capability beyond the ceiling spoils the whole issue: 5" 5 \
	"$CTL" --state "$S" issue --sandbox a1 --cap "fs.read:$W/**" --cap "net.connect:example.org:443"
t_exit "issue: 0" 0 "$CTL" --state "$S" issue --sandbox a1 --cap "fs.read:$W/docs/**" --ttl 600
TOK1=$(out)
t_match "issue prints the token" "$TOK1" '^cap1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$'
t_exit "issue --json: 0" 0 "$CTL" --state "$S" --json issue --sandbox a1 --cap "fs.list:$W/**" --uses 3
cp "$T_TMP/out" "$T_TMP/issue.json"
ID2=$(jget 'd["id"]' <"$T_TMP/issue.json")
t_match "... gives the token id" "$ID2" '^[0-9a-f]{32}$'
t_match "... and the token" "$(jget 'd["token"]' <"$T_TMP/issue.json")" '^cap1\.'
agent_do a1 "capcall --token $TOK1 fs.read $W/docs/a.txt"
t_is "the agent reads with the issued token" "$AOUT" "doc content"

"$CTL" --state "$S" --json list >"$T_TMP/list.json"
t_ok "list --json is valid JSON" isjson "$T_TMP/list.json"
ID1=$(jget '[t["id"] for t in d if t["caps"] == ["fs.read:'"$W"'/docs/**"]][0]' <"$T_TMP/list.json")
t_match "list has the issued token" "$ID1" '^[0-9a-f]{32}$'
t_is "... active, for a1, issued by uid 0" \
	"$(jget '[(t["state"], t["sandbox"], t["by"]) for t in d if t["id"] == "'"$ID1"'"][0]' <"$T_TMP/list.json")" \
	"('active', 'a1', 'uid:0')"
t_is "... and the limited one with its uses left" \
	"$(jget '[t["uses"] for t in d if t["id"] == "'"$ID2"'"][0]' <"$T_TMP/list.json")" 3
t_match "list (table) shows id, state and sandbox" "$("$CTL" --state "$S" list)" "$ID1  active    20[0-9T:-]+Z  a1 "
t_match "list --sandbox filters" "$("$CTL" --state "$S" list --sandbox a1 | grep -c active)" '^[2-9]$'
t_is "list --sandbox of another sandbox is empty" "$("$CTL" --state "$S" --json list --sandbox zz)" "[]"

t_exit "revoke: 0" 0 "$CTL" --state "$S" revoke "$ID1"
t_match "... says how many tokens" "$(out)" "revoked $ID1 \(1 token"
t_is "list shows it revoked" \
	"$("$CTL" --state "$S" --json list | jget '[t["state"] for t in d if t["id"] == "'"$ID1"'"][0]')" revoked
agent_do a1 "capcall --token $TOK1 fs.read $W/docs/a.txt"
t_is "the revoked token is refused (77)" "$ARC" 77
t_match "... because it is revoked" "$AOUT" "revoked"
t_exit "revoke of an unknown id: 2" 2 "$CTL" --state "$S" revoke 00000000000000000000000000000000
t_match "... says unknown" "$(err)" "unknown token id"
t_exit "revoking it again is fine: 0" 0 "$CTL" --state "$S" revoke "$ID1"
t_match "... and says it already was" "$(out)" "already revoked"
"$CTL" --state "$S" issue --sandbox a1 --cap "fs.read:$W/docs/a.txt" >"$T_TMP/tok3"
t_exit "revoke accepts the token itself: 0" 0 "$CTL" --state "$S" --json revoke "$(cat "$T_TMP/tok3")"
t_is "... --json says how many" "$(jget 'd["revoked"]' <"$T_TMP/out")" 1
t_ok "the revoke is in the audit log with who did it" \
	grep -q "\"op\":\"revoke\",\"resource\":\"$ID1\".*\"actor\":\"uid:0\"" "$S/audit.jsonl"

# -- cascade: tokens an agent derived go with their parent -------------------------
"$CTL" --state "$S" --json issue --sandbox a1 --cap "fs.read:$W/**" >"$T_TMP/p.json"
PTOK=$(jget 'd["token"]' <"$T_TMP/p.json")
PID_=$(jget 'd["id"]' <"$T_TMP/p.json")
agent_do a1 "capcall --token $PTOK derive fs.read:$W/docs/**"
t_is "the agent derives a child token" "$ARC" 0
CTOK=$(printf '%s\n' "$AOUT" | grep '^cap1\.')
agent_do a1 "capcall --token $CTOK derive fs.read:$W/docs/a.txt"
t_is "... and a grandchild from the child" "$ARC" 0
GTOK=$(printf '%s\n' "$AOUT" | grep '^cap1\.')
agent_do a1 "capcall --token $GTOK fs.read $W/docs/a.txt"
t_is "the grandchild works" "$AOUT" "doc content"
"$CTL" --state "$S" --json list >"$T_TMP/list.json"
CID=$(jget '[t["id"] for t in d if t["parent"] == "'"$PID_"'"][0]' <"$T_TMP/list.json")
GID=$(jget '[t["id"] for t in d if t["parent"] == "'"$CID"'"][0]' <"$T_TMP/list.json")
t_match "list shows the child under its parent" "$CID" '^[0-9a-f]{32}$'
t_match "... and the grandchild under the child" "$GID" '^[0-9a-f]{32}$'
t_exit "revoke the parent: 0" 0 "$CTL" --state "$S" --json revoke "$PID_"
t_is "... revokes three tokens" "$(jget 'd["revoked"]' <"$T_TMP/out")" 3
"$CTL" --state "$S" --json list >"$T_TMP/list.json"
t_is "list shows child and grandchild revoked" \
	"$(jget '[t["state"] for t in d if t["id"] in ("'"$CID"'", "'"$GID"'")]' <"$T_TMP/list.json")" \
	"['revoked', 'revoked']"
agent_do a1 "capcall --token $CTOK fs.read $W/docs/a.txt"
t_is "the child is refused (77)" "$ARC" 77
t_match "... as revoked" "$AOUT" "revoked"
agent_do a1 "capcall --token $GTOK fs.read $W/docs/a.txt"
t_is "the grandchild is refused (77)" "$ARC" 77
t_match "... as revoked" "$AOUT" "revoked"
agent_do a1 "capcall --token $PTOK derive fs.read:$W/docs/a.txt"
t_is "a revoked parent derives nothing more" "$ARC" 77

# -- sandboxes and kill -------------------------------------------------------------
t_match "sandboxes lists a1, its tier and command" "$("$CTL" --state "$S" sandboxes)" \
	"^a1 +medium +[0-9]+ .* /bin/sh -c while read"
"$CTL" --state "$S" --json sandboxes >"$T_TMP/sbx.json"
t_ok "sandboxes --json is valid JSON (the command has quotes)" isjson "$T_TMP/sbx.json"
t_is "... with a1's workspace" "$(jget '[s["workspace"] for s in d if s["id"] == "a1"][0]' <"$T_TMP/sbx.json")" "$W"
t_exit "kill of an unknown sandbox: 2" 2 "$CTL" --state "$S" kill nosuch
t_exit "kill a1: 0" 0 "$CTL" --state "$S" kill a1
agent_stop a1
t_is "the sandbox ended at once, killed (137)" "$AEXIT" 137
t_ok "sandboxes no longer lists it" wait_for 30 sh -c "! '$CTL' --state '$S' sandboxes | grep -q '^a1 '"
t_ok "the kill is audited with who did it" grep -q '"sandbox":"a1","op":"kill","actor":"uid:0"' "$S/audit.jsonl"

# -- keys ---------------------------------------------------------------------------
t_exit "keygen --out: 0" 0 "$CTL" keygen --out "$T_TMP/k1.key"
t_is "... writes the key file 0600" "$(stat -c %a "$T_TMP/k1.key")" 600
t_match "... and names its key id" "$(out)" "^key [0-9a-f]{16} written to"
t_exit "keygen never overwrites: 1" 1 "$CTL" keygen --out "$T_TMP/k1.key"
t_exit "keygen --json: 0" 0 "$CTL" --json keygen --out "$T_TMP/k2.key"
t_match "... with the public key" "$(jget 'd["public"]' <"$T_TMP/out")" '^[0-9a-f]{64}$'
agent_start a2 --tier medium --workspace "$W"
"$CTL" --state "$S" issue --sandbox a2 --cap "fs.read:$W/docs/**" >"$T_TMP/old.tok"
t_exit "rotate-key: 0" 0 "$CTL" --state "$S" --json rotate-key
K2=$(jget 'd["kid"]' <"$T_TMP/out")
t_match "... names the new key" "$K2" '^[0-9a-f]{16}$'
agent_do a2 "capcall --token $(cat "$T_TMP/old.tok") fs.read $W/docs/a.txt"
t_is "a token signed by the old key still verifies" "$AOUT" "doc content"
"$CTL" --state "$S" issue --sandbox a2 --cap "fs.read:$W/docs/**" >"$T_TMP/k2.tok"
"$CTL" --state "$S" --json rotate-key >"$T_TMP/k3.json"
K3=$(jget 'd["kid"]' <"$T_TMP/k3.json")
t_exit "retire-key of the signing key is refused: 1" 1 "$CTL" --state "$S" retire-key "$K3"
t_exit "retire-key of an unknown key: 2" 2 "$CTL" --state "$S" retire-key 0000000000000000
t_exit "retire-key of the previous key: 0" 0 "$CTL" --state "$S" retire-key "$K2"
agent_do a2 "capcall --token $(cat "$T_TMP/k2.tok") fs.read $W/docs/a.txt"
t_is "a token signed by a retired key is refused (77)" "$ARC" 77
t_match "... as retired" "$AOUT" "retired"

# -- list pages through more than one reply --------------------------------------------
for i in $(seq 450); do
	"$CTL" --state "$S" issue --sandbox a2 --cap "fs.read:$W/docs/p$i" --ttl 600 >/dev/null || break
done
"$CTL" --state "$S" --json list --sandbox a2 >"$T_TMP/many.json"
t_is "list returns all of 450+ tokens (the broker pages by 200)" \
	"$(jget 'len(set(c for t in d for c in t["caps"] if "/docs/p" in c))' <"$T_TMP/many.json")" 450
t_is "... each once" "$(jget 'len(d) == len(set(t["id"] for t in d))' <"$T_TMP/many.json")" True

srv_stop
t_exit "with the broker gone: 69" 69 "$CTL" --state "$S" list

# -- an administrator the policy names ------------------------------------------------------
S2="$T_TMP/st-admins"
printf 'admins = { uids = [ 65534 ]; };\n' >"$T_TMP/admins.conf"
srv_start "$S2" --policy "$T_TMP/admins.conf"
chmod 0711 "$T_TMP" "$S2"
chmod 0666 "$S2/admin.sock"
t_exit "a uid the policy lists as an administrator may use capctl: 0" 0 \
	runuser -u nobody -- "$PUB/capctl" --socket "$S2/admin.sock" --json status
t_exit "... and is recorded as itself when it acts" 0 \
	runuser -u nobody -- "$PUB/capctl" --socket "$S2/admin.sock" rotate-key
t_ok "... in the audit log" wait_for 50 grep -q '"op":"rotate-key",.*"actor":"uid:65534"' "$S2/audit.jsonl"
t_exit "... but it cannot read the broker's 0600 audit log itself (3)" 3 \
	runuser -u nobody -- "$PUB/capctl" --socket "$S2/admin.sock" audit
chmod 0755 "$T_TMP"
srv_stop
t_done
