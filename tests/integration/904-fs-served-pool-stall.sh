#!/usr/bin/env bash
# 904-fs-served-pool-stall.sh - under one `capbroker serve`, sandboxes whose
# served reads are held by a slow host file system hold up no other
# sandbox.  Every sandbox's served trees are answered by a small pool of
# the broker's threads (fsrv/pool.c), not by a thread of its own: a thread
# held in a host read (here three, each in a read of hostfs_slow.c's
# "slow", which sleeps 15 s) must not leave another sandbox's requests
# waiting behind it, so the pool starts another thread when none is left
# waiting.  With a pool that could not grow past one thread, the fast
# sandbox's start (its working directory is looked up in its workspace)
# and its `cat` waited for all three reads (45 s).  Needs root, /dev/fuse
# and libfuse3's headers (pkg-config fuse3).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "a sandbox held by a slow host holds up no other" "needs root and /dev/fuse"
	t_done
	exit
fi
if ! command -v cc >/dev/null || ! pkg-config --exists fuse3 2>/dev/null; then
	t_skip "a sandbox held by a slow host holds up no other" "needs cc and libfuse3's headers"
	t_done
	exit
fi

# shellcheck disable=SC2046
t_ok "the slow host file system builds" cc -std=c17 -D_GNU_SOURCE -o "$T_TMP/hostfs" \
	"$CB_TOP/tests/integration/hostfs_slow.c" $(pkg-config --cflags --libs fuse3)
SLOW="$T_TMP/slow" FAST="$T_TMP/fast" LOG="$T_TMP/host.log"
mkdir -p "$SLOW" "$FAST"
echo fast >"$FAST/f"
trap 'umount -l "$SLOW" 2>/dev/null; adm_cleanup' EXIT
t_ok "... and mounts (allow_other: the agents are another uid)" \
	env HOSTFS_LOG="$LOG" HOSTFS_SLEEP=15 "$T_TMP/hostfs" -o allow_other "$SLOW"
t_is "... and serves f at once" "$(cat "$SLOW/f" 2>&1)" "fast"

srv_start "$T_TMP/st"
SOCK="$T_TMP/st/admin.sock"
held=()
for i in 1 2 3; do
	timeout 60 "$CB" run --connect "$SOCK" --tier medium --workspace "$SLOW" -- \
		/bin/cat slow >"$T_TMP/held$i.out" 2>&1 &
	held+=("$!")
done
t_ok "three sandboxes' reads of the slow file reach the host, each held there" \
	wait_for 300 at_least 3 "$LOG" '^held'

t0=$EPOCHREALTIME
out=$(timeout 40 "$CB" run --connect "$SOCK" --tier medium --workspace "$FAST" -- /bin/cat f 2>&1)
rc=$?
dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
t_is "meanwhile another sandbox starts in its workspace and reads a file (exit 0)" "$rc" 0
t_is "... the file's content" "$out" "fast"
t_ok "... within 5 s (took ${dt}s; the host holds the other reads 15 s)" \
	awk -v d="$dt" 'BEGIN { exit !(d < 5) }'
t_is "... while the host still held all three reads" "$(grep -c '^done' "$LOG")" 0
t0=$EPOCHREALTIME
out=$(timeout 40 "$CB" run --connect "$SOCK" --tier medium --workspace "$SLOW" -- /bin/cat f 2>&1)
dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
t_is "a fourth sandbox on the slow host itself reads its fast file" "$out" "fast"
t_ok "... within 5 s too (took ${dt}s)" awk -v d="$dt" 'BEGIN { exit !(d < 5) }'

rcs=""
for p in "${held[@]}"; do
	wait "$p"
	rcs="$rcs$? "
done
t_is "the held sandboxes end well once the host answers" "$rcs" "0 0 0 "
t_is "... each with the slow file's content" "$(cat "$T_TMP"/held[123].out)" "slow
slow
slow"
t_is "the host answered all three reads" "$(grep -c '^done' "$LOG")" 3
t_done
