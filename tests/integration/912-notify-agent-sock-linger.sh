#!/usr/bin/env bash
# 912-notify-agent-sock-linger.sh - red team: the broker closes, on its
# loop, descriptors the agent may hold too (the copy of the agent's socket
# a mediated connect() takes, a socket it hands over), and that close is
# the last whenever the agent closed its own first: a connect() again on
# a connected socket with SO_LINGER and unsent data towards a peer that
# reads nothing, closed by the agent on its EISCONN, stopped the whole
# broker for the linger (seen in about 1 of 40 tries with everything on
# one CPU: the agent, woken by the answer, ran before the broker's close).
# Ordered, not timed: linger_shim.c, preloaded into the broker, holds its
# close of such a socket 200 ms, long enough for the agent's close to come
# first every time.  Now the broker clears the linger before it closes
# (brk_close_agent): a ping right after is answered at once, not after
# the linger's 5 s.  Needs root (the tests' agents as uid 4248).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ]; then
	t_skip "the broker's close of an agent's lingering socket" "needs root"
	t_done
	exit
fi

shim_build linger_shim
linger_setup reconnect_agent.py
S="$T_TMP/st" ARM="$T_TMP/arm"
CB_LINGER_ARM=$ARM LD_PRELOAD=$SHIM srv_start "$S" --policy "$T_TMP/p.conf"
agent_start o1 --tier medium --workspace "$W" --grant "net.connect:127.0.0.1:$PORT"
touch "$ARM"
agent_do o1 "python3 a.py $PORT 5" 300
t_match "the agent's second connect() was answered EISCONN, its copy closed" "$AOUT" '^errno 106 ping '
t_ok "... and the broker's close of its own copy came last (held by the shim)" test -s "$ARM.hit"
ping=$(printf '%s\n' "$AOUT" | sed -n 's/^errno [0-9]* ping //p')
echo "# the ping after it took ${ping:-?} s (the linger is 5 s)"
t_ok "... without waiting for the agent's linger (the ping within 2 s)" \
	"$PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 2 else 1)' "${ping:-99}"
rm -f "$ARM"
t_ok "capctl answers" timeout 10 "$CTL" --state "$S" status
agent_stop o1
srv_stop
t_ok "the log verifies" "$CTL" --state "$S" audit verify
t_done
