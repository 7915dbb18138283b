#!/bin/sh
# bench/run.sh - `make bench`: build the benchmark programs with the
# project's flags, then run bench/bench.py, which measures capbroker against
# the physical floor and bubblewrap and writes bench/results.json and a
# table (see docs/performance.md for how to read it).
#
# Environment: CB_BIN and CB_BUILD (set by the Makefile).  Optional:
#   BENCH_QUICK=1        fewer repetitions (a smoke test, about a minute)
#   BENCH_ONLY=a,b       only these parts: latency cpu fuse net tokens start serve revoke memory
#                        fleet (a private PostgreSQL and three brokers: docs/cluster.md)
#   BENCH_OUT=FILE       write the JSON there instead of bench/results.json
#   BENCH_PROFILE=1      also record a perf profile of the broker on the
#                        cached fs.read path (build/bench/perf.data)
#   BENCH_COUNTS=1       also count system calls, context switches and wake-ups
#                        per cached fs.read, ping and denial, by thread, and
#                        split each one's wall time on CPU 0 (bench/perop.py,
#                        needs perf): the load-independent figures to compare
# Host side, trusted; runs as the user who runs `make bench` (root for the
# cgroup and 1000-sandbox parts to behave as in production).
set -eu
cd "$(dirname "$0")/.."
: "${CB_BIN:?run through make bench}" "${CB_BUILD:?run through make bench}"
export CB_BIN CB_BUILD
PYTHON=${PYTHON:-python3}

# The Makefile includes bench/bench.mk (its */*.mk include); an older one
# does not, and then we read it ourselves.  Either way: the same flags.
if make -s -n bench-progs >/dev/null 2>&1; then
	make -s bench-progs
else
	make -s -f Makefile -f bench/bench.mk bench-progs
fi
for p in floor agent inproc pool; do
	[ -x "$CB_BUILD/bench/$p" ] || { echo "bench: $CB_BUILD/bench/$p was not built" >&2; exit 1; }
done
command -v bwrap >/dev/null || echo "bench: bwrap not installed: the sandbox-start comparison is skipped" >&2
command -v taskset >/dev/null || { echo "bench: taskset (util-linux) is needed" >&2; exit 1; }

# A thousand idle sandboxes hold about four descriptors each in the broker.
n=$(ulimit -n)
if [ "$n" != unlimited ] && [ "$n" -lt 8192 ]; then
	ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fi

"$PYTHON" bench/bench.py

if [ "${BENCH_COUNTS:-0}" = 1 ]; then
	if command -v perf >/dev/null; then
		"$PYTHON" bench/perop.py
	else
		echo "bench: perf is not installed (apt-get install linux-perf): no counts" >&2
	fi
fi

if [ "${BENCH_PROFILE:-0}" = 1 ]; then
	if ! command -v perf >/dev/null; then
		echo "bench: perf is not installed (apt-get install linux-perf)" >&2
		exit 0
	fi
	w=$(mktemp -d /var/tmp/capbroker-prof.XXXXXX)
	trap 'rm -rf "$w"' EXIT
	echo hello >"$w/file"
	chmod 755 "$w"
	taskset -c 0 "$CB_BIN/capbroker" run --tier medium --workspace "$w" \
		--grant "fs.read:$w/**" --ro-bind "$CB_BUILD/bench/agent:/bench/agent" -- \
		/bench/agent cpu read 200000 "$w/file" >/dev/null &
	sleep 2
	perf record -q -a -C 0 -e cpu-clock -F 20000 -g -o "$CB_BUILD/bench/perf.data" -- sleep 4 \
		>/dev/null 2>&1 || true
	wait
	echo "bench: profile in $CB_BUILD/bench/perf.data;" \
		"perf report -i $CB_BUILD/bench/perf.data --sort comm,sym --no-children"
fi
