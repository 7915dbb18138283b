#!/usr/bin/env bash
# 871-fs-served-close-at-stop.sh - every open of a served file that moved
# data gets exactly one "fs.close" line, also when the sandbox stops with
# the file open or its release reaches the broker after the stop.  Before
# the fix the server dropped the line of a release that came after the
# sandbox began to stop (71-fs-served's "1000 close lines" read 999 twice on
# a loaded machine), and a file whose release the kernel dropped (queued
# when the sandbox's last mount went) got none.
#
# Deterministic, not timed: fuse_shim.c, preloaded into the broker,
# hands every FUSE_RELEASE to the server 1.5 s late, so the releases of the
# files the agent holds at its end come after the stop (or never: aborted
# with the connection).  Before the fix: 0 of 2 close lines, in `run` and
# under `serve`.  Needs root (the broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "close lines at a sandbox's stop" "needs root and /dev/fuse"
	t_done
	exit
fi

shim_build fuse_shim
W="$T_TMP/ws"
mkdir -p "$W"
echo hello >"$W/a.txt"
echo world >"$W/b.txt"
chown -R 4247:4247 "$W"
# Direct I/O: every read moves data through the broker, so each open that
# read has a close line to write.
printf 'tiers = { medium = { fs_cache_data = false; }; };\n' >"$T_TMP/direct.conf"
closes() { grep -c "\"op\":\"fs.close\",\"resource\":\"$W/[ab].txt\"" "$1" 2>/dev/null; }
closes_are() { [ "$(closes "$1")" = "$2" ]; }
HOLD='exec 3<a.txt 4<b.txt; head -c 2 <&3 >/dev/null; head -c 3 <&4 >/dev/null'

# -- run: the broker ends with the sandbox (brk_fss_end_all) ---------------------
A="$T_TMP/st-run"
CB_SHIM_RELEASE_MS=1500 LD_PRELOAD=$SHIM timeout 60 "$CB" run --state "$A" --id hold1 \
	--policy "$T_TMP/direct.conf" --tier medium --workspace "$W" --approve deny -- \
	/bin/sh -c "$HOLD" >/dev/null 2>&1
t_is "run: two files held open at the agent's end, two open lines" \
	"$(grep -c "\"op\":\"fs.open\",\"resource\":\"$W/[ab].txt\"" "$A/audit.jsonl")" 2
t_is "... and two close lines, though their releases came after the stop" "$(closes "$A/audit.jsonl")" 2
t_ok "... with the bytes each open moved" \
	grep -q "\"op\":\"fs.close\",\"resource\":\"$W/b.txt\".*\"detail\":\"served, 3 bytes read, 0 written" \
	"$A/audit.jsonl"
t_ok "... after the sandbox's stop line, and before the broker's" \
	awk '/"op":"sandbox.stop"/ { s = NR } /"op":"fs.close"/ { c = NR } /"op":"broker.stop"/ { b = NR }
		END { exit !(s && c > s && b > c) }' "$A/audit.jsonl"
t_ok "the log verifies" "$CTL" --state "$A" audit verify

# -- serve: the loop writes them as they come (brk_fss_ending) ---------------------
S="$T_TMP/st"
CB_SHIM_RELEASE_MS=1500 LD_PRELOAD=$SHIM srv_start "$S" --policy "$T_TMP/direct.conf"
agent_start h1 --tier medium --workspace "$W"
agent_start h2 --tier medium --workspace "$W"
agent_do h1 "$HOLD && echo held"
t_is "serve: the agent holds two files it read" "$AOUT" "held"
agent_stop h1
t_ok "... two close lines once its releases come, after the stop" \
	wait_for 100 closes_are "$S/audit.jsonl" 2
t_is "... no more (one a file)" "$(sleep 2; closes "$S/audit.jsonl")" 2
agent_do h2 "cat a.txt"
t_is "another sandbox is served meanwhile and after" "$AOUT" "hello"
agent_stop h2
srv_stop
t_ok "the log verifies" "$CTL" --state "$S" audit verify
t_done
