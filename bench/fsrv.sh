#!/usr/bin/env bash
# bench/fsrv.sh - the file server's speed (fsrv/, docs/fsrv.md) against the
# host and libfuse's own example server, passthrough_ll (built here from
# libfuse3-dev's examples), with the server and the client pinned to the
# same CPU.  `make bench` runs it (bench/bench.py, part "fuse", section 8
# of its table; docs/performance.md); on its own, as root:
#
#   bench/fsrv.sh            (FSRV_BENCH_CPU=N to pick the CPU, default 0;
#                             FSRV_BENCH_QUICK=1 for fewer repetitions)
#
# Rows: open+read(4 KiB)+close, open+read(1 MiB)+close, stat of a cached
# name, and `git status` in a 5,000-file repository; and cold1m, the 1 MiB
# read with the mount's cached pages of the file dropped first (fadvise),
# so that every read reaches the server (no host figure: the host's own
# cold read would be a disk read).  Columns: the host,
# fsrv (default: direct I/O, every read checked), fsrv-c (cache_data: the
# kernel keeps file pages, dropped on revocation) and passthrough_ll
# (single-threaded, cache=always, long timeouts; fsrv runs with the same
# timeouts), and "broker": the same client inside a real sandbox of
# `capbroker run --tier high --workspace TREE`, served by the broker's own
# file server (its authorisation against live tokens, its 1 s timeouts),
# broker, server thread and sandbox pinned to the same CPU (the broker's
# default: the kernel keeps file pages, dropped before a revocation is
# acknowledged); "brokerd" and "brokerp" are the same with the policy's
# other modes, `fs_cache_data = false` (direct I/O: every read reaches the
# check) and `fs_passthrough` (the kernel reads and writes an open file
# itself; root broker).  A further row,
# catloop, runs `cat` as a process per file (200 files) on the host and in
# the sandbox.  Prints a table and
# writes $CB_BUILD/bench/fsrv.json.  Host side, trusted.
set -eu
cd "$(dirname "$0")/.."
if [ -z "${FSRV_BENCH_NS:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "bench/fsrv.sh: needs root (fsmount)" >&2; exit 1; }
	FSRV_BENCH_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
B=${CB_BUILD:-$PWD/build}
CPU=${FSRV_BENCH_CPU:-0}
EX=/usr/share/doc/libfuse3-dev/examples
make -s "${B#"$PWD"/}/fsrv/fsrv-serve" >/dev/null	# the Makefile names its targets relative
mkdir -p "$B/bench"
cc -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$B/bench/fsrv-io" bench/fsrv_io.c
cc -O2 -w -I"$EX" -o "$B/bench/passthrough_ll" "$EX/passthrough_ll.c" $(pkg-config --cflags --libs fuse3)

W=$(mktemp -d /var/tmp/fsrv-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	umount -l "$W/m1" "$W/m2" "$W/m3" 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT
R="$W/tree"
mkdir -p "$R" "$W/m1" "$W/m2" "$W/m3"
head -c 4096 /dev/urandom >"$R/f4k"
head -c 1048576 /dev/urandom >"$R/f1m"
mkdir "$R/repo"
for d in $(seq 50); do
	mkdir "$R/repo/d$d"
	for f in $(seq 100); do echo "$d $f" >"$R/repo/d$d/f$f.txt"; done
done
git -C "$R/repo" init -q && git -C "$R/repo" add . &&
	git -C "$R/repo" -c user.name=b -c user.email=b@b.invalid commit -qm files
echo "rlwd ." >"$W/allow"

taskset -c "$CPU" "$B/fsrv/fsrv-serve" --root "$R" --allow "$W/allow" --mount "$W/m1" \
	--ready "$W/ready" --timeout 86400 &
pids+=($!)
taskset -c "$CPU" "$B/fsrv/fsrv-serve" --root "$R" --allow "$W/allow" --mount "$W/m3" \
	--ready "$W/ready3" --timeout 86400 --cache-data &
pids+=($!)
taskset -c "$CPU" "$B/bench/passthrough_ll" -f -s -o source="$R",cache=always,timeout=86400 "$W/m2" &
pids+=($!)
for _ in $(seq 200); do
	[ -s "$W/ready" ] && [ -s "$W/ready3" ] && grep -q " $W/m2 " /proc/self/mounts && break
	sleep 0.05
done
git config --global --get safe.directory >/dev/null 2>&1 || true
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'

q=${FSRV_BENCH_QUICK:-0}
n4k=$([ "$q" = 1 ] && echo 2000 || echo 20000)
n1m=$([ "$q" = 1 ] && echo 100 || echo 1000)
nst=$([ "$q" = 1 ] && echo 5000 || echo 50000)
ngit=$([ "$q" = 1 ] && echo 3 || echo 7)
ncold=$([ "$q" = 1 ] && echo 50 || echo 300)

io() { taskset -c "$CPU" "$B/bench/fsrv-io" "$@"; }
# median of ngit runs of git status, in ms
gitst() {
	local d=$1 ts=()
	taskset -c "$CPU" git -C "$d" status --porcelain >/dev/null	# warm up
	for _ in $(seq "$ngit"); do
		local t0 t1
		t0=$(date +%s%N)
		taskset -c "$CPU" git -C "$d" status --porcelain >/dev/null
		t1=$(date +%s%N)
		ts+=($(( (t1 - t0) / 1000 )))
	done
	printf '%s\n' "${ts[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f\n", a[int((NR+1)/2)]/1000}'
}

declare -A v
for where in host fsrv fsrvc pll; do
	case $where in host) d=$R ;; fsrv) d=$W/m1 ;; fsrvc) d=$W/m3 ;; pll) d=$W/m2 ;; esac
	v[$where.read4k]=$(io read4k "$d/f4k" "$n4k")
	v[$where.read1m]=$(io read1m "$d/f1m" "$n1m")
	v[$where.pread1m]=$(io pread1m "$d/f1m" "$n1m")
	v[$where.stat]=$(io stat "$d/f4k" "$nst")
	v[$where.git]=$(gitst "$d/repo")
	[ $where = host ] || v[$where.cold1m]=$(io cold1m "$d/f1m" "$ncold")
