#!/usr/bin/env bash
# 982-proc-output-discard.sh - red team, fourth pass (2026-12-02): a
# proc.exec child's output past what is kept (64 KiB a stream) is thrown
# away, but it is drained so the program never blocks on it.  Before the
# fix it was read 16 KiB at a time on the loop at every write of the
# program: four children running `cat /dev/zero` made the broker spend
# about half a CPU each discarding it (outside any sandbox's budget), and
# every other sandbox's operations slowed.  Now the broker's CPU stays a
# small part of the flood's time, and a program with a large but finite
# output still ends at once with its status.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
BIG=/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1
[ -r "$BIG" ] || BIG=$(find /usr/lib -type f -size +20M 2>/dev/null | head -1)
cat >"$T_TMP/p.conf" <<EOT
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**", "proc.exec:/usr/bin/cat" ]; }; };
EOT
srv_start "$S" --policy "$T_TMP/p.conf"
ticks() { awk '{ print $14 + $15 }' "/proc/$SRV/stat"; }
hz=$(getconf CLK_TCK)
run_agent() { # ID ARGS... : the agent of proc_flood_agent.py, its output in $T_TMP/ID.out
	local id=$1; shift
	adm_nofifos "$CB" run --connect "$S/admin.sock" --id "$id" --tier medium --workspace "$W" \
		--ro-bind "$CB_TOP/tests/integration:/t" --grant proc.exec:/usr/bin/cat \
		-- /usr/bin/python3 /t/proc_flood_agent.py "$@" >"$T_TMP/$id.out" 2>&1
}

c0=$(ticks)
s0=$(date +%s%N)
(run_agent flood 4 5000 /usr/bin/cat /dev/zero)
s1=$(date +%s%N)
c1=$(ticks)
t_is "four children flooding their output run to their timeout" \
	"$(grep -c 'status=124 out=65536 trunc=True' "$T_TMP/flood.out")" 4
used=$(( (c1 - c0) * 1000 / hz ))
wall=$(( (s1 - s0) / 1000000 ))
echo "# broker CPU ${used} ms during ${wall} ms of four children's flood"
t_ok "... the broker spent under 15 % of that time on it (${used} of ${wall} ms)" \
	test "$((used * 100))" -lt "$((wall * 15))"
if [ -n "$BIG" ]; then
	(run_agent big 1 60000 /usr/bin/cat "$BIG" "$BIG")
	t_match "a large finite output ($(($(stat -c %s "$BIG") * 2 / 1048576)) MiB): status 0, 64 KiB kept, truncated" \
		"$(cat "$T_TMP/big.out")" 'status=0 out=65536 trunc=True'
	t_ok "... and it ends at once (under 10 s), not at its timeout" \
		test "$(sed -n 's/^done in \([0-9]*\)\..*/\1/p' "$T_TMP/big.out")" -lt 10
fi
t_done
