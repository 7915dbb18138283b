#!/usr/bin/env bash
# 25-broker-service.sh - capbroker serve as a service: the systemd units,
# socket activation, readiness and reload notification, SIGHUP reloading the
# policy (new sandboxes only; a bad file keeps the old policy), one broker per
# state directory, stale admin sockets, the journal.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
W="$T_TMP/ws"
mkdir -p "$W" && echo "hello" >"$W/f.txt"

# ---- the units -------------------------------------------------------------
P="$T_TMP/prefix"
t_ok "make install PREFIX=... installs the units" \
	make -s -C "$CB_TOP" install PREFIX="$P" SANITIZE="${CB_SANITIZE:-}"
U="$P/lib/systemd/system"
t_ok "capbroker.service and capbroker.socket are installed" \
	test -f "$U/capbroker.service" -a -f "$U/capbroker.socket"
t_match "the service runs the installed program" "$(grep '^ExecStart=' "$U/capbroker.service")" \
	"^ExecStart=$P/bin/capbroker serve "
if command -v systemd-analyze >/dev/null; then
	# verify prints what it ignores (unknown keys, bad values) but exits 0
	# for those: nothing printed is the bar.
	out=$(cd "$U" && systemd-analyze verify --man=no "$U/capbroker.service" "$U/capbroker.socket" 2>&1)
	t_is "systemd-analyze verify: the units are clean" "$?:$out" "0:"
else
	t_skip "systemd-analyze verify" "systemd-analyze is not installed"
fi

# ---- readiness, reload, stop: sd_notify -------------------------------------
# A stand-in for the service manager's notification socket.
notify_listen() { # SOCKET LOG
	"$PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1])
f = open(sys.argv[2], "ab", 0)
while True:
    f.write(s.recv(65536).replace(b"\n", b" ") + b"\n")' "$1" "$2" &
	_adm_pids+=("$!")
	wait_for 50 test -S "$1"
}
notify_listen "$T_TMP/notify.sock" "$T_TMP/notify.log"
cat >"$T_TMP/pol.conf" <<'EOT'
version = 1;
tiers = { alpha = { extends = "medium"; }; };
EOT
S="$T_TMP/state"
NOTIFY_SOCKET="$T_TMP/notify.sock" srv_start "$S" --policy "$T_TMP/pol.conf"
t_ok "Type=notify: READY=1 with a status once the admin socket is up" \
	wait_for 50 grep -q "^READY=1 STATUS=serving; admin socket $S/admin.sock" "$T_TMP/notify.log"

# ---- SIGHUP: the policy again, for new sandboxes only -------------------------
agent_start a1 --tier alpha --workspace "$W" --grant "fs.read:$W/**"
agent_do a1 "capcall fs.read $W/f.txt"
t_is "an agent runs in tier alpha (the first policy)" "$ARC:$AOUT" "0:hello"
cat >"$T_TMP/pol.conf" <<'EOT'
version = 1;
tiers = { beta = { extends = "medium"; }; };
EOT
kill -HUP "$SRV"
t_ok "SIGHUP: the broker says it reloaded" wait_for 50 grep -q "reloaded $T_TMP/pol.conf" "$T_TMP/serve.log"
t_ok "... and told the service manager (RELOADING=1, then READY=1)" \
	wait_for 50 sh -c "grep -n '^RELOADING=1 MONOTONIC_USEC=' '$T_TMP/notify.log' | head -n 1 | grep -q '^2:' &&
		sed -n 3p '$T_TMP/notify.log' | grep -q '^READY=1 STATUS=serving; policy reloaded'"
t_exit "a new sandbox uses the new policy: tier alpha is gone (64, an unknown tier)" 64 \
	"$CB" run --connect "$S/admin.sock" --tier alpha --workspace "$W" -- /bin/true
