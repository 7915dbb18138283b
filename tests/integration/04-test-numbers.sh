#!/usr/bin/env bash
# 04-test-numbers.sh - no two integration tests share a number.  The number
# is how the docs, the red-team notes and people name a test; parallel work
# kept landing tests with clashing numbers (74 and 77 twice each, fixed by
# hand more than once), so the suite refuses it.
. "$(dirname "$0")/../lib.sh"

# dups DIR: the numbers that more than one NN-name.sh in DIR carries.
dups() {
	find "$1" -maxdepth 1 -name '[0-9]*-*.sh' -printf '%f\n' | cut -d- -f1 | sort | uniq -d
}

d=$(dups "$CB_TOP/tests/integration")
t_is "every integration test has a number of its own" "$d" ""

# The check can fail: a copy of the directory with one clash added.
C="$T_TMP/it"
mkdir -p "$C"
cp "$CB_TOP"/tests/integration/*.sh "$C/"
first=$(find "$C" -maxdepth 1 -name '[0-9]*-*.sh' -printf '%f\n' | sort | head -n 1)
cp "$C/$first" "$C/${first%%-*}-clash.sh"
t_is "a copy with a clashing number is caught" "$(dups "$C")" "${first%%-*}"
t_done
