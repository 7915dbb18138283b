#!/usr/bin/env bash
# 133-fs-served-nested-owner.sh - a change in a served tree is made as the
# identity the broker's explicit fs.write would use, or not at all.  A root
# broker's capcall fs.write acts as the owner of the grant's root; the file
# server acts as the owner of the tree's root, and a grant nested in a tree
# of another owner is served by the outer tree.  Before, with fs.read on a
# root-owned /srv-like tree and fs.write on alice's directory inside it, an
# agent created root-owned files in alice's directory and appended to a
# root-owned file there that capcall (as alice) may not write (red team,
# docs/threat-model.md "Use the broker's privileges on files").  Now such a
# change through the mount is refused (capcall still makes it, as alice);
# grants whose root the tree's owner owns work as before, and a grant's
# root that does not exist yet may be made (mkdir -p) and written at once.
# Needs root (the broker mounts FUSE and changes identity).
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "changes beneath a nested grant of another owner" "needs root and /dev/fuse"
	t_done
	exit
fi

ALICE=4298
N="$T_TMP/srv"			# root-owned: served as root
A="$N/home/alice"		# alice's, granted fs.write inside it
mkdir -p "$A" "$N/pub"
echo "root's config" >"$A/root.conf"
echo "alice's" >"$A/mine"
chown "$ALICE:$ALICE" "$A" "$A/mine"
chmod 0755 "$T_TMP" "$N" "$N/home"

G=(--grant "fs.read:$N/**" --grant "fs.list:$N/**" --grant "fs.write:$A/**"
	--grant "fs.write:$N/pub/**" --grant "fs.write:$N/new/**")
out=$(timeout 60 "$CB" run --tier high --approve deny "${G[@]}" -- /bin/sh -c "
	cd '$A'
	{ echo new >created; } 2>/dev/null; echo c=\$?
	{ echo agent >>root.conf; } 2>/dev/null; echo r=\$?
	{ echo more >>mine; } 2>/dev/null; echo m=\$?
	echo x | capcall fs.write '$A/viacapcall'; echo cc=\$?
	echo p >'$N/pub/f'; echo p=\$?
	mkdir -p '$N/new/sub' && echo n >'$N/new/sub/f' && echo n=\$?
	cat '$A/mine'" 2>&1)
echo "$out" | sed 's/^/# /'
t_match "creating a file in alice's grant inside a root-served tree is refused" "$out" "c=2"
t_match "... and appending to a root-owned file there" "$out" "r=2"
t_match "... and to alice's own file (it would be written as root)" "$out" "m=2"
t_is "... nothing was created" "$(ls "$A" | grep -c created)" "0"
t_is "... the root-owned file is unchanged" "$(cat "$A/root.conf")" "root's config"
t_match "capcall writes there, as alice" "$out" "cc=0"
t_is "... the file is alice's" "$(stat -c %u "$A/viacapcall")" "$ALICE"
t_match "a grant whose root is root's is written through the mount" "$out" "p=0"
t_match "a grant's root made by mkdir -p is written at once" "$out" "n=0"
t_is "... as root (the tree's owner)" "$(stat -c %u "$N/new/sub/f")" "0"
t_match "reading alice's files still works" "$out" "^alice's$"

# A user's workspace with a grant of the same owner inside it: unchanged.
W="$T_TMP/ws"
mkdir -p "$W/sub"
chown -R "$ALICE:$ALICE" "$W"
out=$(timeout 60 "$CB" run --tier medium --approve deny --workspace "$W" \
	--grant "fs.read:$W/**" --grant "fs.list:$W/**" --grant "fs.write:$W/sub/**" -- \
	/bin/sh -c "echo w >'$W/sub/f' && cat '$W/sub/f'" 2>&1)
t_is "a nested grant of the tree's owner is written through the mount" "$out" "w"
t_is "... the file is the owner's" "$(stat -c %u "$W/sub/f")" "$ALICE"
t_done