t_ok "... tier beta is there" "$CB" run --connect "$S/admin.sock" --tier beta --workspace "$W" -- /bin/true
agent_do a1 "capcall fs.read $W/f.txt"
t_is "the running agent keeps the policy it started under" "$ARC:$AOUT" "0:hello"
t_match "capctl sandboxes still shows it in tier alpha" "$("$CTL" --state "$S" sandboxes)" "a1 .*alpha"
t_match "the audit log records the reload (actor signal:HUP, generations)" \
	"$(grep '"op":"policy.reload"' "$S/audit.jsonl")" \
	'"actor":"signal:HUP","detail":"policy generation 2 for new sandboxes; 1 running sandbox\(es\) keep generation 1"'
printf 'version = 1;\ntiers = { gamma = { extends = ; }; };\n' >"$T_TMP/pol.conf"
kill -HUP "$SRV"
t_ok "a bad policy on reload: the broker says why (file:line) and keeps the old one" \
	wait_for 50 grep -q "policy $T_TMP/pol.conf is not valid; keeping the policy in force: $T_TMP/pol.conf:2:" \
	"$T_TMP/serve.log"
t_ok "... new sandboxes still get the policy in force (tier beta)" \
	"$CB" run --connect "$S/admin.sock" --tier beta --workspace "$W" -- /bin/true
t_match "... and the audit log records the refused reload" \
	"$(grep '"op":"policy.reload"' "$S/audit.jsonl" | tail -n 1)" '"decision":"deny".*"actor":"signal:HUP"'
agent_stop a1

# ---- one broker per state directory; the admin socket ------------------------
out=$("$CB" serve --state "$S" 2>&1); rc=$?
t_is "a second serve on a live state directory: 125" "$rc" 125
t_match "... saying a running broker has it, and which" "$out" \
	"state directory $S is in use by a running broker \(pid $SRV\)"
out=$("$CB" serve --state "$T_TMP/state-b" --socket "$S/admin.sock" 2>&1); rc=$?
t_is "a second serve on a live broker's admin socket: 125" "$rc" 125
t_match "... saying another broker serves it" "$out" "another broker is already serving the admin socket $S/admin.sock"
t_ok "... and the first broker still answers" "$CTL" --state "$S" status
srv_stop
t_ok "Type=notify: STOPPING=1 on SIGTERM" grep -q '^STOPPING=1' "$T_TMP/notify.log"
t_ok "a broker that stops removes its admin socket" test ! -e "$S/admin.sock"
"$CB" run --state "$S" --workspace "$W" -- /bin/true
t_ok "so does an exited capbroker run --state" test ! -e "$S/admin.sock"

srv_start "$S"
srv_kill9
t_ok "a killed broker leaves a stale admin socket" test -S "$S/admin.sock"
out=$("$CTL" --state "$S" status 2>&1); rc=$?
t_is "capctl on a stale socket: 69 (unavailable)" "$rc" 69
t_match "... saying the socket is stale, not 'Connection refused'" "$out" \
	"^capctl: no broker is listening at $S/admin.sock: the socket is stale"
out=$("$CB" run --connect "$S/admin.sock" -- /bin/true 2>&1)
t_match "run --connect says the same" "$out" "no broker is listening at $S/admin.sock: the socket is stale"
: >"$T_TMP/serve.log"
srv_start "$S"
t_match "the next serve removes the stale socket and says so" "$(cat "$T_TMP/serve.log")" \
	"removed a stale admin socket $S/admin.sock \(no broker was listening on it\)"
srv_stop

