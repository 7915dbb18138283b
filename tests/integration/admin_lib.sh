# tests/integration/admin_lib.sh - helpers for the tests that drive a
# `capbroker serve` (capctl, approvals, run --connect), sourced after
# tests/lib.sh.
#
# srv_start STATE [ARGS]   capbroker serve in the background (SRV = its pid),
#                          waits until it answers `capctl status`
# srv_stop / srv_kill9     SIGTERM (clean: final checkpoint) / SIGKILL
# agent_start ID [ARGS]    `capbroker run --connect` of a shell agent that runs
#                          each line sent by agent_do/agent_send, in order
# agent_do ID CMD          run CMD in the agent, wait; AOUT = its output
#                          (stdout+stderr), ARC = its exit status
# agent_send ID CMD        the same without waiting (ASEQ = its number);
#                          agent_wait ID ASEQ [TENTHS] waits for it later
# jget EXPR [ARG...]       read JSON on stdin, print the Python expression
#                          EXPR of it (d is the document; ARGs, values that
#                          must not be pasted into Python source, are
#                          sys.argv[2:])
# pending_rid CAP          the id of the pending request for CAP in the
#                          broker of state $S, waiting up to 10 s for it
# pty_drive ANSWERS CMD... CMD on a new pseudo-terminal (tests/integration/
#                          ptydrive.py), each "Approve?" answered with the
#                          next of the comma-separated ANSWERS; prints what
#                          the terminal showed, then "EXIT n"
# Every process started here is killed at exit.  The agents' FIFO write ends
# stay open in the test's shell (bash cannot mark `exec {fd}>` close-on-exec):
# each broker and agent started here closes them first (adm_nofifos), so none
# holds another agent's stdin open (agent_stop's EOF would never arrive) nor
# passes it on to its sandboxes.
CTL="$CB_BIN/capctl"
CB="$CB_BIN/capbroker"
# The same programs for other users (runuser -u nobody ...).
PUB=$(t_public "$CTL" "$CB")
_adm_pids=()
declare -A AFD ASEQS APID

adm_cleanup() {
	local p
	for p in "${_adm_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	for p in "${_adm_pids[@]}"; do wait "$p" 2>/dev/null; done
	t_cleanup
}
trap adm_cleanup EXIT

