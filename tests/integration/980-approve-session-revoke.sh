#!/usr/bin/env bash
# 980-approve-session-revoke.sh - red team, fourth pass (2026-12-02): an
# administrator's `capctl revoke` of a token a human approved "for this
# session" must take the elevation away.  Before the fix the session's
# approval outlived the revocation: the agent asked again and was granted
# a fresh token for the same capability at once, by actor "session", with
# no human asked: the revocation lasted one round trip.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
srv_start "$S"
agent_start a1 --tier medium --workspace "$W"
tid_of() { # the id of the newest token for capability $1 held by a1
	"$CTL" --state "$S" --json list --sandbox a1 |
		jget '[t["id"] for t in d if sys.argv[2] in t["caps"]][-1]' "$1"
}
sessions() { grep -c '"op":"approve","resource":"fs.read:/etc/issue",.*"actor":"session"' "$S/audit.jsonl"; }

agent_send a1 "capcall request fs.read:/etc/issue --ttl 60 --reason 'session please'"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/issue)
t_exit "approve --session: 0" 0 "$CTL" --state "$S" approve "$RID" --session
agent_wait a1 "$N"
t_is "granted" "$ARC" 0
agent_do a1 "capcall fs.read /etc/issue >/dev/null"
t_is "the elevation works" "$ARC" 0
TID=$(tid_of fs.read:/etc/issue)
t_match "its token is listed" "$TID" '^[0-9a-f]+$'
t_exit "the administrator revokes it: 0" 0 "$CTL" --state "$S" revoke "$TID"
agent_do a1 "capcall fs.read /etc/issue >/dev/null"
t_is "... the elevation is gone (77)" "$ARC" 77
before=$(sessions)
# Asked again: it must wait for a human (and is denied here), not be
# granted by the session the revocation ended.
agent_send a1 "capcall request fs.read:/etc/issue --ttl 60 --reason 'again' && capcall fs.read /etc/issue >/dev/null"
N=$ASEQ
wait_for 50 grep -q "^@@$N rc=" "$T_TMP/a1.out"
"$CTL" --state "$S" --json pending >"$T_TMP/p.json"
t_is "a request after the revocation waits for a human" \
	"$(jget '[r["cap"] for r in d if r["sandbox"] == "a1"]' <"$T_TMP/p.json")" "['fs.read:/etc/issue']"
t_is "... no grant by the session after the revocation" "$(sessions)" "$before"
RID=$(pending_rid fs.read:/etc/issue)
[ -n "$RID" ] && "$CTL" --state "$S" deny "$RID" --reason 'revoked means revoked' >/dev/null
agent_wait a1 "$N"
t_is "... and denied, the agent holds nothing (77)" "$ARC" 77
agent_do a1 "capcall fs.read /etc/issue >/dev/null"
t_is "the revoked capability stays refused (77)" "$ARC" 77

# The token an administrator sees and revokes may be one the session
# granted later: that ends the approval too.
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 60 --reason 'session please'"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/hostname)
t_exit "approve --session of another: 0" 0 "$CTL" --state "$S" approve "$RID" --session
agent_wait a1 "$N"
agent_do a1 "capcall request fs.read:/etc/hostname --ttl 60 --reason again" 50
t_is "... asked again, granted by the session" "$ARC" 0
TID=$(tid_of fs.read:/etc/hostname)
t_exit "the administrator revokes the session's newest token: 0" 0 "$CTL" --state "$S" revoke "$TID"
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 60 --reason 'once more'"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/hostname)
t_match "... the next request waits for a human" "$RID" '^[0-9]+$'
"$CTL" --state "$S" deny "$RID" >/dev/null
agent_wait a1 "$N"

# Revoking the human's approval revokes what the session granted since.
agent_send a1 "capcall request fs.read:/etc/os-release --ttl 60 --reason 'session please'"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/os-release)
t_exit "approve --session of a third: 0" 0 "$CTL" --state "$S" approve "$RID" --session
agent_wait a1 "$N"
ROOT=$(tid_of fs.read:/etc/os-release)
agent_do a1 "capcall request fs.read:/etc/os-release --ttl 60 --reason again" 50
t_is "... asked again, granted by the session" "$ARC" 0
LATER=$(tid_of fs.read:/etc/os-release)
t_exit "the administrator revokes the approval itself: 0" 0 "$CTL" --state "$S" revoke "$ROOT"
t_is "... the session's later token is revoked with it" \
	"$("$CTL" --state "$S" --json list --sandbox a1 | jget '[t["state"] for t in d if t["id"] == sys.argv[2]]' "$LATER")" \
	"['revoked']"
agent_do a1 "capcall fs.read /etc/os-release >/dev/null"
t_is "... nothing reads it now (77)" "$ARC" 77
t_done
