#!/usr/bin/env bash
# 961-audit-flush-queued.sh - `capctl audit` asks the broker to flush its
# audit ring first (test 37), but two kinds of lines waited in a queue
# before the ring, so an agent already answered could still be missing from
# what capctl showed: the coalesced count of repeated denials (the budget
# writes it up to 2 s later) and the lines of a served file system (its
# server thread queues them; the loop moves them into the log up to 2 ms
# later, later still when the loop is busy).  Now the flush moves both into
# the log first (admin.c, adm_flush_queued).
#
# Before the fix: the count line was missing every time (5 denials in well
# under a second, capctl at once); the served open was missing whenever the
# loop was still busy when capctl asked: here it is held in another capctl's
# flush by a log whose writes take 1.5 s (slow_audit_shim.c, as in 37).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "capctl audit shows the served file system's queued lines" "needs root and /dev/fuse"
	t_done
	exit
fi
S="$T_TMP/st"; W="$T_TMP/ws"; mkdir -p "$W"
echo payload >"$W/f-$$"
shim_build slow_audit_shim
ARM="$T_TMP/arm"
CB_SLOW_AUDIT=$ARM CB_SLOW_AUDIT_MS=1500 LD_PRELOAD=$SHIM srv_start "$S"
agent_start q1 --tier medium --workspace "$W"

# 1. Repeated denials: the first has its line, the other four one count.
agent_do q1 "for i in 1 2 3 4 5; do capcall fs.read /etc/hostname-$$ >/dev/null 2>&1; done; echo done"
t_match "the agent was denied five times" "$AOUT" "done"
"$CTL" --state "$S" audit --sandbox q1 --decision deny >"$T_TMP/tab1"
t_match "capctl audit at once shows the first denial" "$(cat "$T_TMP/tab1")" \
	"q1 +deny +fs\.read +/etc/hostname-$$ +not-covered"
t_match "... and the count of the four after it" "$(cat "$T_TMP/tab1")" \
	"/etc/hostname-$$ +not-covered \(4 more, [-0-9T:.]+Z to [-0-9T:.]+Z\)"

# 2. A served open while the loop is busy (in a flush behind a slow write).
touch "$ARM"
agent_do q1 "capcall fs.read /etc/busy-$$ >/dev/null 2>&1; echo denied"
"$CTL" --state "$S" audit --sandbox q1 >/dev/null 2>&1 &
BUSY=$!
sleep 0.2
agent_do q1 "cat f-$$"
t_is "the agent read the served file" "$AOUT" payload
"$CTL" --state "$S" audit --sandbox q1 >"$T_TMP/tab2"
t_match "capctl audit at once shows the served open" "$(cat "$T_TMP/tab2")" \
	"q1 +allow +fs\.open +$W/f-$$ "
wait "$BUSY"
rm -f "$ARM"
t_ok "the log verifies" "$CTL" --state "$S" audit verify
t_done
