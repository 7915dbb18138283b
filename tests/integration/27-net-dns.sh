#!/usr/bin/env bash
# 27-net-dns.sh - issue 14, names: a name a `*.domain` token covers resolves
# inside the sandbox through the broker's resolver (broker/dns.c), for an
# unmodified `getent` and Python's getaddrinfo; a name no token covers gets
# NXDOMAIN, and the broker never looks it up (its audit says so, and no DNS
# query for it reaches the host's resolver).
#
# Runs in a mount and network namespace of its own with private /etc/hosts
# and /etc/resolv.conf (dns_lib.sh).  The host's resolver here is a probe on
# 127.0.0.1:53 that records every name it is asked for (and answers
# nothing).
. "$(dirname "$0")/dns_lib.sh"
dns_need "names under a wildcard token"
. "$(dirname "$0")/admin_lib.sh"

dns_files '127.0.0.1 localhost\n10.1.2.3 a.test.invalid\n10.1.2.4 b.other.invalid\n' \
	'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n'
dns_probe
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
