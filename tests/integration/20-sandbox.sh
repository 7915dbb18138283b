#!/usr/bin/env bash
# 20-sandbox.sh - the sandbox end to end through the launcher API: exit
# statuses, stdio, fail-closed setup, life cycle (nothing survives its
# launcher), cgroups cleaned up, and the same as an unprivileged user.
# Uses the escape suite's launcher ($CB_BUILD/escape/launch) until
# "capbroker run" drives the same API.
. "$(dirname "$0")/../lib.sh"
: "${CB_BUILD:=$CB_TOP/build}"
L="$CB_BUILD/escape/launch"
export CAPBROKER_STUB="$CB_BIN/capbroker-stub"
if [ ! -x "$L" ] || [ ! -x "$CAPBROKER_STUB" ]; then
	t_skip "sandbox launcher" "not built ($L, $CAPBROKER_STUB)"
	t_done
	exit
fi

t_exit "low tier runs /bin/true" 0 "$L" -- /bin/true
t_exit "the agent's exit status comes back" 3 "$L" --tier high -- /bin/sh -c 'exit 3'
t_exit "a signal death is 128+N" 143 "$L" --tier high -- /bin/sh -c 'kill -TERM $$'
t_exit "wall-clock timeout is 124" 124 "$L" --timeout 1 -- /bin/sleep 30
t_exit "a missing bind source fails closed with 125" 125 "$L" --ro-bind /nonexistent/cb /x -- /bin/true
t_match "... and says why on stderr" "$(cat "$T_TMP/err")" 'bind source /nonexistent/cb'
t_exit "a writable bind below the high tier is refused" 125 "$L" --bind /tmp /data -- /bin/true
t_exit "a bind destination in /proc is refused" 125 "$L" --ro-bind /usr /proc/x -- /bin/true
t_is "stdin and stdout are relayed pipes" "$(echo hello | "$L" -- /bin/cat)" hello
t_is "stderr is relayed separately" "$("$L" --tier high -- /bin/sh -c 'echo err >&2' 2>&1 >/dev/null)" err
t_match "the stub reports the Landlock ABI" "$("$L" --report -- /bin/true 2>&1)" 'landlock=[0-9]+ cgroup=[01]'

mkdir -m 0755 "$T_TMP/ro"
echo data >"$T_TMP/ro/file"
t_is "a read-only bind is visible" "$("$L" --ro-bind "$T_TMP/ro" /data -- /bin/cat /data/file)" data
t_exit "... and read-only (sh: cannot create)" 2 "$L" --tier high --ro-bind "$T_TMP/ro" /data -- /bin/sh -c 'echo x > /data/file'
t_match "... because the mount is read-only" "$(cat "$T_TMP/err")" 'Read-only file system'
t_is "the host file is unchanged" "$(cat "$T_TMP/ro/file")" data
chmod 0777 "$T_TMP/ro"
t_exit "a writable bind in the high tier" 0 "$L" --tier high --bind "$T_TMP/ro" /data -- /bin/sh -c 'echo new > /data/new'
t_is "... writes reach the host" "$(cat "$T_TMP/ro/new" 2>/dev/null)" new

# Life cycle: killing the launcher kills the whole sandbox.
"$L" --tier high -- /bin/sh -c "/bin/sleep 31337.$$ & /bin/sleep 31338.$$" &
lpid=$!
# (the sandbox takes a moment to start, longer on a loaded machine)
for _ in $(seq 100); do [ "$(pgrep -fc "sleep 3133[78]\\.$$")" = 2 ] && break; sleep 0.1; done
t_ok "the agent's processes run" pgrep -f "sleep 3133[78]\\.$$"
kstart=$(cut -d' ' -f22 "/proc/$lpid/stat" 2>/dev/null)
kill -9 "$lpid"
wait "$lpid" 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do pgrep -f "sleep 3133[78]\\.$$" >/dev/null || break; sleep 0.2; done
t_exit "nothing survives the launcher" 1 pgrep -f "sleep 3133[78]\\.$$"

# Cgroups (root only) are removed when the sandbox is closed.  A pid is
# reused (pid_max may be 32768), so only directories that were not there
# before count: an old leftover of another process with the same pid is
# not this run's.
cg_dirs() { find /sys/fs/cgroup -maxdepth 4 -name "capbroker.$1.*" 2>/dev/null | sort; }
killed="$lpid.$kstart"
if [ "$(id -u)" = 0 ] && [ -n "$(cg_dirs "$killed")" ]; then
	# The launcher killed above could not remove its cgroups; a broker
	# sweeps such leftovers of dead owners on its first tick (1 s in; the
	# agent outlives it with room for a loaded machine).
	"$CB_BIN/capbroker" run -- /bin/sleep 2.5 >/dev/null 2>&1
	t_is "a killed launcher's cgroups are swept by the next broker" "$(cg_dirs "$killed")" ""
