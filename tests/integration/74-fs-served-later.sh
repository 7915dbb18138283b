#!/usr/bin/env bash
# 74-fs-served-later.sh - a tree granted while the sandbox runs appears at
# its host path (issue 14): under `serve`, a sandbox started with only its
# workspace gets an fs.read token on another directory (capctl issue, or an
# approved elevation) and an unmodified `cat` inside reads the file there;
# after the revocation the next `cat` fails.  pid 1 attaches the broker's
# new FUSE mount (broker/fs_served.c brk_fss_grow, sandbox-stub
# stub_mount_late): the mount point is made on the sandbox's own root only,
# never inside /tmp or another mount.  Needs root (the broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "trees granted while the sandbox runs" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4244
W="$T_TMP/ws"
O="$T_TMP/other/data"
E="$T_TMP/elev"
mkdir -p "$W" "$O/sub" "$E"
echo "in the workspace" >"$W/w.txt"
echo "granted later" >"$O/f.txt"
echo deeper >"$O/sub/g.txt"
echo "elevated" >"$E/e.txt"
chown -R "$OWN:$OWN" "$W" "$T_TMP/other" "$E"
chmod 0755 "$T_TMP"

S="$T_TMP/st"
srv_start "$S"

# -- capctl issue to a running sandbox ---------------------------------------------
agent_start l1 --tier high --workspace "$W"
agent_do l1 "cat '$O/f.txt'"
t_is "before the grant the other tree is not there" "$ARC" 1
t_match "... (no such file)" "$AOUT" "No such file"
"$CTL" --state "$S" --json issue --sandbox l1 --cap "fs.read:$O/**" --cap "fs.list:$O/**" \
	>"$T_TMP/issue.json"
ID=$(jget 'd["id"]' <"$T_TMP/issue.json")
t_match "capctl issue grants fs.read on it" "$ID" '^[0-9a-f]+$'
# The mount is attached a moment after the grant: retry for up to 3 s.
agent_do l1 "for i in \$(seq 30); do cat '$O/f.txt' 2>/dev/null && break; sleep 0.1; done"
t_is "an unmodified cat then reads it at its host path" "$AOUT" "granted later"
agent_do l1 "ls '$O' && cat '$O/sub/g.txt'"
t_is "... ls lists it, cat reads beneath it" "$AOUT" "$(printf 'f.txt\nsub\ndeeper')"
agent_do l1 "cat w.txt"
t_is "the workspace is still served" "$AOUT" "in the workspace"
agent_do l1 "echo x >'$O/new.txt'"
t_is "a read grant does not let the agent write there" "$ARC" 2
t_is "... and nothing was written" "$(ls "$O")" "$(printf 'f.txt\nsub')"
t_ok "the mount is audited" wait_for 200 grep -q "\"sandbox\":\"l1\",\"op\":\"fs.serve\",\"resource\":\"$O\".*served at its host path" \
	"$S/audit.jsonl"
t_ok "capctl revoke returns" "$CTL" --state "$S" revoke "$ID"
agent_do l1 "cat '$O/f.txt'"
t_is "after the revocation the next cat fails" "$ARC" 1
t_match "... with permission denied" "$AOUT" "Permission denied"
agent_do l1 "cat w.txt"
t_is "... while the workspace still answers" "$AOUT" "in the workspace"
"$CTL" --state "$S" --json issue --sandbox l1 --cap "fs.read:$O/**" >"$T_TMP/issue2.json"
agent_do l1 "for i in \$(seq 30); do cat '$O/f.txt' 2>/dev/null && break; sleep 0.1; done"
t_is "a new grant serves the tree again (the same mount)" "$AOUT" "granted later"
t_is "... mounted once" "$(grep -c "\"sandbox\":\"l1\",\"op\":\"fs.serve\",\"resource\":\"$O\"" "$S/audit.jsonl")" 1

# -- a tree beneath the sandbox's own /tmp is never mounted while it runs ----------
TD=$(mktemp -d /tmp/cbtest-later.XXXXXX)
echo host >"$TD/h.txt"
chmod 0755 "$TD"
agent_do l1 "mkdir -p '$TD' && echo mine >'$TD/own.txt'"
"$CTL" --state "$S" issue --sandbox l1 --cap "fs.read:$TD/**" >/dev/null
wait_for 50 grep -q "\"op\":\"fs.serve\",\"resource\":\"$TD\"" "$S/audit.jsonl"
t_ok "pid 1 refuses it (another mount: the agent's /tmp)" grep -q \
	"\"op\":\"fs.serve\",\"resource\":\"$TD\".*could not attach it.*inside another mount" "$S/audit.jsonl"
agent_do l1 "ls -A '$TD'"
t_is "... and the agent's own directory there is untouched" "$AOUT" "own.txt"
rm -rf "$TD"

# -- an approved elevation (medium tier) -------------------------------------------
agent_start m1 --tier medium --workspace "$W"
agent_send m1 "capcall --json request 'fs.read:$E/**' --ttl 120 --reason later"
N=$ASEQ
RID=
for i in $(seq 100); do
	RID=$("$CTL" --state "$S" --json pending 2>/dev/null |
		jget '([r["rid"] for r in d if r["cap"] == "fs.read:'"$E"'/**"] + [""])[0]' 2>/dev/null)
	[ -n "$RID" ] && break
	sleep 0.1
done
t_exit "an administrator approves the elevation" 0 "$CTL" --state "$S" approve "$RID"
agent_wait m1 "$N"
agent_do m1 "for i in \$(seq 30); do cat '$E/e.txt' 2>/dev/null && break; sleep 0.1; done"
t_is "the elevated tree appears and cat reads it" "$AOUT" "elevated"

# m1's `run` holds l1's input too (started after it): m1 first.
agent_stop m1
agent_stop l1
t_ok "the audit log verifies" "$CTL" --state "$S" audit verify
t_done
