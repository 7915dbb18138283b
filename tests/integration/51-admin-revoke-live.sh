#!/usr/bin/env bash
# 51-admin-revoke-live.sh - a revocation takes effect on the very next
# operation of a running sandbox: the token the sandbox holds (its
# verification cached by the broker) is refused as "revoked" on the first
# read after `capctl revoke` returns, both step by step and while an agent
# loops on reads as fast as it can.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
echo "secret plan" >"$W/f.txt"
srv_start "$S"

# -- step by step ------------------------------------------------------------
agent_start a1 --tier medium --workspace "$W" --grant "fs.read:$W/**"
ID=$("$CTL" --state "$S" --json list --sandbox a1 | jget 'd[0]["id"]')
t_match "the sandbox holds its grant" "$ID" '^[0-9a-f]{32}$'
agent_do a1 "capcall fs.read $W/f.txt"
t_is "read 1 with the held token" "$AOUT" "secret plan"
agent_do a1 "capcall fs.read $W/f.txt"
t_is "read 2 (verification now cached)" "$AOUT" "secret plan"
t_ok "capctl revoke returns" "$CTL" --state "$S" revoke "$ID"
agent_do a1 "capcall fs.read $W/f.txt"
t_is "the very next read is denied (77)" "$ARC" 77
t_match "... because the token is revoked" "$AOUT" "revoked"
t_ok "... and the denial is audited with the token" \
	wait_for 200 grep -q "\"sandbox\":\"a1\",\"op\":\"fs.read\",\"resource\":\"$W/f.txt\",\"token\":\"$ID\",\"decision\":\"deny\",\"reason\":\"revoked\"" "$S/audit.jsonl"
agent_do a1 "capcall fs.read $W/f.txt"
t_is "and it stays denied" "$ARC" 77

# -- an agent reading in a loop -------------------------------------------------
agent_start a2 --tier medium --workspace "$W" --grant "fs.read:$W/**"
ID2=$("$CTL" --state "$S" --json list --sandbox a2 | jget 'd[0]["id"]')
agent_send a2 "i=0; while capcall fs.read $W/f.txt >/dev/null; do i=\$((i + 1)); echo \"read \$i\"; done; echo \"stopped after \$i\""
N=$ASEQ
t_ok "the looping agent is reading" wait_for 200 grep -q "^read 5$" "$T_TMP/a2.out"
"$CTL" --state "$S" revoke "$ID2" >/dev/null
k=$(grep -c '^read ' "$T_TMP/a2.out")
agent_wait a2 "$N" 100
t_match "the loop stops on a denial once revoked" "$AOUT" "stopped after [0-9]+"
t_match "... which says revoked" "$AOUT" "revoked"
f=$(grep -c '^read ' "$T_TMP/a2.out")
t_ok "at most the read already in flight succeeded after revoke returned ($k then $f)" \
	test $((f - k)) -le 1
t_done