# ---- socket activation ---------------------------------------------------------
# LISTEN_FDS/LISTEN_PID as systemd sets them: the listening socket at fd 3.
# Only ever called in a subshell (& or $(...)): it execs, so that $! is the
# broker itself and `kill $!` leaves nothing behind.
activate() { # SOCKTYPE PATH ARGS...
	exec "$PYTHON" -c 'import os, socket, sys
typ = {"seqpacket": socket.SOCK_SEQPACKET, "stream": socket.SOCK_STREAM}[sys.argv[1]]
s = socket.socket(socket.AF_UNIX, typ); s.bind(sys.argv[2]); s.listen(16)
os.dup2(s.fileno(), 3); os.set_inheritable(3, True)
env = dict(os.environ, LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
os.execve(sys.argv[3], sys.argv[3:], env)' "$@"
}
activate seqpacket "$T_TMP/act.sock" "$CB" serve --state "$T_TMP/state-act" >"$T_TMP/act.log" 2>&1 &
ACT=$!
_adm_pids+=("$ACT")
t_ok "socket activation: capctl reaches the broker on the inherited socket" \
	wait_for 100 "$CTL" --socket "$T_TMP/act.sock" status
t_match "... which says where it came from" "$(cat "$T_TMP/act.log")" \
	"serving; admin socket $T_TMP/act.sock \(from systemd\)"
t_ok "... and binds no socket of its own" test ! -e "$T_TMP/state-act/admin.sock"
kill "$ACT"; wait "$ACT" 2>/dev/null
t_ok "... nor removes the one systemd owns" test -S "$T_TMP/act.sock"
out=$(activate stream "$T_TMP/act2.sock" "$CB" serve --state "$T_TMP/state-act2" 2>&1); rc=$?
t_is "an inherited socket of the wrong kind: 125" "$rc" 125
t_match "... saying the unit must use ListenSequentialPacket=" "$out" "ListenSequentialPacket="
if command -v systemd-socket-activate >/dev/null; then
	systemd-socket-activate --seqpacket -l "$T_TMP/sa.sock" \
		"$CB" serve --state "$T_TMP/state-sa" >"$T_TMP/sa.log" 2>&1 &
	SA=$!
	_adm_pids+=("$SA")
	wait_for 50 test -S "$T_TMP/sa.sock"
	t_ok "systemd-socket-activate: the first capctl starts the broker and is served" \
		wait_for 100 "$CTL" --socket "$T_TMP/sa.sock" status
	kill "$SA"; wait "$SA" 2>/dev/null
else
	t_skip "systemd-socket-activate" "not installed (package systemd)"
fi

# ---- the journal ---------------------------------------------------------------
# A private mount namespace with our own listener at journald's socket path.
if [ "$(id -u)" = 0 ]; then ns=(unshare --mount --propagation private); else ns=(unshare --map-root-user --mount); fi
"${ns[@]}" bash -c '
	mount -t tmpfs tmpfs /run || exit 1
	mkdir -p /run/systemd/journal
	"$1" -c "import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1])
f = open(sys.argv[2], \"ab\", 0)
while True:
    f.write(s.recv(65536).replace(b\"\\n\", b\" \") + b\"\\n\")" /run/systemd/journal/socket "$2/journal.log" &
	j=$!
	for i in $(seq 50); do [ -S /run/systemd/journal/socket ] && break; sleep 0.1; done
	# stderr is "the journal stream": the entry alone, no stderr line
	: >"$2/jstderr.log"
	JOURNAL_STREAM=$(stat -c %d:%i "$2/jstderr.log") "$3" serve --state "$2/state-j" 2>>"$2/jstderr.log" &
	s=$!
	for i in $(seq 100); do grep -q serving "$2/journal.log" 2>/dev/null && break; sleep 0.1; done
	kill -HUP $s; sleep 0.3; kill $s; wait $s; kill $j
' _ "$PYTHON" "$T_TMP" "$CB" </dev/null >/dev/null 2>&1
touch "$T_TMP/jstderr.log" "$T_TMP/journal.log"
t_match "the journal gets each message with its priority and identifier" \
	"$(grep 'MESSAGE=serving; admin socket' "$T_TMP/journal.log")" \
	"PRIORITY=6 SYSLOG_IDENTIFIER=capbroker CAPBROKER_STATE=$T_TMP/state-j"
t_match "... the reload refused for want of a policy file, at priority 3" \
	"$(grep 'MESSAGE=no --policy file' "$T_TMP/journal.log")" "PRIORITY=3 "
t_is "... and nothing twice when stderr is the journal stream" "$(cat "$T_TMP/jstderr.log")" ""
t_done
