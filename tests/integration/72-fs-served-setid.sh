#!/usr/bin/env bash
# 72-fs-served-setid.sh - a set-id file in a served tree is never opened for
# writing.  A root-owned workspace is served as root, with CAP_FSETID, so
# the kernel keeps a set-uid bit on a write: the agent once rewrote a
# set-uid-root file through the medium tier's workspace and it stayed
# set-uid root on the host (found by the red team).  Needs root.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "set-id files in the served workspace" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W"
printf '#!/bin/sh\necho original\n' >"$W/suid"
printf 'original\n' >"$W/sgid"
echo plain >"$W/plain"
chmod 4755 "$W/suid"
chmod 2755 "$W/sgid"

sh_in() { timeout 60 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c "$1" 2>&1; }

out=$(sh_in 'printf "#!/bin/sh\nid\n" >suid; echo "w=$?"; echo x >>sgid; echo "a=$?"; true >sgid; echo "t=$?"; cat suid >/dev/null; echo "r=$?"; echo new >plain; echo "p=$?"')
t_match "writing a set-uid file is refused" "$out" "w=[12]"
t_match "... appending to a set-gid one" "$out" "a=[12]"
t_match "... truncating one" "$out" "t=[12]"
t_match "... reading one still works" "$out" "r=0"
t_match "... and writing a plain file too" "$out" "p=0"
t_is "the set-uid file is unchanged" "$(cat "$W/suid")" "$(printf '#!/bin/sh\necho original')"
t_is "... and still set-uid" "$(stat -c %a "$W/suid")" "4755"
t_is "the set-gid file is unchanged (not truncated)" "$(cat "$W/sgid")" "original"
t_is "the plain file was written" "$(cat "$W/plain")" "new"
t_done