done
# The broker's own file server, from inside a sandbox (pinned like the rest).
CBB=${CB_BIN:-$PWD/bin}
chmod -R a+rX "$B/bench" 2>/dev/null || true
printf 'tiers = { high = { fs_cache_data = false; }; };\n' >"$W/direct.conf"
printf 'tiers = { high = { fs_passthrough = true; }; };\n' >"$W/pt.conf"
: >"$W/none.conf"
POLICY=$W/none.conf
inbox() { taskset -c "$CPU" "$CBB/capbroker" run --policy "$POLICY" --tier high --workspace "$R" \
	--approve deny --ro-bind "$B/bench:/opt/cbbench" -- "$@" 2>/dev/null; }
for col in broker brokerd brokerp; do
	case $col in broker) POLICY=$W/none.conf ;; brokerd) POLICY=$W/direct.conf ;; brokerp) POLICY=$W/pt.conf ;; esac
	v[$col.read4k]=$(inbox /opt/cbbench/fsrv-io read4k "$R/f4k" "$n4k")
	v[$col.read1m]=$(inbox /opt/cbbench/fsrv-io read1m "$R/f1m" "$n1m")
	v[$col.pread1m]=$(inbox /opt/cbbench/fsrv-io pread1m "$R/f1m" "$n1m")
	v[$col.stat]=$(inbox /opt/cbbench/fsrv-io stat "$R/f4k" "$nst")
	[ $col = broker ] && v[$col.cold1m]=$(inbox /opt/cbbench/fsrv-io cold1m "$R/f1m" "$ncold")
	v[$col.git]=$(inbox /bin/sh -c 'git -C repo status --porcelain >/dev/null; for i in $(seq '"$ngit"'); do
		t0=$(date +%s%N); git -C repo status --porcelain >/dev/null; t1=$(date +%s%N)
		echo $(( (t1 - t0) / 1000 )); done' | sort -n |
		awk '{a[NR]=$1} END {printf "%.1f\n", a[int((NR+1)/2)]/1000}')
done
POLICY=$W/none.conf
# A process per file: 200 cats, the mean per cat in microseconds.
catloop='t0=$(date +%s%N); for i in $(seq 200); do cat f4k >/dev/null; done; t1=$(date +%s%N); echo $(( (t1 - t0) / 200000 ))'
v[host.catloop]=$(cd "$R" && taskset -c "$CPU" /bin/sh -c "$catloop")
v[broker.catloop]=$(inbox /bin/sh -c "$catloop")

