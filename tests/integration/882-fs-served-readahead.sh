#!/usr/bin/env bash
# 882-fs-served-readahead.sh - a served tree's FUSE connection reads ahead
# one max_read (512 KiB), not the kernel's default 128 KiB: a root broker
# raises its bdi's read_ahead_kb when it mounts (fsrv/mount.c,
# fsrv_mount_readahead; docs/fsrv.md, "Bounds"), so a cold 1 MiB read is two
# checked read requests instead of eight (docs/performance.md).  Reads
# still return the file.  Needs root (the broker mounts FUSE, and only root
# may write the bdi's sysfs file).
. "$(dirname "$0")/../lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "served readahead" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W"
head -c 1048576 /dev/urandom >"$W/big.bin"
chown -R 4244:4244 "$W"
OUT="$T_TMP/agent.out"

# The agent prints its workspace mount's device (major:minor, the name of
# the connection's bdi), reads the file once (cold: nothing of it is in
# this mount's page cache yet), and stays a moment so that the mount, and
# its bdi, exist while we look.
timeout 60 "$CB_BIN/capbroker" run --tier medium --workspace "$W" --approve deny -- \
	/bin/sh -c 'stat -c %Hd:%Ld .; cksum <big.bin; sleep 2' >"$OUT" 2>&1 &
pid=$!
dev=
for _ in $(seq 200); do
	dev=$(grep -m1 -xE '[0-9]+:[0-9]+' "$OUT" 2>/dev/null) && [ -n "$dev" ] && break
	sleep 0.05
done
ra=$(cat "/sys/class/bdi/$dev/read_ahead_kb" 2>&1)
t_is "the served workspace's connection reads ahead 512 KiB" "$ra" 512
wait "$pid"
t_is "a cold 1 MiB read through it returns the file" "$(sed -n 2p "$OUT")" "$(cksum <"$W/big.bin")"
t_done
