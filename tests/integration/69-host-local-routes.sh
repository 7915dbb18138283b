#!/usr/bin/env bash
# 69-host-local-routes.sh - red-team F4 (issue 10, hole 10 by the routing
# table): the host answers for more than its interface addresses.  A prefix
# on `lo` and a route of type local ("AnyIP", `ip route add local N/len`)
# deliver a whole prefix to the host's own sockets; net.connect:*:PORT must
# reach none of it, in any spelling, and a local route added while the
# broker runs is covered at once.  A capability naming the address (or the
# whole local prefix) still reaches it.
#
# Everything runs in a network namespace this script creates (as root:
# `unshare -n`); the routes are added there, never to the machine's tables.
if [ -z "${CB_NETNS_INNER:-}" ] && [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
	CB_NETNS_INNER=1 exec unshare -n -- bash "$0" "$@"
fi
. "$(dirname "$0")/../lib.sh"
if [ -z "${CB_NETNS_INNER:-}" ]; then
	t_skip "the host's local routes" "needs root to create a network namespace"
	t_done
	exit
fi
ip link set lo up
ip addr add 93.184.216.34/24 dev lo
ip route add local 11.2.0.0/16 dev lo
ip -6 route add local 2606:2800:220:1::/64 dev lo
t_match "93.184.216.35 is local here (the prefix on lo)" "$(ip route get 93.184.216.35 2>&1)" "^local 93.184.216.35"
t_match "... 11.2.3.4 too (a local route)" "$(ip route get 11.2.3.4 2>&1)" "^local 11.2.3.4"
t_match "... and 2606:2800:220:1::99" "$(ip -6 route get 2606:2800:220:1::99 2>&1)" "^local 2606:2800:220:1::99"
t_match "... and this namespace has no route out" "$(ip route get 8.8.8.8 2>&1)" "unreachable"

P=$($PYTHON -c 'import socket
s=socket.socket(); s.bind(("0.0.0.0",0)); print(s.getsockname()[1])')
# A service bound to 0.0.0.0 and ::, the way most host services are.
$PYTHON -c "
import socket, threading
def serve(fam, addr):
    s=socket.socket(fam); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6: s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr,$P)); s.listen(8)
    while True:
        c,_=s.accept(); c.sendall(b'pong\n'); c.close()
threading.Thread(target=serve, args=(socket.AF_INET6, '::'), daemon=True).start()
serve(socket.AF_INET, '0.0.0.0')
" & SRV=$!
trap 'kill $SRV $BRK 2>/dev/null; wait 2>/dev/null; t_cleanup' EXIT
for _ in $(seq 50); do ss -ltn 2>/dev/null | grep -q "]:$P " && break; sleep 0.05; done

agent() { # GRANT HOST: connect with one grant, in the high tier (ceiling: any host)
	"$CB_BIN/capbroker" run --tier high --timeout 20 --grant "$1" \
		-- /bin/sh -c "capcall net.connect $2:$P </dev/null"
}
for h in 93.184.216.35 93.184.216.0 93.184.216.255 "[::ffff:93.184.216.35]" 11.2.3.4 \
	"[2606:2800:220:1::99]" "[2606:2800:220:1:0:0:0:5]"; do
	t_exit "net.connect:*:PORT does not reach $h, local through a route" 77 agent "net.connect:*:$P" "$h"
	t_match "... refused as never-reachable" "$(cat "$T_TMP/err")" "never-reachable"
done
t_exit "... nor the NAT64 spelling of 11.2.3.4 (not tried)" 77 agent "net.connect:*:$P" "[64:ff9b::b02:304]"
t_exit "... nor 6to4 (not tried)" 77 agent "net.connect:*:$P" "[2002:b02:304::1]"
t_exit "... nor a wider range that holds the local prefix" 77 agent "net.connect:11.0.0.0/8:$P" 11.2.3.4
out=$(agent "net.connect:11.2.3.4:$P" 11.2.3.4 2>"$T_TMP/err")
t_is "a capability naming 11.2.3.4 explicitly reaches it" "$out" "pong"
out=$(agent "net.connect:11.2.0.0/16:$P" 11.2.9.9 2>"$T_TMP/err")
t_is "... so does one naming the whole local prefix" "$out" "pong"

# Kept current: a local route added while a broker runs is refused at once.
S="$T_TMP/state"
"$CB_BIN/capbroker" serve --state "$S" 2>"$T_TMP/serve.err" & BRK=$!
for _ in $(seq 100); do [ -S "$S/admin.sock" ] && break; sleep 0.05; done
t_ok "capbroker serve is listening" test -S "$S/admin.sock"
served() { "$CB_BIN/capbroker" run --connect "$S/admin.sock" --tier high --timeout 20 --grant "$1" \
	-- /bin/sh -c "capcall net.connect $2:$P </dev/null"; }
t_exit "11.3.1.1 is not local yet: the connection is tried and fails" 1 served "net.connect:*:$P" 11.3.1.1
ip route add local 11.3.0.0/16 dev lo
t_exit "a local route added while the broker runs: refused at once" 77 served "net.connect:*:$P" 11.3.1.1
t_match "... as never-reachable" "$(cat "$T_TMP/err")" "never-reachable.*11.3.1.1"
ip route del local 11.3.0.0/16 dev lo
t_exit "removed again: tried again (and fails: nothing is there)" 1 served "net.connect:*:$P" 11.3.1.1
t_done
