#!/usr/bin/env bash
# 79-fs-served-fd-budget.sh - red-team F8: every file an agent holds open in
# a served tree is one of the broker's descriptors.  They were bounded per
# tree only (4,096), never summed against the broker's open-files limit, so
# a few sandboxes holding files open made every other sandbox's start fail
# ("Too many open files").  Now all sandboxes' served files together keep
# half the broker's limit free.  Here the broker's limit is 4,160 (so one
# sandbox shows it; on a real host it takes a few): the hostile sandbox's
# opens stop near half of it and another sandbox still starts and reads.
# Needs root (the broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "the broker's descriptors and served files" "needs root and /dev/fuse"
	t_done
	exit
fi
W="$T_TMP/ws"; W2="$T_TMP/ws2"
mkdir -p "$W" "$W2"
echo x >"$W/f"
echo hello >"$W2/a.txt"
S="$T_TMP/st"
(ulimit -n 4160; exec "$CB" serve --state "$S") &
_adm_pids+=("$!")
SRV=$!
wait_for 100 test -S "$S/admin.sock"
t_ok "capbroker serve is listening (open-files limit 4160)" test -S "$S/admin.sock"
# Five processes (the agent's own limit is 1,024 a process) open one
# workspace file until refused, then hold what they got.
"$CB" run --connect "$S/admin.sock" --id hostile --tier medium --workspace "$W" --timeout 60 -- \
	/usr/bin/python3 -c '
import os, sys, time
for k in range(5):
    if os.fork() == 0:
        fds = []
        try:
            while True: fds.append(os.open("f", os.O_RDONLY))
        except OSError: pass
        print("held", len(fds), flush=True)
        time.sleep(30); os._exit(0)
time.sleep(30)' >"$T_TMP/hostile.out" 2>&1 &
_adm_pids+=("$!")
wait_for 150 test "$(grep -c '^held' "$T_TMP/hostile.out" 2>/dev/null)" = 5
held=$(awk '/^held/ { n += $2 } END { print n + 0 }' "$T_TMP/hostile.out")
t_ok "the hostile sandbox holds what it could open ($held files)" test "$held" -gt 1000
t_ok "... at most half the broker's limit" test "$held" -le 2080
t_ok "the broker keeps descriptors free ($(ls /proc/$SRV/fd | wc -l) of 4160 in use)" \
	test "$(ls /proc/$SRV/fd | wc -l)" -lt 2400
out=$("$CB" run --connect "$S/admin.sock" --id calm --tier medium --workspace "$W2" -- cat a.txt 2>&1)
t_is "another sandbox starts and reads its workspace meanwhile" "$out" "hello"
t_done
