#!/usr/bin/env bash
# 906-fs-served-pool-threads.sh - idle sandboxes cost the broker no thread
# each.  Every medium sandbox has served trees (its workspace, four slots);
# they were served by a thread of the sandbox's own (40 idle sandboxes, 40
# threads: each a stack, an arena and a request buffer, most of the 64 KiB
# an idle sandbox may cost, issue 16).  Now a small pool of threads serves
# every sandbox (fsrv/pool.c), growing only while its threads are all
# busy, and back to two once the extra ones have been idle a while (5 s);
# with no sandbox left to serve, it ends.
# Needs root and /dev/fuse.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "idle sandboxes cost no thread each" "needs root and /dev/fuse"
	t_done
	exit
fi

N=40
mkdir -p "$T_TMP/ws"
echo hello >"$T_TMP/ws/f"
srv_start "$T_TMP/st"
SOCK="$T_TMP/st/admin.sock"
threads() { ls "/proc/$SRV/task" | wc -l; }
stubs() { wc -w <"/proc/$SRV/task/$SRV/children"; }
before=$(threads)
pids=()
for i in $(seq "$N"); do
	timeout 120 "$CB" run --connect "$SOCK" --tier medium --workspace "$T_TMP/ws" -- \
		/bin/sh -c 'cat f >/dev/null && exec /bin/sleep 60' >/dev/null 2>&1 &
	pids+=("$!")
done
# (wait_for expands its arguments once: the count is polled here.)
n=0
while [ "$(stubs)" -lt "$N" ] && [ "$n" -lt 900 ]; do sleep 0.1; n=$((n + 1)); done
t_is "$N medium sandboxes run under one broker" "$(stubs)" "$N"
sleep 1
during=$(threads)
t_ok "... with fewer than 10 more threads in the broker ($before before, $during with them)" \
	test "$during" -lt $((before + 10))
t_ok "... which still serves them: a new sandbox reads the workspace" \
	test "$(timeout 60 "$CB" run --connect "$SOCK" --tier medium --workspace "$T_TMP/ws" -- \
	/bin/cat f 2>&1)" = hello
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
n=0
while [ "$(stubs)" -gt 0 ] && [ "$n" -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
t_is "the sandboxes end" "$(stubs)" 0
# With no sandbox left to serve the pool ends, threads and all.
n=0
while [ "$(threads)" -gt "$before" ] && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
t_ok "once they have ended the broker has the threads it had before any ($(threads), $before)" \
	test "$(threads)" -le "$before"
t_done
