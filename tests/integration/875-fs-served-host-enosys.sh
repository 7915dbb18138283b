#!/usr/bin/env bash
# 875-fs-served-host-enosys.sh - a workspace on a host file system that
# answers a system call ENOSYS (a host FUSE file system without truncate,
# hostfs_notrunc.c) neither crashes the broker nor stops its checks.  The
# agent's open(O_TRUNC) makes the broker ftruncate, which fails ENOSYS; to
# the kernel's FUSE driver an OPEN answered ENOSYS means "this server has
# no open": it then opens every file without asking (unchecked) with file
# handle 0, and the close's RELEASE of handle 0 made the broker dereference
# a null handle (SIGSEGV: every sandbox of the broker gone).  Now a
# handler's ENOSYS is answered EOPNOTSUPP and a request with handle 0 is
# refused.  Needs root, /dev/fuse and libfuse3's headers (pkg-config fuse3).
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "a workspace whose host answers ENOSYS" "needs root and /dev/fuse"
	t_done
	exit
fi
if ! command -v cc >/dev/null || ! pkg-config --exists fuse3 2>/dev/null; then
	t_skip "a workspace whose host answers ENOSYS" "needs cc and libfuse3's headers"
	t_done
	exit
fi

# shellcheck disable=SC2046
t_ok "the host file system builds" cc -std=c17 -D_GNU_SOURCE -o "$T_TMP/hostfs" \
	"$CB_TOP/tests/integration/hostfs_notrunc.c" $(pkg-config --cflags --libs fuse3)
W="$T_TMP/ws"
mkdir -p "$W"
trap 'umount -l "$W" 2>/dev/null; t_cleanup' EXIT
t_ok "... and mounts (allow_other: the agent is another uid)" "$T_TMP/hostfs" -o allow_other "$W"
t_is "... and serves f" "$(cat "$W/f" 2>&1)" "hello"

out=$(timeout 60 "$CB" run --tier medium --workspace "$W" --approve deny -- /usr/bin/python3 -u -c '
import os
print(open("f").read(), end="")
try:
    open("f", "w").close()
    print("open O_TRUNC: succeeded")
except OSError as e:
    print("open O_TRUNC:", e.errno == 95 and "EOPNOTSUPP" or e)
for i in range(3):
    print(open("f").read(), end="")
print("alive")
' 2>&1)
rc=$?
t_is "the broker and its agent live on (exit 0, not 139)" "$rc" 0
t_match "an open(O_TRUNC) the host cannot truncate fails, EOPNOTSUPP (not a silent success)" "$out" \
	"^open O_TRUNC: EOPNOTSUPP$"
t_match "... and later opens are still served and answered" "$out" "^hello"$'\n'"hello"$'\n'"hello"$'\n'"alive$"
t_done
