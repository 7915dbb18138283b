#!/usr/bin/env bash
# 87-fs-served-page-cache.sh - served files' pages cached by the kernel by
# default (docs/fsrv.md, "Revocation, caches and open files"), and issue
# 14's revocation guarantee kept: `capctl revoke` returns only once the
# kernel has dropped the sandbox's cached pages, so the very next read of a
# file the agent already had open (and had read, so its pages were cached)
# fails, with no retry; so does a shared mapping's next access.  A change
# made on the host outside the mount is read at the next open (the pages
# are kept only while the file is unchanged), also when it grew.  An
# expired token's pages go as a revoked one's.  Needs root (the broker
# mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "served files' page cache" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W"
echo hello >"$W/a.txt"
head -c 300000 /dev/urandom >"$W/big.bin"
"$PYTHON" -c 'import os, sys
os.mkdir(sys.argv[1])
for i in range(5000):
    open("%s/f%d" % (sys.argv[1], i), "w").write("%d\n" % i)' "$W/many"
# Reads a cached page of big.bin as fast as it can until a read fails, then
# prints when (wall clock, ns) the last read that succeeded began.
cat >"$W/spin.py" <<'END'
import os, time
fd = os.open("big.bin", os.O_RDONLY)
os.pread(fd, 4096, 0)
open("/tmp/spin.ready", "w").close()
last = 0
while True:
    t = time.time_ns()
    try:
        os.pread(fd, 4096, 0)
    except OSError:
        break
    last = t
print(last)
END
chown -R 4245:4245 "$W"
SUM=$(cksum <"$W/big.bin")
# fd 7 is big.bin, opened by the agent's shell and inherited by python.
PREAD='import os, zlib; print(zlib.crc32(os.pread(7, 300000, 0)))'
CRC=$("$PYTHON" -c 'import sys, zlib; print(zlib.crc32(open(sys.argv[1], "rb").read()))' "$W/big.bin")

S="$T_TMP/st"
srv_start "$S"
agent_start c1 --tier medium --workspace "$W"
ID=$("$CTL" --state "$S" --json list --sandbox c1 | jget 'd[0]["id"]')

# -- cached by default --------------------------------------------------------
agent_do c1 "cat big.bin | cksum; cat big.bin | cksum"
t_is "a served file reads, twice" "$AOUT" "$SUM"$'\n'"$SUM"
# The lines come through the file server's queue and the audit writer (two
# threads): wait for the ones that must be there, then a moment more for a
# second close line that must not.
wait_for 200 at_least 2 "$S/audit.jsonl" "\"op\":\"fs.open\",\"resource\":\"$W/big.bin\""
wait_for 200 at_least 1 "$S/audit.jsonl" "\"op\":\"fs.close\",\"resource\":\"$W/big.bin\""
sleep 0.1
t_is "... and the broker served it once: the second read came from the page cache" \
	"$(grep -c "\"op\":\"fs.close\",\"resource\":\"$W/big.bin\"" "$S/audit.jsonl")" 1
t_is "... while both opens reached the check (one line each)" \
	"$(grep -c "\"op\":\"fs.open\",\"resource\":\"$W/big.bin\"" "$S/audit.jsonl")" 2
agent_do c1 "python3 -c 'import mmap; f = open(\"a.txt\", \"r+b\"); m = mmap.mmap(f.fileno(), 0); print(m[:5].decode())'"
t_is "a shared mapping works (no direct I/O)" "$AOUT" "hello"

# -- a change made on the host is read at the next open --------------------------
agent_do c1 "cat a.txt; cat a.txt"
printf 'HELLO\n' >"$W/a.txt"
agent_do c1 "cat a.txt"
t_is "a host change of the same size is read at the next open" "$AOUT" "HELLO"
printf 'hello, and a longer line\n' >"$W/a.txt"
agent_do c1 "cat a.txt"
t_is "... and a file grown on the host reads whole (its size is asked again)" "$AOUT" \
	"hello, and a longer line"

# -- revocation: acknowledged only once the pages are gone ---------------------------
agent_do c1 "exec 7<big.bin && python3 -c '$PREAD' && python3 -c '$PREAD'"
t_is "an open file reads, twice (its pages are cached)" "$AOUT" "$CRC"$'\n'"$CRC"
t_ok "capctl revoke returns" "$CTL" --state "$S" revoke "$ID"
agent_do c1 "python3 -c '$PREAD'"
t_match "the very next read of the open file fails (no retry)" "$AOUT" "Permission denied|Input/output error"
t_ok "... with an error status" test "$ARC" != 0
agent_do c1 "cat big.bin"
t_match "... and the next open fails" "$AOUT" "Permission denied"
t_ok "the log verifies" "$CTL" --state "$S" audit verify
agent_stop c1

# The same, racing: a reader spins on a cached page of an open file while
# the token is revoked, after the agent has read 5,000 other files (their
# pages are dropped first, which takes the kernel tens of milliseconds: an
# acknowledgement that did not wait for it came that much too early).  No
# read that began after capctl revoke returned may have succeeded.
agent_start c3 --tier medium --workspace "$W"
ID=$("$CTL" --state "$S" --json list --sandbox c3 | jget 'd[0]["id"]')
agent_do c3 "cat many/* | wc -l"
t_is "5,000 files read (their pages cached)" "$(echo $AOUT)" 5000
agent_send c3 "rm -f /tmp/spin.ready; python3 spin.py & while [ ! -e /tmp/spin.ready ]; do sleep 0.01; done; echo spinning; wait"
# (python starts slowly on a loaded machine: the revocation comes once it spins)
wait_for 300 grep -q '^spinning' "$T_TMP/c3.out"
"$CTL" --state "$S" revoke "$ID" >/dev/null
ACK=$(date +%s%N)
agent_wait c3 "$ASEQ"
LAST=$(echo "$AOUT" | tail -n 1)
t_ok "a reader spinning on an open file: no read begun after the revocation was acknowledged succeeded" \
	test "${LAST:-0}" -gt 0 -a "${LAST:-0}" -lt "$ACK"
[ "${LAST:-0}" -lt "$ACK" ] || echo "#   the last read began $(( (LAST - ACK) / 1000 )) us after it"
agent_stop c3

# -- expiry: the pages go as a revoked token's --------------------------------------
agent_start c2 --tier medium --workspace "$W" --ttl 3
agent_do c2 "exec 7<big.bin && python3 -c '$PREAD' && python3 -c '$PREAD'"
t_is "a token with 3 s to live: an open file reads, twice" "$AOUT" "$CRC"$'\n'"$CRC"
agent_do c2 "i=0; while [ \$i -lt 60 ] && python3 -c '$PREAD' >/dev/null 2>&1; do i=\$((i + 1)); sleep 0.1; done; python3 -c '$PREAD' >/dev/null 2>&1 && echo still || echo cut"
t_is "... and fails once the token has expired" "$AOUT" "cut"
agent_stop c2
srv_stop
t_done
