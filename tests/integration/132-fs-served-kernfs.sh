#!/usr/bin/env bash
# 132-fs-served-kernfs.sh - a kernel file system mounted beneath a served
# tree on the host is not served.  The broker's own resolver refuses every
# fd on procfs, sysfs, cgroup, debugfs... (common/resolve.c); the file
# server did not: with a procfs mounted inside a root-owned granted tree
# (a chroot's /proc, a bind of /), an agent listed the host's processes and
# wrote /proc/sys/kernel/hostname as root through the mount (/proc/sys/
# kernel/core_pattern the same way: root on the host).  Found by the red
# team (docs/threat-model.md, "Reach the broker itself").  Runs in a mount
# and UTS namespace of its own, so the procfs and the hostname written are
# the test's.  Needs root (FUSE, mount).
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ] || ! unshare -mu true 2>/dev/null; then
	t_skip "kernel file systems beneath a served tree" "needs root, /dev/fuse and unshare"
	t_done
	exit
fi

K="$T_TMP/chroot"		# root-owned, served as root (high tier)
W="$T_TMP/ws"			# a user's workspace (medium tier)
mkdir -p "$K/proc" "$K/sys" "$W/proc"
echo plain >"$K/plain"
chown -R 4296:4296 "$W"
chmod 0755 "$T_TMP" "$K"

cat >"$T_TMP/inner.sh" <<EOF
mount -t proc proc '$K/proc' || exit 3
mount -t sysfs sysfs '$K/sys' || exit 3
mount -t proc proc '$W/proc' || exit 3
hostname kernfs-test
G=()
for op in read list write; do G+=(--grant "fs.\$op:$K/**"); done
timeout 60 '$CB' run --tier high --approve deny "\${G[@]}" -- /bin/sh -c "
	ls '$K/proc' >/dev/null 2>&1; echo l=\\\$?
	cat '$K/proc/version' >/dev/null 2>&1; echo r=\\\$?
	{ echo pwned >'$K/proc/sys/kernel/hostname'; } 2>/dev/null; echo w=\\\$?
	ls '$K/sys/kernel' >/dev/null 2>&1; echo s=\\\$?
	capcall fs.read '$K/proc/version' >/dev/null 2>&1; echo cc=\\\$?
	cat '$K/plain'"
echo "host=\$(hostname)"
timeout 60 '$CB' run --tier medium --approve deny --workspace '$W' -- /bin/sh -c "
	ls '$W/proc' >/dev/null 2>&1; echo ml=\\\$?
	cat '$W/proc/self/maps' >/dev/null 2>&1; echo mr=\\\$?
	echo ok >'$W/f' && cat '$W/f'"
EOF
out=$(unshare -mu --propagation private bash "$T_TMP/inner.sh" 2>&1)
echo "$out" | sed 's/^/# /'
t_match "a procfs beneath a root-served tree cannot be listed" "$out" "l=[12]"
t_match "... nor read" "$out" "r=1"
t_match "... nor written (/proc/sys/kernel/hostname)" "$out" "w=2"
t_is "... the hostname is the test's" "$(printf '%s\n' "$out" | sed -n 's/^host=//p')" "kernfs-test"
t_match "a sysfs beneath it cannot be listed either" "$out" "s=[12]"
t_match "... as capcall fs.read is refused" "$out" "cc=77"
t_match "the rest of the tree is served" "$out" "^plain$"
t_match "a procfs beneath a user's workspace cannot be listed" "$out" "ml=[12]"
t_match "... nor read" "$out" "mr=1"
t_match "... while the workspace is written" "$out" "^ok$"
t_done
