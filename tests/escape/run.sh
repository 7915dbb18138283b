#!/usr/bin/env bash
# tests/escape/run.sh - the escape suite: run every attempt as the agent of a
# sandbox and check that it failed the way it should.  Prints TAP.
#
# Each tests/escape/NAME.c (built to $CB_BUILD/escape/NAME) declares in its
# leading comment:
#   TIER: low|medium|high   the tier to run it in (default low)
#   EXIT: N                 the sandbox's expected exit status (default 0:
#                           the attempt itself saw every try fail properly)
#   OPTS: ...               extra sandbox options (limits)
#   ARGS: ...               arguments; @STATEKEY@ @ABSTRACT@ @HOSTPIDS@
#                           @AGENTUID@ are filled in here
#   PRE: ARG                run once with ARG first (persistence attempts)
# Plus positive controls written here (python3, the socketpair from Python,
# a script agent, a setup failure that must be exit 125).
#
# As root the suite runs twice: as root (the agent becomes nobody) and as an
# ordinary unprivileged uid (the agent keeps that uid).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${CB_BUILD:=$top/build}" "${CB_BIN:=$top/bin}"
PYTHON3=/usr/bin/python3
TEST_UID=4242		# the ordinary user of the second pass

n=0
failed=0
work=$(mktemp -d "${TMPDIR:-/tmp}/cbescape.XXXXXX") || exit 1
listener=
cleanup() {
	[ -n "$listener" ] && kill "$listener" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# Everything the sandboxed side needs, readable by the unprivileged pass.
chmod 0755 "$work"
mkdir -m 0755 "$work/bin"
for f in "$CB_BUILD"/escape/*; do
	name=$(basename "$f")
	[ "$name" = launch ] && continue
	[ -f "$here/$name.c" ] || continue
	install -m 0755 "$f" "$work/bin/$name"
done
install -m 0755 "$CB_BUILD/escape/launch" "$work/launch"
install -m 0755 "$CB_BIN/capbroker-stub" "$work/capbroker-stub"
printf '#!%s\nimport sys\nprint("script", sys.argv[1:])\n' "$PYTHON3" >"$work/bin/script.py"
chmod 0755 "$work/bin/script.py"
# A stand-in for the broker's state directory, with a "key" in it.
mkdir -m 0700 "$work/state"
echo "secret signing key" >"$work/state/signing.key"
# A host abstract unix socket the sandbox must not reach.
abstract="capbroker-escape-$$"
"$PYTHON3" -c 'import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.bind("\0"+sys.argv[1]); s.listen(8); time.sleep(600)' \
	"$abstract" &
listener=$!

AS_USER=()
# sandbox_run TIER [SANDBOX OPTIONS...] -- CMD [ARGS...]
# The one place that starts a sandbox.  With the broker it becomes:
#   capbroker run --tier "$tier" --id escape --ro-bind "$work/bin:/escape" "$@"
sandbox_run() {
	local tier=$1
	shift
	"${AS_USER[@]}" env -i CAPBROKER_STUB="$work/capbroker-stub" \
		"$work/launch" --tier "$tier" --id escape --ro-bind "$work/bin" /escape "$@"
}

report() { # RESULT(0/1) TITLE OUTPUTFILE
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
		sed 's/^/#   /' "$3" | head -n 20
	fi
}

meta() { # FILE KEY DEFAULT
	local v
	v=$(sed -n "s/^ \* $2: //p" "$1" | head -n 1)
	echo "${v:-$3}"
}

run_attempt() { # PASS NAME
	local pass=$1 name=$2 src="$here/$2.c" tier want opts args pre rc title out
	tier=$(meta "$src" TIER low)
	want=$(meta "$src" EXIT 0)
	opts=$(meta "$src" OPTS "")
	args=$(meta "$src" ARGS "")
	pre=$(meta "$src" PRE "")
	title=$(sed -n '2s/^ \* [a-z0-9_]*\.c - escape attempt: //p' "$src")
	args=${args//@STATEKEY@/$work/state/signing.key}
	args=${args//@ABSTRACT@/$abstract}
	args=${args//@HOSTPIDS@/$$ $listener $PPID}
	args=${args//@AGENTUID@/$agent_uid}
	out="$work/out.$name"
	: >"$out"
	if [ -n "$pre" ]; then
		# shellcheck disable=SC2086
		if ! sandbox_run "$tier" $opts -- "/escape/$name" "$pre" >"$out" 2>&1 </dev/null; then
			echo "the first run ($pre) failed" >>"$out"
			report 1 "[$pass] $tier $name: $(sed -n '2s/^ \* [a-z0-9_]*\.c - escape attempt: //p' "$src")" "$out"
			return
		fi
	fi
	# shellcheck disable=SC2086
	sandbox_run "$tier" $opts -- "/escape/$name" $args >>"$out" 2>&1 </dev/null
	rc=$?
	if [ "$rc" != "$want" ]; then
		echo "exit status $rc, expected $want" >>"$out"
	fi
	report "$([ "$rc" = "$want" ] && echo 0 || echo 1)" "[$pass] $tier $name: $title" "$out"
}

positive() { # PASS
	local pass=$1 out="$work/out.pos" rc
	sandbox_run low -- "$PYTHON3" -c 'print(sum(i * i for i in range(10)))' >"$out" 2>&1
	rc=$?
	report "$([ $rc = 0 ] && [ "$(cat "$out")" = 285 ] && echo 0 || echo 1)" \
		"[$pass] low positive: python3 starts and computes" "$out"

	sandbox_run low -- "$PYTHON3" -c 'import os, socket
s = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
s.send(b"hi"); print(s.recv(64).decode())' >"$out" 2>&1
	rc=$?
	report "$([ $rc = 0 ] && [ "$(cat "$out")" = echo:hi ] && echo 0 || echo 1)" \
		"[$pass] low positive: python3 talks to the launcher over CAPBROKER_FD" "$out"

	sandbox_run low -- /escape/script.py a b >"$out" 2>&1
	rc=$?
	report "$([ $rc = 0 ] && [ "$(cat "$out")" = "script ['a', 'b']" ] && echo 0 || echo 1)" \
		"[$pass] low positive: a #! script runs as the agent" "$out"

	sandbox_run medium -- /bin/sh -c '/usr/bin/id -u; echo "rc=$?"' >"$out" 2>&1
	rc=$?
	report "$([ $rc = 0 ] && grep -q 'Permission denied' "$out" && grep -q 'rc=126' "$out" && echo 0 || echo 1)" \
		"[$pass] medium: a program not on the exec list is refused (EACCES)" "$out"

	sandbox_run medium --exec-allow /usr/bin/id -- /bin/sh -c '/usr/bin/id -u; /usr/bin/env; echo "rc=$?"' >"$out" 2>&1
	rc=$?
	report "$([ $rc = 0 ] && grep -qx "$agent_uid" "$out" && grep -q 'rc=126' "$out" && echo 0 || echo 1)" \
		"[$pass] medium: a listed program runs (fork + exec), others do not" "$out"

	sandbox_run high -- /bin/sh -c '/usr/bin/id -u >/dev/null && echo high' >"$out" 2>&1
	rc=$?
	report "$([ $rc = 0 ] && [ "$(cat "$out")" = high ] && echo 0 || echo 1)" \
		"[$pass] high: forks and execs what it sees" "$out"

	sandbox_run low --ro-bind /nonexistent/dir /x -- /bin/true >"$out" 2>&1
	rc=$?
	report "$([ $rc = 125 ] && grep -q 'bind source /nonexistent/dir' "$out" && echo 0 || echo 1)" \
		"[$pass] fail closed: a bind that cannot be made is exit 125 with a reason" "$out"

	sandbox_run low -- /escape/no-such-agent >"$out" 2>&1
	rc=$?
	report "$([ $rc = 125 ] && echo 0 || echo 1)" \
		"[$pass] fail closed: a missing agent is exit 125" "$out"
}

run_pass() { # PASS
	local f
	for f in "$here"/*.c; do
		name=$(basename "$f" .c)
		[ "$name" = launch ] && continue
		if [ ! -x "$work/bin/$name" ]; then
			n=$((n + 1)); failed=$((failed + 1))
			echo "not ok $n - [$1] $name: not built ($CB_BUILD/escape/$name)"
			continue
		fi
		run_attempt "$1" "$name"
	done
	positive "$1"
}

if [ "$(id -u)" = 0 ]; then
	agent_uid=65534
	run_pass root
	if command -v setpriv >/dev/null; then
		AS_USER=(setpriv "--reuid=$TEST_UID" "--regid=$TEST_UID" --clear-groups --)
		agent_uid=$TEST_UID
	else
		AS_USER=(runuser -u nobody --)
		agent_uid=65534
	fi
	run_pass "uid $agent_uid"
else
	agent_uid=$(id -u)
	run_pass "uid $agent_uid"
fi
echo "1..$n"
[ "$failed" = 0 ]
