#!/usr/bin/env bash
# 60-approve-capctl.sh - time-limited elevation approved by an administrator
# with capctl: approve (the agent then uses it), the approver shortening the
# time-to-live, denial (77 with the reason), expiry of an elevation (denied
# "expired" after its ttl), "for this session", a pending request expiring
# undecided (75), a request dropped when its sandbox is killed, and
# `capctl watch` (prompting, and streaming with --json).  Agents run under
# `capbroker serve` (--approve admin is the daemon's mode).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
HOST=$(cat /etc/hostname)
err() { cat "$T_TMP/err"; }
tok_of() { # JSON list entry of the newest elevated token of sandbox $1
	"$CTL" --state "$S" --json list --sandbox "$1" | jget '[t for t in d if t["elevated"]][-1]'
}

srv_start "$S"
agent_start a1 --tier medium --workspace "$W"

# -- approval by capctl -------------------------------------------------------------
agent_do a1 "capcall fs.read /etc/hostname"
t_is "before: /etc/hostname is beyond the medium ceiling (77)" "$ARC" 77
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 30 --reason 'need the host name' && capcall fs.read /etc/hostname"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/hostname)
t_match "the request is pending" "$RID" '^[0-9]+$'
"$CTL" --state "$S" --json pending >"$T_TMP/p.json"
t_is "pending --json shows sandbox, capability, reason, ttl, state" \
	"$(jget '[(r["sandbox"], r["cap"], r["reason"], r["ttl"], r["state"]) for r in d if r["rid"] == '"$RID"'][0]' <"$T_TMP/p.json")" \
	"('a1', 'fs.read:/etc/hostname', 'need the host name', 30, 'pending')"
t_match "... and the sandbox's command" "$(jget '[r["command"] for r in d if r["rid"] == '"$RID"'][0]' <"$T_TMP/p.json")" "^/bin/sh -c while read"
"$CTL" --state "$S" pending >"$T_TMP/p.txt"
t_match "pending (table) shows it for people" "$(cat "$T_TMP/p.txt")" "$RID +a1 +30s .*fs.read:/etc/hostname"
t_match "... with the reason under it" "$(cat "$T_TMP/p.txt")" "reason: +need the host name"
t_ok "the agent is still waiting" sh -c "! grep -q '^@@$N ' '$T_TMP/a1.out'"
t_exit "capctl approve: 0" 0 "$CTL" --state "$S" approve "$RID"
agent_wait a1 "$N"
t_is "the agent got the elevation and used it" "$ARC" 0
t_match "... reading /etc/hostname" "$AOUT" "$HOST"
t_is "the elevated token is bound to a1, by uid 0, for 30 s" \
	"$(tok_of a1 | "$PYTHON" -c 'import ast,sys; t = ast.literal_eval(sys.stdin.read()); print(t["sandbox"], t["by"], t["exp"] - t["nbf"], t["caps"])')" \
	"a1 uid:0 30 ['fs.read:/etc/hostname']"
t_ok "the request and the approval are audited with who decided" \
	grep -q '"sandbox":"a1","op":"approve","resource":"fs.read:/etc/hostname",.*"actor":"uid:0","detail":"ttl 30s, scope once"' "$S/audit.jsonl"
t_exit "approving it twice: 1" 1 "$CTL" --state "$S" approve "$RID"
t_match "... already decided" "$(err)" "already decided"
t_exit "approving an unknown request: 2" 2 "$CTL" --state "$S" approve 999999

# -- the approver shortens; never lengthens ---------------------------------------
agent_send a1 "capcall request fs.read:/etc/os-release --ttl 60 --reason shorten"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/os-release)
t_exit "approve --ttl 2 (shorter than asked): 0" 0 "$CTL" --state "$S" approve "$RID" --ttl 2
agent_wait a1 "$N"
t_is "the agent got it" "$ARC" 0
t_is "... for 2 s, not 60" "$(tok_of a1 | "$PYTHON" -c 'import ast,sys; t = ast.literal_eval(sys.stdin.read()); print(t["exp"] - t["nbf"])')" 2

# -- expiry of an elevation --------------------------------------------------------
agent_send a1 "capcall request fs.list:/etc --ttl 2 --reason 'two seconds'"
N=$ASEQ
RID=$(pending_rid fs.list:/etc)
t_exit "approve --ttl 100 of a 2 s request: 0" 0 "$CTL" --state "$S" approve "$RID" --ttl 100
agent_wait a1 "$N"
t_is "the 2 s elevation is granted" "$ARC" 0
t_is "... for 2 s: the approver cannot lengthen it" "$(tok_of a1 | "$PYTHON" -c 'import ast,sys; t = ast.literal_eval(sys.stdin.read()); print(t["exp"] - t["nbf"])')" 2
agent_do a1 "capcall fs.list /etc"
t_is "within its ttl it works" "$ARC" 0
t_match "... listing /etc" "$AOUT" "hostname"
sleep 3
agent_do a1 "capcall fs.list /etc"
t_is "after 3 s it is denied (77)" "$ARC" 77
t_match "... as expired" "$AOUT" "expired"

