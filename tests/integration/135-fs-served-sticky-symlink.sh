#!/usr/bin/env bash
# 135-fs-served-sticky-symlink.sh - no symlink is made as root in a sticky,
# world-writable served directory.  A root-owned tree is served as root;
# with a grant on a /var/tmp-like directory (mode 1777) an agent made a
# root-owned symlink to /etc/passwd there, which fs.protected_symlinks lets
# every process follow (the link's owner owns the directory), so a host
# root process writing a predictable name would write /etc/passwd; a link
# of the agent's own uid would have been refused by the kernel.  capcall
# makes no symlinks at all.  Found by the red team (docs/threat-model.md,
# "Use the broker's privileges on files").  Nor beneath such a directory,
# in one the agent made there (root's too, which such a process trusts).
# Elsewhere symlinks are made as before.  Needs root (FUSE).
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "symlinks in sticky served directories" "needs root and /dev/fuse"
	t_done
	exit
fi

D="$T_TMP/vartmp"
P="$T_TMP/plain"
mkdir -m 1777 "$D"
mkdir -m 0755 "$P"
chmod 0755 "$T_TMP"
G=()
for op in read list write; do G+=(--grant "fs.$op:$D/**" --grant "fs.$op:$P/**"); done
out=$(timeout 60 "$CB" run --tier high --approve deny "${G[@]}" -- /bin/sh -c "
	cd '$D'
	ln -s /etc/passwd link 2>/dev/null; echo l=\$?
	mkdir sub && ln -s /etc/passwd sub/link 2>/dev/null; echo s=\$?
	ln -s /etc/passwd '$P/link'; echo p=\$?
	echo data >file; echo f=\$?" 2>&1)
echo "$out" | sed 's/^/# /'
t_match "a symlink made as root in a sticky world-writable directory is refused" "$out" "l=1"
t_ok "... nothing was made" test ! -L "$D/link"
t_match "... and in a directory the agent made beneath it" "$out" "s=1"
t_ok "... nothing was made there either" test ! -L "$D/sub/link"
t_match "one in an ordinary tree is made" "$out" "p=0"
t_is "... as a link" "$(readlink "$P/link")" "/etc/passwd"
t_match "files are still written in the sticky directory" "$out" "f=0"
t_done
