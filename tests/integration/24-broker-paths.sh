#!/usr/bin/env bash
# 24-broker-paths.sh - every path the broker touches is resolved by the kernel
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
#    /proc, or a procfs/sysfs mounted inside a granted tree, was served;
#  - a root broker wrote as root: it rewrote set-uid files keeping the bit and
#    what it created in a user's workspace belonged to root (hole 4);
#  - fs.read served hardlinks to files of other owners (a planted link);
#  - the root fd cached per grant kept serving a granted directory that was
#    moved away and replaced (hole 5); the root fd kept since issue 16 is
#    checked against the name on every request;
#  - a root broker's high-tier agent (nobody) got writable binds it could not
#    write, and found out only at its first write.
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

# ---- hole 4: changes run as the grant root's owner; set-id never written --
if [ "$(id -u)" = 0 ]; then
	U="$T_TMP/userws"; mkdir -p "$U"; chown 4242:4242 "$U"
	printf orig >"$U/suid"; chmod 4755 "$U/suid"
	printf mine >"$U/own-suid"; chown 4242:4242 "$U/own-suid"; chmod 4755 "$U/own-suid"
	printf gid >"$U/sgid"; chmod 2755 "$U/sgid"
	echo root-only >"$U/rootfile"; chmod 0644 "$U/rootfile"
	wr() { sh -c 'echo x | "$0" run --tier medium --workspace "$1" --grant "fs.write:$1/**" -- capcall fs.write "$2"' \
		"$CB_BIN/capbroker" "$U" "$1"; }
	t_exit "fs.write over a root-owned set-uid file is refused" 77 wr "$U/suid"
	t_is "... its bit and content are intact" "$(stat -c %a:%s "$U/suid")" 4755:4
	t_exit "fs.write over the owner's own set-uid file is refused too" 77 wr "$U/own-suid"
	t_exit "fs.write over a set-gid file is refused" 77 wr "$U/sgid"
	t_is "... intact" "$(stat -c %a:%s "$U/sgid")" 2755:3
	t_exit "fs.write of a new file in a user's workspace" 0 wr "$U/new"
	t_is "... the file belongs to the workspace's owner, not root" "$(stat -c %u:%g "$U/new")" 4242:4242
	t_exit "fs.mkdir in a user's workspace" 0 "$CB_BIN/capbroker" run --tier medium --workspace "$U" \
		--grant "fs.write:$U/**" -- capcall fs.mkdir "$U/d"
	t_is "... the directory belongs to the workspace's owner" "$(stat -c %u:%g "$U/d")" 4242:4242
	t_exit "a root-owned file in the user's workspace is written with the user's permissions (refused)" 77 \
		wr "$U/rootfile"
	t_is "... unchanged" "$(cat "$U/rootfile")" root-only
else
	t_skip "changes as the workspace owner" "needs a root broker"
fi

