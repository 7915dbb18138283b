#!/usr/bin/env bash
# 28-run-ephemeral-state.sh - `capbroker run` without --state keeps its state
# in memory (docs/state.md, "Ephemeral state"): no database, no key file, no
# state lock on disk; its audit log is still written and capctl still works
# through the run's admin socket while the agent runs (issue, list, revoke,
# rotate-key, audit verify). With --state the state is on disk as before.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

# A run whose agent waits for its stdin: it stays up while we look.
mkfifo "$T_TMP/go"
"$CB" run --id eph --tier medium --workspace "$T_TMP" -- /bin/sh -c 'read -r x; echo "got $x"' \
	<"$T_TMP/go" >"$T_TMP/run.out" 2>"$T_TMP/run.err" &
RUN=$!; _adm_pids+=("$RUN")
exec {GO}>"$T_TMP/go"
# The run's private directory: the one its audit log is open in.
run_dir() {
	local l
	for l in /proc/"$RUN"/fd/*; do
		l=$(readlink "$l") || continue
		case $l in */audit.jsonl) D=${l%/audit.jsonl}; return 0 ;; esac
	done
	return 1
}
t_ok "the run keeps an audit log in a private directory" wait_for 100 run_dir
SOCK="$D/admin.sock"
t_ok "... and answers capctl on its admin socket" wait_for 100 "$CTL" --socket "$SOCK" status
t_is "no database in the directory (the state is in memory)" \
	"$(ls "$D" | grep -c '^state\.\(db\|lock\)')" 0
t_is "no key file written" "$(find "$D" -name '*.key' -o -name '*.pub' | wc -l)" 0

t_ok "capctl sandboxes lists the run's sandbox" "$CTL" --socket "$SOCK" sandboxes
t_match "... by its id" "$(cat "$T_TMP/out")" "eph"
t_ok "capctl issue mints a token for it" "$CTL" --socket "$SOCK" issue --sandbox eph \
	--cap "fs.read:$T_TMP/**" --ttl 60
tok=$(cat "$T_TMP/out")
t_ok "capctl list shows it" "$CTL" --socket "$SOCK" list
t_match "... for the sandbox" "$(cat "$T_TMP/out")" "eph"
t_ok "capctl revoke revokes it" "$CTL" --socket "$SOCK" revoke "$tok"
t_ok "capctl rotate-key makes a new key, in memory too" "$CTL" --socket "$SOCK" rotate-key
t_is "... still no key file" "$(find "$D" -name '*.key' -o -name '*.pub' | wc -l)" 0
t_ok "capctl audit verify checks the run's log" "$CTL" --socket "$SOCK" audit verify
t_ok "... which records the issue" grep -q '"op":"issue"' "$D/audit.jsonl"
t_ok "... and the revocation" grep -q '"op":"revoke"' "$D/audit.jsonl"

echo bye >&"$GO"
exec {GO}>&-
wait "$RUN"
t_is "the agent ran to its end" "$?:$(cat "$T_TMP/run.out")" "0:got bye"
t_ok "the directory is removed when the run ends" test ! -e "$D"

# With --state the state stays on disk, synced, as before.
"$CB" run --state "$T_TMP/st" --tier low -- /bin/true
t_ok "with --state the database is on disk" test -s "$T_TMP/st/state.db"
t_is "... and the signing key is in keys/" "$(find "$T_TMP/st/keys" -name '*.key' | wc -l)" 1
t_done
