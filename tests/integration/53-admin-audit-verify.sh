#!/usr/bin/env bash
# 53-admin-audit-verify.sh - `capctl audit verify` on a real audit log:
# intact, then each kind of tampering on a copy of the stopped broker's
# state (edit a byte, delete a line, insert a line, swap two lines,
# truncate after a checkpoint, replace the file by another log, forge a
# log without the key), each caught with where.  The copies are checked
# offline (`capctl --state DIR audit verify` with no broker running opens
# the state itself); an edited log is also checked through a broker
# restarted on it.  Also `capctl --json audit` (the lines byte for byte) and
# `audit --follow --from-start` (the table and the filters: 54-admin-audit-table.sh).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
echo "x" >"$W/f"
out() { cat "$T_TMP/out"; }

# -- a real log ----------------------------------------------------------------
srv_start "$S"
"$CTL" --state "$S" --json audit --follow --from-start >"$T_TMP/follow.out" 2>&1 &
FOL=$!
_adm_pids+=("$FOL")
agent_start a1 --tier medium --workspace "$W" --grant "fs.read:$W/**"
for i in 1 2 3 4; do agent_do a1 "capcall fs.read $W/f"; done
t_exit "verify through the running broker: intact (0)" 0 "$CTL" --state "$S" audit verify
t_match "... says so with the counts" "$(out)" "^intact: .*audit.jsonl: [0-9]+ lines, [0-9]+ checkpoints"
"$CTL" --state "$S" --json audit verify >"$T_TMP/v.json"
t_is "--json: intact" "$(jget 'd["intact"], d["problem"]' <"$T_TMP/v.json")" "(True, 'intact')"
for i in 5 6 7; do agent_do a1 "capcall fs.read $W/f"; done
agent_do a1 "capcall fs.read /etc/passwd"
"$CTL" --state "$S" issue --sandbox a1 --cap "fs.read:$W/f" >/dev/null
"$CTL" --state "$S" --json audit >"$T_TMP/audit.out"
# (the broker keeps writing: what was printed is a prefix of the file)
t_ok "capctl --json audit prints the log" sh -c "head -c \$(stat -c %s '$T_TMP/audit.out') '$S/audit.jsonl' | cmp - '$T_TMP/audit.out'"
t_ok "... from its genesis record" sh -c "head -n 1 '$T_TMP/audit.out' | grep -q '\"ev\":\"genesis\"'"
t_ok "... as JSON lines" "$PYTHON" -c 'import json, sys
for l in open(sys.argv[1]): json.loads(l)' "$T_TMP/audit.out"
t_ok "audit --follow streams new lines as they are written" \
	wait_for 50 grep -q '"op":"issue"' "$T_TMP/follow.out"
t_ok "... the denial of /etc/passwd among them" grep -q '"resource":"/etc/passwd","decision":"deny"' "$T_TMP/follow.out"
kill "$FOL" 2>/dev/null
srv_stop
t_exit "offline verify of the stopped broker's state: intact (0)" 0 "$CTL" --state "$S" audit verify
t_match "... ends sealed by the shutdown checkpoint" "$(out)" "checkpoints, 0 lines after the last checkpoint"
t_ok "capctl --json audit reads the log offline too" sh -c "'$CTL' --state '$S' --json audit | cmp - '$S/audit.jsonl'"

L=$(wc -l <"$S/audit.jsonl")
# Lines (1-based) of two neighbouring op records in the middle, and the
# checkpoints.
OP=$(grep -n '"ev":"op"' "$S/audit.jsonl" | sed -n 3p | cut -d: -f1)
CPS=$(grep -n '"ev":"checkpoint"' "$S/audit.jsonl" | cut -d: -f1 | tr '\n' ' ')
set -- $CPS
t_ok "the log has several checkpoints ($CPS) and $L lines" test $# -ge 3

# tamper NAME CMD: a copy of the state with CMD applied to its log ($F)
tamper() {
	local n=$1; shift
	C="$T_TMP/copy-$n"
	cp -a "$S" "$C"
	F="$C/audit.jsonl"
	eval "$*"
}
verify() { "$CTL" --state "$C" --json audit verify >"$T_TMP/v.json" 2>"$T_TMP/err"; echo $?; }
problem() { jget 'd["problem"] + " line " + str(d["line"])' <"$T_TMP/v.json"; }