else
	t_skip "a killed launcher's cgroups are swept by the next broker" "no cgroups here (not root?)"
fi
# The stub joins alone (a v1 "tasks" write); whatever the sandbox forks
# after that is inside both cgroups.
if [ "$(id -u)" = 0 ]; then
	"$L" --tier high -- /bin/sh -c "/bin/sleep 31339.$$ & wait" &
	lpid=$!
	for _ in $(seq 25); do spid=$(pgrep -f "^/bin/sleep 31339\\.$$") && break; sleep 0.2; done
	# Its own directories exactly: the name carries the launcher's start
	# time (field 22 of its stat), so another process's old leftover with
	# the same pid does not count.
	mine="capbroker.$lpid.$(cut -d' ' -f22 "/proc/$lpid/stat" 2>/dev/null).*"
	inside=0
	for d in $(find /sys/fs/cgroup -maxdepth 4 -name "$mine" 2>/dev/null); do
		grep -qx "$spid" "$d/cgroup.procs" && inside=$((inside + 1))
	done
	n=$(find /sys/fs/cgroup -maxdepth 4 -name "$mine" 2>/dev/null | wc -l)
	[ "$n" -gt 0 ] || inside=none
	t_is "a process the agent forked is in the sandbox's cgroups" "$inside" "$n"
	kill "$spid"
	wait "$lpid" 2>/dev/null
else
	t_skip "a process the agent forked is in the sandbox's cgroups" "not root"
fi
before=$(find /sys/fs/cgroup -maxdepth 4 -name "capbroker.*" 2>/dev/null | sort)
left=""
# Many short sandboxes back to back: the kernel may still count a reaped
# process in its cgroup for a moment (rmdir: EBUSY), which sbx_proc_close
# waits out.
for _ in $(seq 30); do
	"$L" -- /bin/true &
	lpid=$!
	wait "$lpid"
	left="$left$(comm -13 <(printf '%s\n' "$before") <(cg_dirs "$lpid"))"
done
t_is "no cgroup left behind (30 sandboxes back to back)" "$left" ""

if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	chmod 0755 "$T_TMP"
	U=(setpriv --reuid=4242 --regid=4242 --clear-groups --)
	# The tree may be private: the ordinary user runs copies.
	P=$(t_public "$L" "$CAPBROKER_STUB")
	L="$P/launch" CAPBROKER_STUB="$P/capbroker-stub"
	t_is "as root the agent is nobody" "$("$L" --tier high -- /usr/bin/id -u)" 65534
	t_is "as an ordinary user the agent is that user" \
		"$("${U[@]}" env CAPBROKER_STUB="$CAPBROKER_STUB" "$L" --tier high -- /usr/bin/id -u)" 4242
	t_exit "... and the low tier starts" 0 "${U[@]}" env CAPBROKER_STUB="$CAPBROKER_STUB" "$L" -- /bin/true
	# Root's binds are walked by root (docs/sandbox.md, "Who walks to a bind
	# source"): below a 0700 directory the sandbox user cannot search.
	mkdir -m 0700 "$T_TMP/private" && mkdir -m 0755 "$T_TMP/private/pub" &&
		echo "readable" >"$T_TMP/private/pub/f"
	t_is "root's --ro-bind below a 0700 directory works (root walks to it)" \
		"$("$CB_BIN/capbroker" run --tier low --ro-bind "$T_TMP/private/pub:/data" -- /bin/cat /data/f 2>&1)" \
		"readable"
	t_exit "an ordinary user's bind there is walked as that user: refused (125)" 125 \
		"${U[@]}" env CAPBROKER_STUB="$CAPBROKER_STUB" "$L" --ro-bind "$T_TMP/private/pub" /data -- /bin/true
	# A build tree in a private directory: capcall next to the broker.
	mkdir -m 0700 "$T_TMP/private/tree" && mkdir "$T_TMP/private/tree/bin" &&
		install -m 0755 "$CB_BIN/capbroker" "$CB_BIN/capbroker-stub" "$CB_BIN/capcall" \
		"$T_TMP/private/tree/bin/"
	t_ok "a broker run as root from a tree in a 0700 directory starts capcall" \
		env -u CAPBROKER_STUB "$T_TMP/private/tree/bin/capbroker" run --tier low -- capcall tokens
else
	t_skip "unprivileged pass" "needs root and setpriv"
fi
t_done
