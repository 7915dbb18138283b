#!/usr/bin/env bash
# 36-policy-never.sh - issue 10, hole 3: never rules win.  With a never rule
# for one file before a human rule for everything, a request that merely
# overlaps the never rule (fs.read:/secret/fil*, fs.read:/**) is refused at
# once without reaching a human, wherever the never rule stands in the
# list; a request beside it still reaches one.  And the never rules are
# checked again on every operation an elevated token covers: a host name
# approved by a human that resolves into a never rule's address range is
# refused at connect time as beyond the policy.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/data"	# outside the workspace: beyond the medium ceiling
S="$T_TMP/st"
mkdir -p "$W/secret" "$T_TMP/ws"
echo "the secret" >"$W/secret/file"
echo "not secret" >"$W/secret/other"
# (requests expire undecided after 5 s: before the fix, the overlapping
# ones waited for a human and then expired, exit 75)
cat >"$T_TMP/never.conf" <<EOT
defaults = { request_expiry = 5; };
tiers = { medium = {
  requestable = (
    { caps = [ "fs.read:$W/secret/file" ]; approval = "never"; },
    { caps = [ "fs.read:/**", "fs.list:/**", "net.connect:localhost:*" ]; approval = "human"; max_ttl = 60; },
    { caps = [ "net.connect:127.0.0.0/8:*", "fs.list:$W/secret" ]; approval = "never"; }
  );
}; };
EOT
t_ok "the policy is valid" "$CB" check-policy "$T_TMP/never.conf"
srv_start "$S" --policy "$T_TMP/never.conf"
agent_start a1 --tier medium --workspace "$T_TMP/ws"
pending_count() { "$CTL" --state "$S" --json pending | jget 'len(d)'; }

for req in "fs.read:$W/secret/fil*" "fs.read:$W/secret/*" "fs.read:$W/*/file" "fs.read:/**" \
	"fs.read:$W/secret/file"; do
	agent_do a1 "capcall request '$req' --ttl 30 --reason overlap"
	t_is "a request overlapping the never rule is refused at once: $req (77)" "$ARC" 77
	t_match "... as beyond the policy" "$AOUT" "policy does not let this tier request it"
done
t_is "... and none of them reached a human" "$(pending_count)" 0
agent_do a1 "capcall request 'fs.list:$W/**' --ttl 30 --reason wide"
t_is "a never rule after the human rule wins too: fs.list:$W/** (77)" "$ARC" 77
t_is "... still nothing pending" "$(pending_count)" 0

# A neighbour the never rule does not touch goes to a human and works.
agent_send a1 "capcall request 'fs.read:$W/secret/o*' --ttl 30 --reason neighbour && capcall fs.read $W/secret/other"
N=$ASEQ
RID=$(pending_rid "fs.read:$W/secret/o*")
t_match "a request beside the never rule reaches a human" "$RID" '^[0-9]+$'
t_exit "... who approves it" 0 "$CTL" --state "$S" approve "$RID"
agent_wait a1 "$N"
t_match "... and the agent reads the neighbour" "$AOUT" "not secret"
agent_do a1 "capcall fs.read $W/secret/file"
t_is "the secret itself stays unreadable (77)" "$ARC" 77

# An approved name whose address is in a never rule's range: refused when
# it connects, as beyond the policy (before the fix: only the loopback
# never-reachable check stood in the way).
agent_send a1 "capcall request net.connect:localhost:9 --ttl 30 --reason name"
N=$ASEQ
RID=$(pending_rid net.connect:localhost:9)
t_match "a host name goes to a human (its address is judged when it connects)" "$RID" '^[0-9]+$'
t_exit "... who approves it" 0 "$CTL" --state "$S" approve "$RID"
agent_wait a1 "$N"
t_is "... the agent holds the elevation" "$ARC" 0
agent_do a1 "capcall net.connect localhost:9 </dev/null"
t_is "connecting to the name that resolves into the never range is refused (77)" "$ARC" 77
t_match "... by the never rule (exceeds policy), not by luck" "$AOUT" "exceeds policy"
t_ok "... and audited so" wait_for 200 grep -q '"op":"net.connect","resource":"localhost:9".*"decision":"deny","reason":"exceeds-policy"' "$S/audit.jsonl"
t_done
