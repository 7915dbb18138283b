#!/usr/bin/env bash
# 43-client-sandbox.sh - capcall and the Python module inside real sandboxes
# served by a real broker (`capbroker run`): allowed and denied operations
# with the broker's reasons and capcall's exit codes, in the low tier (where
# the agent may not fork: the Python client still works) and the medium and
# high tiers.  Skipped when capbroker is not built or cannot start a sandbox
# on this machine.
. "$(dirname "$0")/../lib.sh"

CB="$CB_BIN/capbroker"
WS="$T_TMP/ws"
mkdir -p "$WS/out"
chmod 0755 "$WS" "$WS/out"
printf 'hello\n' >"$WS/a.txt"
chmod 0644 "$WS/a.txt"
chmod -R a+rwX "$WS/out"

if [ ! -x "$CB" ] || [ ! -x "$CB_BIN/capcall" ]; then
	t_skip "capcall and the Python module in a real sandbox" "capbroker or capcall not built"
	t_done
	exit
fi
"$CB" run --tier low -- capcall ping >"$T_TMP/probe" 2>&1
rc=$?
if [ "$rc" = 125 ]; then
	t_skip "capcall and the Python module in a real sandbox" "no sandbox here: $(head -n 1 "$T_TMP/probe")"
	t_done
	exit
fi

run() { local tier=$1; shift; "$CB" run --tier "$tier" --workspace "$WS" --timeout 60 "$@"; }
RD="fs.read:$WS/**"
LS="fs.list:$WS/**"
WR="fs.write:$WS/out/**"

# -- capcall, medium tier ----------------------------------------------------
t_exit "ping in a low-tier sandbox" 0 run low -- capcall ping
t_exit "fs.read granted: 0" 0 run medium --grant "$RD" -- capcall fs.read "$WS/a.txt"
t_is "fs.read granted: the content" "$(cat "$T_TMP/out")" "hello"
t_exit "fs.read outside the grant: 77" 77 run medium --grant "$RD" -- capcall fs.read /etc/passwd
t_match "fs.read outside the grant: capcall: denied: REASON" "$(cat "$T_TMP/err")" "^capcall: denied: .+"
# A named workspace alone brings its own token (docs/sandbox.md): no token at
# all means no --workspace either.
t_exit "fs.read without any token: 77" 77 "$CB" run --tier medium --timeout 60 -- capcall fs.read "$WS/a.txt"
t_exit "--json denial: 77" 77 "$CB" run --tier medium --timeout 60 -- capcall --json fs.read "$WS/a.txt"
t_match "--json denial: the error object" "$(cat "$T_TMP/out")" '^\{"ok":false,"op":"fs.read","err":-[0-9]+,"name":"[a-z-]+","reason":".*","exit":77\}$'
ln -sf /etc/passwd "$WS/link-out"
t_exit "a symlink out of the workspace: 77" 77 run medium --grant "$RD" -- capcall fs.read "$WS/link-out"
t_exit "fs.list granted: 0" 0 run medium --grant "$LS" -- capcall fs.list "$WS"
t_match "fs.list shows the file" "$(cat "$T_TMP/out")" "^a.txt$"
t_exit "fs.stat --json: 0" 0 run medium --grant "$RD" -- capcall --json fs.stat "$WS/a.txt"
t_match "fs.stat --json: size 6" "$(cat "$T_TMP/out")" '"type":"file","size":6,'
echo written | run medium --grant "$WR" -- capcall fs.write "$WS/out/w.txt" >"$T_TMP/out" 2>"$T_TMP/err"
t_is "fs.write from stdin: exit 0" "$?" 0
t_is "fs.write: the file holds stdin" "$(cat "$WS/out/w.txt" 2>/dev/null)" "written"
echo more | run medium --grant "$WR" -- capcall fs.write --append "$WS/out/w.txt" >/dev/null 2>&1
t_is "fs.write --append" "$(cat "$WS/out/w.txt" 2>/dev/null)" "$(printf 'written\nmore')"
head -c 300000 /dev/urandom >"$T_TMP/big"
cat "$T_TMP/big" | run medium --grant "$WR" -- capcall fs.write "$WS/out/big" >/dev/null 2>&1
t_ok "fs.write of 300 KB from a pipe is byte-exact" cmp "$T_TMP/big" "$WS/out/big"
# stdin a regular file larger than a pipe buffer: the launcher must not
# block its loop copying it in before the agent's request is served.
timeout 30 "$CB" run --tier medium --workspace "$WS" --grant "$WR" -- \
	capcall fs.write "$WS/out/big2" <"$T_TMP/big" >/dev/null 2>&1
t_ok "fs.write of 300 KB from a regular-file stdin is byte-exact" cmp "$T_TMP/big" "$WS/out/big2"
run medium --grant "$RD" -- capcall fs.read "$WS/out/big" >"$T_TMP/big.out" 2>/dev/null
t_ok "fs.read of 300 KB is byte-exact" cmp "$T_TMP/big" "$T_TMP/big.out"
echo no | run medium --grant "$WR" -- capcall fs.write "$WS/a.txt" >/dev/null 2>&1
t_is "fs.write outside the grant: 77" "$?" 77
t_is "fs.write outside the grant: file untouched" "$(cat "$WS/a.txt")" "hello"
t_exit "tokens lists the grants" 0 run medium --grant "$RD" --grant "$WR" -- capcall tokens
t_match "tokens: both capabilities" "$(cat "$T_TMP/out" | tr '\n' ' ')" "fs.read:$WS/\*\*.*fs.write:$WS/out/\*\*"
t_exit "a forged --token: 77" 77 run medium -- capcall --token cap1.AAAA.BBBB ping
t_exit "request with --approve deny: 77" 77 run medium --approve deny -- \
	capcall request "fs.write:$WS/out/x" --ttl 60 --reason "a test"
