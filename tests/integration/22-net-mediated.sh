#!/usr/bin/env bash
# 22-net-mediated.sh - issue 14, part 2: an unmodified program's connect()
# (curl, Python's urllib and asyncio; TCP over IPv4 and IPv6, blocking and
# non-blocking) reaches a server on the host's loopback when a live
# net.connect token covers the address, and is refused (EACCES) otherwise;
# a revoked token stops the next connect.
#
# 127.0.0.1 and ::1 are never-reachable unless a capability names them
# (docs/policy.md): the policy's ceiling and the grants below name them.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

PY=$(readlink -f "$PYTHON")
CURL=$(command -v curl)
HN=$(hostname)
cat >"$T_TMP/p.conf" <<EOT
tiers = {
  medium = { ceiling = [ "net.connect:127.0.0.1:*", "net.connect:[::1]:*", "proc.exec:$PY" ];
             exec = [ "/bin/sh", "/usr/bin/sh", "/usr/bin/dash", "$PY", "$CURL" ]; };
  high = { ceiling = [ "net.connect:127.0.0.1:*", "net.connect:[::1]:*", "net.connect:$HN:*" ]; };
};
EOT
# Two HTTP servers on ephemeral ports (one IPv4, one IPv6 when the host has
# ::1), each answering its own name; a third port nothing covers.
srv() {
	$PYTHON -c '
import http.server, socket, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(sys.argv[2].encode() + b"\n")
    def log_message(self, *a): pass
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = S((sys.argv[1], 0), H)
open(sys.argv[3], "w").write("%d\n" % s.server_address[1])
s.serve_forever()' "$1" "$2" "$3" &
	_adm_pids+=("$!")
}
srv 127.0.0.1 hello-v4 "$T_TMP/p4"
srv 127.0.0.1 other "$T_TMP/p2"
have6=
if $PYTHON -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
	have6=1
	srv ::1 hello-v6 "$T_TMP/p6"
fi
wait_for 100 test -s "$T_TMP/p4"; wait_for 100 test -s "$T_TMP/p2"
[ -n "$have6" ] && wait_for 100 test -s "$T_TMP/p6"
P4=$(cat "$T_TMP/p4"); P2=$(cat "$T_TMP/p2"); P6=$(cat "$T_TMP/p6" 2>/dev/null)
S="$T_TMP/st"
mkdir -p "$S"

run() { # TIER GRANTS... -- CMD
	local tier=$1; shift
	local -a g=()
	while [ "$1" != -- ]; do g+=(--grant "$1"); shift; done
	shift
	"$CB" run --state "$S" --policy "$T_TMP/p.conf" --tier "$tier" "${g[@]}" -- "$@"
}

out=$(run medium "net.connect:127.0.0.1:$P4" -- curl -sS "http://127.0.0.1:$P4/" 2>&1)
t_is "curl reaches a granted loopback server (medium)" "$out" "hello-v4"
t_is "... one audit line for that connect, allowed" \
	"$(grep -c "\"op\":\"net.connect\",\"resource\":\"127.0.0.1:$P4\".*\"decision\":\"allow\".*mediated connect" "$S/audit.jsonl")" 1
t_exit "curl without a token fails" 7 run medium -- curl -sS "http://127.0.0.1:$P4/"
t_match "... refused by the broker (EACCES)" "$(cat "$T_TMP/err")" "Permission denied|Couldn't connect"
t_ok "... and the refusal is audited" \
	grep -q "\"op\":\"net.connect\",\"resource\":\"127.0.0.1:$P4\".*\"decision\":\"deny\",\"reason\":\"not-covered\".*mediated connect" "$S/audit.jsonl"
t_exit "curl to a port the token does not cover fails" 7 \
	run medium "net.connect:127.0.0.1:$P4" -- curl -sS "http://127.0.0.1:$P2/"

URL="import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode().strip())"
out=$(run medium "net.connect:127.0.0.1:$P4" -- python3 -c "$URL" "http://127.0.0.1:$P4/" 2>&1)
t_is "Python's urllib reaches it" "$out" "hello-v4"
out=$(run medium -- python3 -c "$URL" "http://127.0.0.1:$P4/" 2>&1)
t_match "... and without a token gets PermissionError" "$out" "Permission denied"

