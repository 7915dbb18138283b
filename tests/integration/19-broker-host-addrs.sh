#!/usr/bin/env bash
# 19-broker-host-addrs.sh - issue 10, hole 10: net.connect:*:PORT must not
# reach the host's own interface addresses (a service bound to 0.0.0.0),
# in any spelling, and an address that appears while the broker runs is
# covered at once; a capability naming the address still reaches it.
#
# Everything runs in a network namespace this script creates (as root:
# `unshare -n`) with a veth pair of its own, so the only addresses ever
# targeted are on this machine, in that namespace: it has no route out.
if [ -z "${CB_NETNS_INNER:-}" ] && [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
	CB_NETNS_INNER=1 exec unshare -n -- bash "$0" "$@"
fi
. "$(dirname "$0")/../lib.sh"
if [ -z "${CB_NETNS_INNER:-}" ]; then
	t_skip "the host's own addresses" "needs root to create a network namespace"
	t_done
	exit
fi
ip link set lo up
ip link add cbh0 type veth peer name cbh1 && ip link set cbh0 up && ip link set cbh1 up &&
	ip addr add 11.0.0.7/24 dev cbh0
# The address must be local to this namespace, and nothing beyond it
# reachable, before anything connects to it.
t_match "11.0.0.7 is an address of this namespace's own interface" "$(ip route get 11.0.0.7 2>&1)" "^local 11.0.0.7"
t_match "... and this namespace has no route out" "$(ip route get 8.8.8.8 2>&1)" "unreachable"
if ! ip route get 11.0.0.7 2>&1 | grep -q '^local'; then t_done; exit; fi

P=$($PYTHON -c 'import socket
s=socket.socket(); s.bind(("0.0.0.0",0)); print(s.getsockname()[1])')
# A service bound to 0.0.0.0, the way most host services are.
$PYTHON -c "
import socket
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0',$P)); s.listen(8)
for _ in range(20):
    c,_=s.accept(); c.recv(100); c.sendall(b'pong\n'); c.close()
" & SRV=$!
trap 'kill $SRV $BRK 2>/dev/null; wait 2>/dev/null; t_cleanup' EXIT
for _ in $(seq 50); do ss -ltn 2>/dev/null | grep -q ":$P " && break; sleep 0.05; done

agent() { # GRANT HOST: connect with one grant, in the high tier (ceiling: any host)
	"$CB_BIN/capbroker" run --tier high --timeout 20 --grant "$1" \
		-- /bin/sh -c "echo ping | capcall net.connect $2:$P"
}
t_exit "net.connect:*:PORT does not reach the host's interface address" 77 agent "net.connect:*:$P" 11.0.0.7
t_match "... refused as never-reachable" "$(cat "$T_TMP/err")" "never-reachable.*11.0.0.7"
t_exit "... nor its NAT64 spelling" 77 agent "net.connect:*:$P" "[64:ff9b::b00:7]"
t_match "... refused as never-reachable, not tried" "$(cat "$T_TMP/err")" "never-reachable"
t_exit "... nor its 6to4 spelling" 77 agent "net.connect:*:$P" "[2002:b00:7::1]"
t_exit "... nor the /24 it sits in, named as a range" 77 agent "net.connect:11.0.0.0/24:$P" 11.0.0.7
out=$(agent "net.connect:11.0.0.7:$P" 11.0.0.7 2>"$T_TMP/err")
t_is "a capability naming 11.0.0.7 explicitly reaches it" "$out" "pong"

# Kept current: an address added while a broker runs is refused at once.
S="$T_TMP/state"
"$CB_BIN/capbroker" serve --state "$S" 2>"$T_TMP/serve.err" & BRK=$!
for _ in $(seq 100); do [ -S "$S/admin.sock" ] && break; sleep 0.05; done
t_ok "capbroker serve is listening" test -S "$S/admin.sock"
served() { "$CB_BIN/capbroker" run --connect "$S/admin.sock" --tier high --timeout 20 --grant "$1" \
	-- /bin/sh -c "echo ping | capcall net.connect $2:$P"; }
out=$(served "net.connect:11.0.0.7:$P" 11.0.0.7 2>"$T_TMP/err")
t_is "the running broker reaches a named host address" "$out" "pong"
t_exit "11.0.1.9 is not an address yet: the connection is tried and fails" 1 \
	served "net.connect:*:$P" 11.0.1.9
ip addr add 11.0.1.9/32 dev cbh1
t_exit "added while the broker runs: refused at once" 77 served "net.connect:*:$P" 11.0.1.9
t_match "... as never-reachable" "$(cat "$T_TMP/err")" "never-reachable.*11.0.1.9"
ip addr del 11.0.1.9/32 dev cbh1
t_exit "removed again: tried again (and fails: nothing is there)" 1 served "net.connect:*:$P" 11.0.1.9
kill $SRV $BRK 2>/dev/null
t_done