t_match "request denied: the reason" "$(cat "$T_TMP/err")" "^capcall: denied: .+"
t_exit "request without --reason: 64" 64 run medium -- capcall request "fs.write:$WS/out/x"
t_exit "capcall outside a sandbox: 69" 69 env -u CAPBROKER_FD "$CB_BIN/capcall" ping

# -- proc.exec (high tier: every tool may be granted) ------------------------------
t_exit "proc.exec: the program's status" 3 run high --grant "proc.exec:/usr/bin/sh" -- \
	capcall proc.exec -- /usr/bin/sh -c 'echo out; echo err >&2; exit 3'
t_is "proc.exec: stdout relayed" "$(cat "$T_TMP/out")" "out"
t_is "proc.exec: stderr relayed" "$(cat "$T_TMP/err")" "err"
t_exit "proc.exec not granted: 77" 77 run high -- capcall proc.exec -- /usr/bin/id

# -- net.connect to a local echo server -----------------------------------------------
"$PYTHON" - "$T_TMP/port" <<'EOF' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
s.settimeout(60)
try:
    for _ in range(2):
        c, _ = s.accept()
        with c:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
except OSError:
    pass
EOF
echo_pid=$!
for _ in $(seq 50); do [ -s "$T_TMP/port" ] && break; sleep 0.1; done
port=$(cat "$T_TMP/port" 2>/dev/null)
head -c 200000 /dev/urandom >"$T_TMP/net.in"
cat "$T_TMP/net.in" | run high --grant "net.connect:127.0.0.1:$port" -- \
	capcall net.connect "127.0.0.1:$port" >"$T_TMP/net.out" 2>"$T_TMP/err"
t_is "net.connect granted: exit 0" "$?" 0
t_ok "net.connect relays both ways byte-exact" cmp "$T_TMP/net.in" "$T_TMP/net.out"
t_exit "net.connect to another port: 77" 77 run high --grant "net.connect:127.0.0.1:$port" -- \
	capcall net.connect "127.0.0.1:$((port == 65535 ? 1 : port + 1))"

# -- the C library: a small agent linked with it --------------------------------------
LIBS_DIR="${CB_BUILD:-$CB_TOP/build}"
mkdir -p "$T_TMP/cbin"
if [ -f "$LIBS_DIR/libclient.a" ] && cc -std=c17 -D_GNU_SOURCE -I"$CB_TOP" -o "$T_TMP/cbin/cc_agent" \
	"$CB_TOP/tests/integration/cc_agent.c" "$LIBS_DIR/libclient.a" "$LIBS_DIR/libwire.a" \
	"$LIBS_DIR/libcaps.a" "$LIBS_DIR/libcommon.a" $(pkg-config --libs msgpack libsodium) 2>"$T_TMP/cc.err"; then
	chmod -R a+rX "$T_TMP/cbin"
	t_exit "C agent: fs.read granted" 0 run high --ro-bind "$T_TMP/cbin:/opt/cbin" --grant "$RD" -- \
		/opt/cbin/cc_agent "$WS/a.txt"
	t_is "C agent: tokens and content" "$(cat "$T_TMP/out")" "$(printf 'tokens: 1\nhello')"
	t_exit "C agent: fs.read denied" 77 run high --ro-bind "$T_TMP/cbin:/opt/cbin" --grant "$RD" -- \
		/opt/cbin/cc_agent /etc/passwd
	t_match "C agent: the broker's name and reason" "$(cat "$T_TMP/err")" "^not-covered: .+"
else
	t_skip "C agent in a sandbox" "cannot build it: $(head -n 1 "$T_TMP/cc.err")"
fi

# -- the Python module ----------------------------------------------------------------------
cat >"$WS/agent.py" <<EOF
import capbroker, os, sys
cb = capbroker.Client()
cb.ping()
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("fork: allowed")
except OSError:
    print("fork: blocked")
try:
    cb.read_file("/etc/hostname")
except capbroker.Denied as e:
    print("denied:", e.name)
if len(sys.argv) > 1:
    print("read:", cb.read_file("$WS/a.txt").decode().strip())
    cb.write_file("$WS/out/py.txt", "from python\n")
    print("list:", sorted(e.name for e in cb.list_dir("$WS")))
    print("stat:", cb.stat("$WS/a.txt").size)
    with cb.connect("127.0.0.1", $port) as s:
        s.sendall(b"ping")
        s.shutdown(1)
        print("net:", s.recv(10).decode())
EOF
chmod 0644 "$WS/agent.py"
t_exit "Python agent in the low tier" 0 run low -- /usr/bin/python3 -c "$(cat "$WS/agent.py")"
t_match "low tier: the agent may not fork" "$(cat "$T_TMP/out")" "fork: blocked"
t_match "low tier: the client still talks to the broker (Denied raised)" "$(cat "$T_TMP/out")" "denied: [a-z-]+"
t_exit "Python agent in the high tier" 0 run high --grant "$RD" --grant "$LS" --grant "$WR" \
	--grant "net.connect:127.0.0.1:$port" -- /usr/bin/python3 -c "$(cat "$WS/agent.py")" full
t_match "Python: read_file" "$(cat "$T_TMP/out")" "read: hello"
t_match "Python: list_dir" "$(cat "$T_TMP/out")" "list: \[.*'a.txt'.*\]"
t_match "Python: stat" "$(cat "$T_TMP/out")" "stat: 6"
t_match "Python: connect" "$(cat "$T_TMP/out")" "net: ping"
t_is "Python: write_file" "$(cat "$WS/out/py.txt" 2>/dev/null)" "from python"
kill "$echo_pid" 2>/dev/null
wait "$echo_pid" 2>/dev/null

t_done
