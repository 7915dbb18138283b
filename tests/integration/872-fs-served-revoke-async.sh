#!/usr/bin/env bash
# 872-fs-served-revoke-async.sh - a revocation's answer waits for the kernel
# to drop the sandbox's cached file pages (docs/fsrv.md, "Revocation,
# caches and open files"), but the broker's loop does not: every other
# sandbox is served meanwhile.  Before, the loop itself waited (15-17 ms
# for a sandbox holding 5,000 cached files, up to 2 s), and every other
# sandbox stalled with it.
#
# Ordered, not timed: fuse_shim.c, preloaded into the broker, writes the
# revocation's page invalidation 1.5 s late (as a kernel slow to drop many
# pages), and tells the test when that wait begins.  Operations of another
# sandbox sent after that (through the loop: capcall over the channel)
# must complete before capctl revoke returns; before the fix none did.
# And the answer still comes only once the pages are gone: the next read
# of the open file fails.  Needs root (the broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "a revocation's page drop off the loop" "needs root and /dev/fuse"
	t_done
	exit
fi

shim_build fuse_shim
W="$T_TMP/ws" W2="$T_TMP/ws2"
mkdir -p "$W" "$W2"
head -c 300000 /dev/urandom >"$W/big.bin"
echo other >"$W2/o.txt"
chown -R 4248:4248 "$W" "$W2"
PREAD='import os, zlib; print(zlib.crc32(os.pread(7, 300000, 0)))'
CRC=$("$PYTHON" -c 'import sys, zlib; print(zlib.crc32(open(sys.argv[1], "rb").read()))' "$W/big.bin")
ARM="$T_TMP/arm"

S="$T_TMP/st"
CB_SHIM_INVAL_ARM=$ARM CB_SHIM_INVAL_MS=1500 LD_PRELOAD=$SHIM srv_start "$S"
agent_start r1 --tier medium --workspace "$W"
agent_start o1 --tier medium --workspace "$W2"
ID=$("$CTL" --state "$S" --json list --sandbox r1 | jget 'd[0]["id"]')
agent_do r1 "exec 7<big.bin && python3 -c '$PREAD' && python3 -c '$PREAD'"
t_is "an open file reads, twice (its pages are cached)" "$AOUT" "$CRC"$'\n'"$CRC"

touch "$ARM"
( "$CTL" --state "$S" revoke "$ID" >"$T_TMP/revoke.out" 2>&1; date +%s%N >"$T_TMP/revoked.at" ) &
RPID=$!
t_ok "the revocation's page drop is under way (and slow)" wait_for 100 test -e "$ARM.hit"
BEGAN=$(date +%s%N)
: >"$T_TMP/ops.at"
# Another sandbox's operations (capcall through the loop, cat through its
# own server), one after another until the revocation returns (5 at most).
for i in 1 2 3 4 5; do
	agent_do o1 "capcall tokens >/dev/null && cat o.txt" 100
	[ "$AOUT" = other ] && date +%s%N >>"$T_TMP/ops.at"
	[ -e "$T_TMP/revoked.at" ] && break
done
wait "$RPID"
REVOKED=$(cat "$T_TMP/revoked.at")
FIRST=$(head -n 1 "$T_TMP/ops.at")
before=$(awk -v r="$REVOKED" '$1 < r { n++ } END { print n + 0 }' "$T_TMP/ops.at")
t_ok "another sandbox's operation completed while the revocation waited for the page drop" \
	test -n "$FIRST" -a "${FIRST:-0}" -lt "$REVOKED"
echo "# the revocation was answered $(( (REVOKED - BEGAN) / 1000000 )) ms after its page drop began;" \
	"$(wc -l <"$T_TMP/ops.at") operations of another sandbox completed, $before of them before"
t_ok "capctl revoke succeeded" grep -q "revoked" "$T_TMP/revoke.out"
t_ok "... and waited for the page drop (>= 1 s after it began)" \
	test $(( (REVOKED - BEGAN) / 1000000 )) -ge 1000
agent_do r1 "python3 -c '$PREAD'"
t_match "the very next read of the open file fails: the pages were gone when it returned" "$AOUT" \
	"Permission denied|Input/output error"
t_ok "... no line says the pages may outlive it" \
	sh -c "! grep -q 'did not drop the cached file pages in time' '$S/audit.jsonl'"
agent_stop r1
agent_stop o1
srv_stop
t_ok "the log verifies" "$CTL" --state "$S" audit verify
t_done
