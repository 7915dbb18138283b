#!/usr/bin/env bash
# tests/escape/run.sh - the escape suite: run every attempt as the agent of
# a real `capbroker run` and check that it failed the way it should.
# Prints TAP.  Trust domain: the test harness (host side); the attempts it
# starts are the untrusted agent.
#
# Each tests/escape/NAME.c (built to $CB_BUILD/escape/NAME) or NAME.py (a
# Python agent: the broker protocol is easier to speak with msgpack) declares
# in its leading comment (" * KEY: " in C, "# KEY: " in Python):
#   TIER: low|medium|high   the tier to run it in (default low)
#   EXIT: N                 the expected exit status of `capbroker run`
#                           (default 0: the attempt itself saw every try
#                           fail properly)
#   OPTS: ...               sandbox options, in the vocabulary sandbox_run
#                           translates (limits, exec list, binds, --timeout,
#                           --grant, --state)
#   ARGS: ...               arguments; @STATEKEY@ @STATEDIR@ @STATEKID@ @ABSTRACT@
#                           @HOSTPIDS@ @AGENTUID@ @HOSTPORT@ (a host service
#                           on 0.0.0.0) @HOSTADDRS@ (the host's global
#                           addresses, comma-separated) @PATHS@ (a host tree
#                           with symlinks out of a workspace, see
#                           prime_paths) are filled in here
#   PRE: ARG                run once with ARG first (persistence attempts)
# Plus positive controls written here (python3, the broker protocol from
# Python, a script agent, the medium exec list, policy limits, setup
# failures that must be exit 125).
#
# CB_ESCAPE_ONLY=GLOB runs only the attempts whose name matches (and the
# controls); CB_ESCAPE_VERBOSE=1 shows every attempt's output.
#
# As root the suite runs twice: as root ($CB_BIN/capbroker; the agent
# becomes nobody) and as an ordinary unprivileged uid, which runs its own
# copy of capbroker, capbroker-stub and capcall (the agent keeps that uid).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
: "${CB_BUILD:=$top/build}" "${CB_BIN:=$top/bin}"
PYTHON3=/usr/bin/python3
TEST_UID=4242		# the ordinary user of the second pass

