#!/usr/bin/env bash
# 57-admin-run-caps.sh - an admin connection that runs a sandbox
# (`run --connect`) is counted as that sandbox, not as an idle connection:
# one uid runs more sandboxes on one daemon than the idle-connection cap
# (BRK_ADMIN_PER_UID, 32), and capctl still gets through beside them; a flood
# of idle connections from the same uid is still cut at that cap, and the
# client past it hears why in one line.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

N=40
W="$T_TMP/ws"; mkdir -p "$W"
nsbx() { "$CTL" --state "$S" --json status | jget 'd["sandboxes"]'; }
has_n() { [ "$(nsbx)" = "$1" ]; }

S="$T_TMP/s"
srv_start "$S"
# Each sandbox waits for its stdin to end: all of them hold their admin
# connection at once, until the one writer below closes the fifo.
mkfifo "$T_TMP/go"
pids=()
for i in $(seq 1 "$N"); do
	"$CB" run --connect "$S/admin.sock" --id "r$i" --tier medium --workspace "$W" -- \
		/bin/sh -c 'read -r x; echo "done $x"' <"$T_TMP/go" >"$T_TMP/r$i.out" 2>"$T_TMP/r$i.err" &
	pids+=("$!"); _adm_pids+=("$!")
done
exec {GO}>"$T_TMP/go"
t_ok "one uid runs $N sandboxes at once over the admin socket (idle cap 32)" wait_for 600 has_n "$N"
t_exit "capctl is still served beside them" 0 "$CTL" --state "$S" status

# An idle flood from the same uid is still cut at the per-uid cap.
"$PYTHON" "$CB_TOP/tests/integration/admin_flood.py" "$S/admin.sock" 40 4 "$T_TMP/n" &
FL=$!; _adm_pids+=("$FL")
wait_for 50 test -s "$T_TMP/n"
sleep 0.3
t_exit "beside them, an idle connection past the per-uid cap is refused (69)" 69 \
	timeout 10 "$CTL" --state "$S" status
t_is "... in one line" "$(wc -l <"$T_TMP/err")" 1
t_match "... saying so" "$(cat "$T_TMP/err")" "too many admin connections \(32 idle of uid:$(id -u)"
t_exit "a new sandbox is refused too while the flood holds the idle room (125)" 125 \
	timeout 10 "$CB" run --connect "$S/admin.sock" --tier medium --workspace "$W" -- /bin/true
t_match "... and the client says why" "$(cat "$T_TMP/err")" "too many admin connections"
kill "$FL"; wait "$FL" 2>/dev/null
t_ok "after the flood the broker answers again" wait_for 50 "$CTL" --state "$S" status
t_is "... and every sandbox still runs" "$(nsbx)" "$N"

# Let them all finish: each exits 0 with its own output.
echo go >&"$GO"
exec {GO}>&-
bad=0
for i in $(seq 1 "$N"); do
	wait "${pids[$((i - 1))]}" || bad=$((bad + 1))
done
t_is "all $N exit 0" "$bad" 0
t_is "... and each ran to its end" "$(cat "$T_TMP"/r*.out | grep -c '^done')" "$N"
t_ok "the run connections are gone: no sandbox left" wait_for 50 has_n 0
srv_stop
t_done
