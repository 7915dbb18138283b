#!/usr/bin/env bash
# 64-elevation-instance.sh - issue 10, holes 7 and 9: approved elevations
# belong to the sandbox instance a human saw, however many there are, and
# no path mints without bound.
#  - hole 7: with a session approval an agent asks for the same capability
#    70 more times.  No grant goes out that the broker does not keep: past
#    the sandbox's token table the requests are refused (busy).  When the
#    sandbox ends every token it was granted is revoked, so a new sandbox
#    started with the same --id can use none of them (before the fix the
#    ones past the 64th outlived it).  The same after a broker restart.
#  - hole 9: the mint cap is one for every path: a sandbox that derived
#    BRK_MINT_MAX (1024) tokens gets no auto grant either.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
echo "in the workspace" >"$W/f"
BIND="$CB_TOP/tests/integration:/t"
HOST=$(cat /etc/hostname)

srv_start "$S"
# -- hole 7: 71 requests under one session approval ------------------------------------
"$CB" run --connect "$S/admin.sock" --id e1 --tier medium --workspace "$W" --ro-bind "$BIND" \
	-- /usr/bin/python3 /t/mint_agent.py request 71 fs.read:/etc/hostname >"$T_TMP/e1.out" 2>&1 &
E1=$!
_adm_pids+=("$E1")
RID=$(pending_rid fs.read:/etc/hostname)
t_match "the first request waits for a human" "$RID" '^[0-9]+$'
t_exit "... who approves it for the session" 0 "$CTL" --state "$S" approve "$RID" --session
wait "$E1"
t_is "the agent ran to its end" "$(grep -c '^DONE' "$T_TMP/e1.out")" 1
granted=$(sed -n 's/^GRANTED //p' "$T_TMP/e1.out")
t_ok "the session grants stop at the sandbox's token table (${granted:-?} of 71 granted, want <= 64)" \
	test -n "$granted" -a "${granted:-99}" -le 64
t_ok "... the rest refused as busy, not minted and dropped" grep -q '^REFUSED busy' "$T_TMP/e1.out"
sed -n 's/^TOKEN //p' "$T_TMP/e1.out" >"$T_TMP/e1.tokens"
t_is "... each grant a token the agent received" "$(wc -l <"$T_TMP/e1.tokens")" "$granted"
"$CTL" --state "$S" --json list --sandbox e1 >"$T_TMP/e1.list"
t_is "the state recorded no more elevations than were granted" \
	"$(jget 'len([t for t in d if t["elevated"]])' <"$T_TMP/e1.list")" "$granted"
t_is "every one of them was revoked when the sandbox ended" \
	"$(jget 'len([t for t in d if t["elevated"] and not t["revoked"]])' <"$T_TMP/e1.list")" 0
# A new sandbox with the same id presents every token the old one got.
# (newest first: the ones a fixed-size table forgot were the last ones)
tac "$T_TMP/e1.tokens" >"$W/e1.tokens"
"$CB" run --connect "$S/admin.sock" --id e1 --tier medium --workspace "$W" --grant "fs.read:$W/**" -- /bin/sh -c \
	'n=0 k=0; for t in $(capcall fs.read "$1/e1.tokens"); do k=$((k+1)); capcall --token "$t" fs.read /etc/hostname >/dev/null 2>&1 && n=$((n+1)); done; echo TRIED $k; echo READ $n' \
	sh "$W" >"$T_TMP/e1b.out" 2>&1
t_is "a new sandbox with the same id presented every one" "$(sed -n 's/^TRIED //p' "$T_TMP/e1b.out")" "$granted"
t_is "... and could use none of them" "$(sed -n 's/^READ //p' "$T_TMP/e1b.out")" 0

# -- after a broker restart -----------------------------------------------------------
agent_start e2 --tier medium --workspace "$W"
agent_send e2 "capcall --json request fs.read:/etc/hostname --ttl 120 --reason restart"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/hostname)
t_exit "an elevation approved for e2" 0 "$CTL" --state "$S" approve "$RID"
agent_wait e2 "$N"
TOK=$(printf '%s\n' "$AOUT" | jget 'd["token"]' 2>/dev/null)
t_match "... its token" "$TOK" '^cap1\.'
srv_kill9
agent_stop e2
srv_start "$S"
t_exit "after kill -9 and a restart, a new e2 cannot use it (77)" 77 \
	"$CB" run --connect "$S/admin.sock" --id e2 --tier medium --workspace "$W" -- \
	capcall --token "$TOK" fs.read /etc/hostname
t_ok "... the restart ended the old instance on record" \
	grep -q '"op":"revoke".*"actor":"broker","detail":"elevation of a sandbox that no longer runs' "$S/audit.jsonl"

# -- hole 9: one mint cap for derive and request alike ---------------------------------
cat >"$T_TMP/auto.conf" <<EOT
tiers = { medium = { requestable = (
  { caps = [ "fs.read:\${workspace}/**" ]; approval = "auto"; max_ttl = 60; }
); }; };
EOT
"$CB" run --state "$T_TMP/st3" --policy "$T_TMP/auto.conf" --id m1 --tier medium --workspace "$W" \
	--ro-bind "$BIND" --grant "fs.read:$W/**" -- /usr/bin/python3 /t/mint_agent.py request 3 "fs.read:$W/f" \
	>"$T_TMP/m0.out" 2>&1
t_is "control: auto grants need no human" "$(sed -n 's/^GRANTED //p' "$T_TMP/m0.out")" 3
"$CB" run --state "$T_TMP/st3" --policy "$T_TMP/auto.conf" --id m2 --tier medium --workspace "$W" \
	--ro-bind "$BIND" --grant "fs.read:$W/**" -- \
	/usr/bin/python3 /t/mint_agent.py derive-other 1030 "fs.read:$W/f" 1 >"$T_TMP/m2.out" 2>&1
t_is "derive stops at the mint cap" "$(sed -n 's/^MINTED //p' "$T_TMP/m2.out")" 1024
t_is "... and so does the request path: no auto grant past it" "$(sed -n 's/^GRANTED //p' "$T_TMP/m2.out")" 0
t_ok "... refused as busy" grep -q '^REFUSED busy' "$T_TMP/m2.out"
t_done
