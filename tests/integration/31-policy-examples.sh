#!/usr/bin/env bash
# 31-policy-examples.sh - every tier of every shipped policy starts a
# sandbox, and check-policy refuses what start-up would refuse: the same
# bind-destination rule (sbx_bind_dst_refusal) judges both, and a bind
# source missing on this machine is an error.
. "$(dirname "$0")/../lib.sh"

CB="$CB_BIN/capbroker"
EX="${CB_EXAMPLES:-$CB_TOP/examples/policies}"
W="$T_TMP/ws"
mkdir -p "$W"

for f in "$EX"/*.conf; do
	name=$(basename "$f")
	tiers=$("$CB" check-policy "$f" 2>/dev/null | sed -n 's/.*(tiers: \([^;]*\);.*/\1/p')
	t_match "$name: check-policy lists its tiers" "$tiers" "[a-z]"
	for t in $tiers; do
		t_exit "$name: a sandbox of tier $t starts and runs its agent" 0 \
			"$CB" run --policy "$f" --tier "$t" --workspace "$W" --timeout 30 -- \
			/bin/sh -c 'echo "ran in $CAPBROKER_SANDBOX"'
		t_match "$name: ... the agent's output came back" "$(cat "$T_TMP/out")" "^ran in sbx-"
	done
done

# The examples' old binds: /etc as a destination is the sandbox's own.
printf 'tiers = { high = { ro_binds = [ "/etc" ]; }; medium = { ro_binds = [ "/etc/ssl/certs" ]; }; };\n' \
	>"$T_TMP/etc.conf"
t_exit "check-policy refuses /etc as a bind destination" 1 "$CB" check-policy "$T_TMP/etc.conf"
t_match "... with file:line and why" "$(cat "$T_TMP/err")" \
	'etc.conf:1: bind destination "/etc" in ro_binds refused: the sandbox builds its own /etc'
t_match "... and beneath /etc too" "$(cat "$T_TMP/err")" 'bind destination "/etc/ssl/certs" in ro_binds refused'
t_exit "start-up refuses the same policy (serve loads it)" 125 \
	"$CB" serve --state "$T_TMP/st-etc" --policy "$T_TMP/etc.conf"
t_match "... for the same reason" "$(cat "$T_TMP/err")" 'bind destination "/etc" in ro_binds refused'

for d in /tmp /proc/x /dev/shm /capbroker/y / /a//b /a/./b; do
	printf 'tiers = { high = { ro_binds = [ "/usr:%s" ]; }; };\n' "$d" >"$T_TMP/d.conf"
	t_exit "check-policy refuses the destination $d" 1 "$CB" check-policy "$T_TMP/d.conf"
done
printf 'tiers = { high = { ro_binds = [ "/usr/share/doc:/tmp/doc" ]; }; };\n' >"$T_TMP/tmp.conf"
t_exit "check-policy accepts a destination beneath /tmp" 0 "$CB" check-policy "$T_TMP/tmp.conf"
t_exit "... and the sandbox shows it there, on its private /tmp" 0 \
	"$CB" run --policy "$T_TMP/tmp.conf" --tier high --workspace "$W" -- /bin/sh -c 'test -d /tmp/doc && ls /tmp/doc >/dev/null'

printf 'tiers = { high = { rw_binds = [ "%s/absent:/out" ]; }; };\n' "$T_TMP" >"$T_TMP/src.conf"
t_exit "check-policy refuses a bind source missing on this machine" 1 "$CB" check-policy "$T_TMP/src.conf"
t_match "... naming the tier and the source" "$(cat "$T_TMP/err")" 'tier "high": bind source .*/absent: No such file'
printf 'tiers = { medium = { workspace = "%s/nowhere"; }; };\n' "$T_TMP" >"$T_TMP/ws.conf"
t_exit "a missing workspace is only a warning (--workspace replaces it)" 0 "$CB" check-policy "$T_TMP/ws.conf"
t_match "... but it is said" "$(cat "$T_TMP/err")" 'warning: tier "medium": workspace .*/nowhere is not a directory'

t_exit "run --ro-bind onto /etc is refused before anything starts" 64 \
	"$CB" run --ro-bind /usr/share:/etc/share -- true
t_match "... saying why" "$(cat "$T_TMP/err")" "destination /etc/share refused: the sandbox builds its own /etc"
t_done