# -- denial ------------------------------------------------------------------------
agent_send a1 "capcall request fs.read:/etc/passwd --ttl 10 --reason 'want the users'"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/passwd)
t_exit "capctl deny --reason: 0" 0 "$CTL" --state "$S" deny "$RID" --reason "not today"
agent_wait a1 "$N"
t_is "the agent learns the denial (77)" "$ARC" 77
t_match "... with who denied it and why" "$AOUT" "denied by uid:0: not today"
t_ok "the denial is audited" grep -q '"sandbox":"a1","op":"deny","resource":"fs.read:/etc/passwd","decision":"deny","reason":"denied","actor":"uid:0","detail":"not today"' "$S/audit.jsonl"
agent_do a1 "capcall fs.read /etc/passwd"
t_is "and nothing was granted (77)" "$ARC" 77

# -- for this session ----------------------------------------------------------------
agent_send a1 "capcall request fs.read:/etc/issue --ttl 20 --reason 'session please'"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/issue)
t_exit "approve --session: 0" 0 "$CTL" --state "$S" approve "$RID" --session
agent_wait a1 "$N"
t_is "granted" "$ARC" 0
t_ok "the session scope is audited" grep -q '"op":"approve","resource":"fs.read:/etc/issue",.*"actor":"uid:0","detail":"ttl 20s, scope session"' "$S/audit.jsonl"
agent_do a1 "capcall request fs.read:/etc/issue --ttl 20 --reason again" 50
t_is "a second request inside the session scope is granted without asking" "$ARC" 0
t_ok "... recorded as granted by the session" grep -q '"op":"approve","resource":"fs.read:/etc/issue",.*"actor":"session"' "$S/audit.jsonl"
agent_send a1 "capcall request fs.read:/etc/hosts --ttl 20 --reason 'not in scope'"
N=$ASEQ
RID=$(pending_rid fs.read:/etc/hosts)
t_match "a request outside the session scope still waits for a human" "$RID" '^[0-9]+$'
"$CTL" --state "$S" deny "$RID" >/dev/null
agent_wait a1 "$N"

# -- capctl watch: prompts, answers on the same connection -------------------------
mkfifo "$T_TMP/watch.in"
"$CTL" --state "$S" watch <"$T_TMP/watch.in" >"$T_TMP/watch.out" 2>&1 &
_adm_pids+=("$!")
exec {WFD}>"$T_TMP/watch.in"
t_ok "watch is watching" wait_for 50 grep -q "watching for elevation requests" "$T_TMP/watch.out"
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 7 --reason 'watch me' && capcall fs.read /etc/hostname"
N=$ASEQ
t_ok "watch prompts for the request" wait_for 50 grep -q "Approve?" "$T_TMP/watch.out"
W1=$(cat "$T_TMP/watch.out")
t_match "... showing the sandbox" "$W1" "request [0-9]+ from sandbox a1"
t_match "... its command" "$W1" "command: +/bin/sh -c while read"
t_match "... the capability" "$W1" "capability: fs.read:/etc/hostname"
t_match "... the ttl" "$W1" "for: +7 s"
t_match "... the reason" "$W1" "reason: +watch me"
t_match "... and when it was asked" "$W1" "asked: +20[0-9-]+T[0-9:]+Z \(expires in [0-9]+ s\)"
echo y >&$WFD
agent_wait a1 "$N"
t_is "answering y approves: the agent reads" "$ARC" 0
t_match "... /etc/hostname" "$AOUT" "$HOST"
t_ok "watch says it approved" wait_for 50 grep -q "^approved request" "$T_TMP/watch.out"

agent_send a1 "capcall request fs.read:/etc/passwd --ttl 7 --reason 'watch deny'"
N=$ASEQ
t_ok "watch prompts again" wait_for 50 sh -c "[ \$(grep -c 'Approve?' '$T_TMP/watch.out') -ge 2 ]"
echo n >&$WFD
agent_wait a1 "$N"
t_is "answering n denies (77)" "$ARC" 77
t_match "... with the reason" "$AOUT" "refused by the administrator"

