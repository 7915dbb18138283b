#!/usr/bin/env bash
# 902-stub-start-lean.sh - what the stub's start no longer does, and that
# the layers stay as they were (docs/performance.md, "fifth pass"):
# - a stub that may clone in the host's mount namespace (a root launcher)
#   clones its bind sources itself: its only fork is pid 1, no helper per
#   source; a stub that may not (an ordinary user's) still forks one helper
#   per source;
# - either way a bind of a shared host mount is a slave inside, never a
#   peer: nothing mounted in the sandbox can reach the host;
# - the network namespace the outer stub makes while pid 1 builds the root
#   is the one pid 1 and the agent are in, and not the host's, and none of
#   the three holds a capability.
. "$(dirname "$0")/../lib.sh"
L="$CB_BUILD/escape/launch"
export CAPBROKER_STUB="$CB_BIN/capbroker-stub"
if [ ! -x "$L" ] || [ ! -x "$CAPBROKER_STUB" ]; then
	t_skip "sandbox launcher" "not built ($L, $CAPBROKER_STUB)"
	t_done
	exit
fi
if [ "$(id -u)" != 0 ] || ! command -v strace >/dev/null || ! command -v setpriv >/dev/null; then
	t_skip "the stub's forks, as root and as an ordinary user" "needs root, strace and setpriv"
	t_done
	exit
fi

chmod 0755 "$T_TMP"
for i in 1 2 3; do mkdir -m 0755 "$T_TMP/src$i" && echo "in $i" >"$T_TMP/src$i/f"; done
binds=(--ro-bind "$T_TMP/src1" /s1 --ro-bind "$T_TMP/src2" /s2 --ro-bind "$T_TMP/src3" /s3)

# The forks (clone, clone3, fork, vfork) of the process that executed the
# stub, under strace -f of the whole start.  LeakSanitizer cannot run under
# ptrace (a sanitizer build's check-asan): leak checking is off for it here.
stub_forks() {
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -e trace=execve,clone,clone3,fork,vfork -e signal=none \
		-o "$T_TMP/trace" "$@" >"$T_TMP/out" 2>&1 || { echo "failed: $(cat "$T_TMP/out")"; return; }
	local p
	p=$(grep -E 'execve\("[^"]*capbroker-stub"' "$T_TMP/trace" | awk '{ print $1; exit }')
	[ -n "$p" ] || { echo "no stub in the trace"; return; }
	# strace pads the pid to five columns: "9881  clone(", "12345 clone(".
	grep -cE "^$p +(clone|clone3|fork|vfork)\(" "$T_TMP/trace"
}

t_is "as root the stub forks pid 1 only: its three sources cloned without helpers" \
	"$(stub_forks "$L" "${binds[@]}" -- /bin/cat /s1/f /s2/f /s3/f)" 1
t_is "... and every source is there" "$(cat "$T_TMP/out")" "in 1
in 2
in 3"

U=(setpriv --reuid=4242 --regid=4242 --clear-groups --)
P=$(t_public "$L" "$CAPBROKER_STUB")
t_is "as an ordinary user, one helper per source and pid 1" \
	"$(stub_forks "${U[@]}" env CAPBROKER_STUB="$P/capbroker-stub" "$P/launch" "${binds[@]}" \
		-- /bin/cat /s1/f /s2/f /s3/f)" 4
t_is "... and every source is there" "$(cat "$T_TMP/out")" "in 1
in 2
in 3"

# A shared host mount as a bind source: the clone must not join its peer
# group (a mount made in the sandbox's tree would then appear on the host).
mkdir "$T_TMP/shared"
if mount -t tmpfs -o size=64k tmpfs "$T_TMP/shared" && mount --make-shared "$T_TMP/shared"; then
	echo there >"$T_TMP/shared/f"
	for who in root user; do
		if [ "$who" = root ]; then run=("$L"); else
			run=("${U[@]}" env CAPBROKER_STUB="$P/capbroker-stub" "$P/launch"); fi
		line=$("${run[@]}" --ro-bind "$T_TMP/shared" /sh -- /bin/cat /proc/self/mountinfo |
			grep ' /sh ')
		t_match "a shared host mount bound by $who's stub is read-only inside" "$line" ' /sh ro,'
		t_match "... a slave of the host's, not a peer" "$line" ' master:[0-9]+ - '
	done
	umount "$T_TMP/shared"
else
	t_skip "a shared host mount as a bind source" "cannot mount a tmpfs here"
fi

# pid 1 failing while it builds the root, before it takes the network
# namespace the outer stub is making: its reason is the one told, the exit
# is 125 (the outer stub relays it rather than failing on its own), every
# time, whichever of the two comes first.
bad=0
for i in $(seq 20); do
	out=$("$L" --ro-bind "$T_TMP/src1" /s1 --ro-bind "$T_TMP/src2" /s1/sub/deeper -- /bin/true 2>&1)
	rc=$?
	case "$rc $out" in
	"125 "*"pid1: mount point /s1/sub/deeper would be created inside a bound host directory"*) ;;
	*) bad=$((bad + 1)); echo "# $rc $out" ;;
	esac
done
t_is "a pid 1 that fails before it joins the network namespace: its reason and 125, 20 of 20" \
	"$bad" 0

# The network namespaces of the outer stub, pid 1 and the agent, read from
# the host while the agent sleeps.
"$L" -- /bin/sleep 31341.$$ &
lpid=$!
for _ in $(seq 50); do pgrep -f "^/bin/sleep 31341\\.$$" >/dev/null && break; sleep 0.1; done
outer=$(pgrep -P "$lpid" | head -n 1)
pid1=$( [ -n "$outer" ] && pgrep -P "$outer" | head -n 1)
agent=$( [ -n "$pid1" ] && pgrep -P "$pid1" | head -n 1)
ns() { readlink "/proc/$1/ns/net" 2>/dev/null || echo "none($1)"; }
t_is "pid 1 is in the network namespace the outer stub made" "$(ns "$pid1")" "$(ns "$outer")"
t_is "... and so is the agent" "$(ns "$agent")" "$(ns "$outer")"
t_ok "... which is not the host's" test "$(ns "$outer")" != "$(ns $$)"
# The bounding set, dropped once in the outer stub before the fork, is
# empty in all three (and so is every other set, once pid 1 is ready).
caps() { grep -E '^Cap(Bnd|Prm|Eff|Amb):' "/proc/$1/status" 2>/dev/null | awk '{ print $2 }' |
	sort -u | tr '\n' ' '; }
t_is "the outer stub, pid 1 and the agent hold no capability, bounding set included" \
	"$(caps "$outer")/$(caps "$pid1")/$(caps "$agent")" \
	"0000000000000000 /0000000000000000 /0000000000000000 "
kill "$lpid" 2>/dev/null
wait "$lpid" 2>/dev/null
t_done