n=0
failed=0
started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/cbescape.XXXXXX") || exit 1
listener=
tcplistener=
cleanup() {
	[ -n "$listener" ] && kill "$listener" 2>/dev/null
	[ -n "$tcplistener" ] && kill "$tcplistener" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# Everything the sandboxed side needs, readable by the unprivileged pass.
chmod 0755 "$work"
mkdir -m 0755 "$work/bin" "$work/bin-exe" "$work/policies"
for f in "$CB_BUILD"/escape/*; do
	name=$(basename "$f")
	[ "$name" = launch ] && continue	# used by tests/integration/20-sandbox.sh
	[ -f "$here/$name.c" ] || continue
	install -m 0755 "$f" "$work/bin/$name"
done
# The unprivileged pass runs the product from here: capbroker finds the stub
# and capcall next to its own executable.
for p in capbroker capbroker-stub capcall; do
	if [ ! -x "$CB_BIN/$p" ]; then
		echo "Bail out! $CB_BIN/$p is not built"
		exit 1
	fi
	install -m 0755 "$CB_BIN/$p" "$work/bin-exe/$p"
done
install -m 0755 "$here"/*.py "$work/bin/"
printf '#!%s\nimport sys\nprint("script", sys.argv[1:])\n' "$PYTHON3" >"$work/bin/script.py"
chmod 0755 "$work/bin/script.py"
# A host abstract unix socket the sandbox must not reach.
abstract="capbroker-escape-$$"
"$PYTHON3" -c 'import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.bind("\0"+sys.argv[1]); s.listen(8); time.sleep(600)' \
	"$abstract" &
listener=$!
# A host service bound to 0.0.0.0 (an ephemeral port; it accepts and closes
# every connection), and the host's own global addresses, for
# net_host_addrs: net.connect:*:PORT must reach the service through none of
# them; net_connect_* reach it through a token for 127.0.0.1:PORT.
"$PYTHON3" -c 'import socket,sys,time
s=socket.socket(); s.bind(("0.0.0.0", 0)); s.listen(64)
open(sys.argv[1], "w").write("%d\n" % s.getsockname()[1])
while True: s.accept()[0].close()' "$work/hostport" &
tcplistener=$!
for _ in $(seq 100); do [ -s "$work/hostport" ] && break; sleep 0.05; done
hostport=$(cat "$work/hostport" 2>/dev/null)
hostaddrs=$(ip -o addr show scope global 2>/dev/null | awk '{ sub("/.*", "", $4); print $4 }' | paste -sd, -)

AS_USER=()		# how a pass runs capbroker (empty: as ourselves)
CB=			# the capbroker a pass runs
statedir=		# a pass's real broker state (keys), see prime_state
statekey=
statekid=

# policy_file TIER LIMITS EXEC: the policy a user would write for these
# limits ("key = value;"...) and exec list ("\"/path\", "...), generated
# once per distinct set and checked with `capbroker check-policy`.  Sets
# $policy; returns non-zero (with the reason on stderr) if it is invalid.
declare -A policies=()
policy_file() {
	local key="$1|$2|$3" f out
	policy=${policies[$key]:-}
	[ -n "$policy" ] && return 0
	f="$work/policies/p${#policies[@]}.conf"
	{
		echo "# escape suite: tier $1 with: $2 exec [ $3 ]"
		echo "tiers = {"
		echo "  $1 = {"
		[ -n "$2" ] && echo "    limits = { $2 };"
		[ -n "$3" ] && echo "    exec = [ ${3%, } ];"
		echo "  };"
		echo "};"
	} >"$f"
	chmod 0644 "$f"
	if ! out=$("$CB_BIN/capbroker" check-policy "$f" 2>&1); then
		echo "generated policy $f is invalid: $out" >&2
		sed 's/^/  | /' "$f" >&2
		return 1
	fi
	policies[$key]=$f
	policy=$f
}

# A size for the policy: libconfig (1.5) truncates integers above 2^31-1
# without an L suffix, and the policy loader refuses them.
pol_size() {
	if [ "$1" -gt 2147483647 ]; then echo "${1}L"; else echo "$1"; fi
}

# sandbox_run TIER [OPTIONS...] -- CMD [ARGS...]
# The one place that starts a sandbox: a real `capbroker run`, as the pass's
# user.  OPTIONS become what a user would write: the limits (--nproc --cpu
# --mem --nofile --fsize --tmp-size --wall) and --exec-allow PATH a policy
# file for TIER; --ro-bind SRC DST is `--ro-bind SRC:DST`; --timeout S,
# --grant CAP and --state DIR are capbroker run's own.
sandbox_run() {
	local tier=$1 lim="" exe="" policy
	local -a run=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		case $1 in
		--nproc) lim+="processes = $2; " ;;
		--cpu) lim+="cpu = $2; " ;;
		--mem) lim+="memory = $(pol_size "$2"); " ;;
		--nofile) lim+="open_files = $2; " ;;
		--fsize) lim+="file_size = $(pol_size "$2"); " ;;
		--tmp-size) lim+="tmp_size = $(pol_size "$2"); " ;;
		--wall) lim+="wall = $2; " ;;
		--exec-allow) exe+="\"$2\", " ;;
		--timeout | --state | --grant) run+=("$1" "$2") ;;
		--ro-bind)
			run+=(--ro-bind "$2:$3")
			shift
			;;
		*)
			echo "sandbox_run: unknown option $1" >&2
			return 2
			;;
		esac
		shift 2
	done
	shift	# --
	if [ -n "$lim$exe" ]; then
		policy_file "$tier" "$lim" "$exe" || return 2
		run+=(--policy "$policy")
	fi
	"${AS_USER[@]}" env -i PATH=/usr/bin:/bin \
		${ASAN_OPTIONS+"ASAN_OPTIONS=$ASAN_OPTIONS"} \
		${UBSAN_OPTIONS+"UBSAN_OPTIONS=$UBSAN_OPTIONS"} \
		"$CB" run --tier "$tier" --id escape --approve deny --ro-bind "$work/bin:/escape" \
		"${run[@]}" -- "$@"
}

# A real broker state for this pass (keys, audit log, admin socket), made
# by one run and then given to files_broker_state with --state: the attempt
# goes for the keys of the very broker that serves it.
prime_state() { # PASS-TAG
	statedir="$work/state.$1"
	if [ ${#AS_USER[@]} -gt 0 ]; then
		install -d -m 0700 -o "$agent_uid" -g "$agent_uid" "$statedir"
	else
		install -d -m 0700 "$statedir"
	fi
	statekey=
	if sandbox_run low --state "$statedir" -- /bin/true >"$work/out.prime" 2>&1 </dev/null; then
		statekey=$(find "$statedir/keys" -name '*.key' 2>/dev/null | head -n 1)
	fi
	if [ -z "$statekey" ]; then
		n=$((n + 1)); failed=$((failed + 1))
		echo "not ok $n - [$1] a broker state with a signing key for files_broker_state"
		sed 's/^/#   /' "$work/out.prime"
		statekey="$statedir/keys/0000000000000000.key"
	fi
	statekid=$(basename "$statekey" .key)
}

# A host tree for the path attempts (files_broker_paths): a workspace whose
# link and dirlink point out of it, at a directory holding a secret.
prime_paths() {
	paths="$work/paths"
	rm -rf "$paths"
	mkdir -p -m 0755 "$paths/ws" "$paths/outside"
	echo TOPSECRET >"$paths/outside/secret.txt"
	echo wsfile >"$paths/ws/ok.txt"
	chmod 0644 "$paths/outside/secret.txt" "$paths/ws/ok.txt"
	ln -s "$paths/outside" "$paths/ws/link"
	ln -s "$paths/outside" "$paths/ws/dirlink"
	# Set-id files in the workspace, and a file of another uid linked in.
	printf orig >"$paths/ws/suid"; chmod 4755 "$paths/ws/suid"
	printf gid >"$paths/ws/sgid"; chmod 2755 "$paths/ws/sgid"
	echo theirs >"$paths/outside/foreign"; chmod 0644 "$paths/outside/foreign"
	chown 4243:4243 "$paths/outside/foreign" 2>/dev/null
	ln "$paths/outside/foreign" "$paths/ws/hl-foreign"
	# Roots for the cached-root attempts: stale/cur, and r/0 .. r/16.
	mkdir -p "$paths/stale/cur"; echo one >"$paths/stale/cur/a"
	for i in $(seq 0 16); do mkdir -p "$paths/r/$i"; echo "from-$i" >"$paths/r/$i/x"; done
	if [ ${#AS_USER[@]} -gt 0 ]; then
		# Not -R through ws: hl-foreign must stay another uid's.
		chown -R "$agent_uid:$agent_uid" "$paths/stale" "$paths/r"
		chown "$agent_uid:$agent_uid" "$paths/ws" "$paths/ws/suid" "$paths/ws/sgid"
		chmod 4755 "$paths/ws/suid"; chmod 2755 "$paths/ws/sgid"
	fi
}

report() { # RESULT(0/1) TITLE OUTPUTFILE
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
		[ -n "${CB_ESCAPE_VERBOSE:-}" ] && sed 's/^/#   /' "$3"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
		sed 's/^/#   /' "$3" | head -n 20
	fi
}

meta() { # FILE KEY DEFAULT
	local v
	v=$(sed -n -E "s/^( \*|#) $2: //p" "$1" | head -n 1)
	echo "${v:-$3}"
}

fill() { # TEXT: the @...@ placeholders of ARGS and OPTS
	local v=$1
	v=${v//@STATEKEY@/$statekey}
	v=${v//@STATEDIR@/$statedir}
	v=${v//@STATEKID@/$statekid}
	v=${v//@ABSTRACT@/$abstract}
	v=${v//@HOSTPIDS@/$$ $listener $PPID}
	v=${v//@AGENTUID@/$agent_uid}
	v=${v//@HOSTPORT@/$hostport}
	v=${v//@HOSTADDRS@/$hostaddrs}
	v=${v//@PATHS@/$paths}
	echo "$v"
}

run_attempt() { # PASS NAME (NAME.c, or NAME.py with its suffix)
	local pass=$1 name=$2 src="$here/$2" tier want opts args pre rc title out
	[[ "$name" == *.py ]] || src+=.c
	tier=$(meta "$src" TIER low)
	want=$(meta "$src" EXIT 0)
	opts=$(fill "$(meta "$src" OPTS "")")
	args=$(fill "$(meta "$src" ARGS "")")
	pre=$(meta "$src" PRE "")
	title="[$pass] $tier $name: $(sed -n -E '2s/^( \*|#) [a-z0-9_]*\.(c|py) - escape attempt: //p' "$src")"
	out="$work/out.$name"
	: >"$out"
	if [ -n "$pre" ]; then
		# shellcheck disable=SC2086
		if ! sandbox_run "$tier" $opts -- "/escape/$name" "$pre" >"$out" 2>&1 </dev/null; then
			echo "the first run ($pre) failed" >>"$out"
			report 1 "$title" "$out"
			return
		fi
	fi
	# shellcheck disable=SC2086
	sandbox_run "$tier" $opts -- "/escape/$name" $args >>"$out" 2>&1 </dev/null
	rc=$?
	if [ "$rc" != "$want" ]; then
		echo "exit status $rc, expected $want" >>"$out"
	fi
	report "$([ "$rc" = "$want" ] && echo 0 || echo 1)" "$title" "$out"
}

positive() { # PASS
	local pass=$1 out="$work/out.pos" rc t0 t1
	sandbox_run low -- "$PYTHON3" -c 'print(sum(i * i for i in range(10)))' >"$out" 2>&1 </dev/null
	rc=$?
	report "$([ $rc = 0 ] && [ "$(cat "$out")" = 285 ] && echo 0 || echo 1)" \
		"[$pass] low positive: python3 starts and computes" "$out"

	# The broker's own protocol (docs/protocol.md), with Debian's msgpack.
	sandbox_run low -- "$PYTHON3" -c 'import os, socket, msgpack
s = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
s.send(msgpack.packb({"id": 1, "op": "ping"}))
print(msgpack.unpackb(s.recv(65536), raw=False))' >"$out" 2>&1 </dev/null
	rc=$?
	report "$([ $rc = 0 ] && [ "$(cat "$out")" = "{'id': 1, 'ok': True}" ] && echo 0 || echo 1)" \
		"[$pass] low positive: python3 pings the broker over CAPBROKER_FD" "$out"

	sandbox_run low -- /escape/script.py a b >"$out" 2>&1 </dev/null
	rc=$?
	report "$([ $rc = 0 ] && [ "$(cat "$out")" = "script ['a', 'b']" ] && echo 0 || echo 1)" \
		"[$pass] low positive: a #! script runs as the agent" "$out"

	sandbox_run medium -- /bin/sh -c '/usr/bin/dpkg --version >/dev/null; echo "rc=$?"' >"$out" 2>&1 </dev/null
	rc=$?
	report "$([ $rc = 0 ] && grep -q 'Permission denied' "$out" && grep -q 'rc=126' "$out" && echo 0 || echo 1)" \
		"[$pass] medium: a program not on the exec list is refused (EACCES)" "$out"

	sandbox_run medium --exec-allow /usr/bin/id -- /bin/sh -c '/usr/bin/id -u; /usr/bin/env; echo "rc=$?"' >"$out" 2>&1 </dev/null
	rc=$?
	report "$([ $rc = 0 ] && grep -qx "$agent_uid" "$out" && grep -q 'rc=126' "$out" && echo 0 || echo 1)" \
		"[$pass] medium: a program on the policy's exec list runs (fork + exec), others do not" "$out"

	# capcall is the one program the medium tier may always exec.
	sandbox_run medium -- /bin/sh -c 'capcall ping && echo "rc=$?"' >"$out" 2>&1 </dev/null
	rc=$?
	report "$([ $rc = 0 ] && grep -qx 'rc=0' "$out" && echo 0 || echo 1)" \
		"[$pass] medium: the agent execs capcall, which reaches the broker" "$out"

	sandbox_run high -- /bin/sh -c '/usr/bin/id -u >/dev/null && echo high' >"$out" 2>&1 </dev/null
	rc=$?
	report "$([ $rc = 0 ] && [ "$(cat "$out")" = high ] && echo 0 || echo 1)" \
		"[$pass] high: forks and execs what it sees" "$out"

	# The wall clock of the policy alone (res_wall_clock uses --timeout).
	t0=$(date +%s)
	sandbox_run low --wall 1 -- /escape/res_wall_clock >"$out" 2>&1 </dev/null
	rc=$?
	t1=$(date +%s)
	echo "exit $rc after $((t1 - t0)) s" >>"$out"
	report "$([ $rc = 124 ] && [ $((t1 - t0)) -le 10 ] && echo 0 || echo 1)" \
		"[$pass] the policy's wall limit kills the agent (exit 124)" "$out"

	sandbox_run low --ro-bind /nonexistent/dir /x -- /bin/true >"$out" 2>&1 </dev/null
	rc=$?
	report "$([ $rc = 125 ] && grep -q 'bind source /nonexistent/dir' "$out" && echo 0 || echo 1)" \
		"[$pass] fail closed: a bind that cannot be made is exit 125 with a reason" "$out"

	sandbox_run low -- /escape/no-such-agent >"$out" 2>&1 </dev/null
	rc=$?
	report "$([ $rc = 125 ] && grep -q 'no-such-agent' "$out" && echo 0 || echo 1)" \
		"[$pass] fail closed: a missing agent is exit 125 with a reason" "$out"
}

run_pass() { # PASS PASS-TAG
	local f
	prime_state "$2"
	prime_paths
	for f in "$here"/*.c "$here"/*.py; do
		name=$(basename "$f" .c)
		[ "$name" = launch ] && continue
		# shellcheck disable=SC2053  # a glob on purpose
		[[ "$name" == ${CB_ESCAPE_ONLY:-*} ]] || continue
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
	CB="$CB_BIN/capbroker"
	run_pass root root
	if command -v setpriv >/dev/null; then
		AS_USER=(setpriv "--reuid=$TEST_UID" "--regid=$TEST_UID" --clear-groups --)
		agent_uid=$TEST_UID
	else
		AS_USER=(runuser -u nobody --)
		agent_uid=65534
	fi
	CB="$work/bin-exe/capbroker"
	# The default workspace is the current directory: one the ordinary
	# user can reach (the tree may sit in a private directory).
	cd "$work" || exit 1
	run_pass "uid $agent_uid" user
else
	agent_uid=$(id -u)
	CB="$CB_BIN/capbroker"
	run_pass "uid $agent_uid" user
fi
echo "1..$n"
echo "# $((n - failed))/$n passed in $(($(date +%s) - started)) s"
[ "$failed" = 0 ]