# The same 4 KiB round trip with the client on another CPU than the server.
other=$(( (CPU + 1) % $(nproc) ))
v[fsrv.read4k_split]=$(taskset -c "$other" "$B/bench/fsrv-io" read4k "$W/m1/f4k" "$n4k")

r() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '%-16s %8s %8s %8s %8s %9s %9s %10s %10s\n' row host fsrv fsrv-c p_ll \
	fsrv/host fsrv/p_ll fsrv-c/host fsrv-c/p_ll
for k in read4k read1m pread1m stat git; do
	unit=us; [ $k = git ] && unit=ms
	printf '%-16s %8s %8s %8s %8s %9s %9s %10s %10s\n' "$k ($unit)" "${v[host.$k]}" \
		"${v[fsrv.$k]}" "${v[fsrvc.$k]}" "${v[pll.$k]}" \
		"$(r "${v[fsrv.$k]}" "${v[host.$k]}")" "$(r "${v[fsrv.$k]}" "${v[pll.$k]}")" \
		"$(r "${v[fsrvc.$k]}" "${v[host.$k]}")" "$(r "${v[fsrvc.$k]}" "${v[pll.$k]}")"
done
printf '%-16s %8s %8s   (client on CPU %s, server on CPU %s)\n' "read4k split" - \
	"${v[fsrv.read4k_split]}" "$other" "$CPU"
printf '\n%-16s %8s %8s %9s %9s   (broker: capbroker run, served workspace)\n' row host broker \
	broker/host broker/fsrv
for k in read4k read1m pread1m stat git; do
	unit=us; [ $k = git ] && unit=ms
	printf '%-16s %8s %8s %9s %9s\n' "$k ($unit)" "${v[host.$k]}" "${v[broker.$k]}" \
		"$(r "${v[broker.$k]}" "${v[host.$k]}")" "$(r "${v[broker.$k]}" "${v[fsrv.$k]}")"
done
printf '%-16s %8s %8s %9s\n' "catloop (us)" "${v[host.catloop]}" "${v[broker.catloop]}" \
	"$(r "${v[broker.catloop]}" "${v[host.catloop]}")"
printf '%-16s %8s %8s %8s %8s %8s   (cold: the mount'"'"'s pages dropped before each read)\n' \
	"cold1m (us)" - "${v[fsrv.cold1m]}" "${v[fsrvc.cold1m]}" "${v[pll.cold1m]}" "${v[broker.cold1m]}"
printf '\n%-16s %8s %8s %8s %11s %11s   (the policy: fs_cache_data = false, fs_passthrough)\n' \
	row host direct passthr direct/host passthr/host
for k in read4k read1m pread1m stat git; do
	unit=us; [ $k = git ] && unit=ms
	printf '%-16s %8s %8s %8s %11s %11s\n' "$k ($unit)" "${v[host.$k]}" "${v[brokerd.$k]}" \
		"${v[brokerp.$k]}" "$(r "${v[brokerd.$k]}" "${v[host.$k]}")" \
		"$(r "${v[brokerp.$k]}" "${v[host.$k]}")"
done
{
	printf '{\n'
	for k in "${!v[@]}"; do printf '  "fuse.%s": %s,\n' "$k" "${v[$k]}"; done
	printf '  "fuse.read4k_vs_host": %s,\n' "$(r "${v[fsrv.read4k]}" "${v[host.read4k]}")"
	printf '  "fuse.read4k_vs_passthrough_ll": %s,\n' "$(r "${v[fsrv.read4k]}" "${v[pll.read4k]}")"
	printf '  "fuse.git_status_vs_host": %s,\n' "$(r "${v[fsrv.git]}" "${v[host.git]}")"
	printf '  "fuse.broker_read4k_vs_passthrough_ll": %s,\n' "$(r "${v[broker.read4k]}" "${v[pll.read4k]}")"
	printf '  "fuse.broker_git_status_vs_host": %s\n' "$(r "${v[broker.git]}" "${v[host.git]}")"
	printf '}\n'
} >"$B/bench/fsrv.json"
echo "(json: $B/bench/fsrv.json)"
