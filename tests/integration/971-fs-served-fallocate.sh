#!/usr/bin/env bash
# 971-fs-served-fallocate.sh - fallocate(2) in a served workspace.  The
# file server did not serve FUSE_FALLOCATE (ENOSYS, which the kernel turns
# into EOPNOTSUPP), so `fallocate -l 1M f` said "fallocate failed:
# Operation not supported", and a punched hole or zeroed range (fallocate
# -p, -z; tools that sparsify or preallocate) could not be had at all; only
# glibc's posix_fallocate worked, by writing zeros.  Now the server does it
# on its descriptor of the open file, as a write: checked against the live
# tokens every time, so after the workspace token is revoked a file still
# open for writing cannot be grown or punched any more (EACCES).  The
# agent's file size limit still holds (its kernel checks before sending).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "fallocate in a served workspace" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4261
W="$T_TMP/ws"
mkdir -p "$W"
printf 'hello\n' >"$W/h.txt"
chown -R "$OWN:$OWN" "$W"

run() { timeout 120 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c "$1"; }

t_is "fallocate -l 1M makes a 1 MiB file" "$(run 'fallocate -l 1M f.bin && stat -c %s f.bin' 2>&1)" 1048576
t_ok "... allocated on the host (not sparse)" test "$(stat -c %b "$W/f.bin")" -ge 2048
t_is "... owned by the tree's owner" "$(stat -c %u "$W/f.bin")" "$OWN"
t_is "fallocate -p punches a hole (zeros, same size)" \
	"$(run 'fallocate -p -o 0 -l 2 h.txt && stat -c %s h.txt' 2>&1)" 6
t_is "... on the host file" "$(od -An -c "$W/h.txt" | tr -s ' ')" " \\0 \\0 l l o \\n"
# Zeroing a range is the host file system's to do: tmpfs (and an overlay
# over it, as in a throw-away CI root) has no FALLOC_FL_ZERO_RANGE.  There
# the agent must get the host's own answer, EOPNOTSUPP, not another.
printf 'probe\n' >"$T_TMP/zprobe"
if fallocate -z -o 0 -l 1 "$T_TMP/zprobe" 2>/dev/null; then
	t_is "fallocate -z zeroes a range" "$(run 'fallocate -z -o 2 -l 1 h.txt && od -An -c h.txt' 2>&1 | tr -s ' ')" \
		" \\0 \\0 \\0 l o \\n"
else
	t_match "fallocate -z where the host's file system cannot zero a range: the host's answer" \
		"$(run 'fallocate -z -o 2 -l 1 h.txt' 2>&1)" "Operation not supported"
	printf '\0\0\0lo\n' >"$W/h.txt"	# as -z would have left it, for what follows
fi
t_match "a descriptor open read-only is refused by the kernel" \
	"$(run 'python3 -c "import os; os.posix_fallocate(os.open(\"h.txt\", os.O_RDONLY), 0, 9)"' 2>&1)" \
	"Bad file descriptor"
t_match "past the agent's file size limit it is stopped (SIGXFSZ)" \
	"$(run 'fallocate -l 2G big.bin; echo rc=$?' 2>&1)" "rc=153$"
t_is "... nothing was allocated" "$(stat -c %s "$W/big.bin" 2>/dev/null || echo none)" 0

# A file open for writing, then the token revoked: no more fallocate.
S="$T_TMP/st"
srv_start "$S"
agent_start a1 --tier medium --workspace "$W"
ID=$("$CTL" --state "$S" --json list --sandbox a1 | jget 'd[0]["id"]')
# One line (the agent reads a command a line): an OSError prints its errno.
FA='import os, sys; sys.excepthook = lambda t, e, tb: print("errno", e.errno); '
FA+='os.posix_fallocate(7, 0, int(sys.argv[1])); print("ok", os.fstat(7).st_size)'
agent_do a1 "exec 7<>g.bin && python3 -c '$FA' 4096"
t_is "with the workspace token an open file is extended" "$AOUT" "ok 4096"
"$CTL" --state "$S" revoke "$ID" >/dev/null
agent_do a1 "cd / && python3 -c '$FA' 8192"
t_is "after the revocation the same descriptor is refused (EACCES)" "$AOUT" "errno 13"
t_is "... and the host file is unchanged" "$(stat -c %s "$W/g.bin")" 4096
t_ok "... the broker audited the denial" wait_for 50 grep -q \
	"\"sandbox\":\"a1\",\"op\":\"fs.write\",\"resource\":\"$W/g.bin\".*\"decision\":\"deny\"" "$S/audit.jsonl"
agent_stop a1
t_done
