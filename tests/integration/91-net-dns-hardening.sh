#!/usr/bin/env bash
# 91-net-dns-hardening.sh - review findings on the sandbox's resolver
# (broker/dns.c):
#  - a question of a type other than A or AAAA (MX, ANY...) for a covered
#    name gets NOTIMP and is never looked up (before the fix the broker
#    looked the name up, for an answer that could not carry what was asked);
#  - a token revoked while the broker's lookup of a name it covered runs
#    teaches the sandbox nothing: the name is judged again when the lookup
#    returns, and the answer is NXDOMAIN, audited as a denial (before the
#    fix the sandbox got the address, remembered for its connect()s).
# The host's resolver is a probe (dns_lib.sh) that revokes the token, with
# capctl, before it answers the query for slow.test.invalid.
. "$(dirname "$0")/dns_lib.sh"
dns_need "the resolver's query types and revocations during a lookup"
. "$(dirname "$0")/admin_lib.sh"

W='net.connect:*.test.invalid:443'
dns_files '127.0.0.1 localhost\n' 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n'
srv_start "$T_TMP/srv"
dns_probe ok.test.invalid 10.9.9.8 "" \
	slow.test.invalid 10.9.9.9 "'$CTL' --state '$T_TMP/srv' revoke \"\$(cat '$T_TMP/tokid')\" >'$T_TMP/revoked'"
agent_start d1 --tier high --grant "$W"
"$CTL" --state "$T_TMP/srv" --json list --sandbox d1 | jget 'd[0]["id"]' >"$T_TMP/tokid"

# Raw DNS over TCP to the sandbox's resolver: QTYPE NAME... -> "rcode N
# answers N" each.  The agent runs one line: the program travels in base64.
ASK=$(base64 -w0 <<'PY'
import socket, struct, sys
s = socket.create_connection(("127.0.0.53", 53), timeout=10)
for qtype, name in zip(sys.argv[1::2], sys.argv[2::2]):
    q = struct.pack(">HHHHHH", 9, 0x100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    q += struct.pack(">HH", int(qtype), 1)
    s.sendall(struct.pack(">H", len(q)) + q)
    r = s.recv(4096)
    print("rcode", r[2 + 3] & 15, "answers", struct.unpack(">H", r[2 + 6:2 + 8])[0])
PY
)
agent_do d1 "python3 -c 'import base64; exec(base64.b64decode(\"$ASK\"))' 15 mx.test.invalid 255 any.test.invalid 16 txt.other.invalid 1 ok.test.invalid"
t_is "MX, ANY and TXT questions get NOTIMP; an A question on the same connection is answered" "$AOUT" \
"rcode 4 answers 0
rcode 4 answers 0
rcode 4 answers 0
rcode 0 answers 1"
t_is "... the names of the other types were never looked up (the host's resolver)" \
	"$(grep -cE '^(mx|any)\.test\.invalid$|^txt\.other\.invalid$' "$T_TMP/asked")" 0
t_is "... nor audited as lookups" \
	"$(grep -cE '"op":"net.resolve","resource":"(mx|any)\.test\.invalid".*"decision":"allow"' "$T_TMP/srv/audit.jsonl")" 0
t_ok "... but as denials (unsupported), with the type" wait_for 200 grep -qE \
	'"op":"net.resolve","resource":"mx\.test\.invalid","decision":"deny","reason":"unsupported".*type 15' \
	"$T_TMP/srv/audit.jsonl"
t_ok "control: the A question was looked up and audited" \
	wait_for 200 grep -q '"op":"net.resolve","resource":"ok.test.invalid",.*"decision":"allow"' "$T_TMP/srv/audit.jsonl"

# One A question (gethostbyname), so that what the first answer carries shows.
agent_do d1 "python3 -c 'import socket; print(socket.gethostbyname(\"slow.test.invalid\"))'"
t_match "a name whose token is revoked during its lookup does not resolve" "$AOUT" "gaierror"
t_ok "control: the lookup reached the host's resolver (which revoked the token)" \
	grep -qx "slow.test.invalid" "$T_TMP/asked"
t_match "control: the token is revoked" "$(cat "$T_TMP/revoked")" "^revoked $(cat "$T_TMP/tokid") "
t_ok "... the answer is a denial in the audit, after the lookup" \
	wait_for 200 grep -q '"op":"net.resolve","resource":"slow.test.invalid","decision":"deny".*after its lookup' "$T_TMP/srv/audit.jsonl"
t_is "... and the address was never handed to the sandbox" "$(printf '%s' "$AOUT" | grep -c 10.9.9.9)" 0
agent_stop d1
t_done
