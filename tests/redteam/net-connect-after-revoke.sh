#!/usr/bin/env bash
# net-connect-after-revoke.sh - red team, fifth pass (2026-12-02 evening),
# R5-2 (open, low): a mediated TCP connect judged and begun (its SYN
# unanswered: the listener's queue is full) when its token is revoked is
# still completed and installed in the agent once the listener makes room,
# after `capctl revoke` returned: a connection made past its token, for up
# to the broker's 10 s (BRK_NOTIFY_TIMEOUT_MS) or the agent's SO_SNDTIMEO.
# It should be refused (EACCES), as a new connect is.  Run as root after
# `make`, from the top of the tree: bash tests/redteam/net-connect-after-revoke.sh
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/admin_lib.sh"
S="$T_TMP/st"; mkdir -p "$S"
P=$($PYTHON -c 'import socket
s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# A listener whose queue is full (backlog 0, one connection queued) until
# $T_TMP/go appears: then it accepts everything.
$PYTHON -c "
import os, socket, time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1',$P)); s.listen(0)
f=socket.create_connection(('127.0.0.1',$P))
while not os.path.exists('$T_TMP/go'): time.sleep(0.05)
while True:
    c,_=s.accept()
" &
LPID=$!
_adm_pids+=("$LPID")
for _ in $(seq 100); do [ -n "$(ss -Hltn "sport = :$P")" ] && break; sleep 0.1; done
cat >"$T_TMP/p.conf" <<EOT
tiers = { medium = { ceiling_add = [ "net.connect:127.0.0.1:*" ]; }; };
EOT
srv_start "$S" --policy "$T_TMP/p.conf" || { echo "Bail out! serve: $(cat "$T_TMP/serve.log")"; exit 1; }
W="$T_TMP/ws"; mkdir -p "$W"
"$CB" run --connect "$S/admin.sock" --id rv5r --tier medium --workspace "$W" \
    --grant "net.connect:127.0.0.1:$P" -- python3 -c '
import errno, socket, sys, time
s = socket.socket(); s.settimeout(15)
print("connecting", flush=True)
t0 = time.monotonic()
e = s.connect_ex(("127.0.0.1", int(sys.argv[1])))
print("first:", errno.errorcode.get(e, "ok") if e else "ok", "after %.1f s" % (time.monotonic() - t0), flush=True)
s2 = socket.socket(); s2.settimeout(5)
e = s2.connect_ex(("127.0.0.1", int(sys.argv[1])))
print("second:", errno.errorcode.get(e, "ok") if e else "ok", flush=True)' "$P" >"$T_TMP/a.out" 2>&1 &
A=$!
_adm_pids+=("$A")
wait_for 100 grep -q connecting "$T_TMP/a.out" || { echo "Bail out! $(cat "$T_TMP/a.out")"; exit 1; }
sleep 0.5
tok=$("$CTL" --state "$S" --json list --sandbox rv5r | jget 'd[0]["id"] if isinstance(d, list) else d["tokens"][0]["id"]')
"$CTL" --state "$S" revoke "$tok" >/dev/null 2>&1
t_is "the token is revoked while the connect waits for its handshake" "$?" 0
touch "$T_TMP/go"
wait "$A"
echo "# agent: $(tr '\n' ' ' <"$T_TMP/a.out")"
t_match "a connect not yet made when its token was revoked is refused (observed: made, 'first: ok')" "$(cat "$T_TMP/a.out")" "first: EACCES"
t_match "a connect after it is refused" "$(cat "$T_TMP/a.out")" "second: EACCES"
# The explicit net.connect (capcall), the same way: a fresh listener, full.
rm -f "$T_TMP/go"
kill "$LPID" 2>/dev/null; wait "$LPID" 2>/dev/null
$PYTHON -c "
import os, socket, time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1',$P)); s.listen(0)
f=socket.create_connection(('127.0.0.1',$P))
while not os.path.exists('$T_TMP/go'): time.sleep(0.05)
while True:
    c,_=s.accept(); c.sendall(b'hello\\n')
" &
LPID=$!
_adm_pids+=("$LPID")
sleep 0.5
"$CB" run --connect "$S/admin.sock" --id rv5x --tier medium --workspace "$W" \
    --grant "net.connect:127.0.0.1:$P" -- sh -c "echo connecting; timeout 4 capcall net.connect 127.0.0.1:$P --timeout 8 </dev/null; echo rc=\$?" >"$T_TMP/x.out" 2>&1 &
X=$!
_adm_pids+=("$X")
wait_for 100 grep -q connecting "$T_TMP/x.out"
sleep 0.5
tok=$("$CTL" --state "$S" --json list --sandbox rv5x | jget 'd[0]["id"] if isinstance(d, list) else d["tokens"][0]["id"]')
"$CTL" --state "$S" revoke "$tok" >/dev/null 2>&1
touch "$T_TMP/go"
wait "$X"
echo "# capcall: $(tr '\n' ' ' <"$T_TMP/x.out")"
t_ok "the broker is still up" "$CTL" --state "$S" status
t_done
