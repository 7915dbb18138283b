#!/usr/bin/env bash
# 63-approve-layout.sh - the red-team pass over issue 10: an agent's reason
# can no longer draw a block of its own under the real request.  Before,
# the one escaper (common/text.c) left combining marks, the spaces
# U+2000-200A, U+3000, the braille blank U+2800 and long runs of spaces
# as they were, so a long reason wrapped on the approver's terminal into
# what looked like another line of the prompt ("capbroker: sandbox ...
# asks for fs.read:/tmp/harmless") under the real capability line.  Each
# display is checked: `capctl pending`, `capctl watch` and the tty prompt
# of `capbroker run --approve tty`: none of those characters raw, runs of
# spaces counted, and the reason cut at 200 bytes, saying how much more
# there was (`capctl --json pending` keeps it whole).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
EMSP=$'\xe2\x80\x83' IDSP=$'\xe3\x80\x80' BRL=$'\xe2\xa0\x80' ACUTE=$'\xcc\x81' OVER=$'\xcc\xb8'
PAD=$(printf '%*s' 70 '')
# wrap to a fresh line with spaces, then a fake prompt line; em spaces,
# ideographic spaces and braille blanks as padding too; marks stacked
REASON="ok${PAD}capbroker: sandbox x asks for fs.read:/tmp/harmless${EMSP}${EMSP}${IDSP}${BRL}${BRL}e${ACUTE}${ACUTE}${ACUTE}=${OVER}$(printf 'z%.0s' $(seq 400))"
HEAD='ok\\x20\{70\}capbroker: sandbox x asks for fs.read:/tmp/harmless\\u2003\\u2003\\u3000\\u2800\\u2800e\\u0301\\u0301\\u0301=\\u0338z+\[\.\.\. [0-9]+ more bytes\]'
# raw FILE: 0 when FILE holds none of the characters, nor a run of 4
# spaces in a reason (after its label)
raw_free() {
	! grep -qaF -e "$EMSP" -e "$IDSP" -e "$BRL" -e "$ACUTE" -e "$OVER" "$1" &&
		! sed -n 's/.*\(reason\|because\): *//p' "$1" | grep -q '    '
}
# the reason's display is at most 200 bytes
short() { # FILE PREFIX
	local l
	l=$(grep -a "$2" "$1" | head -n 1 | tr -d '\r')
	l=${l#*"$2"}
	[ -n "$l" ] && [ "${#l}" -le 200 ]
}

srv_start "$S"
printf '%s' "$REASON" >"$T_TMP/reason"
"$CB" run --connect "$S/admin.sock" --id lay1 --tier medium --workspace "$W" --setenv R "$REASON" -- \
	/bin/sh -c 'capcall request fs.read:/etc/hostname --ttl 5 --reason "$R"' >"$T_TMP/a.out" 2>&1 &
APID_LAY=$!
_adm_pids+=("$APID_LAY")
RID=$(pending_rid fs.read:/etc/hostname)
t_match "a request with a reason laid out to draw a fake prompt line is pending" "$RID" '^[0-9]+$'

"$CTL" --state "$S" pending >"$T_TMP/p.txt" 2>&1
t_ok "capctl pending shows no mark, odd space or long run of spaces raw" raw_free "$T_TMP/p.txt"
t_match "... but each as a visible escape, the run counted, the reason cut" "$(cat "$T_TMP/p.txt")" \
	"reason: +$HEAD"
t_ok "... in at most 200 bytes" short "$T_TMP/p.txt" "reason:  "
t_is "capctl --json pending keeps the reason whole" \
	"$("$CTL" --state "$S" --json pending | jget '[r["reason"] for r in d][0] == open("'"$T_TMP/reason"'").read()')" True

printf 'n\n' | timeout 10 "$CTL" --state "$S" watch >"$T_TMP/w.txt" 2>&1
t_ok "capctl watch prompted for it" grep -q "request $RID" "$T_TMP/w.txt"
t_ok "capctl watch shows none of them raw" raw_free "$T_TMP/w.txt"
t_match "... but escaped, counted and cut" "$(cat "$T_TMP/w.txt")" "reason: +$HEAD"
t_ok "... in at most 200 bytes" short "$T_TMP/w.txt" "reason:     "
wait "$APID_LAY"
t_is "the agent was denied (77)" "$?" 77

# -- the tty prompt of capbroker run --------------------------------------------------
pty_drive n /bin/sh -c 'exec "$@" </dev/null' sh \
	"$CB" run --state "$T_TMP/s2" --approve tty --tier medium --workspace "$W" --id tty1 \
	--setenv R "$REASON" -- /bin/sh -c 'capcall request fs.read:/etc/hostname --ttl 5 --reason "$R"' \
	>"$T_TMP/tty.out" 2>&1
t_ok "the tty prompt showed the request" grep -q "Approve?" "$T_TMP/tty.out"
t_ok "... with no mark, odd space or long run of spaces raw" raw_free "$T_TMP/tty.out"
t_match "... each escaped, the run counted, the reason cut" "$(tr -d '\r' <"$T_TMP/tty.out")" "because: $HEAD"
t_ok "... in at most 200 bytes" short "$T_TMP/tty.out" "because: "
t_done
