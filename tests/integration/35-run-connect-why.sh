#!/usr/bin/env bash
# 35-run-connect-why.sh - `run --connect` tells its user why the sandbox
# could not be set up (a bind source missing, say), as a local `run` does:
# the broker keeps the stub's one-line reason and sends it with the exit.
# And a relative --workspace is the client's, as for a local `run`: the
# client sent it as given and the daemon resolved it against its own
# directory, granting that tree (`--workspace .` from a project gave the
# agent the daemon's working directory); now the client makes it absolute
# and the daemon refuses a relative one.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

S="$T_TMP/st"
srv_start "$S"
t_exit "a local run with a missing bind source exits 125" 125 \
	"$CB" run --tier high --ro-bind "$T_TMP/missing" -- /bin/true
t_match "... saying which and why" "$(cat "$T_TMP/err")" "bind source $T_TMP/missing: No such file or directory"
t_exit "run --connect with the same bind source exits 125" 125 \
	"$CB" run --connect "$S/admin.sock" --tier high --ro-bind "$T_TMP/missing" -- /bin/true
t_match "... and says the same reason" "$(cat "$T_TMP/err")" "^capbroker: .*bind source $T_TMP/missing: No such file or directory"
t_is "... in one line" "$(wc -l <"$T_TMP/err")" 1
t_exit "a sandbox that starts passes its own exit status through" 3 \
	"$CB" run --connect "$S/admin.sock" --tier high -- /bin/sh -c 'exit 3'
t_is "... with no reason line" "$(cat "$T_TMP/err")" ""

mkdir -p "$T_TMP/proj/sub"
(cd "$T_TMP/proj" && "$CB" run --connect "$S/admin.sock" --id rel1 --tier medium --workspace . -- \
	/bin/sh -c 'sleep 30' >/dev/null 2>&1 &)
(cd "$T_TMP/proj" && "$CB" run --connect "$S/admin.sock" --id rel2 --tier medium --workspace sub -- \
	/bin/sh -c 'sleep 30' >/dev/null 2>&1 &)
for i in $(seq 100); do
	[ "$("$CTL" --state "$S" list 2>/dev/null | grep -c 'rel[12] ')" = 2 ] && break
	sleep 0.1
done
t_match "run --connect --workspace . is the client's directory, not the daemon's" \
	"$("$CTL" --state "$S" list --sandbox rel1)" "fs\.read:$T_TMP/proj/\*\*"
t_match "... and --workspace sub the client's sub" \
	"$("$CTL" --state "$S" list --sandbox rel2)" "fs\.read:$T_TMP/proj/sub/\*\*"
"$CTL" --state "$S" kill rel1 >/dev/null 2>&1
"$CTL" --state "$S" kill rel2 >/dev/null 2>&1
(cd "$T_TMP/proj" && "$CB" run --connect "$S/admin.sock" --tier medium --workspace nonexist -- /bin/true \
	>"$T_TMP/out" 2>"$T_TMP/err")
t_is "a relative workspace that does not exist: 64" "$?" 64
t_is "... saying so" "$(cat "$T_TMP/err")" "capbroker: workspace 'nonexist': No such file or directory"
t_match "a run request naming a relative workspace is refused by the daemon" \
	"$("$PYTHON" -c 'import socket, sys, msgpack
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(msgpack.packb({"id": 1, "cmd": "run", "argv": ["/bin/true"], "tier": "medium",
    "workspace": "proj", "serve_workspace": True}))
print(msgpack.unpackb(s.recv(65536), raw=False).get("reason"))' "$S/admin.sock" 2>&1)" \
	"workspace must be an absolute path"
t_done