# wait_for TENTHS CMD...: retry CMD every 0.1 s (CMD's arguments are
# expanded once: to wait on a count, give a command that counts, at_least)
wait_for() {
	local n=$1; shift
	while [ "$n" -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

# at_least N FILE PATTERN: FILE has at least N lines grep matches PATTERN
# (a basic regular expression).  For wait_for: the audit writer is a thread
# (docs/audit.md), so an operation's line lands a moment after the broker
# answered the agent, later still on a loaded machine; a test that checks
# the log right after an operation waits for the line (bounded) first.
at_least() { [ "$(grep -c -- "$3" "$2" 2>/dev/null)" -ge "$1" ]; }

# adm_nofifos CMD...: exec CMD without the agents' FIFO write ends.
adm_nofifos() {
	local fd
	for fd in "${AFD[@]}"; do
		[ -n "$fd" ] && exec {fd}>&-
	done
	exec "$@"
}

srv_start() {
	local s=$1; shift
	SRV_STATE=$s
	adm_nofifos "$CB" serve --state "$s" "$@" >>"$T_TMP/serve.log" 2>&1 &
	SRV=$!
	_adm_pids+=("$SRV")
	# Up to 30 s (a start on a loaded machine, under a sanitizer, may fsync
	# its way slowly), but no longer than the broker lives: a refused start
	# returns at once.
	local n=300
	while [ "$n" -gt 0 ]; do
		"$CTL" --state "$s" status >/dev/null 2>&1 && return 0
		kill -0 "$SRV" 2>/dev/null || return 1
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}
srv_stop() { kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; }
srv_kill9() { kill -9 "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; }

# The agent's loop: read "N command", run it with stderr on stdout, then
# print a marker with N and the status.  Medium tier: sh may exec capcall.
_AGENT_LOOP='while read -r n x; do eval "$x" 2>&1; r=$?; echo; echo "@@$n rc=$r"; done'

agent_start() {
	local id=$1 fd; shift
	rm -f "$T_TMP/$id.in"
	mkfifo "$T_TMP/$id.in"
	# Emptied here, before the agent's first command is waited for: the
	# redirections below happen in the background job, maybe late (a
	# loaded machine), and an id used again in a test would meanwhile
	# show the last agent's "@@N rc=" markers to agent_wait.
	: >"$T_TMP/$id.out"
	: >"$T_TMP/$id.err"
	adm_nofifos "$CB" run --connect "$SRV_STATE/admin.sock" --id "$id" "$@" -- /bin/sh -c "$_AGENT_LOOP" \
		<"$T_TMP/$id.in" >"$T_TMP/$id.out" 2>"$T_TMP/$id.err" &
	APID[$id]=$!
	_adm_pids+=("$!")
	exec {fd}>"$T_TMP/$id.in"
	AFD[$id]=$fd
	ASEQS[$id]=0
	# ready when it answers a no-op
	agent_do "$id" true
}

agent_send() {
	local id=$1
	ASEQ=$((ASEQS[$id] + 1))
	ASEQS[$id]=$ASEQ
	echo "$ASEQ $2" >&"${AFD[$id]}"
}

# agent_wait ID N [TENTHS]: 0 when command N finished (AOUT, ARC set)
agent_wait() {
	local id=$1 n=$2 t=${3:-200}
	if ! wait_for "$t" grep -q "^@@$n rc=" "$T_TMP/$id.out"; then
		AOUT=$(cat "$T_TMP/$id.out" "$T_TMP/$id.err"); ARC=timeout
		return 1
	fi
	AOUT=$(awk -v n="$n" 'BEGIN { on = (n == 1) }
		/^@@[0-9]+ rc=/ { k = substr($1, 3) + 0; if (k == n) exit; if (k == n - 1) on = 1; next }
		on { print }' "$T_TMP/$id.out")
	ARC=$(sed -n "s/^@@$n rc=//p" "$T_TMP/$id.out")
}

agent_do() { agent_send "$1" "$2"; agent_wait "$1" "$ASEQ" "${3:-200}"; }

agent_stop() {
	local id=$1
	local fd=${AFD[$id]:-}
	[ -n "$fd" ] && exec {fd}>&-
	AFD[$id]=
	wait "${APID[$id]}" 2>/dev/null
	AEXIT=$?
}

jget() { "$PYTHON" -c 'import json, sys
d = json.load(sys.stdin)
print(eval(sys.argv[1]))' "$@"; }

pending_rid() {
	local i r
	for i in $(seq 100); do
		r=$("$CTL" --state "$S" --json pending 2>/dev/null |
			jget '([r["rid"] for r in d if r["cap"] == sys.argv[2]] + [""])[0]' "$1" 2>/dev/null)
		[ -n "$r" ] && { echo "$r"; return 0; }
		sleep 0.1
	done
	return 1
}

pty_drive() { "$PYTHON" "$CB_TOP/tests/integration/ptydrive.py" "$@"; }

# shim_build NAME: tests/integration/NAME.c built into $SHIM, a library the
# test preloads into the broker to reach a rare path (one TAP line).  A
# sanitized broker accepts a library preloaded before its runtime.
shim_build() {
	SHIM="$T_TMP/$1.so"
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
	t_ok "the $1 builds" cc -std=c17 -shared -fPIC -o "$SHIM" "$CB_TOP/tests/integration/$1.c" -ldl
}

# linger_setup AGENT: the set-up of the linger tests (911, 912, 951, 952).
# A workspace $W owned by the agents' uid holding AGENT (a file of
# tests/integration/) as a.py; a TCP peer on 127.0.0.1:$PORT that accepts
# and never reads, with a small receive buffer, so that what an agent
# sends it stays unsent and a close with SO_LINGER waits; and the policy
# $T_TMP/p.conf, whose medium ceiling allows net.connect to 127.0.0.1.
linger_setup() {
	W="$T_TMP/ws"
	mkdir -p "$W"
	cp "$CB_TOP/tests/integration/$1" "$W/a.py"
	chown -R 4248:4248 "$W"
	"$PYTHON" -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])' >"$T_TMP/port" &
	_adm_pids+=("$!")
	wait_for 50 test -s "$T_TMP/port"
	PORT=$(cat "$T_TMP/port")
	cat >"$T_TMP/p.conf" <<EOT
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**", "net.connect:127.0.0.1:*" ]; }; };
EOT
}
