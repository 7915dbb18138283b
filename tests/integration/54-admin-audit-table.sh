#!/usr/bin/env bash
# 54-admin-audit-table.sh - the tools people read: `capctl audit` is a
# table by default (time, sandbox, decision, operation, resource, reason)
# and JSON lines with --json; --sandbox, --since, --decision and --op
# filter; --follow shows only new lines unless --from-start; `capctl list`
# has one header line and columns awk can cut; capcall fs.list escapes
# control characters in names; --json failures are JSON too.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
S="$T_TMP/st"; W="$T_TMP/ws"
mkdir -p "$W"; echo x >"$W/f"
: >"$W/$(printf 'evil\033[2Jname')"

srv_start "$S"
agent_start a1 --tier medium --workspace "$W" --grant "fs.read:$W/**" --grant "fs.list:$W/**"
agent_start b2 --tier medium --workspace "$W" --grant "fs.read:$W/**"
agent_do a1 "capcall fs.read $W/f"
agent_do a1 "capcall fs.read /etc/passwd"
agent_do b2 "capcall fs.read $W/f"

# -- the table ------------------------------------------------------------------------------------
"$CTL" --state "$S" audit >"$T_TMP/tab" 2>"$T_TMP/err"
t_is "audit prints a table by default: one header line" "$(head -n 1 "$T_TMP/tab" | tr -s ' ')" \
	"TIME SANDBOX DECISION OPERATION RESOURCE REASON"
t_ok "... no JSON in it" sh -c "! grep -q '\"prev\"' '$T_TMP/tab'"
t_match "... an allowed read: time, sandbox, decision, operation, resource" "$(cat "$T_TMP/tab")" \
	"20[0-9-]+T[0-9:.]+Z +a1 +allow +fs\.read +$W/f"
t_match "... a denied one with its reason" "$(cat "$T_TMP/tab")" \
	"a1 +deny +fs\.read +/etc/passwd +not-covered"
t_match "... administrative lines say who" "$(cat "$T_TMP/tab")" "a1 +- +issue +fs\.read:$W/\*\* .*\(by uid:0\)"

# -- filters ----------------------------------------------------------------------------------------
n() { "$CTL" --state "$S" "$@" | tail -n +2 | wc -l; }
t_is "--sandbox b2: only its lines" "$("$CTL" --state "$S" audit --sandbox b2 | tail -n +2 | awk '{print $2}' | sort -u)" "b2"
t_is "--decision deny: only denials" "$("$CTL" --state "$S" audit --decision deny | tail -n +2 | awk '{print $3}' | sort -u)" "deny"
t_is "--op fs.read --decision allow: the two reads" "$(n audit --op fs.read --decision allow)" 2
t_is "--op combined with --sandbox" "$(n audit --op fs.read --sandbox a1)" 2
t_is "--since 1h: everything of this run" "$(n audit --since 1h)" "$(n audit)"
t_is "--since a time to come: nothing" "$(n audit --since 2100-01-01T00:00:00Z)" 0
t_is "--since an epoch second" "$(n audit --since 1)" "$(n audit)"
t_exit "--since nonsense is a usage error (64)" 64 "$CTL" --state "$S" audit --since yesterday
t_exit "--decision maybe is a usage error (64)" 64 "$CTL" --state "$S" audit --decision maybe
t_exit "--from-start without --follow is a usage error (64)" 64 "$CTL" --state "$S" audit --from-start
"$CTL" --state "$S" --json audit --decision deny >"$T_TMP/deny.jsonl"
t_ok "--json: JSON lines, the filter applied" "$PYTHON" -c 'import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
assert ls and all(l["decision"] == "deny" for l in ls)' "$T_TMP/deny.jsonl"
t_ok "... each the log's own line, byte for byte" sh -c "while IFS= read -r l; do grep -qxF \"\$l\" '$S/audit.jsonl' || exit 1; done <'$T_TMP/deny.jsonl'"

