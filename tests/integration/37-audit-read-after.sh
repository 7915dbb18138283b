#!/usr/bin/env bash
# 37-audit-read-after.sh - CI finding: `capctl audit` run just after an
# agent's denial did not show it.  The agent is answered once its record is
# in the audit ring; the writer puts it in the file a moment later
# (docs/audit.md), and capctl read the file in between.  Now capctl asks
# the running broker to flush first (status with "flush"), so every
# decision made before the command is in what it shows.
#
# slow_audit_shim.c, preloaded into the broker, makes each write to the log
# take 700 ms while armed: before the fix the line was missing every time.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
S="$T_TMP/st"; W="$T_TMP/ws"; mkdir -p "$W"
shim_build slow_audit_shim
ARM="$T_TMP/arm"
CB_SLOW_AUDIT=$ARM LD_PRELOAD=$SHIM srv_start "$S"
agent_start a1 --tier medium --workspace "$W" --grant "fs.read:$W/**"
touch "$ARM"
agent_do a1 "capcall fs.read /etc/hostname-$$"
t_match "the agent has its answer (a denial)" "$AOUT" "not-covered|denied|77"
t_ok "... before its line reaches the file (the writer is slow)" \
	sh -c "! grep -q 'hostname-$$' '$S/audit.jsonl'"
"$CTL" --state "$S" audit --sandbox a1 >"$T_TMP/tab"
t_match "capctl audit at once shows the denial" "$(cat "$T_TMP/tab")" \
	"a1 +deny +fs\.read +/etc/hostname-$$ +not-covered"
agent_do a1 "capcall fs.read /etc/hostname-2-$$"
t_match "... and --json too" "$("$CTL" --state "$S" --json audit --sandbox a1)" "hostname-2-$$"
rm -f "$ARM"
t_done
