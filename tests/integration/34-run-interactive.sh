#!/usr/bin/env bash
# 34-run-interactive.sh - `capbroker run` started from a terminal (a real
# pseudo-terminal driven by Python's pty module): the agent gets a pty of
# its own and its stdin, so an interactive agent works (a shell reading
# from the user); ^C reaches the agent and run exits 130; an approval
# prompt takes one answer line between the agent's output and never its
# input; the host terminal's mode comes back; the agent cannot inject
# input (TIOCSTI) nor reach the host terminal.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"
W="$T_TMP/ws"; mkdir -p "$W"

cat >"$T_TMP/drive.py" <<'PY'
# drive.py STEPS CMD...: run CMD on a new pseudo-terminal (as its
# controlling terminal); STEPS is JSON [[regex, text], ...]: wait until the
# output so far matches regex, then type text.  Prints the output, then
# "EXIT n".
import json, os, pty, re, select, sys, time
steps = json.loads(sys.argv[1])
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
out, deadline = b"", time.time() + 60
while time.time() < deadline:
    if steps and re.search(steps[0][0].encode(), out, re.S):
        time.sleep(0.2)
        os.write(fd, steps.pop(0)[1].encode())
        continue
    r, _, _ = select.select([fd], [], [], 0.1)
    if not r:
        continue
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    out += data
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out.replace(b"\r", b""))
print("\nEXIT %d" % os.waitstatus_to_exitcode(status))
PY
# drive STEPS CMD...: TOUT the terminal's text, TEXIT the exit status
drive() {
	local steps=$1; shift
	"$PYTHON" "$T_TMP/drive.py" "$steps" "$@" >"$T_TMP/pty.out" 2>&1
	TOUT=$(cat "$T_TMP/pty.out")
	TEXIT=$(sed -n 's/^EXIT //p' "$T_TMP/pty.out" | tail -n 1)
}

# -- an interactive agent -----------------------------------------------------------------------
drive '[["READY", "hello there\n"]]' "$CB" run --tier medium --workspace "$W" --approve deny -- \
	/bin/sh -c 'for f in 0 1 2; do [ -t $f ] && printf "tty%s " $f; done; echo READY; read -r l; echo "got:$l"'
t_match "the agent's stdin, stdout and stderr are a terminal" "$TOUT" "tty0 tty1 tty2 READY"
t_match "... and it reads what the user types" "$TOUT" "got:hello there"
t_is "... then exits 0" "$TEXIT" 0

drive '[["\\$ $", "echo $((6*7)) $TERM\n"], ["42 xterm.*\\$ $", "exit 3\n"]]' \
	"$CB" run --tier high --approve deny --setenv PS1 '$ ' -- /bin/sh -i
t_match "an interactive shell works in it" "$TOUT" "42 xterm-256color"
t_is "... and its exit status is run's" "$TEXIT" 3

# -- ^C -------------------------------------------------------------------------------------------------
drive '[["ready", "\u0003"]]' "$CB" run --tier medium --workspace "$W" --approve deny -- \
	python3 -c 'import time; print("ready", flush=True); time.sleep(30); print("not interrupted")'
t_is "^C interrupts the agent: run exits 130" "$TEXIT" 130
t_ok "... before it finished" sh -c "! grep -q 'not interrupted' '$T_TMP/pty.out'"

# -- the terminal's mode is restored ---------------------------------------------------------------
drive '[]' /bin/sh -c 'a=$(stty -g); "$0" run --approve deny -- /bin/true; b=$(stty -g); [ "$a" = "$b" ] && echo MODE-KEPT' "$CB"
t_match "the terminal's mode is the same after run" "$TOUT" "MODE-KEPT"

# -- approval prompts and the agent's input ------------------------------------------------------
drive '[["Approve\\?", "y\n"], ["rc=", "for the agent\n"]]' \
	"$CB" run --tier medium --workspace "$W" -- /bin/sh -c \
	'capcall request fs.read:/etc/hostname --ttl 5 --reason test >/dev/null; echo "rc=$?"; read -r l; echo "after:$l"'
t_match "--approve tty (the default on a terminal) asks between the agent's output" "$TOUT" "Approve\?"
t_match "... the answer approves" "$TOUT" "rc=0"
t_match "... and the next line is the agent's, not the prompt's" "$TOUT" "after:for the agent"
t_ok "... the answer never reached the agent" sh -c "! grep -q 'after:y' '$T_TMP/pty.out'"

# -- no way to the host terminal ------------------------------------------------------------------------
drive '[]' "$CB" run --tier medium --workspace "$W" --approve deny -- python3 -c '
import fcntl, os, termios
for fd in (0, 1, 2):
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
        print("INJECTED-" "%d" % fd)
    except OSError as e:
        print("tiocsti %d refused: %s" % (fd, os.strerror(e.errno)))
try:
    os.open("/dev/tty", os.O_RDWR)
    print("OPENED-" "DEV-TTY")
except OSError as e:
    print("no /dev/tty: %s" % os.strerror(e.errno))
print("sid", os.getsid(0) == os.getpid())
'
t_is "TIOCSTI is refused on every stdio descriptor" "$(grep -c 'tiocsti . refused: Operation not permitted' "$T_TMP/pty.out")" 3
t_ok "... nothing was injected" sh -c "! grep -q INJECTED '$T_TMP/pty.out'"
t_ok "the agent cannot open the host's /dev/tty" sh -c "! grep -q OPENED-DEV-TTY '$T_TMP/pty.out'"
t_match "... and it leads a session of its own" "$TOUT" "sid True"

# -- run --connect: the daemon's sandbox gets a pty too -------------------------------------------
"$CB" serve --state "$T_TMP/srv" >"$T_TMP/serve.log" 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; t_cleanup' EXIT
for i in $(seq 50); do [ -S "$T_TMP/srv/admin.sock" ] && break; sleep 0.1; done
drive '[["READY", "via the daemon\n"]]' "$CB" run --connect "$T_TMP/srv/admin.sock" --tier medium \
	--workspace "$W" -- /bin/sh -c '[ -t 0 ] && [ -t 1 ] && echo TTY; echo READY; read -r l; echo "got:$l"; exit 4'
t_match "run --connect on a terminal: the agent has a pty" "$TOUT" "TTY"
t_match "... and reads what the user types" "$TOUT" "got:via the daemon"
t_is "... its status is run's" "$TEXIT" 4
drive '[]' /bin/sh -c 'a=$(stty -g); "$0" run --connect "$1" -- /bin/true; b=$(stty -g); [ "$a" = "$b" ] && echo MODE-KEPT' \
	"$CB" "$T_TMP/srv/admin.sock"
t_match "... the terminal's mode comes back" "$TOUT" "MODE-KEPT"

# -- not a terminal both ways: plain pipes ------------------------------------------------------
drive '[]' /bin/sh -c '"$0" run --approve deny -- /bin/sh -c "[ -t 1 ] && echo OUT-TTY; [ -t 0 ] && echo IN-TTY; echo done" | cat' "$CB"
t_match "with stdout piped, the agent gets pipes" "$TOUT" "done"
t_ok "... no terminal for its stdout" sh -c "! grep -q OUT-TTY '$T_TMP/pty.out'"
t_ok "... nor its stdin" sh -c "! grep -q IN-TTY '$T_TMP/pty.out'"
t_done
