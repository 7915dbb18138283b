#!/usr/bin/env bash
# 874-fs-served-stop-refused.sh - a served request that reaches the file
# server after its sandbox began to stop is refused (EACCES) with a denial
# line of its own, reason `stopping`, written after the sandbox's
# `sandbox.stop` line in its name, and the log still verifies.  Before,
# such a request got EACCES with no line at all (a killed sandbox is freed
# once its launcher is reaped; an agent process killed after it, or one
# whose request waited while the sandbox was throttled, may still be
# answered).  A first attempt wrote it with reason `permission`, which made
# 73-fs-served-audit-flood count an open of a sandbox stopped for its
# budget as refused for another reason.
#
# Deterministic, not timed: fuse_shim.c, preloaded into the broker, holds
# the agent's next open (CB_SHIM_OPEN_ARM) after the server has read it
# from the kernel, so the agent waits for the answer; the sandbox is killed
# and freed (no longer listed) before the hold is let go.  Before the fix:
# no line.  Needs root (the broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "a served request after the stop has its line" "needs root and /dev/fuse"
	t_done
	exit
fi

shim_build fuse_shim
W="$T_TMP/ws"
mkdir -p "$W"
echo hello >"$W/a.txt"
ARM="$T_TMP/arm"
S="$T_TMP/st"
CB_SHIM_OPEN_ARM=$ARM LD_PRELOAD=$SHIM srv_start "$S"
t_ok "capbroker serve is listening" test -S "$S/admin.sock"
agent_start late --tier medium --workspace "$W"
agent_do late "cat a.txt"
t_is "an open is served while the sandbox runs" "$AOUT" "hello"

unlisted() { ! "$CTL" --state "$S" --json sandboxes | grep -q '"late"'; }
: >"$ARM.hold"
: >"$ARM"
agent_send late "cat a.txt"
t_ok "the server has read the agent's next open (held)" wait_for 100 test -e "$ARM.hit"
t_exit "capctl kill of its sandbox" 0 "$CTL" --state "$S" kill late
t_ok "... which is freed while the open waits (no longer listed)" wait_for 100 unlisted
rm -f "$ARM.hold"
agent_stop late
t_is "the agent was killed (137)" "$AEXIT" 137

line() { grep "\"sandbox\":\"late\",\"op\":\"fs.open\",\"resource\":\"$W/a.txt\"" "$S/audit.jsonl" |
	grep '"decision":"deny"'; }
t_ok "the open judged after the stop has its denial line" wait_for 100 line
t_match "... reason stopping, not permission" "$(line)" '"reason":"stopping"'
t_is "... one line" "$(line | wc -l)" 1
t_ok "... after the sandbox's stop line" \
	awk '/"sandbox":"late","op":"sandbox.stop"/ { s = NR }
		/"sandbox":"late","op":"fs.open"/ && /"decision":"deny"/ { d = NR }
		END { exit !(s && d > s) }' "$S/audit.jsonl"
t_is "no open of it refused for any other reason" \
	"$(grep '"sandbox":"late","op":"fs.open"' "$S/audit.jsonl" | grep '"decision":"deny"' |
		grep -vc '"reason":"stopping"')" 0
t_match "capctl audit shows it, and why" \
	"$("$CTL" --state "$S" audit --sandbox late --decision deny)" "fs.open.*stopping"
agent_start other --tier medium --workspace "$W"
agent_do other "cat a.txt"
t_is "another sandbox is served after it" "$AOUT" "hello"
agent_stop other
t_ok "capctl audit verify: intact" "$CTL" --state "$S" audit verify
srv_stop
t_ok "... and after the broker's stop" "$CTL" --state "$S" audit verify
t_done
