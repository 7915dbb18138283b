#!/usr/bin/env bash
# tests/run.sh - run every test and print one closing line "N passed, N failed".
#
# Each test (a unit binary, an integration or escape script) prints TAP lines
# ("ok ..." / "not ok ..."); we count those.  A test that exits non-zero
# without reporting a failure, or that reports nothing, counts as one failure,
# so a crash can never pass silently.
set -u
cd "$(dirname "$0")/.."
: "${CB_BIN:?}" "${CB_BUILD:?}"
export CB_BIN CB_BUILD
export PYTHON="${PYTHON:-/usr/bin/python3}"
export CB_TOP="$PWD"

passed=0 failed=0 skipped=0
failures=()
logdir="$CB_BUILD/test-logs"
mkdir -p "$logdir"

run_one() {
	local name=$1; shift
	local log="$logdir/$(echo "$name" | tr '/' '_').log"
	local rc p f s
	timeout --kill-after=10 "${CB_TEST_TIMEOUT:-600}" "$@" >"$log" 2>&1 </dev/null
	rc=$?
	p=$(grep -cE '^ok ' "$log")
	f=$(grep -cE '^not ok ' "$log")
	s=$(grep -cE '^ok .*# SKIP' "$log")
	p=$((p - s))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	if [ $((p + f + s)) -eq 0 ]; then f=1; fi
	passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
	if [ "$f" -ne 0 ]; then
		failures+=("$name")
		printf 'FAIL %-40s %3d passed, %d failed (exit %d)\n' "$name" "$p" "$f" "$rc"
		grep -E '^not ok|^#' "$log" | head -n 20 | sed 's/^/    /'
		if [ "$rc" -ne 0 ]; then tail -n 5 "$log" | sed 's/^/    | /'; fi
	else
		printf 'ok   %-40s %3d passed%s\n' "$name" "$p" "$([ "$s" -gt 0 ] && echo ", $s skipped")"
	fi
}

for t in "$CB_BUILD"/t/test_*; do
	[ -x "$t" ] || continue
	run_one "unit/$(basename "$t")" "$t"
done
for t in tests/integration/[0-9]*.sh; do
	[ -f "$t" ] || continue
	run_one "integration/$(basename "$t" .sh)" bash "$t"
done
if [ -x tests/escape/run.sh ]; then
	run_one "escape/suite" tests/escape/run.sh
fi

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
