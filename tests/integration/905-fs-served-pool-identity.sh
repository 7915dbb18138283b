#!/usr/bin/env bash
# 905-fs-served-pool-identity.sh - sandboxes whose workspaces have different
# owners, served at the same time by the same few threads of the broker's
# pool (fsrv/pool.c), each get what they create owned by their own
# workspace's owner.  The file-system identity (fsuid, fsgid, groups) is a
# thread's, and a pool thread answers one sandbox's request and then
# another's: each request must be answered with its own tree's owner,
# never with the identity the thread kept from the last (keep_identity),
# and a root-owned tree as root.  Needs root and /dev/fuse.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "each sandbox's files are its own owner's" "needs root and /dev/fuse"
	t_done
	exit
fi

A=4301 B=4302 N=300
mkdir -p "$T_TMP/a" "$T_TMP/b" "$T_TMP/r"
chown "$A:$A" "$T_TMP/a"
chown "$B:$B" "$T_TMP/b"
srv_start "$T_TMP/st"
SOCK="$T_TMP/st/admin.sock"
# Each agent makes N files and N directories as fast as it can, all three
# at once, so that the pool's threads go from one sandbox to another.
MAKE='import os
for i in range(int(os.environ["N"])):
    open("f%d" % i, "w").write("x")
    os.mkdir("d%d" % i)
print("made")'
pids=()
for w in a b r; do
	timeout 120 "$CB" run --connect "$SOCK" --tier medium --workspace "$T_TMP/$w" \
		--setenv N "$N" -- /usr/bin/python3 -c "$MAKE" >"$T_TMP/$w.out" 2>&1 &
	pids+=("$!")
done
rcs=""
for p in "${pids[@]}"; do
	wait "$p"
	rcs="$rcs$? "
done
t_is "three sandboxes make their files at the same time (exit 0)" "$rcs" "0 0 0 "
t_is "... and say so" "$(cat "$T_TMP"/[abr].out)" "made
made
made"
owners() { # DIR: "uid:gid count" for everything made in DIR
	find "$1" -mindepth 1 -printf '%U:%G\n' | sort | uniq -c | awk '{ print $2, $1 }'
}
t_is "everything made in uid $A's workspace is uid $A's" "$(owners "$T_TMP/a")" "$A:$A $((2 * N))"
t_is "everything made in uid $B's workspace is uid $B's" "$(owners "$T_TMP/b")" "$B:$B $((2 * N))"
t_is "everything made in root's workspace is root's" "$(owners "$T_TMP/r")" "0:0 $((2 * N))"
t_done
