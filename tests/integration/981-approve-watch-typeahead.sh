#!/usr/bin/env bash
# 981-approve-watch-typeahead.sh - red team, fourth pass (2026-12-02):
# `capctl watch` on a terminal must not let keys typed for one prompt
# answer the next, as the tty prompt of `run` does not (tcflush there).
# Before the fix watch read its answers byte by byte and kept what followed
# a line for the next prompt: a "y" typed twice (or ahead) for one request
# approved the next one, which nobody had read yet.  A pipe keeps its
# typeahead (scripts answer that way: 60-approve-capctl.sh).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
srv_start "$S"
agent_start a1 --tier medium --workspace "$W"
agent_start a2 --tier medium --workspace "$W"
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 30 --reason 'read me first'"
R1=$(pending_rid fs.read:/etc/hostname)
agent_send a2 "capcall request fs.read:/etc/passwd --ttl 30 --reason 'never shown before the answer'"
R2=$(pending_rid fs.read:/etc/passwd)
t_match "two requests wait" "$R1 $R2" '^[0-9]+ [0-9]+$'
# The first prompt is answered "y", "y": the second line is typeahead.
pty_drive "y
y" /usr/bin/timeout 6 "$CTL" --state "$S" watch >"$T_TMP/w.out" 2>&1
state_of() { "$CTL" --state "$S" --json pending | jget '[r["state"] for r in d if r["rid"] == int(sys.argv[2])]' "$1"; }
t_match "the first request was approved at its prompt" "$(cat "$T_TMP/w.out")" "approved request $R1"
t_ok "... the second was prompted for" grep -q "fs.read:/etc/passwd" "$T_TMP/w.out"
t_ok "... and not approved by the typeahead" sh -c "! grep -q 'approved request $R2' '$T_TMP/w.out'"
t_is "... it still waits for a human" "$(state_of "$R2")" "['pending']"
"$CTL" --state "$S" deny "$R2" >/dev/null
t_done
