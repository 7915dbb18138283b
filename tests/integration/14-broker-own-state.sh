#!/usr/bin/env bash
# 14-broker-own-state.sh - no token, however wide, reaches the broker's own
# state (its signing keys) or its memory: the high tier's fs.*:/** is
# everything else, not the broker itself.
. "$(dirname "$0")/../lib.sh"
S="$T_TMP/state"
"$CB_BIN/capbroker" run --state "$S" --tier low -- /bin/true
key=$(ls "$S"/keys/*.key | head -1)
t_ok "the state has a signing key file" test -f "$key"
run_high() {
	"$CB_BIN/capbroker" run --state "$S" --tier high --approve deny \
		--grant 'fs.read:/**' --grant 'fs.list:/**' --grant 'fs.write:/**' --grant 'fs.delete:/**' \
		-- /bin/sh -c "$1"
}
t_exit "fs.read of the broker's signing key is refused under fs.read:/**" 77 run_high "capcall fs.read $key"
t_match "... as permission denied" "$(cat "$T_TMP/err")" "permission denied"
t_exit "fs.read of the state database is refused" 77 run_high "capcall fs.read $S/state.db"
t_exit "fs.list of the state directory is refused" 77 run_high "capcall fs.list $S"
t_exit "fs.write into the state directory is refused" 77 run_high "echo x | capcall fs.write $S/keys/evil.key"
t_exit "fs.delete of the audit log is refused" 77 run_high "capcall fs.delete $S/audit.jsonl"
t_exit "renaming a directory that holds the state is refused" 77 run_high "capcall fs.rename $T_TMP $T_TMP.moved"
t_ok "... and the state is where it was" test -f "$key"
t_exit "/proc (the broker's memory) is refused under fs.read:/**" 77 run_high "capcall fs.read /proc/self/status"
t_exit "/proc/1/environ is refused" 77 run_high "capcall fs.read /proc/1/environ"
t_exit "/sys is refused under fs.read:/**" 77 run_high "capcall fs.list /sys/kernel"
out=$(run_high "capcall fs.read /etc/hostname")
t_is "while an ordinary file is served" "$out" "$(cat /etc/hostname)"
out=$("$CB_BIN/capbroker" run --tier high --grant 'fs.read:/proc/sys/kernel/**' \
	-- capcall fs.read /proc/sys/kernel/ostype)
t_is "a capability rooted inside /proc is honoured" "$out" "Linux"
t_done
