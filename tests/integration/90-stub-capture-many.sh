#!/usr/bin/env bash
# 90-stub-capture-many.sh - the stub clones many bind sources: as root
# itself, as an ordinary user with several helpers at once
# (stub_capture_sources, STUB_CAPTURE_AHEAD at a time): more sources than
# that all arrive, each at its own place, read-only, and no helper is left
# behind once the agent runs (a zombie would count against the sandbox's
# pids limit).  Which of the two ways is taken: 902-stub-start-lean.sh.
. "$(dirname "$0")/../lib.sh"
L="$CB_BUILD/escape/launch"
export CAPBROKER_STUB="$CB_BIN/capbroker-stub"
if [ ! -x "$L" ] || [ ! -x "$CAPBROKER_STUB" ]; then
	t_skip "sandbox launcher" "not built ($L, $CAPBROKER_STUB)"
	t_done
	exit
fi

n=11	# more than STUB_CAPTURE_AHEAD (4), not a multiple of it
binds=() want="" cat_args=()
for i in $(seq "$n"); do
	mkdir -m 0755 "$T_TMP/src$i"
	echo "content $i" >"$T_TMP/src$i/f"
	binds+=(--ro-bind "$T_TMP/src$i" "/s$i")
	cat_args+=("/s$i/f")
	want="$want${want:+
}content $i"
done
echo single >"$T_TMP/file"
binds+=(--ro-bind "$T_TMP/file" /single)

t_is "$n directory sources and a file, each at its place" \
	"$("$L" "${binds[@]}" -- /bin/cat "${cat_args[@]}" /single)" "$want
single"
t_exit "... read-only, every one" 0 "$L" --tier high "${binds[@]}" -- /bin/sh -c \
	"k=0; for f in /s*/f /single; do if (echo x >\$f) 2>/dev/null; then exit 1; fi; k=\$((k+1)); done; [ \$k = $((n + 1)) ]"
t_exit "a missing source among many still fails closed" 125 "$L" "${binds[@]}" \
	--ro-bind "$T_TMP/nonexistent" /x -- /bin/true

# A source that fails among others: the stub itself, given a FIFO as the
# second of five sources (the launcher would refuse one before the stub,
# so this is the only way to reach the stub's own check).  It fails closed
# with the reason, and none of its helpers (forks of the stub: the same
# command line, this test's id) is left running.  As root (no helpers),
# then as an ordinary user (the FIFO's helper fails while others are at
# work).
mkfifo -m 0666 "$T_TMP/fifo"
fifo_source() {
	local id="cbtest-capture-$$-$1" rc
	shift
	(
		exec 4>"$T_TMP/status" 5<"$T_TMP/src1" 6<"$T_TMP" 7<>"$T_TMP/fifo" 8<"$T_TMP/src2" \
			9<"$T_TMP/src3" 10<"$T_TMP/src4"
		exec "$@" --tier low --id "$id" --parent-pid $$ --ro-bind-fd 5 5 . /s1 \
			--ro-bind-fd 6 7 fifo /f --ro-bind-fd 8 8 . /s2 --ro-bind-fd 9 9 . /s3 \
			--ro-bind-fd 10 10 . /s4 -- /bin/true </dev/null >/dev/null 2>&1
	)
	rc=$?
	t_is "a source refused among sources being cloned fails the stub (125, $id)" "$rc" 125
	t_match "... with the reason" "$(cat "$T_TMP/status")" \
		'bind source is not a file or directory: /f'
	t_exit "... and no helper of it is left" 1 pgrep -f -- "--id $id "
}
fifo_source root "$CAPBROKER_STUB"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	chmod 0755 "$T_TMP"
	U=(setpriv --reuid=4242 --regid=4242 --clear-groups --)
	P=$(t_public "$L" "$CAPBROKER_STUB")
	t_is "as an ordinary user, through helpers at once: each at its place" \
		"$("${U[@]}" env CAPBROKER_STUB="$P/capbroker-stub" "$P/launch" "${binds[@]}" \
			-- /bin/cat "${cat_args[@]}" /single)" "$want
single"
	t_exit "... a missing source among many still fails closed" 125 \
		"${U[@]}" env CAPBROKER_STUB="$P/capbroker-stub" "$P/launch" "${binds[@]}" \
		--ro-bind "$T_TMP/nonexistent" /x -- /bin/true
	fifo_source user "${U[@]}" "$P/capbroker-stub"
else
	t_skip "the helpers of an ordinary user's stub" "needs root and setpriv"
fi

# The outer stub (the launcher's child) has exactly one child while the
# agent runs: pid 1 of the sandbox.  Every clone helper was reaped.
"$L" --tier high "${binds[@]}" -- /bin/sleep 31340.$$ &
lpid=$!
for _ in $(seq 50); do pgrep -f "^/bin/sleep 31340\\.$$" >/dev/null && break; sleep 0.1; done
outer=$(pgrep -P "$lpid" | head -n 1)
kids=$( [ -n "$outer" ] && ps -o pid=,stat= --ppid "$outer" | wc -l)
zombies=$( [ -n "$outer" ] && ps -o stat= --ppid "$outer" | grep -c '^Z')
t_is "no clone helper outlives the capture (the outer stub's only child is pid 1)" "${kids:-x} ${zombies:-x}" "1 0"
kill "$lpid" 2>/dev/null
wait "$lpid" 2>/dev/null
t_done
