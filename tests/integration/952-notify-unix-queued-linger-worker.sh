#!/usr/bin/env bash
# 952-notify-unix-queued-linger-worker.sh - red team (2026-12-02, third
# pass, left open by F12's fix, 951): the broker's copy of an agent's
# AF_UNIX socket is closed on a worker, and a TCP socket the agent queued
# on it with SO_LINGER and unsent data (its peer reads nothing) held that
# worker for the linger the agent chose, up to 2^31 s, after the sandbox
# had ended too: a thread and the ended sandbox's memory each, at most 32
# a sandbox but without bound across sandboxes (5 threads before, 8 after
# the sandbox ended, three of them in the socket's wait, for a 3,600 s
# linger).  Now a timer aimed at the closing worker interrupts the wait
# (brk_nclose_work).  Needs root (the tests' agents as uid 4248).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ]; then
	t_skip "a worker's close of an agent's AF_UNIX socket with a lingering socket queued" "needs root"
	t_done
	exit
fi

linger_setup unix_queue_agent.py
S="$T_TMP/st"
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start o1 --tier medium --workspace "$W" --grant "net.connect:127.0.0.1:$PORT"
sleep 1
before=$(ls /proc/"$SRV"/task | wc -l)
agent_do o1 "python3 a.py $PORT 3600 80 0.5 3" 1200
won=$(printf '%s\n' "$AOUT" | sed -n 's/^won //p')
agent_stop o1
sleep 3
after=$(ls /proc/"$SRV"/task | wc -l)
# A broker at rest waits in epoll or on a futex; a socket's linger waits
# in wait_woken (sk_stream_wait_close).
lingering=0
for t in /proc/"$SRV"/task/*; do
	[ "$(cat "$t/wchan" 2>/dev/null)" = wait_woken ] && lingering=$((lingering + 1))
done
echo "# threads $before before, $after after the sandbox ended; $lingering in a socket's wait; the broker's close $won times"
t_ok "the agent's close was not the last at least once (the broker's copy outlived it)" \
	test "${won:-0}" -ge 1
t_ok "no broker thread waits out the queued socket's linger after the sandbox ended" \
	test "$lingering" -eq 0
t_ok "the broker has no more threads than while the sandbox ran" test "$after" -le "$before"
t_ok "capctl answers" timeout 10 "$CTL" --state "$S" status
srv_stop
t_ok "the log verifies" "$CTL" --state "$S" audit verify
t_done
