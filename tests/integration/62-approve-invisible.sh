#!/usr/bin/env bash
# 62-approve-invisible.sh - issue 10, hole 6: an agent's text reaches a
# human only through the one escaper (common/text.c).  Bidi overrides and
# isolates (U+202A-202E, U+2066-2069), zero-width characters (U+200B-200F),
# the line separator, the BOM, tag characters and C1 controls in a
# request's reason or in a sandbox's command line would let an agent make
# what the approver reads differ from what is asked.  Each display is
# checked: `capctl pending`, `capctl watch`, `capctl sandboxes`, the tty
# prompt of `capbroker run --approve tty`, and check-policy's messages:
# none of those bytes raw, each shown as a visible \uXXXX escape.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
RLO=$'\xe2\x80\xae' LRI=$'\xe2\x81\xa6' PDI=$'\xe2\x81\xa9' ZWSP=$'\xe2\x80\x8b'
LS=$'\xe2\x80\xa8' BOM=$'\xef\xbb\xbf' TAG=$'\xf3\xa0\x81\x81' NEL=$'\xc2\x85'
REASON="a${RLO}txt.dwssap${PDI}b${LRI}c${ZWSP}d${LS}e${BOM}f${TAG}g${NEL}h"
SHOWN='a\\u202etxt.dwssap\\u2069b\\u2066c\\u200bd\\u2028e\\ufefff\\U000e0041g\\u0085h'
# raw FILE: 0 when FILE holds none of the invisible characters
raw_free() {
	! grep -qaF -e "$RLO" -e "$LRI" -e "$PDI" -e "$ZWSP" -e "$LS" -e "$BOM" -e "$TAG" -e "$NEL" "$1"
}

srv_start "$S"
# The sandbox's command line is the launcher's choice, shown to approvers.
"$CB" run --connect "$S/admin.sock" --id inv1 --tier medium --workspace "$W" -- \
	/bin/sh -c "capcall request fs.read:/etc/hostname --ttl 5 --reason '$REASON'; r=\$?; : '${RLO}cmd'; exit \$r" \
	>"$T_TMP/a.out" 2>&1 &
APID_INV=$!
_adm_pids+=("$APID_INV")
RID=$(pending_rid fs.read:/etc/hostname)
t_match "a request with bidi and invisible characters in its reason is pending" "$RID" '^[0-9]+$'

"$CTL" --state "$S" pending >"$T_TMP/p.txt" 2>&1
t_ok "capctl pending shows none of the invisible characters raw" raw_free "$T_TMP/p.txt"
t_match "... but each as a visible escape" "$(cat "$T_TMP/p.txt")" "reason: +$SHOWN"
t_match "... the command line too" "$(cat "$T_TMP/p.txt")" '\\u202ecmd'

"$CTL" --state "$S" sandboxes >"$T_TMP/s.txt" 2>&1
t_ok "capctl sandboxes shows the command without them" raw_free "$T_TMP/s.txt"
t_match "... escaped" "$(cat "$T_TMP/s.txt")" '\\u202ecmd'

printf 'n\n' | timeout 10 "$CTL" --state "$S" watch >"$T_TMP/w.txt" 2>&1
t_ok "capctl watch prompted for it" grep -q "request $RID" "$T_TMP/w.txt"
t_ok "capctl watch shows none of them raw" raw_free "$T_TMP/w.txt"
t_match "... but each as a visible escape" "$(cat "$T_TMP/w.txt")" "$SHOWN"
wait "$APID_INV"
t_is "the agent was denied (77)" "$?" 77

# -- the tty prompt of capbroker run --------------------------------------------------
pty_drive n /bin/sh -c 'exec "$@" </dev/null' sh \
	"$CB" run --state "$T_TMP/s2" --approve tty --tier medium --workspace "$W" --id tty1 -- \
	/bin/sh -c "capcall request fs.read:/etc/hostname --ttl 5 --reason '$REASON'" >"$T_TMP/tty.out" 2>&1
t_ok "the tty prompt showed the request" grep -q "Approve?" "$T_TMP/tty.out"
t_ok "... with none of the invisible characters raw (reason and command line)" raw_free "$T_TMP/tty.out"
t_match "... each as a visible escape" "$(tr -d '\r' <"$T_TMP/tty.out")" "because: $SHOWN"

# -- check-policy quotes what the file says ---------------------------------------------
printf 'tiers = { medium = { ceiling = [ "fs.read:/a%sb" ]; }; };\n' "$RLO" >"$T_TMP/bad.conf"
"$CB" check-policy "$T_TMP/bad.conf" >"$T_TMP/cp.txt" 2>&1
t_ok "check-policy's message about a bad capability has no raw override" raw_free "$T_TMP/cp.txt"
t_match "... it is shown escaped" "$(cat "$T_TMP/cp.txt")" 'fs.read:/a\\u202eb'
t_done
