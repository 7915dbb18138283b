#!/usr/bin/env bash
# 59-admin-typed.sh - the admin protocol is typed (wire/admin.c): against a
# real `capbroker serve`, a command carrying a key it does not take, a key
# no command knows, or a field of the wrong type is refused with the
# message's id and a reason naming the key, and the connection still works.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

S="$T_TMP/st"
srv_start "$S"
cat >"$T_TMP/adm.py" <<'EOT'
import socket, sys, msgpack
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
for m in ({"id": 1, "cmd": "status"},
          {"id": 2, "cmd": "kill", "sandbox": "nope", "tid": "00"},
          {"id": 3, "cmd": "issue", "sandbox": "a", "caps": ["fs.read:/x"], "evil": 1},
          {"id": 4, "cmd": "list", "offset": "ten"},
          {"id": 5, "cmd": "status"}):
    s.send(msgpack.packb(m))
    r = msgpack.unpackb(s.recv(300000), raw=False)
    print(r.get("id"), r.get("ok"), r.get("err"), r.get("reason"))
EOT
out=$("$PYTHON" "$T_TMP/adm.py" "$S/admin.sock" 2>&1)
t_match "status answers" "$out" '^1 True None None'
t_match "kill refuses revoke's key, naming it" "$out" '^2 False -90 kill does not take the key "tid"'
t_match "a key no command knows is refused" "$out" '^3 False -90 .*does not know'
t_match "a field of the wrong type is refused, named" "$out" '^4 False -90 .*"offset" has the wrong type'
t_match "the connection still answers" "$out" '^5 True None None'
t_done
