#!/usr/bin/env bash
# 38-fs-served-audit-slow.sh - CI finding: reading 5,000 served files on a
# loaded machine (test 87), 3 opens were refused (Permission denied).  Each
# served open and close takes room in the audit log's reserve; the writer
# extends the reserve between its writes, and on a busy disk the burst used
# it up faster: the server waited aud_room's 200 ms, then refused.  A
# server thread is not the broker's loop, so it now waits for room as long
# as aud_flush would (5 s): the agent is slowed, not refused.
#
# slow_audit_shim.c, preloaded into the broker, makes each write to the log
# take 400 ms while armed (a busy disk; aud_room alone waited 200): before the fix some of the reads
# below were refused every time.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "served reads on a slow audit disk" "needs root and /dev/fuse"
	t_done
	exit
fi
S="$T_TMP/st"; W="$T_TMP/ws"; mkdir -p "$W/many"
"$PYTHON" -c 'import sys
for i in range(2000):
    open("%s/f%d" % (sys.argv[1], i), "w").write("%d\n" % i)' "$W/many"
shim_build slow_audit_shim
ARM="$T_TMP/arm"
CB_SLOW_AUDIT=$ARM CB_SLOW_AUDIT_MS=400 LD_PRELOAD=$SHIM srv_start "$S"
agent_start c1 --tier medium --workspace "$W"
touch "$ARM"
agent_do c1 "cat many/* 2>/tmp/e | wc -l; grep -c denied /tmp/e; head -n 3 /tmp/e"
rm -f "$ARM"
t_is "2,000 served files read while the log's disk is slow: every one" "$(sed -n 1p <<<"$AOUT")" 2000
t_is "... none refused" "$(sed -n 2p <<<"$AOUT")" 0
t_is "... and no refusal in the log" "$(grep -c '"decision":"deny"' "$S/audit.jsonl")" 0
if [ "$(sed -n 2p <<<"$AOUT")" != 0 ]; then
	sed -n '3,$p' <<<"$AOUT" | sed 's/^/# agent: /'
	grep '"decision":"deny"' "$S/audit.jsonl" | head -n 3 | sed 's/^/# log: /'
	tail -n 5 "$T_TMP/serve.log" | sed 's/^/# broker: /'
fi
t_ok "the log verifies" "$CTL" --state "$S" audit verify
t_done
