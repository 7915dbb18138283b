#!/usr/bin/env bash
# 13-broker-audit-fail.sh - when the audit log cannot be written, every
# operation is denied (fail closed) with a clear reason, and nothing hangs.
. "$(dirname "$0")/../lib.sh"

# A log that vanished (or was replaced) stops the broker: the state
# remembers the log's id and last checkpoint.
S2="$T_TMP/state2"
t_ok "a first run creates state and log" "$CB_BIN/capbroker" run --state "$S2" --tier low -- /bin/true
mv "$S2/audit.jsonl" "$T_TMP/old-audit.jsonl"
t_exit "a missing audit log refuses to start (125)" 125 "$CB_BIN/capbroker" run --state "$S2" --tier low -- /bin/true
t_match "... and says why and what to do" "$(cat "$T_TMP/err")" "missing, replaced or cut short.*--new-audit-log"
cp "$T_TMP/old-audit.jsonl" "$S2/audit.jsonl"
t_ok "the original log put back: it starts again" "$CB_BIN/capbroker" run --state "$S2" --tier low -- /bin/true
rm "$S2/audit.jsonl"
t_ok "--new-audit-log starts a new log deliberately" "$CB_BIN/capbroker" run --state "$S2" --new-audit-log --tier low -- /bin/true
t_match "... and the new log says so" "$(cat "$S2/audit.jsonl")" '"op":"audit.new-log"'

if [ "$(id -u)" != 0 ]; then
	t_skip "audit log on a full file system" "needs root to mount a small tmpfs"
	t_done; exit
fi
S="$T_TMP/state"; W="$T_TMP/ws"; mkdir -p "$S" "$W"; echo data >"$W/f"
mount -t tmpfs -o size=640k,mode=0700 tmpfs "$S" || { t_skip "tmpfs" "mount failed"; t_done; exit; }
trap 'umount -l "$S" 2>/dev/null; t_cleanup' EXIT
cat >"$T_TMP/agent.py" <<'EOT'
import capbroker, sys
cb = capbroker.Client()
first = None; allowed = 0; denied_after = 0
for i in range(20000):
    try:
        cb.read_file(sys.argv[1]); allowed += 1
        if first: print("ALLOWED AFTER FAILURE"); sys.exit(2)
    except capbroker.Error as e:
        if first is None: first = e
        denied_after += 1
        if denied_after >= 50: break
print("allowed", allowed, "first-denial", first.name if first else None, "|", first.reason if first else "")
EOT
out=$(timeout 120 "$CB_BIN/capbroker" run --state "$S" --tier medium --workspace "$W" \
	--grant "fs.read:$W/**" --ro-bind "$T_TMP:/t" -- /usr/bin/python3 /t/agent.py "$W/f" 2>"$T_TMP/err")
rc=$?
t_ok "the run finished (no hang)" test "$rc" != 124
t_match "reads were allowed while the log had room" "$out" "^allowed [0-9]+"
t_match "then every read was denied because the audit log failed" "$out" "first-denial audit-failed"
t_match "... with a reason a person understands" "$out" "audit log cannot be written"
t_ok "no operation was allowed after the first audit failure" test "$rc" != 2
t_done
