#!/usr/bin/env bash
# 986-approve-watch-switch.sh - red team, fourth pass (2026-12-02): when the
# request `capctl watch` shows on a terminal expires unanswered, the next
# one appears in its place, and an answer typed a moment later was meant
# for the one the human was reading.  Before the fix that answer (here
# 0.1 s after the new prompt) approved the new request.  Now watch ignores
# answers for a second after such a switch, and says so (as `run`'s tty
# prompt: 985).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
printf 'defaults = { request_expiry = 3; };\n' >"$T_TMP/p.conf"
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start a1 --tier medium --workspace "$W"
agent_start a2 --tier medium --workspace "$W"
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 30 --reason 'read me'"
R1=$(pending_rid fs.read:/etc/hostname)
sleep 1
agent_send a2 "capcall request fs.read:/etc/passwd --ttl 30 --reason 'never read'"
R2=$(pending_rid fs.read:/etc/passwd)
t_match "two requests wait" "$R1 $R2" '^[0-9]+ [0-9]+$'
# The first prompt is answered "x" (asked again, no new "Approve?") and
# expires; the one shown next is answered "y" 0.1 s after it appears.
pty_drive x,y /usr/bin/timeout 6 "$CTL" --state "$S" watch >"$T_TMP/w.out" 2>&1
WOUT=$(tr -d '\r' <"$T_TMP/w.out")
t_match "the first request expired while shown" "$WOUT" "request $R1 expired"
t_ok "... the second was shown next" grep -q "fs.read:/etc/passwd" "$T_TMP/w.out"
t_ok "... and not approved by an answer typed 0.1 s later" \
	sh -c "! grep -q '\"op\":\"approve\",\"resource\":\"fs.read:/etc/passwd\"' '$S/audit.jsonl'"
t_match "... which watch said it ignored" "$WOUT" "ignored: this is another request"
t_done
