#!/usr/bin/env bash
# 911-chan-fd-linger.sh - red team: descriptors an agent sent the broker
# were closed by the broker on its loop (the channel), or dropped by the
# kernel in the loop's own read (the resolver's socketpair); either way
# their last close ran there.  The last close of a TCP socket with
# SO_LINGER set and unsent data towards a peer that reads nothing waits
# the linger time (the agent's choice, up to 2^31 s): an agent with any
# net.connect grant stopped the whole broker, every sandbox and the admin
# socket, for as long as it liked (capctl status: 18.6 s for a linger of
# 20 s, by the channel and by the resolver alike).  Now the broker's ends
# take no descriptors (SO_PASSRIGHTS off, Linux 6.16): the agent's
# sendmsg is refused with EPERM, and capctl answers at once.  Needs root
# (the tests' agents as uid 4248) and a kernel with SO_PASSRIGHTS.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ]; then
	t_skip "an agent's lingering socket closed by the broker" "needs root"
	t_done
	exit
fi
if ! "$PYTHON" -c 'import socket; a, b = socket.socketpair(); b.setsockopt(socket.SOL_SOCKET, 83, 0)' 2>/dev/null; then
	t_skip "an agent's lingering socket closed by the broker" "the kernel has no SO_PASSRIGHTS (6.16)"
	t_done
	exit
fi

linger_setup linger_agent.py
S="$T_TMP/st"
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start o1 --tier medium --workspace "$W" --grant "net.connect:127.0.0.1:$PORT"
n=0
for via in chan dns; do
	n=$((n + 1))
	agent_do o1 "python3 a.py $PORT 30 $via &" 50
	t_ok "$via: the agent's socket has unsent data" wait_for 100 at_least $n "$T_TMP/o1.out" "^queued [1-9]"
	t_ok "$via: ... and the descriptor was refused by the kernel" \
		wait_for 100 at_least $n "$T_TMP/o1.out" "^refused 1\$"
	sleep 0.5
	t0=$(date +%s%N)
	t_ok "$via: capctl answers" timeout 10 "$CTL" --state "$S" status
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	echo "# $via: capctl status took $ms ms"
	t_ok "$via: ... at once (within 3 s, the linger is 30 s)" test "$ms" -lt 3000
	agent_do o1 wait 100
done
# A wedged broker ends its clients never: kill it before waiting for them.
timeout 10 "$CTL" --state "$S" status >/dev/null 2>&1 || srv_kill9
agent_stop o1
srv_stop
t_ok "the log verifies" "$CTL" --state "$S" audit verify
t_done