# ---- hardlinks: a file another owner has more links to is refused ---------
if [ "$(id -u)" = 0 ]; then
	echo theirs >"$T_TMP/foreign"; chown 4243:4243 "$T_TMP/foreign"; chmod 0600 "$T_TMP/foreign"
	ln "$T_TMP/foreign" "$W/hl-foreign"
	echo rootsecret >"$T_TMP/rootsecret"; chmod 0600 "$T_TMP/rootsecret"
	ln "$T_TMP/rootsecret" "$U/hl-root"
	echo mine >"$T_TMP/mine"; ln "$T_TMP/mine" "$W/hl-mine"
	t_exit "fs.read of a hardlink to another owner's file is refused" 77 \
		"$CB_BIN/capbroker" run --tier medium --workspace "$W" --grant "fs.read:$W/**" \
		-- capcall fs.read "$W/hl-foreign"
	t_exit "... a link to a root-only file planted in a user's workspace too" 77 \
		"$CB_BIN/capbroker" run --tier medium --workspace "$U" --grant "fs.read:$U/**" \
		-- capcall fs.read "$U/hl-root"
	t_is "... while a linked file of the root's own owner is served" \
		"$("$CB_BIN/capbroker" run --tier medium --workspace "$W" --grant "fs.read:$W/**" \
		-- capcall fs.read "$W/hl-mine" 2>&1)" mine
else
	t_skip "the hardlink rule" "needs root to make files of other owners"
fi

# ---- hole 5: a root moved away and replaced is resolved again ------------
S="$T_TMP/stale"; mkdir -p "$S/cur"; echo one >"$S/cur/a"
mkfifo "$T_TMP/go"; exec 7<>"$T_TMP/go"
"$CB_BIN/capbroker" run --tier medium --workspace "$S" --grant "fs.read:$S/cur/**" -- \
	sh -c 'capcall fs.read "$0/cur/a"; read x; capcall fs.read "$0/cur/a"' "$S" \
	<"$T_TMP/go" >"$T_TMP/stale.out" 2>&1 &
RUNP=$!
for _ in $(seq 1200); do grep -q one "$T_TMP/stale.out" 2>/dev/null && break; sleep 0.05; done
mv "$S/cur" "$S/moved"; mkdir "$S/cur"; echo two >"$S/cur/a"
echo go >&7; exec 7>&-
wait $RUNP
t_is "a granted directory moved away and replaced: the new one is served" \
	"$(tr '\n' ' ' <"$T_TMP/stale.out")" "one two "

# The root fd is kept between requests (issue 16): it must still follow the
# name.  A root replaced by a symlink to the directory it was is refused; a
# parent replaced by a symlink to a look-alike tree is refused (the name
# leads to another inode, so the root is walked again, strictly).  A parent
# replaced by a symlink to where the same directory went is the one case a
# kept root still serves (the same inode: docs/broker.md, "root fds").
S="$T_TMP/kept"; mkdir -p "$S/p/cur"; echo one >"$S/p/cur/a"
kept() { # $1: what to do to the tree between the two reads
	rm -f "$T_TMP/go"; mkfifo "$T_TMP/go"; exec 7<>"$T_TMP/go"
	# Emptied here, not by the background run's redirection: that may come
	# late (a loaded machine), and the wait below would see the last call's
	# "one" and change the tree before this run's first read.
	: >"$T_TMP/kept.out"
	"$CB_BIN/capbroker" run --tier medium --workspace "$S" --grant "fs.read:$S/p/cur/**" -- \
		sh -c 'capcall fs.read "$0/p/cur/a"; read x; capcall fs.read "$0/p/cur/a"' "$S" \
		<"$T_TMP/go" >"$T_TMP/kept.out" 2>/dev/null &
	RUNP=$!
	for _ in $(seq 1200); do grep -q one "$T_TMP/kept.out" 2>/dev/null && break; sleep 0.05; done
	eval "$1"
	echo go >&7; exec 7>&-
	wait $RUNP
	tr '\n' ' ' <"$T_TMP/kept.out"
}
t_is "a kept root replaced by a symlink to the directory it was: refused" \
	"$(kept 'mv "$S/p/cur" "$S/p/was"; ln -s was "$S/p/cur"')" "one "
rm "$S/p/cur"; mv "$S/p/was" "$S/p/cur"
t_is "a kept root whose parent became a symlink to a look-alike tree: refused" \
	"$(kept 'mv "$S/p" "$S/q"; mkdir -p "$S/d/cur"; echo decoy >"$S/d/cur/a"; ln -s d "$S/p"')" "one "
rm "$S/p"; mv "$S/q" "$S/p"
t_is "... and served again once the tree is restored" "$(kept true)" "one one "

# The kept root spares its walk, and the type probe of a plain regular file
# is a statx: a cached fs.read makes one openat2 (the file), not 3 (the
# root again, the O_PATH probe).  strace follows only the broker's loop
# thread here (no -f), not the sandbox.
if command -v strace >/dev/null; then
	# openat2 calls of the broker's loop for 20 more cached fs.reads of
	# $1/f, the workspace $1 (run by $2 and what follows, e.g. a namespace).
	reads20() {
		local r=$1 n; shift
		for n in 5 25; do
			rm -f "$T_TMP/st.$n"
			"$@" strace -qq -o "$T_TMP/st.$n" -e trace=openat2 "$CB_BIN/capbroker" run \
				--tier medium --workspace "$r" --grant "fs.read:$r/**" -- \
				sh -c 'i=0; while [ $i -lt "$1" ]; do capcall fs.read "$0/f" >/dev/null; i=$((i+1)); done' \
				"$r" "$n" >/dev/null 2>&1
		done
		echo $(( $(grep -c '^openat2' "$T_TMP/st.25") - $(grep -c '^openat2' "$T_TMP/st.5") ))
	}
	R="$T_TMP/count"; mkdir -p "$R"; echo x >"$R/f"
	t_is "20 more cached fs.reads cost 20 more openat2 calls in the broker" "$(reads20 "$R")" 20
	# On overlayfs (most containers, and the fresh-machine run) a regular
	# file reports its layer's device, not the overlay's: the statx probe
	# then knows the file system by the mount id.  Before, every read took
	# the strict O_PATH probe there: 40.  The overlay (its upper layer on a
	# tmpfs, so the layers are two file systems) lives in a mount namespace
	# of the test's own.
	O="$T_TMP/ovl"; mkdir -p "$O/lo" "$O/t" "$O/m"; echo x >"$O/lo/f"
	if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
		unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs "$0/t" && mkdir "$0/t/u" "$0/t/w" &&
			mount -t overlay overlay -o "lowerdir=$0/lo,upperdir=$0/t/u,workdir=$0/t/w" "$0/m" &&
			[ "$(stat -c %d "$0/m")" != "$(stat -c %d "$0/m/f")" ]' "$O" 2>/dev/null; then
		ovl() { unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs "$0/t" &&
			mkdir "$0/t/u" "$0/t/w" &&
			mount -t overlay overlay -o "lowerdir=$0/lo,upperdir=$0/t/u,workdir=$0/t/w" "$0/m" &&
			exec "$@"' "$O" "$@"; }
		t_is "on overlayfs (file and directory report different devices) too: 20 more openat2 calls, not 40" \
			"$(reads20 "$O/m" ovl)" 20
	else
		t_skip "openat2 calls per cached fs.read on overlayfs" "needs root, unshare and an overlay with two devices"
	fi
	# The statx probe follows symlinks, the open does not: a symlink in
	# the root to a file or a FIFO outside is refused as an escape, as the
	# strict probe refused it (not opened, its type not told).
	mkdir -p "$T_TMP/out2"; echo secret >"$T_TMP/out2/f"; mkfifo "$T_TMP/out2/fifo"
	ln -s "$T_TMP/out2/f" "$R/lf"; ln -s "$T_TMP/out2/fifo" "$R/lfifo"; ln -s "$T_TMP/out2" "$R/ld"
	for l in lf lfifo ld/f ld/fifo; do
		t_match "fs.read of $l (a symlink out of the root) is refused as an escape" \
			"$("$CB_BIN/capbroker" run --tier medium --workspace "$R" --grant "fs.read:$R/**" -- \
			capcall fs.read "$R/$l" 2>&1)" 'escape'
	done
else
	t_skip "openat2 calls per cached fs.read" "needs strace"
fi

# ---- high tier: a writable bind the agent (nobody) cannot write ---------
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$T_TMP/rw"; chmod 0755 "$T_TMP/rw"
	printf 'tiers = { high = { rw_binds = [ "%s:/data" ]; }; };\n' "$T_TMP/rw" >"$T_TMP/rw.conf"
	chmod 0644 "$T_TMP/rw.conf"
	t_exit "a root broker refuses a writable bind its agent (nobody) cannot write" 125 \
		"$CB_BIN/capbroker" run --tier high --policy "$T_TMP/rw.conf" -- /bin/sh -c 'echo x >/data/f'
	t_match "... and says why and what to do" "$(cat "$T_TMP/err")" 'runs the agent as nobody.*run capbroker as its owner'
	chmod 0777 "$T_TMP/rw"
	t_exit "... and starts once nobody may write it" 0 \
		"$CB_BIN/capbroker" run --tier high --policy "$T_TMP/rw.conf" -- /bin/sh -c 'echo x >/data/f'
else
	t_skip "writable binds of a root broker" "needs root"
fi

# ---- a non-root client's --ro-bind through a root daemon: its own reach --
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	mkdir -p -m 0755 "$T_TMP/pub"; mkdir -p -m 0700 "$T_TMP/rootonly"
	mkdir -p -m 0755 "$T_TMP/rootonly/sub"; echo hidden >"$T_TMP/rootonly/sub/f"
	mkdir -p -m 0711 "$T_TMP/noread"; echo noread >"$T_TMP/noread/f"
	mkdir -p -m 0755 "$T_TMP/shared"; echo shared >"$T_TMP/shared/f"
	printf 'admins = { uids = [ 4242 ]; gids = [ ]; };\n' >"$T_TMP/adm.conf"; chmod 0644 "$T_TMP/adm.conf"
	PB=$(t_public "$CB_BIN/capbroker" "$CB_BIN/capbroker-stub" "$CB_BIN/capcall")
	"$CB_BIN/capbroker" serve --state "$T_TMP/st" --policy "$T_TMP/adm.conf" \
		--socket "$T_TMP/pub/adm.sock" >"$T_TMP/serve.log" 2>&1 & SRVP=$!
	for _ in $(seq 200); do [ -S "$T_TMP/pub/adm.sock" ] && break; sleep 0.05; done
	chmod 0666 "$T_TMP/pub/adm.sock"
	U=(setpriv --reuid=4242 --regid=4242 --clear-groups --)
	t_exit "a non-root client's --ro-bind of a root-only directory through a root daemon fails" 125 \
		"${U[@]}" "$PB/capbroker" run --connect "$T_TMP/pub/adm.sock" \
		--ro-bind "$T_TMP/rootonly/sub:/data" -- /bin/cat /data/f
	t_match "... it is opened with the client's identity (the daemon says why)" "$(cat "$T_TMP/serve.log")" 'bind source .*rootonly/sub: Permission denied'
	t_exit "... nor one the client may search but not read" 125 \
		"${U[@]}" "$PB/capbroker" run --connect "$T_TMP/pub/adm.sock" \
		--ro-bind "$T_TMP/noread:/data" -- /bin/cat /data/f
	t_is "... while one it can reach is shown" "$("${U[@]}" "$PB/capbroker" run --connect "$T_TMP/pub/adm.sock" \
		--ro-bind "$T_TMP/shared:/data" -- /bin/cat /data/f 2>&1)" shared
	t_is "... and root's own --ro-bind of the root-only one works" "$("$CB_BIN/capbroker" run --connect \
		"$T_TMP/pub/adm.sock" --ro-bind "$T_TMP/rootonly/sub:/data" -- /bin/cat /data/f 2>&1)" hidden
	kill $SRVP 2>/dev/null; wait $SRVP 2>/dev/null
else
	t_skip "a non-root client's --ro-bind through a root daemon" "needs root and setpriv"
fi

t_done
