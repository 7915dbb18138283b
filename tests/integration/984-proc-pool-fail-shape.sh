#!/usr/bin/env bash
# 984-proc-pool-fail-shape.sh - red team, fourth pass (2026-12-02): a
# pooled sandbox whose build fails pauses the building of its own shape,
# not the whole pool's.  Before the fix any failure stopped every build for
# a second, and an agent could make its own builds fail at will (fs.read
# derived on a directory of its workspace, a proc.exec, the directory
# renamed at once: "mount point ... would be created inside a bound host
# directory"), so another sandbox's proc.exec was handed a pooled sandbox
# 20 times in 49 instead of 56 in 57.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

S="$T_TMP/st"
mkdir -p "$T_TMP/wa" "$T_TMP/wv"
chmod 0755 "$T_TMP/wa" "$T_TMP/wv"
cat >"$T_TMP/p.conf" <<EOT
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**", "proc.exec:/usr/bin/true" ]; }; };
EOT
srv_start "$S" --policy "$T_TMP/p.conf"
ag() { # ID WORKSPACE MODE SECONDS
	(adm_nofifos "$CB" run --connect "$S/admin.sock" --id "$1" --tier medium --workspace "$T_TMP/w$2" \
		--ro-bind "$CB_TOP/tests/integration:/t" --grant proc.exec:/usr/bin/true \
		-- /usr/bin/python3 /t/pool_backoff_agent.py "$3" "$T_TMP/w$2" "$4")
}
takes() { grep -c "\"sandbox\":\"$1\".*\"op\":\"sandbox.pool.take\"" "$S/audit.jsonl"; }
execs() { grep -c "\"sandbox\":\"$1\",\"op\":\"proc.exec\"" "$S/audit.jsonl"; }

ag att a attack 8 >"$T_TMP/att.out" 2>&1 &
apid=$!
sleep 1
ag vic v victim 6 >"$T_TMP/vic.out" 2>&1
wait "$apid"
t_match "the attacker ran" "$(cat "$T_TMP/att.out")" '^attack rounds [0-9]+'
t_ok "... and made pooled builds fail" wait_for 30 at_least 1 "$S/audit.jsonl" '"op":"sandbox.pool.failed"'
t=$(takes vic) n=$(execs vic)
echo "# the other sandbox: $t pooled of $n proc.exec"
t_ok "another sandbox's proc.exec was still handed pooled sandboxes ($t of $n, at least 3 in 4)" \
	test "$((t * 4))" -ge "$((n * 3))" -a "$n" -ge 10
t_done
