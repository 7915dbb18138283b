#!/usr/bin/env bash
# tests/run.sh - run every test and print one closing line "N passed, N failed".
#
# Each test (a unit binary, an integration or escape script) prints TAP lines
# ("ok ..." / "not ok ..."); we count those.  A test that exits non-zero
# without reporting a failure, or that reports nothing, counts as one failure,
# so a crash can never pass silently.
#
# Tests run CB_TEST_JOBS at a time (default 1): most of the suite's wall time
# is spent waiting on sandboxes and brokers, not on the CPU, and every test
# works in its own temporary directories.  Results are printed in a fixed
# order whatever order the tests finish in.  CB_TEST_JOBS=1 runs them one by
# one, as a timing-sensitive investigation may want.
set -u
cd "$(dirname "$0")/.."
: "${CB_BIN:?}" "${CB_BUILD:?}"
export CB_BIN CB_BUILD
export PYTHON="${PYTHON:-/usr/bin/python3}"
export CB_TOP="$PWD"
# What the suite writes (policy files above all: the broker refuses one that
# group or others may write) is made as under umask 022 whatever the caller's
# umask is (002 is common with user-private groups), and the shipped example
# policies are read through a copy made that way, since a clone made under
# umask 002 has them group-writable.
umask 022
CB_EXAMPLES=$(mktemp -d "${TMPDIR:-/tmp}/capbroker-examples.XXXXXX")
install -m 0644 examples/policies/*.conf "$CB_EXAMPLES/"
export CB_EXAMPLES
trap 'rm -rf "$CB_EXAMPLES"' EXIT
jobs_max=${CB_TEST_JOBS:-1}

passed=0 failed=0 skipped=0
failures=()
names=()
logdir="$CB_BUILD/test-logs"
rm -rf "$logdir"
mkdir -p "$logdir"

logname() { echo "$logdir/$(echo "$1" | tr '/' '_')"; }

# Run one test into its log; record its exit status beside the log.
run_one() {
	local name=$1; shift
	local base rc t0
	base=$(logname "$name")
	t0=$SECONDS
	timeout --kill-after=10 "${CB_TEST_TIMEOUT:-600}" "$@" >"$base.log" 2>&1 </dev/null
	rc=$?
	echo "$rc" >"$base.rc"
	echo $((SECONDS - t0)) >"$base.time"
}

start() {
	names+=("$1")
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
	run_one "$@" &
}

report() {
	local name=$1 base log rc p f s t
	base=$(logname "$name")
	t=$(cat "$base.time" 2>/dev/null || echo '?')
	log=$base.log
	rc=$(cat "$base.rc" 2>/dev/null || echo 255)
	p=$(grep -cE '^ok ' "$log")
	f=$(grep -cE '^not ok ' "$log")
	s=$(grep -cE '^ok .*# SKIP' "$log")
	p=$((p - s))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	if [ $((p + f + s)) -eq 0 ]; then f=1; fi
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
	if [ "$f" -ne 0 ]; then
		failures+=("$name")
		printf 'FAIL %-40s %3d passed, %d failed (exit %d, %ss)\n' "$name" "$p" "$f" "$rc" "$t"
		grep -E '^not ok|^#' "$log" | head -n 20 | sed 's/^/    /'
		if [ "$rc" -ne 0 ]; then tail -n 5 "$log" | sed 's/^/    | /'; fi
	else
		printf 'ok   %-40s %3d passed%s %5ss\n' "$name" "$p" "$([ "$s" -gt 0 ] && echo ", $s skipped")" "$t"
	fi
}

# The escape suite is the longest single test: start it first.
if [ -x tests/escape/run.sh ]; then
	start "escape/suite" tests/escape/run.sh
fi
for t in "$CB_BUILD"/t/test_*; do
	[ -x "$t" ] || continue
	start "unit/$(basename "$t")" "$t"
done
for t in tests/integration/[0-9]*.sh; do
	[ -f "$t" ] || continue
	start "integration/$(basename "$t" .sh)" bash "$t"
done
wait

for name in "${names[@]}"; do report "$name"; done

echo
if [ ${#failures[@]} -gt 0 ]; then
	echo "failed: ${failures[*]} (logs in $logdir)"
fi
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
