#!/usr/bin/env bash
# 19-broker-paths.sh - every path the broker touches is resolved by the kernel
# from a grant's root, bind sources included (issue 10, the path half).
#
# Each block is one class of hole that was found open; each assertion failed
# before its fix:
#  - proc.exec binds the fs.read roots the agent holds: by path string they
#    followed symlinks out of the grant (hole 1);
#  - bind sources (capcall, the Python client, --ro-bind, proc.exec roots)
#    were opened by the stub as the agent's uid, so a checkout under a 0700
#    directory could not start a sandbox (hole 2);
#  - /proc and /sys were refused by a string check only: a grant rooted in
#    /proc, or a procfs/sysfs mounted inside a granted tree, was served.
. "$(dirname "$0")/../lib.sh"
MNTS=()
cleanup() { for m in "${MNTS[@]}"; do umount -l "$m" 2>/dev/null; done; t_cleanup; }
trap cleanup EXIT

# ---- hole 1: proc.exec binds by fd, resolved with no symlink -------------
W="$T_TMP/ws"; O="$T_TMP/outside"
mkdir -p "$W" "$O"; echo TOPSECRET >"$O/secret.txt"; echo wsfile >"$W/ok.txt"
ln -s "$O" "$W/link"; ln -s "$O" "$W/dirlink"
out=$("$CB_BIN/capbroker" run --tier medium --workspace "$W" \
	--grant "fs.read:$W/link/secret.txt" --grant proc.exec:/usr/bin/cat \
	-- capcall proc.exec -- /usr/bin/cat "$W/link/secret.txt" 2>&1)
t_is "proc.exec does not bind a file grant through a symlink" "$(grep -c TOPSECRET <<<"$out")" 0
out=$("$CB_BIN/capbroker" run --tier medium --workspace "$W" \
	--grant "fs.read:$W/*" --grant "fs.read:$W/dirlink" --grant proc.exec:/usr/bin/ls \
	-- capcall proc.exec -- /usr/bin/ls "$W/dirlink/" 2>&1)
t_is "proc.exec does not bind a directory grant through a symlink (link -> elsewhere)" \
	"$(grep -c secret.txt <<<"$out")" 0
out=$("$CB_BIN/capbroker" run --tier medium --workspace "$W" \
	--grant "fs.read:$W/**" --grant proc.exec:/usr/bin/cat \
	-- capcall proc.exec -- /usr/bin/cat "$W/link/secret.txt" 2>&1)
t_is "... nor does a workspace grant make the symlink's target visible" "$(grep -c TOPSECRET <<<"$out")" 0
t_is "... while a real file in the granted tree is shown" \
	"$("$CB_BIN/capbroker" run --tier medium --workspace "$W" --grant "fs.read:$W/**" \
	--grant proc.exec:/usr/bin/cat -- capcall proc.exec -- /usr/bin/cat "$W/ok.txt" 2>&1)" wsfile

# ---- hole 2: bind sources are opened with the broker's credentials -------
# A copy of the programs under a 0700 directory, as a checkout in root's
# home: the agent (nobody when the broker is root) cannot search it.
P=$(mktemp -d "$T_TMP/private.XXXXXX"); chmod 0700 "$P"
mkdir -p "$P/cb" "$P/cb/ws" "$P/ro"
cp -a "$CB_BIN" "$P/cb/bin"; cp -a "$CB_TOP/client" "$P/cb/client"
echo private-ws >"$P/cb/ws/f"; echo private-ro >"$P/ro/f"; chmod 0644 "$P/cb/ws/f" "$P/ro/f"
t_exit "a broker installed under a 0700 directory starts a sandbox with capcall" 0 \
	"$P/cb/bin/capbroker" run -- capcall ping
t_is "... --ro-bind of a directory under it is shown" \
	"$("$P/cb/bin/capbroker" run --ro-bind "$P/ro:/data" -- /usr/bin/cat /data/f 2>&1)" private-ro
t_is "... the Python client under it is importable" \
	"$("$P/cb/bin/capbroker" run -- /usr/bin/python3 -c 'import capbroker; print("py")' 2>&1)" py
t_is "... proc.exec sees a grant root under it" \
	"$("$P/cb/bin/capbroker" run --tier medium --workspace "$P/cb/ws" --grant "fs.read:$P/cb/ws/**" \
	--grant proc.exec:/usr/bin/cat -- capcall proc.exec -- /usr/bin/cat "$P/cb/ws/f" 2>&1)" private-ws
ln -s "$P/ro" "$T_TMP/rolink"
t_is "an administrator's --ro-bind through a symlink is resolved once, then bound by fd" \
	"$("$CB_BIN/capbroker" run --ro-bind "$T_TMP/rolink:/data" -- /usr/bin/cat /data/f 2>&1)" private-ro

# ---- kernel file systems: decided by the fd's file system ----------------
t_exit "fs.read:/proc/** does not serve /proc/1/status" 77 \
	"$CB_BIN/capbroker" run --tier high --grant 'fs.read:/proc/**' -- capcall fs.read /proc/1/status
t_exit "fs.list:/proc/** does not list the processes" 77 \
	"$CB_BIN/capbroker" run --tier high --grant 'fs.list:/proc/**' -- capcall fs.list /proc
t_exit "fs.read:/sys/** does not serve sysfs" 77 \
	"$CB_BIN/capbroker" run --tier high --grant 'fs.read:/sys/**' -- capcall fs.read /sys/kernel/uevent_seqnum
t_exit "fs.write:/proc/sys/** writes no tunable" 77 \
	"$CB_BIN/capbroker" run --tier high --grant 'fs.write:/proc/sys/**' -- capcall fs.write /proc/sys/kernel/hostname
if [ "$(id -u)" = 0 ] && mkdir -p "$W/p" "$W/s" && mount -t proc proc "$W/p" 2>/dev/null; then
	MNTS+=("$W/p")
	mount --bind /sys "$W/s" && MNTS+=("$W/s")
	t_exit "a procfs mounted inside a granted tree is not served (fs.read)" 77 \
		"$CB_BIN/capbroker" run --tier medium --workspace "$W" --grant "fs.read:$W/**" \
		-- capcall fs.read "$W/p/1/status"
	t_exit "... nor listed" 77 \
		"$CB_BIN/capbroker" run --tier medium --workspace "$W" --grant "fs.list:$W/**" \
		-- capcall fs.list "$W/p"
	t_exit "... nor a grant rooted inside it" 77 \
		"$CB_BIN/capbroker" run --tier high --grant "fs.read:$W/p/**" \
		-- capcall fs.read "$W/p/1/status"
	t_exit "a sysfs bind-mounted inside a granted tree is not served" 77 \
		"$CB_BIN/capbroker" run --tier medium --workspace "$W" --grant "fs.read:$W/**" \
		-- capcall fs.read "$W/s/kernel/uevent_seqnum"
	t_match "... and proc.exec does not bind a grant rooted on it" \
		"$("$CB_BIN/capbroker" run --tier high --grant "fs.read:$W/p/**" --grant proc.exec:/usr/bin/cat \
		-- capcall proc.exec -- /usr/bin/cat "$W/p/1/status" 2>&1)" 'No such file'
	umount -l "$W/p" "$W/s"; MNTS=()
else
	t_skip "procfs inside a granted tree" "needs root to mount"
fi

t_done
