#!/usr/bin/env bash
# 76-fs-served-cache.sh - the policy's `fs_cache_data` for served files
# (docs/policy.md, docs/fsrv.md).  Off (`fs_cache_data = false;`) every
# read of a served file reaches the broker's check: a shared mapping is
# refused (direct I/O).  On (the default since issue 14's speed work), the
# kernel keeps the file's pages: a shared mapping works, reads still return
# the file, show-policy says so, and a revocation still cuts an open file
# (87 tests that it does before the revocation is acknowledged).  With
# `fs_passthrough` the kernel reads and writes an open file itself: it
# works, and, as documented, a file opened before a revocation keeps
# reading after it (a new open fails).  Needs root (the broker mounts
# FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "fs_cache_data" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W"
echo hello >"$W/a.txt"
head -c 300000 /dev/urandom >"$W/big.bin"
chown -R 4244:4244 "$W"
printf 'tiers = { medium = { fs_cache_data = true; }; };\n' >"$T_TMP/cache.conf"
MMAP='import mmap, sys
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
print(m[:5].decode())'

run() { timeout 60 "$CB" run --tier medium --workspace "$W" --approve deny "$@" 2>&1; }

# -- off (fs_cache_data = false; on is the default) ------------------------------
printf 'tiers = { medium = { fs_cache_data = false; }; };\n' >"$T_TMP/direct.conf"
t_match "off: a shared mapping of a served file is refused (direct I/O)" \
	"$(run --policy "$T_TMP/direct.conf" -- /usr/bin/python3 -c "$MMAP" a.txt)" "No such device"
t_is "off: reads work" "$(run --policy "$T_TMP/direct.conf" -- /bin/cat a.txt)" hello
t_match "show-policy prints the opt-out" "$("$CB" show-policy "$T_TMP/direct.conf")" \
	"fs_cache_data = false;"
t_is "the default: a shared mapping works (cached, as on)" "$(run -- /usr/bin/python3 -c "$MMAP" a.txt)" hello
printf 'tiers = { medium = { fs_cache_data = "yes"; }; };\n' >"$T_TMP/bad.conf"
t_match "fs_cache_data must be a boolean" "$("$CB" check-policy "$T_TMP/bad.conf" 2>&1)" \
	'wrong type for "fs_cache_data"'
t_exit "... (refused)" 1 "$CB" check-policy "$T_TMP/bad.conf"


# -- on ----------------------------------------------------------------------------
t_match "show-policy prints the opt-in" "$("$CB" show-policy "$T_TMP/cache.conf")" \
	"fs_cache_data = true;"
t_is "on: a shared mapping works" "$(run --policy "$T_TMP/cache.conf" -- /usr/bin/python3 -c "$MMAP" a.txt)" hello
t_is "on: reads work, twice (the second from the cache)" \
	"$(run --policy "$T_TMP/cache.conf" -- /bin/sh -c 'cat big.bin | cksum; cat big.bin | cksum')" \
	"$(cksum <"$W/big.bin"; cksum <"$W/big.bin")"

# On, under serve: a revocation still cuts an open file, once the
# invalidation it queues has dropped the cached pages.
S="$T_TMP/st"
srv_start "$S" --policy "$T_TMP/cache.conf"
agent_start c1 --tier medium --workspace "$W"
ID=$("$CTL" --state "$S" --json list --sandbox c1 | jget 'd[0]["id"]')
PREAD='import os; print(os.pread(7, 5, 0).decode())'
agent_do c1 "exec 7<a.txt && python3 -c '$PREAD' && python3 -c '$PREAD'"
t_match "on: an open file reads (and its pages are cached)" "$AOUT" "^hello"
t_ok "capctl revoke returns" "$CTL" --state "$S" revoke "$ID"
agent_do c1 "for i in \$(seq 20); do python3 -c '$PREAD' >/dev/null 2>&1 || { echo cut; break; }; sleep 0.1; done"
t_match "on: a read on the open file fails within 2 s of the revocation" "$AOUT" "^cut"
agent_do c1 "cat a.txt"
t_match "... and the next open fails" "$AOUT" "Permission denied"
agent_stop c1

# -- passthrough ---------------------------------------------------------------
printf 'tiers = { medium = { fs_passthrough = true; }; };\n' >"$T_TMP/pt.conf"
t_match "show-policy prints fs_passthrough" "$("$CB" show-policy "$T_TMP/pt.conf")" \
	"fs_passthrough = true;"
t_is "passthrough: a shared mapping works" \
	"$(run --policy "$T_TMP/pt.conf" -- /usr/bin/python3 -c "$MMAP" a.txt)" hello
t_is "passthrough: reads and writes work" \
	"$(run --policy "$T_TMP/pt.conf" -- /bin/sh -c 'echo through >pt.txt && cat pt.txt && cat big.bin | cksum')" \
	"$(printf 'through\n'; cksum <"$W/big.bin")"
t_is "... the file is on the host, the owner's" "$(stat -c %u "$W/pt.txt"):$(cat "$W/pt.txt")" "4244:through"
srv_stop
S2="$T_TMP/st2"
srv_start "$S2" --policy "$T_TMP/pt.conf"
agent_start p1 --tier medium --workspace "$W"
ID=$("$CTL" --state "$S2" --json list --sandbox p1 | jget 'd[0]["id"]')
agent_do p1 "exec 7<a.txt && python3 -c '$PREAD'"
t_match "passthrough: an open file reads" "$AOUT" "^hello"
t_ok "capctl revoke returns" "$CTL" --state "$S2" revoke "$ID"
agent_do p1 "cat a.txt"
t_match "passthrough: the next open fails" "$AOUT" "Permission denied"
agent_do p1 "sleep 0.5; python3 -c '$PREAD'"
t_match "passthrough: the file opened before keeps reading (it outlives its token, documented)" "$AOUT" "^hello"
t_done
