#!/usr/bin/env bash
# 56-admin-limits.sh - never spin, never hang silently, never go back in
# time: a flood of admin connections to the descriptor limit leaves the
# broker idle (failed accepts back off and are counted) and every client
# refused hears why in one line; admin connections are capped per uid; a
# clock set back (simulated by a state that saw a later time) does not
# revive an expired token, and is audited.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"; mkdir -p "$W"; echo x >"$W/f"
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# -- descriptor exhaustion ---------------------------------------------------------
S="$T_TMP/fd"
SRV_STATE=$S
prlimit --nofile=40:40 "$CB" serve --state "$S" >>"$T_TMP/serve.log" 2>&1 &
SRV=$!; _adm_pids+=("$SRV")
wait_for 100 "$CTL" --state "$S" status
"$PYTHON" "$CB_TOP/tests/integration/admin_flood.py" "$S/admin.sock" 150 6 "$T_TMP/n" &
FL=$!; _adm_pids+=("$FL")
wait_for 50 test -s "$T_TMP/n"
sleep 0.5
c0=$(cpu "$SRV"); sleep 1; c1=$(cpu "$SRV")
t_ok "a flood to the fd limit does not spin the broker (<30% CPU, $((c1 - c0)) ticks in 1 s)" test $((c1 - c0)) -lt 30
t_exit "capctl is refused at once, not left waiting (69)" 69 timeout 10 "$CTL" --state "$S" status
t_match "... with a one-line reason" "$(cat "$T_TMP/err")" "out of file descriptors|too many admin connections"
t_exit "a new sandbox is refused (125)" 125 timeout 10 \
	"$CB" run --connect "$S/admin.sock" --tier medium --workspace "$W" -- /bin/true
t_match "... and the client says why" "$(cat "$T_TMP/err")" "out of file descriptors|too many admin connections"
kill "$FL"; wait "$FL" 2>/dev/null
t_ok "after the flood the broker answers again" wait_for 50 "$CTL" --state "$S" status
t_ok "the failed accepts are in the audit log" wait_for 200 grep -q '"op":"admin.accept-failed"' "$S/audit.jsonl"
"$CTL" --state "$S" --json status >"$T_TMP/st.json"
t_ok "... and counted (status accept_failures)" "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d.get("accept_failures", 0) > 0 else 1)' "$T_TMP/st.json"
srv_stop

t_exit "run under a tiny open-files limit: 125" 125 prlimit --nofile=20:20 "$CB" run --tier low -- /bin/true
t_match "... saying so on the client side" "$(cat "$T_TMP/err")" "open-files limit is 20"

# -- per-uid cap -----------------------------------------------------------------------
S="$T_TMP/cap"
srv_start "$S"
"$PYTHON" "$CB_TOP/tests/integration/admin_flood.py" "$S/admin.sock" 40 4 "$T_TMP/n2" &
FL=$!; _adm_pids+=("$FL")
wait_for 50 test -s "$T_TMP/n2"
sleep 0.3
t_exit "the connection past the per-uid cap is refused (69)" 69 timeout 10 "$CTL" --state "$S" status
t_match "... saying so" "$(cat "$T_TMP/err")" "too many admin connections"
kill "$FL"; wait "$FL" 2>/dev/null
t_ok "... and served again once they close" wait_for 50 "$CTL" --state "$S" status
srv_stop

# -- time does not run backwards for tokens ----------------------------------------------
S="$T_TMP/clock"
srv_start "$S"
srv_stop
# the state saw a time an hour ahead: as if the clock was set back an hour
"$PYTHON" -c 'import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
db.execute("INSERT INTO meta(k, v) VALUES(\"hwm\", ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v", (int(time.time()) + 3600,))
db.commit()' "$S/state.db"
srv_start "$S"
t_ok "the clock behind the state's latest time is audited" wait_for 200 grep -q '"op":"clock.backwards"' "$S/audit.jsonl"
agent_start a1 --tier medium --workspace "$W"
T1=$("$CTL" --state "$S" --json issue --sandbox a1 --cap "fs.read:$W/**" --ttl 600 | jget 'd["token"]')
agent_do a1 "capcall --token $T1 fs.read $W/f"
t_is "a token whose expiry lies before the high-water mark is refused (77)" "$ARC" 77
t_match "... as expired" "$AOUT" "expired"
srv_stop
t_done
