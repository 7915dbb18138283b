#!/usr/bin/env bash
# 935-broker-no-nss-on-loop.sh - review finding: a `run --connect --ro-bind`
# by an administrator other than root made the daemon look the caller's
# group up with getpwuid() on its loop thread.  The user database may be a
# directory server (LDAP, SSSD) across the network: a slow one stalled
# every sandbox of the broker.  Now the group is the one the caller runs as,
# from the admin socket's SO_PEERCRED, and the loop asks NSS nothing.
#
# fault_shim.c (CB_FAULT_CALL=nss), preloaded into the daemon, records
# every getpwuid/getpwnam/getgrgid/getgrnam and the thread that made it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ]; then
	t_skip "no user database lookup on the loop" "needs root (runuser)"
	t_done
	exit
fi
shim_build fault_shim
NOBODY=$(id -u nobody)
mkdir -p "$T_TMP/pub" "$T_TMP/share"
echo "shared" >"$T_TMP/share/f"
chmod 0777 "$T_TMP/pub"
chmod 0755 "$T_TMP/share"
printf 'admins = { uids = [ %s ]; };\n' "$NOBODY" >"$T_TMP/p.conf"
SOCK="$T_TMP/pub/adm.sock"
ARM="$T_TMP/arm"
touch "$ARM"
CB_FAULT_CALL=nss CB_FAULT_ARM=$ARM CB_FAULT_MATCH=- LD_PRELOAD=$SHIM \
	"$CB" serve --state "$T_TMP/st" --socket "$SOCK" --policy "$T_TMP/p.conf" >>"$T_TMP/serve.log" 2>&1 &
SRV=$!
_adm_pids+=("$SRV")
wait_for 100 "$CTL" --socket "$SOCK" status
chmod 0666 "$SOCK"
rm -f "$ARM.pid"

out=$(cd / && timeout 60 runuser -u nobody -- "$PUB/capbroker" run --connect "$SOCK" \
	--ro-bind "$T_TMP/share:/shared" -- /bin/cat /shared/f 2>&1)
t_is "an administrator's --ro-bind is shown to its sandbox" "$out" "shared"
t_is "the daemon's loop looked nothing up in the user database" \
	"$(grep '^main' "$ARM.pid" 2>/dev/null)" ""
t_done