# An agent's reason cannot drive the approver's terminal.
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 7 --reason \"\$(printf 'ok\\033[2J\\033[1;1Hfake')\""
N=$ASEQ
t_ok "watch prompts for the third request" wait_for 50 sh -c "[ \$(grep -c 'Approve?' '$T_TMP/watch.out') -ge 3 ]"
t_ok "... with no raw escape character on the terminal" sh -c "! grep -q \$(printf '\\033') '$T_TMP/watch.out'"
t_match "... but the escape shown visibly" "$(cat "$T_TMP/watch.out")" 'reason: +ok\\x1b\[2J\\x1b\[1;1Hfake'
echo 3 >&$WFD
agent_wait a1 "$N"
t_is "answering a number approves for that many seconds" "$ARC" 0
t_is "... 3 s" "$(tok_of a1 | "$PYTHON" -c 'import ast,sys; t = ast.literal_eval(sys.stdin.read()); print(t["exp"] - t["nbf"])')" 3
exec {WFD}>&-

# watch --json streams the events for scripts.
"$CTL" --state "$S" --json watch >"$T_TMP/wj.out" 2>&1 &
_adm_pids+=("$!")
sleep 0.5
agent_send a1 "capcall request fs.read:/etc/shells --ttl 5 --reason 'json \"quoted\"'"
N=$ASEQ
t_ok "watch --json prints the request" wait_for 50 grep -q shells "$T_TMP/wj.out"
t_is "... as one JSON object a line" \
	"$(head -n 1 "$T_TMP/wj.out" | jget '(d["event"], d["sandbox"], d["cap"], d["reason"], d["ttl"])')" \
	"('request', 'a1', 'fs.read:/etc/shells', 'json \"quoted\"', 5)"
RID=$(head -n 1 "$T_TMP/wj.out" | jget 'd["rid"]')
"$CTL" --state "$S" approve "$RID" >/dev/null
agent_wait a1 "$N"
t_is "approved from another capctl" "$ARC" 0

# -- a killed sandbox's request is denied, not left pending --------------------------
agent_start k1 --tier medium --workspace "$W"
agent_send k1 "capcall request fs.read:/etc/motd --ttl 5 --reason 'about to die'"
RID=$(pending_rid fs.read:/etc/motd)
"$CTL" --state "$S" kill k1 >/dev/null
t_ok "the killed sandbox's request leaves the pending list" \
	wait_for 50 sh -c "'$CTL' --state '$S' --json pending | grep -q '^\[\]\$'"
t_exit "... and can no longer be approved (1)" 1 "$CTL" --state "$S" approve "$RID"
t_match "... as it was decided" "$(err)" "already decided"
t_ok "... denied by the broker, audited" grep -q '"sandbox":"k1","op":"deny","resource":"fs.read:/etc/motd","decision":"deny","reason":"denied","actor":"broker","detail":"sandbox is gone"' "$S/audit.jsonl"
srv_stop

# -- a pending request expires undecided ----------------------------------------------
printf 'defaults = { request_expiry = 2; };\n' >"$T_TMP/short.conf"
S="$T_TMP/st2"
srv_start "$S" --policy "$T_TMP/short.conf"
agent_start e1 --tier medium --workspace "$W"
start=$(date +%s)
agent_do e1 "capcall request fs.read:/etc/hostname --ttl 5 --reason 'no one is there'" 100
t_is "no decision in time: the agent exits 75" "$ARC" 75
t_match "... told no one decided in time" "$AOUT" "no one decided in time; expiry means deny"
t_ok "... after about the request expiry (2 s)" test $(( $(date +%s) - start )) -le 5
t_is "nothing is left pending" "$("$CTL" --state "$S" --json pending)" "[]"
t_ok "the expiry is audited" wait_for 200 grep -q '"sandbox":"e1","op":"expire","resource":"fs.read:/etc/hostname","decision":"deny"' "$S/audit.jsonl"
srv_stop

# -- a one-shot `capbroker run --approve admin` has an admin socket of its own -------------
S="$T_TMP/one"
"$CB" run --state "$S" --approve admin --tier medium --workspace "$W" --id once -- /bin/sh -c \
	"capcall request fs.read:/etc/hostname --ttl 5 --reason one-shot && capcall fs.read /etc/hostname" \
	>"$T_TMP/once.out" 2>&1 </dev/null &
ONE=$!
_adm_pids+=("$ONE")
RID=$(pending_rid fs.read:/etc/hostname)
t_match "run --approve admin: the request shows in capctl pending" "$RID" '^[0-9]+$'
t_exit "... capctl approves it through the run's state directory" 0 "$CTL" --state "$S" approve "$RID"
wait "$ONE"
t_is "... and the one-shot agent exits 0" "$?" 0
t_match "... having read the file" "$(cat "$T_TMP/once.out")" "$HOST"

# -- capbroker run --approve deny refuses at once ------------------------------------------
t_exit "run --approve deny: a request is refused at once (77)" 77 timeout 20 \
	"$CB" run --tier medium --workspace "$W" --approve deny -- \
	capcall request fs.read:/etc/hostname --ttl 5 --reason nobody-asked
t_match "... saying so" "$(err)" "approval mode is deny"
t_done