ASYNC='import asyncio, sys
async def main(port):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET / HTTP/1.0\r\n\r\n"); await w.drain()
    print((await r.read()).split(b"\r\n\r\n", 1)[1].decode().strip())
asyncio.run(main(int(sys.argv[1])))'
out=$(run medium "net.connect:127.0.0.1:$P4" -- python3 -c "$ASYNC" "$P4" 2>&1)
t_is "asyncio (non-blocking connect) reaches it" "$out" "hello-v4"

# The agent's socket options and O_NONBLOCK travel to the broker's socket;
# a non-blocking connect returns once connected (0: the broker never hands
# over a socket still connecting, docs/sandbox.md).
OPTS='import errno, fcntl, os, select, socket, sys
s = socket.socket(); port = int(sys.argv[1])
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 77)
s.setblocking(False)
e = s.connect_ex(("127.0.0.1", port))
select.select([], [s], [], 10)
print(errno.errorcode.get(e, e), s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR),
      s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0,
      s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0,
      s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
      bool(fcntl.fcntl(s.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK),
      s.getpeername() == ("127.0.0.1", port))'
out=$(run medium "net.connect:127.0.0.1:$P4" -- python3 -c "$OPTS" "$P4" 2>&1)
t_is "non-blocking connect: connected with the agent's options and O_NONBLOCK" \
	"$out" "0 0 True True 77 True True"
BLK='import socket, sys
s = socket.socket(); s.connect(("127.0.0.1", int(sys.argv[1])))
import fcntl, os
print(bool(fcntl.fcntl(s.fileno(), fcntl.F_GETFL) & os.O_NONBLOCK), s.get_inheritable())'
out=$(run high "net.connect:127.0.0.1:$P4" -- python3 -c "$BLK" "$P4" 2>&1)
t_is "blocking connect (high tier): a blocking, close-on-exec socket as the agent made it" \
	"$out" "False False"

if [ -n "$have6" ]; then
	out=$(run medium "net.connect:[::1]:$P6" -- curl -sS -g "http://[::1]:$P6/" 2>&1)
	t_is "curl over IPv6 reaches a granted ::1 server" "$out" "hello-v6"
	t_exit "... and without a token fails" 7 run medium -- curl -sS -g "http://[::1]:$P6/"
else
	t_skip "curl over IPv6 reaches a granted ::1 server" "no ::1 on this host"
	t_skip "... and without a token fails" "no ::1 on this host"
fi

# A proc.exec child is a low-tier sandbox: no network, a clear EPERM (not
# ENOSYS) on socket() and connect(), even when the agent holds a token
# covering the address (docs/sandbox.md says why it is not mediated).
CHILD='import errno, socket, sys
try: socket.socket().connect(("127.0.0.1", int(sys.argv[1]))); print("connected")
except OSError as e: print("inet", errno.errorcode[e.errno])
u = socket.socket(socket.AF_UNIX)
try: u.connect("/tmp/none")
except OSError as e: print("unix", errno.errorcode[e.errno])'
out=$(run medium "net.connect:127.0.0.1:$P4" "proc.exec:$PY" -- capcall proc.exec -- "$PY" -c "$CHILD" "$P4" 2>&1)
t_is "a proc.exec child's socket()/connect() fail with EPERM (low tier: no network)" "$out" "inet EPERM
unix EPERM"

# Names: the sandbox's /etc/hosts lists the names its tokens grant, with
# the addresses the broker looked up; no other name resolves.  This host's
# own name is used (it resolves on the host to one of its own addresses,
# which a name never unlocks: the connect is judged by the name, and
# refused as never-reachable).
if getent hosts "$HN" >/dev/null 2>&1; then
	HA=$(getent ahosts "$HN" | awk 'NR == 1 { print $1 }')
	out=$(run high "net.connect:$HN:$P4" -- getent hosts "$HN" 2>&1)
	t_match "a name a token grants resolves inside, to the broker's lookup" "$out" "^$HA +$HN\$"
	t_exit "a name no token grants does not resolve" 2 run high "net.connect:$HN:$P4" -- getent hosts example.com
	t_exit "... nor that name without the token" 2 run high -- getent hosts "$HN"
	t_exit "a connect to the name's address is judged by the name (never-reachable here)" 7 \
		run high "net.connect:$HN:$P4" -- curl -sS "http://$HN:$P4/"
	t_ok "... audited under the name" \
		grep -q "\"op\":\"net.connect\",\"resource\":\"$HN:$P4\".*\"decision\":\"deny\",\"reason\":\"never-reachable\".*mediated connect" "$S/audit.jsonl"