# -- --follow -----------------------------------------------------------------------------------------
"$CTL" --state "$S" audit --follow >"$T_TMP/fol" 2>&1 &
F1=$!; _adm_pids+=("$F1")
"$CTL" --state "$S" --json audit --follow --from-start --sandbox b2 >"$T_TMP/fol2" 2>&1 &
F2=$!; _adm_pids+=("$F2")
sleep 0.5
t_ok "--follow prints its header at once, before any new line" wait_for 30 grep -q '^TIME ' "$T_TMP/fol"
agent_do b2 "capcall fs.read $W/nothere"
wait_for 50 grep -q nothere "$T_TMP/fol"
t_match "--follow shows the new line" "$(cat "$T_TMP/fol")" "b2 +deny +fs\.read +$W/nothere"
t_ok "... and only new lines (not the earlier ones)" sh -c "! grep -q /etc/passwd '$T_TMP/fol'"
wait_for 50 grep -q nothere "$T_TMP/fol2"
t_ok "--follow --from-start: the earlier lines too" grep -q "\"sandbox\":\"b2\",\"op\":\"fs.read\",\"resource\":\"$W/f\"" "$T_TMP/fol2"
t_ok "... with the filter applied" sh -c "! grep -q '\"sandbox\":\"a1\"' '$T_TMP/fol2'"
kill "$F1" "$F2" 2>/dev/null

# -- list -----------------------------------------------------------------------------------------------
"$CTL" --state "$S" list >"$T_TMP/list"
t_is "list: one header line" "$(grep -c '^ID ' "$T_TMP/list")" 1
t_is "... one line per token" "$(($(wc -l <"$T_TMP/list") - 1))" 3
t_is "... every row has every column (awk NF)" "$(awk '{print NF}' "$T_TMP/list" | sort -u)" 9
t_is "... awk cuts the sandbox column" "$(tail -n +2 "$T_TMP/list" | awk '{print $4}' | sort | tr '\n' ' ')" "a1 a1 b2 "
t_is "... and the state column" "$(tail -n +2 "$T_TMP/list" | awk '{print $2}' | sort -u)" "active"
h=$(head -n 1 "$T_TMP/list")
r=$(sed -n 2p "$T_TMP/list")
t_match "... columns line up under their header" "$(awk -v h="$h" -v r="$r" 'BEGIN{print substr(r, index(h, "SANDBOX"), 3) substr(r, index(h, "CAPABILITIES"), 8)}')" \
	"^(a1|b2) fs\.(read|list)"

# -- capcall fs.list escapes names --------------------------------------------------------------------
agent_do a1 "capcall fs.list $W"
t_match "capcall fs.list shows a control character escaped" "$AOUT" 'evil\\x1b\[2Jname'
t_ok "... never as itself" sh -c "! printf '%s' \"\$1\" | grep -q \"\$(printf '\\033')\"" sh "$AOUT"

# -- --json failures ------------------------------------------------------------------------------------
"$CTL" --socket "$T_TMP/none.sock" --json list >"$T_TMP/j" 2>/dev/null
t_is "capctl --json: no broker is a JSON error too" \
	"$(jget 'd["ok"], d["error"], d["exit"]' <"$T_TMP/j")" "(False, 'unavailable', 69)"
"$CTL" --state "$S" --json revoke nonsense >"$T_TMP/j" 2>/dev/null
t_is "capctl --json: a usage error is a JSON error" "$(jget 'd["ok"], d["exit"]' <"$T_TMP/j")" "(False, 64)"
"$CTL" --state "$S" --json kill nosuch >"$T_TMP/j" 2>/dev/null
t_is "capctl --json: the broker's refusal, once" "$(jget 'd["ok"], d["exit"]' <"$T_TMP/j")" "(False, 2)"
agent_do a1 "capcall --json fs.read $W/f --bogus"
t_match "capcall --json: a usage error is a JSON error" "$AOUT" '"ok":false,"op":"fs.read".*"name":"usage".*"exit":64'
agent_do a1 "capcall fs.read --json /etc/shadow"
t_match "capcall --json: a denial is a JSON error" "$AOUT" '"ok":false,"op":"fs.read".*"exit":77'
# -- a byte that is not UTF-8 cannot hide a line ---------------------------------------------------------
# The log keeps it as \udcff (exact, valid JSON), which jansson refuses to
# parse: without care the line would vanish from every view of capctl audit.
agent_do a1 "capcall fs.read \"$W/hid\$(printf '\\377')den\""
"$CTL" --state "$S" audit --sandbox a1 --op fs.read >"$T_TMP/hid" 2>"$T_TMP/hid.err"
t_match "a path with a byte that is not UTF-8 still has its line in capctl audit" \
	"$(cat "$T_TMP/hid")" "hid.*den"
t_is "... and capctl calls no line torn" "$(grep -c 'torn' "$T_TMP/hid.err")" 0
t_match "... --json prints the line itself, byte for byte" \
	"$("$CTL" --state "$S" --json audit --sandbox a1 --op fs.read 2>/dev/null)" 'hid\\udcffden'
t_done
