#!/usr/bin/env bash
# 75-run-connect-owner.sh - a sandbox started over the admin socket by an
# administrator other than root and the broker's own user works in a
# directory that administrator owns.  The workspace is the medium tier's
# file ceiling and the (root) broker acts there as the directory's owner,
# so before, a policy administrator's `run --connect --workspace
# /home/other` let its agent read and change another user's files as that
# user (and a run from /tmp, as root).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "the workspace of an administrator's sandbox" "needs root and /dev/fuse"
	t_done
	exit
fi

NOBODY=$(id -u nobody)
OTHER=4246
mkdir -p "$T_TMP/other" "$T_TMP/mine" "$T_TMP/pub"
echo "other's secret" >"$T_TMP/other/f"
echo "mine" >"$T_TMP/mine/f"
chown -R "$OTHER:$OTHER" "$T_TMP/other"
chown -R "$NOBODY" "$T_TMP/mine"
chmod 0777 "$T_TMP/pub"
printf 'admins = { uids = [ %s ]; };\n' "$NOBODY" >"$T_TMP/p.conf"
SOCK="$T_TMP/pub/adm.sock"
"$CB" serve --state "$T_TMP/st" --socket "$SOCK" --policy "$T_TMP/p.conf" >>"$T_TMP/serve.log" 2>&1 &
SRV=$!
_adm_pids+=("$SRV")
wait_for 100 "$CTL" --socket "$SOCK" status
chmod 0666 "$SOCK"
as_nobody() { # DIR ARGS... : run --connect as nobody, from DIR
	local d=$1; shift
	(cd "$d" && timeout 60 runuser -u nobody -- "$PUB/capbroker" run --connect "$SOCK" "$@")
}

t_exit "an administrator's medium-tier sandbox on another user's directory is refused (125)" 125 \
	as_nobody / --tier medium --workspace "$T_TMP/other" -- /bin/cat "$T_TMP/other/f"
t_match "... saying whose it is" "$(cat "$T_TMP/err")" \
	"workspace '$T_TMP/other' belongs to uid $OTHER, not to uid $NOBODY who asked"
t_exit "... in the high tier too, when named" 125 \
	as_nobody / --tier high --workspace "$T_TMP/other" -- /bin/cat "$T_TMP/other/f"
t_exit "... and as the medium tier's default, the current directory" 125 \
	as_nobody "$T_TMP" --tier medium -- /bin/true
t_match "... saying so" "$(cat "$T_TMP/err")" "without --workspace, the current directory"
t_is "nothing was started for them" "$(grep -c '"op":"sandbox.start"' "$T_TMP/st/audit.jsonl")" 0
t_is "its own directory works" "$(as_nobody / --tier medium --workspace "$T_TMP/mine" -- /bin/cat f 2>&1)" "mine"
t_exit "so does the root, with no workspace" 0 as_nobody / --tier medium -- /bin/true
t_exit "... and the high tier without a named workspace (the policy's ceiling)" 0 \
	as_nobody "$T_TMP" --tier high -- /bin/true
t_is "root may name any directory" "$(cd / && timeout 60 "$CB" run --connect "$SOCK" --tier medium \
	--workspace "$T_TMP/other" -- /bin/cat f 2>&1)" "other's secret"
t_done
