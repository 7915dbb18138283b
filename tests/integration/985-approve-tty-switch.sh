#!/usr/bin/env bash
# 985-approve-tty-switch.sh - red team, fourth pass (2026-12-02): when the
# request `run --approve tty` shows goes away without the terminal's answer
# (decided with capctl, expired, its sandbox gone), the next one appears in
# its place, and an answer typed a moment later was meant for the one the
# human was reading.  Before the fix that answer (here 0.1 s after the new
# prompt) approved the new request, which no one could have read.  Now the
# terminal ignores answers for a second after such a switch, and says so.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
# The first prompt is answered "x" (asked again, no new "Approve?"); the
# one that replaces it, "y".
pty_drive x,y /bin/sh -c 'exec "$@" </dev/null' sh \
	"$CB" run --state "$S" --approve tty --tier medium --workspace "$W" --id tty1 -- /bin/sh -c \
	"capcall request fs.read:/etc/hostname --ttl 5 --reason first & \
	 until [ -e $W/go ]; do :; done; \
	 capcall request fs.read:/etc/passwd --ttl 5 --reason second; wait" \
	>"$T_TMP/tty.out" 2>&1 &
ppid=$!
t_ok "the first request waits" wait_for 100 at_least 1 "$S/audit.jsonl" '"op":"request","resource":"fs.read:/etc/hostname"'
touch "$W/go"
t_ok "... and the second behind it" wait_for 100 at_least 1 "$S/audit.jsonl" '"op":"request","resource":"fs.read:/etc/passwd"'
sleep 0.5
R1=$(pending_rid fs.read:/etc/hostname)
t_exit "the shown request is decided elsewhere (capctl deny)" 0 "$CTL" --state "$S" deny "$R1"
sleep 2
R2=$(pending_rid fs.read:/etc/passwd)
[ -n "$R2" ] && "$CTL" --state "$S" deny "$R2" --reason "not read in time" >/dev/null 2>&1
wait "$ppid"
TOUT=$(tr -d '\r' <"$T_TMP/tty.out")
t_ok "the second request was not approved by an answer typed 0.1 s after it appeared" \
	sh -c "! grep -q '\"op\":\"approve\",\"resource\":\"fs.read:/etc/passwd\"' '$S/audit.jsonl'"
t_match "... and the terminal said why the answer was ignored" "$TOUT" "another request"
t_done
