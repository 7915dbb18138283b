#!/usr/bin/env bash
# 70-fsrv.sh - the FUSE file server (fsrv/) on its own, for real: a
# temporary tree served through $CB_BUILD/fsrv/fsrv-serve with an
# allow-list for authorisation, mounted with fsopen/fsconfig/fsmount and
# move_mount in a private mount namespace.  Ordinary programs work in it;
# denied paths give EACCES; the server never follows a symlink; a
# revocation stops the next open and a read on an already-open file; a
# mount fd attaches inside a user namespace; a dead server leaves ENOTCONN,
# not a hang.
# Needs root (fsmount of fuse; unshare -m).
if [ -z "${FSRV_IN_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	FSRV_IN_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib.sh"
: "${CB_BUILD:=$CB_TOP/build}"
S="$CB_BUILD/fsrv/fsrv-serve"
if [ -z "${FSRV_IN_NS:-}" ] || [ ! -x "$S" ] || [ ! -c /dev/fuse ]; then
	t_skip "fsrv" "needs root, unshare, /dev/fuse and $S"
	t_done
	exit
fi

R="$T_TMP/root" M="$T_TMP/mnt" A="$T_TMP/allow" READY="$T_TMP/ready"
mkdir -p "$R/sub" "$R/secret" "$R/ro" "$R/cached" "$M"
echo hello >"$R/a.txt"
echo needle >"$R/sub/hay.txt"
: >"$R/sub/seen"
echo topsecret >"$R/secret/key"
echo readonly >"$R/ro/file"
echo inside >"$R/cached/f"
head -c 1048576 /dev/urandom >"$R/big"
head -c 1061165 /dev/urandom >"$R/odd"	# 1 MiB + 12,589: not a page multiple
ln -s /etc/hostname "$R/abs"
ln -s ../../../../../../../etc/hostname "$R/up"
ln -s a.txt "$R/rel"
printf 'rlwd .\n- secret\nrl ro\n' >"$A"

spid=
start() { # start the server; wait until it has loaded the allow-list
	rm -f "$READY"
	"$S" --root "$R" --allow "$A" --mount "$M" --ready "$READY" "$@" 2>"$T_TMP/serve.err" &
	spid=$!
	for _ in $(seq 200); do [ -s "$READY" ] && return 0; sleep 0.05; done
	return 1
}
reload() { # SIGHUP, then wait until load number $1 is done
	kill -HUP "$spid"
	for _ in $(seq 200); do [ "$(cat "$READY" 2>/dev/null)" = "$1" ] && return 0; sleep 0.05; done
	return 1
}
stop() { [ -n "$spid" ] && kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=; umount -l "$M" 2>/dev/null; }
trap 'stop; umount -l "$M" 2>/dev/null; t_cleanup' EXIT

t_ok "the server mounts the tree (fsmount + move_mount)" start --timeout 30
t_match "it is a fuse mount" "$(grep " $M " /proc/self/mounts)" "fuse.capbroker .*nosuid,nodev"

# Ordinary programs.
t_match "ls -la lists the tree" "$(ls -la "$M" 2>/dev/null)" 'a\.txt'
t_is "cat reads a file" "$(cat "$M/a.txt")" hello
t_ok "echo > file creates a file" sh -c "echo created >'$M/new.txt'"
t_is "... which is on the host" "$(cat "$R/new.txt")" created
t_ok "echo >> file appends" sh -c "echo more >>'$M/new.txt'"
t_is "... at the end" "$(cat "$R/new.txt" | tr '\n' ' ')" "created more "
t_ok "mkdir makes a directory" mkdir "$M/d1"
t_ok "mv renames into it" mv "$M/new.txt" "$M/d1/moved.txt"
t_is "... on the host" "$(cat "$R/d1/moved.txt" | head -n 1)" created
t_ok "rm removes a file" rm "$M/d1/moved.txt"
t_ok "rmdir removes a directory" rmdir "$M/d1"
t_ok "... both gone on the host" test ! -e "$R/d1"
t_match "grep -r finds text" "$(grep -r needle "$M" 2>/dev/null)" 'sub/hay\.txt:needle'
t_match "find walks the tree" "$(find "$M" -name hay.txt 2>/dev/null)" "^$M/sub/hay\\.txt\$"
t_is "a 1 MiB file reads back whole" "$(cmp "$M/big" "$R/big" && echo same)" same
# Reads of 8 KiB and more are spliced from the file, in pieces of at most
# 512 KiB (the mount's max_read); the last piece stops at the end of file.
t_is "... and one of an odd size, read 1 MiB at a time (spliced)" \
	"$(dd if="$M/odd" bs=1M 2>/dev/null | cmp - "$R/odd" && echo same)" same
t_is "... and its last 10,000 bytes, from an offset" \
	"$(tail -c 10000 "$M/odd" | cmp - <(tail -c 10000 "$R/odd")  && echo same)" same
t_is "... and a 64 KiB read from the middle" \
	"$(dd if="$M/odd" bs=64k skip=7 count=1 2>/dev/null | cmp - <(dd if="$R/odd" bs=64k skip=7 count=1 2>/dev/null) && echo same)" same
t_ok "git init, add, commit in the mount" sh -c "cd '$M' && git init -q . && git add a.txt sub &&
	git -c user.name=t -c user.email=t@t.invalid commit -qm first"
t_is "git status is clean" "$(cd "$M" && git status --short --untracked-files=no)" ""
t_match "git log shows the commit" "$(cd "$M" && git log --oneline)" 'first'
t_ok "chmod works" chmod 0600 "$M/a.txt"
t_is "... on the host" "$(stat -c %a "$R/a.txt")" 600
t_ok "a set-uid bit is refused" sh -c "! chmod 4755 '$M/a.txt' 2>/dev/null"
t_ok "a FIFO cannot be made" sh -c "! mkfifo '$M/fifo' 2>/dev/null"
t_ok "truncate works" truncate -s 2 "$M/a.txt"
t_is "... on the host" "$(cat "$R/a.txt")" he
t_ok "touch -d sets times" touch -d @1000000000 "$M/a.txt"
t_is "... on the host" "$(stat -c %Y "$R/a.txt")" 1000000000
t_ok "ln makes a hard link" ln "$M/a.txt" "$M/hard"
t_is "... the same file on the host" "$(stat -c %i "$R/hard")" "$(stat -c %i "$R/a.txt")"
t_ok "ln -s makes a symlink" ln -s a.txt "$M/soft"
t_is "... a symlink on the host" "$(readlink "$R/soft")" a.txt

# Symlinks are shown, never followed by the server.
t_is "a symlink is shown as one" "$(stat -c %F "$M/abs")" "symbolic link"
t_is "readlink returns its text" "$(readlink "$M/abs")" /etc/hostname
t_is "a relative link inside the tree works" "$(cat "$M/rel")" he
ls "$M/cached/" >/dev/null
mv "$R/cached" "$R/cached.old" && ln -s /etc "$R/cached"
t_ok "a directory swapped for a symlink on the host is not followed" \
	sh -c "! cat '$M/cached/hostname' 2>/dev/null && ! cat '$M/cached/f' 2>/dev/null"

# Denials.
t_match "a denied file gives EACCES" "$(cat "$M/secret/key" 2>&1)" 'Permission denied'
t_match "a denied directory cannot be listed" "$(ls "$M/secret" 2>&1)" 'Permission denied'
t_match "a read-only area refuses a write" "$(sh -c "echo x >'$M/ro/file'" 2>&1)" 'Permission denied'
t_match "... and a new file" "$(sh -c "echo x >'$M/ro/other'" 2>&1)" 'Permission denied'
t_match "... and a delete" "$(rm -f "$M/ro/file" 2>&1)" 'Permission denied'
t_is "... but reads" "$(cat "$M/ro/file")" readonly
t_match "a rename out of the read-only area is refused" "$(mv "$M/ro/file" "$M/stolen" 2>&1)" 'Permission denied'
t_is "the host file is untouched" "$(cat "$R/ro/file")" readonly

# Revocation: the next open fails, and so does a read on an open file,
# and a page of a private mapping faulted in before (the invalidation drops
# and unmaps it: the next access faults into the check).
python3 - "$M/big" "$T_TMP/mapped" "$T_TMP/go" <<'PY' >"$T_TMP/map.out" 2>&1 &
import mmap, os, sys, time
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
first = m[0]
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
print("still read", m[0] == first, flush=True)
PY
mpid=$!
for _ in $(seq 100); do [ -e "$T_TMP/mapped" ] && break; sleep 0.05; done
exec 7<"$M/big"
t_ok "a name is looked up (and cached)" test -e "$M/sub/seen"
t_is "an open file reads" "$(head -c 4 <&7 | wc -c)" 4
printf -- '- .\n' >"$A"
t_ok "revoke everything (SIGHUP, caches invalidated)" reload 2
t_match "after revocation cat fails" "$(cat "$M/sub/hay.txt" 2>&1)" 'Permission denied'
t_match "... and a read on the already-open file fails" "$(head -c 4 <&7 2>&1)" 'Permission denied'
t_match "... a large (spliced) read on it too" "$(dd bs=256k count=1 <&7 2>&1 >/dev/null)" 'Permission denied'
t_ok "... and a name cached for 30 s is gone (invalidated)" sh -c "! test -e '$M/sub/seen'"
touch "$T_TMP/go"
{ wait "$mpid"; } 2>/dev/null
t_is "... and a private mapping's page faulted in before cannot be read (SIGBUS)" "$?:$(cat "$T_TMP/map.out")" "135:"
printf 'rlwd .\n' >"$A"
t_ok "grant again" reload 3
t_is "the open file reads again" "$(head -c 4 <&7 | wc -c)" 4

# A dead server: errors, never a hang.
kill -9 "$spid"; wait "$spid" 2>/dev/null; spid=
t_match "with the server dead cat fails with ENOTCONN" \
	"$(timeout 10 cat "$M/sub/hay.txt" 2>&1 | tr '\n' ' '; echo "rc=${PIPESTATUS[0]}")" 'not connected.*rc=1'
t_match "... and so does a read on an open file" \
	"$(timeout 10 head -c 4 <&7 2>&1 | tr '\n' ' '; echo "rc=${PIPESTATUS[0]}")" '(not connected|Input/output error).*rc=1'
exec 7<&-
umount -l "$M" 2>/dev/null

# The mount fd crosses into other namespaces; symlinks resolve in the
# client's view, where "/" is the mount: they cannot leave it.
t_is "a mount fd attaches inside a new user namespace" \
	"$("$S" --root "$R" --allow "$A" --mount "$M" --userns -- cat "$M/rel" 2>&1)" he
t_is "with the mount as root, an absolute link stays inside" \
	"$("$S" --root "$R" --allow "$A" --mount "$M" --chroot -- @cat /abs 2>&1)" "No such file or directory"
t_is "... and so does a link climbing with .." \
	"$("$S" --root "$R" --allow "$A" --mount "$M" --chroot -- @cat /up 2>&1)" "No such file or directory"
t_is "... while a link inside works" \
	"$("$S" --root "$R" --allow "$A" --mount "$M" --chroot -- @cat /rel 2>&1)" he

# A rename race on the host: a directory swapped for a symlink to /etc
# and back while a client whose root is the mount reads through it.  The
# kernel follows a link it sees inside the mount (to the mount's own,
# absent /etc); the server, asked for swap/passwd while swap is a link,
# must refuse rather than follow it to the host's /etc/passwd.
mkdir "$R/swap" && echo inside >"$R/swap/passwd"
( end=$((SECONDS + 3)); while [ $SECONDS -lt $end ]; do
	mv "$R/swap" "$R/swap.d"; ln -s /etc "$R/swap"; rm "$R/swap"; mv "$R/swap.d" "$R/swap"
done ) &
racer=$!
out=$("$S" --root "$R" --allow "$A" --mount "$M" --chroot --timeout 0 -- @race 20000 /swap/passwd 2>&1)
wait "$racer"
t_match "a symlink swap racing 20000 reads never reaches the host's /etc" "$out" '^leaks=0 '; echo "# $out"
t_match "... while the file itself reads" "$out" 'inside=[1-9]'

# A lookup flood stops at the node bound; the server keeps serving.
mkdir "$R/many" && for i in $(seq 60); do : >"$R/many/f$i"; done
t_match "names past max_nodes are refused (ENFILE)" \
	"$("$S" --root "$R" --allow "$A" --mount "$M" --max-nodes 40 --timeout 30 -- \
		sh -c "cat '$M/rel' >/dev/null; ls -l '$M/many' >/dev/null; cat '$M/rel'" 2>&1 | tr '\n' ' ')" \
	'Too many open files in system.* he ?$'

# With cache_data the kernel keeps file pages; a revocation still cuts an
# open file, once the invalidation has dropped them.
t_ok "a server with cached file data mounts" start --timeout 30 --cache-data
exec 8<"$M/big"
t_is "an open file reads (and is cached whole)" "$(head -c 4 <&8 | wc -c; cat "$M/big" >/dev/null)" 4
printf -- '- .\n' >"$A"
t_ok "revoke everything" reload 2
t_match "a cached open file no longer reads" "$(head -c 4 <&8 2>&1)" 'Permission denied'
t_match "... nor opens" "$(cat "$M/big" 2>&1 >/dev/null)" 'Permission denied'
exec 8<&-
stop
# Every open file is reported closed exactly once: at its release, or, still
# open when the server stops, by the server itself (fsrv_free; the broker's
# close lines, docs/fsrv.md).  Deterministic: fd 8 is this shell's.
rm -f "$T_TMP/closes"
printf 'rlwd .\n' >"$A"
t_ok "a server reporting closes mounts" start --timeout 30 --closes "$T_TMP/closes"
head -c 3 "$M/a.txt" >/dev/null
exec 8<"$M/sub/hay.txt"
head -c 2 <&8 >/dev/null
kill "$spid"; wait "$spid"; rc=$?; spid=
t_is "the server exits cleanly with a file still open (no leak under ASan)" "$rc" 0
exec 8<&-
t_is "a released file is reported once, a file open at the stop once (at-stop)" \
	"$(sort "$T_TMP/closes" 2>&1)" "a.txt $(head -c 3 "$R/a.txt" | wc -c) 0 released"$'\n'"sub/hay.txt 2 0 at-stop"
stop

# As the tree's owner: created files belong to the owner, the owner's
# permissions decide, and a write clears a set-uid bit.
R2="$T_TMP/owned" NOBODY=65534:65534
mkdir -p "$R2"
echo mine >"$R2/mine"
echo root-only >"$R2/rootfile" && chmod 0600 "$R2/rootfile"
echo suid >"$R2/suid"
chown -R "$NOBODY" "$R2" && chown 0:0 "$R2/rootfile" && chmod 4755 "$R2/suid"
printf 'rlwd .\n' >"$A"
R_SAVE=$R R=$R2
t_ok "a server acting as uid 65534 mounts" start --owner "$NOBODY"
R=$R_SAVE
t_ok "it creates a file" sh -c "echo new >'$M/made' && mkdir '$M/dir'"
t_is "... which belongs to the tree's owner" "$(stat -c %u:%g "$R2/made") $(stat -c %u:%g "$R2/dir")" \
	"$NOBODY $NOBODY"
t_is "it reads the owner's file" "$(cat "$M/mine")" mine
t_match "it cannot read a root-only file in the tree" "$(cat "$M/rootfile" 2>&1)" 'Permission denied'
t_ok "a write to a set-uid file works" sh -c "echo more >>'$M/suid'"
t_is "... and clears the set-uid bit" "$(stat -c %a "$R2/suid")" 755
stop
R_SAVE=$R R=$R2
t_ok "a server switching identity per request mounts" start --owner "$NOBODY" --restore-identity
R=$R_SAVE
t_ok "it creates a file" sh -c "echo new >'$M/made2' && cat '$M/mine' >/dev/null"
t_is "... which belongs to the tree's owner" "$(stat -c %u:%g "$R2/made2")" "$NOBODY"
t_match "... and it cannot read a root-only file" "$(cat "$M/rootfile" 2>&1)" 'Permission denied'
stop
t_done
