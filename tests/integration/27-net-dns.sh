#!/usr/bin/env bash
# 27-net-dns.sh - issue 14, names: a name a `*.domain` token covers resolves
# inside the sandbox through the broker's resolver (broker/dns.c), for an
# unmodified `getent` and Python's getaddrinfo; a name no token covers gets
# NXDOMAIN, and the broker never looks it up (its audit says so, and no DNS
# query for it reaches the host's resolver).
#
# Runs in a mount and network namespace of its own (as root: `unshare -m
# -n`, as 68-never-host.sh): /etc/hosts and /etc/resolv.conf are private
# files bind-mounted over the machine's for this namespace only.  The
# host's resolver here is a probe on 127.0.0.1:53 that records every name
# it is asked for (and answers nothing).
if [ -z "${CB_NETNS_INNER:-}" ] && [ "$(id -u)" = 0 ] && unshare -m -n true 2>/dev/null; then
	CB_NETNS_INNER=1 exec unshare -m -n -- bash "$0" "$@"
fi
. "$(dirname "$0")/../lib.sh"
if [ -z "${CB_NETNS_INNER:-}" ]; then
	t_skip "names under a wildcard token" "needs root for a mount and network namespace"
	t_done
	exit
fi
. "$(dirname "$0")/admin_lib.sh"

ip link set lo up
printf '127.0.0.1 localhost\n10.1.2.3 a.test.invalid\n10.1.2.4 b.other.invalid\n' >"$T_TMP/hosts"
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$T_TMP/resolv.conf"
mount --bind "$T_TMP/hosts" /etc/hosts && mount --bind "$T_TMP/resolv.conf" /etc/resolv.conf
: >"$T_TMP/asked"
$PYTHON -c '
import socket, sys, threading
log = open(sys.argv[1], "a", buffering=1)
def name(m):
    i, out = 12, []
    while i < len(m) and m[i]:
        out.append(m[i + 1:i + 1 + m[i]].decode("ascii", "replace")); i += 1 + m[i]
    return ".".join(out)
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 53))
    while True: log.write(name(u.recvfrom(4096)[0]) + "\n")
def tcp():
    t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("127.0.0.1", 53)); t.listen(8)
    while True:
        c, _ = t.accept(); log.write(name(c.recv(4096)[2:]) + "\n"); c.close()
threading.Thread(target=udp, daemon=True).start()
tcp()' "$T_TMP/asked" & _adm_pids+=("$!")
for _ in $(seq 50); do ss -ltn 2>/dev/null | grep -q "127.0.0.1:53 " && break; sleep 0.05; done
getent hosts probe.nowhere.invalid >/dev/null
t_ok "control: the host's resolver here is the probe (it saw a query)" grep -qx "probe.nowhere.invalid" "$T_TMP/asked"
t_match "a.test.invalid is 10.1.2.3 in this namespace only" "$(getent hosts a.test.invalid)" "^10\.1\.2\.3 "

S="$T_TMP/st"
mkdir -p "$S"
run() { "$CB" run --state "$S" --tier high "$@"; }
W='net.connect:*.test.invalid:443'

out=$(run --grant "$W" -- getent hosts a.test.invalid 2>&1)
t_match "a name under a *.domain token resolves inside (getent)" "$out" "^10\.1\.2\.3 +a\.test\.invalid\$"
out=$(run --grant "$W" -- python3 -c 'import socket
print(sorted({a[4][0] for a in socket.getaddrinfo("a.test.invalid", 443)}))' 2>&1)
t_is "... and for Python's getaddrinfo" "$out" "['10.1.2.3']"
t_ok "... looked up by the broker, audited under the name with the token" \
	grep -q '"op":"net.resolve","resource":"a.test.invalid","token":"[0-9a-f]*","decision":"allow"' "$S/audit.jsonl"

t_exit "a name no token covers does not resolve (getent: 2)" 2 run --grant "$W" -- getent hosts b.other.invalid
t_match "... nor for Python" "$(run --grant "$W" -- python3 -c 'import socket
try: socket.getaddrinfo("b.other.invalid", 443)
except socket.gaierror as e: print("gaierror", e.errno == socket.EAI_NONAME)' 2>&1)" "^gaierror True\$"
t_ok "... the query is denied in the audit (not covered, not looked up)" \
	grep -q '"op":"net.resolve","resource":"b.other.invalid","decision":"deny","reason":"not-covered"' "$S/audit.jsonl"
t_is "... no lookup of it was allowed" \
	"$(grep -c '"op":"net.resolve","resource":"b.other.invalid".*"decision":"allow"' "$S/audit.jsonl")" 0
t_exit "the domain itself is not under *.domain" 2 run --grant "$W" -- getent hosts test.invalid
t_exit "without the token no name resolves" 2 run -- getent hosts a.test.invalid
run --grant "$W" -- getent hosts d.test.invalid >/dev/null 2>&1
sleep 0.2
t_ok "control: a covered name missing from the host's files is looked up, and the probe sees it" \
	grep -qx "d.test.invalid" "$T_TMP/asked"
t_is "the host's resolver was never asked for a name no token covers" \
	"$(grep -cxE 'b\.other\.invalid|test\.invalid' "$T_TMP/asked")" 0

# A connect() to the address found is judged as the name (10.1.2.3 is
# private: never-reachable for a name capability, so refused, under its name).
t_exit "a connect to the name's address is judged by the name" 1 run --grant "$W" -- python3 -c '
import socket
try: socket.create_connection(("a.test.invalid", 443), timeout=5)
except PermissionError: raise SystemExit(1)'
t_ok "... audited as a.test.invalid:443, never-reachable" \
	grep -q '"op":"net.connect","resource":"a.test.invalid:443".*"decision":"deny","reason":"never-reachable".*mediated connect' "$S/audit.jsonl"

# A malformed or hostile query never reaches a lookup, nor harms the broker.
out=$(run --grant "$W" -- python3 -c '
import socket, struct
s = socket.create_connection(("127.0.0.53", 53), timeout=5)
q = struct.pack(">HHHHHH", 7, 0x100, 1, 0, 0, 0) + b"\x03a_b\x04test\x07invalid\x00" + struct.pack(">HH", 1, 1)
s.sendall(struct.pack(">H", len(q)) + q)
r = s.recv(4096); print("rcode", r[2 + 3] & 15)
s.sendall(b"\xff\xff" + b"x" * 100)
print("closed", s.recv(10) == b"")' 2>&1)
t_is "a name that is not LDH gets NXDOMAIN; an oversized message closes the connection" "$out" "rcode 3
closed True"

# Under serve: a revoked token's names stop resolving at once.
srv_start "$T_TMP/srv"
agent_start d1 --tier high --grant "$W"
ID=$("$CTL" --state "$T_TMP/srv" --json list --sandbox d1 | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
agent_do d1 "getent hosts x.test.invalid; getent hosts a.test.invalid"
t_match "a served sandbox resolves a name under its wildcard" "$AOUT" "10\.1\.2\.3 +a\.test\.invalid"
t_ok "capctl revoke returns" "$CTL" --state "$T_TMP/srv" revoke "$ID"
agent_do d1 "getent hosts a.test.invalid"
t_is "... and after the revocation it does not" "$ARC" 2
agent_stop d1
t_done