tamper edit "sed -i '${OP}s/\"decision\":\"allow\"/\"decision\":\"allox\"/' \"\$F\""
t_ok "edit: one byte changed" sh -c "! cmp -s '$F' '$S/audit.jsonl'"
t_is "edit: not intact (1)" "$(verify)" 1
t_is "edit: says edited, at that line" "$(problem)" "edited line $OP"
"$CTL" --state "$C" audit verify >"$T_TMP/human" 2>&1
t_match "edit: the human report says what and where" "$(cat "$T_TMP/human")" "^NOT INTACT \(edited\) at line $OP: "

tamper delete "sed -i '${OP}d' \"\$F\""
t_is "delete a line: not intact (1)" "$(verify)" 1
t_match "delete a line: says removed, where" "$(problem)" "^removed line $OP$"

tamper insert "sed -i '${OP}p' \"\$F\""
t_is "insert a line (a replayed copy): not intact (1)" "$(verify)" 1
t_match "insert a line: says inserted" "$(problem)" "^inserted line $((OP + 1))$"

tamper swap "sed -i -n '${OP}{h;n;G};p' \"\$F\""
t_ok "swap: same lines, another order" bash -c "cmp -s <(sort '$F') <(sort '$S/audit.jsonl') && ! cmp -s '$F' '$S/audit.jsonl'"
t_is "swap two lines: not intact (1)" "$(verify)" 1
t_match "swap two lines: says reordered" "$(problem)" "^reordered line $OP$"

tamper truncate "head -n $2 \"\$S/audit.jsonl\" >\"\$F\""
t_is "truncate after a checkpoint: not intact (1)" "$(verify)" 1
t_match "truncate after a checkpoint: says truncated" "$(problem)" "^truncated "
t_exit "truncate: a broker refuses to start on it (125)" 125 timeout 20 "$CB" serve --state "$C"
t_match "... and points to capctl audit verify" "$(cat "$T_TMP/err")" "capctl audit verify"

tamper truncate-last "head -n $((L - 1)) \"\$S/audit.jsonl\" >\"\$F\""
t_is "truncate just the final checkpoint: not intact (1)" "$(verify)" 1
t_match "... says truncated" "$(problem)" "^truncated "

# Another broker's genuine log, signed by its own key, in place of ours.
S2="$T_TMP/other"
srv_start "$S2"
srv_stop
tamper replace "cp \"\$S2/audit.jsonl\" \"\$F\""
t_is "replace the file by another log: not intact (1)" "$(verify)" 1
t_match "replace: says replaced" "$(problem)" "^replaced "

# A log written without the key: genesis + an unsigned "checkpoint".
tamper forge "head -n 1 \"\$F\" >\"\$F.new\"; sed -n 2p \"\$F\" | sed 's/\"sig\":\"[0-9a-f]\\{8\\}/\"sig\":\"00000000/' >>\"\$F.new\"; mv \"\$F.new\" \"\$F\""
t_is "replace by a forged log: not intact (1)" "$(verify)" 1
t_is "forged: says line 2 is no valid seal" "$(problem)" "no-seal line 2"

tamper delete-file "rm \"\$F\""
t_is "audit log deleted: not intact (1)" "$(verify)" 1

# A torn last line (a crash mid-write) is not tampering.
tamper torn "printf '{\"prev\":\"00' >>\"\$F\""
t_is "a torn last line still verifies (0)" "$(verify)" 0
t_is "... reported as torn" "$(jget 'd["problem"]' <"$T_TMP/v.json")" torn

# Through a broker restarted on the edited copy.
tamper edit-online "sed -i '${OP}s/\"decision\":\"allow\"/\"decision\":\"allox\"/' \"\$F\""
srv_start "$C"
t_exit "online: a broker restarted on the edited log reports it (1)" 1 "$CTL" --state "$C" audit verify
t_match "... edited, at that line" "$(out)" "^NOT INTACT \(edited\) at line $OP"
srv_stop
t_done
