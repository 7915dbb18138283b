#!/bin/sh
# scripts/fuzz.sh BUILDDIR SECONDS - run every libFuzzer target for SECONDS
# from its seed corpus (tests/fuzz/corpus/NAME); fail on any crash.
set -u
dir=$1 secs=$2 failed=0
for f in "$dir"/fuzz_*; do
	[ -x "$f" ] || continue
	name=$(basename "$f")
	work=$(mktemp -d)
	seeds="tests/fuzz/corpus/$name"
	echo "== $name: ${secs}s"
	if ! LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
		"$f" -max_total_time="$secs" -max_len=8192 -rss_limit_mb=2048 \
		-artifact_prefix="$dir/crash-$name-" -print_final_stats=0 \
		"$work" ${seeds:+$( [ -d "$seeds" ] && echo "$seeds")} >"$dir/$name.log" 2>&1; then
		echo "FAIL $name (see $dir/$name.log)"; tail -n 30 "$dir/$name.log"; failed=1
	else
		grep -E '^#[0-9]+.*(DONE|pulse)' "$dir/$name.log" | tail -n 1
	fi
	rm -rf "$work"
done
[ "$failed" -eq 0 ] && echo "fuzz: no crashes" || exit 1