else
	for x in 1 2 3 4 5; do t_skip "names: /etc/hosts of granted names ($x)" "this host's name does not resolve"; done
fi

# Revocation: under serve, the next connect after `capctl revoke` fails.
srv_start "$T_TMP/srv" --policy "$T_TMP/p.conf"
agent_start n1 --tier medium --grant "net.connect:127.0.0.1:$P4"
ID=$("$CTL" --state "$T_TMP/srv" --json list --sandbox n1 | jget 'd[0]["id"]')
agent_do n1 "curl -sS http://127.0.0.1:$P4/"
t_is "a served sandbox connects with its token" "$AOUT" "hello-v4"
t_ok "capctl revoke returns" "$CTL" --state "$T_TMP/srv" revoke "$ID"
agent_do n1 "curl -sS http://127.0.0.1:$P4/"
t_is "the next connect after the revocation fails" "$ARC" 7
t_ok "... denied in the audit log (no live token covers it)" \
	wait_for 200 grep -q "\"sandbox\":\"n1\",\"op\":\"net.connect\",\"resource\":\"127.0.0.1:$P4\".*\"decision\":\"deny\",\"reason\":\"not-covered\"" \
	"$T_TMP/srv/audit.jsonl"
agent_stop n1
if [ -n "${HA:-}" ]; then
	agent_start n3 --tier high --grant "net.connect:$HN:443"
	ID3=$("$CTL" --state "$T_TMP/srv" --json list --sandbox n3 | jget 'd[0]["id"]')
	agent_do n3 "getent hosts $HN"
	t_match "a served sandbox resolves its granted name" "$AOUT" "$HN"
	"$CTL" --state "$T_TMP/srv" revoke "$ID3" >/dev/null
	agent_do n3 "sleep 2; getent hosts $HN"
	t_is "... getent then fails" "$ARC" 2
	agent_stop n3
else
	t_skip "a served sandbox resolves its granted name" "this host's name does not resolve"
	t_skip "... getent then fails" "this host's name does not resolve"
fi

# A sandbox flooding the broker with connect() calls (uncovered addresses,
# a new port each time so nothing coalesces) does not slow another's.
FLOOD='import socket, threading, time
end = time.time() + 4
def f(k):
    p = 1024 + k * 3000
    while time.time() < end:
        s = socket.socket(); p += 1
        try: s.connect(("127.0.0.2", p % 60000 + 1024))
        except OSError: pass
        s.close()
for t in [threading.Thread(target=f, args=(k,)) for k in range(8)]: t.start()
print("flooded")'
agent_start fl --tier high
# (one line for the agent's loop: the script travels hex-encoded)
agent_send fl "python3 -c \"exec(bytes.fromhex('$(printf '%s' "$FLOOD" | od -An -tx1 | tr -d ' \n')'))\""
FL=$ASEQ
agent_start n2 --tier medium --grant "net.connect:127.0.0.1:$P4"
t0=$(date +%s%N)
for i in 1 2 3 4 5; do agent_do n2 "curl -sS -m 5 http://127.0.0.1:$P4/"; [ "$AOUT" = hello-v4 ] || break; done
t1=$(date +%s%N)
t_is "another sandbox's connects are served during a connect flood" "$i $AOUT" "5 hello-v4"
t_ok "... promptly (5 in under 5 s)" test $(( (t1 - t0) / 1000000 )) -lt 5000
agent_wait fl "$FL" 300
t_is "the flooding sandbox ran to its end" "$AOUT" "flooded"
nfl=$(grep -c '"sandbox":"fl","op":"net.connect".*"decision":"deny"' "$T_TMP/srv/audit.jsonl")
t_ok "... refused, one audit line each as its budget allowed ($nfl)" test "$nfl" -gt 50
t_done
