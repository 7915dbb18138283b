#!/usr/bin/env bash
# 873-fs-served-expiry-cached.sh - a token is honoured only while now is
# within [nbf, exp] (docs/tokens.md), also for reads the kernel answers from
# its page cache: no read of a cached page of an open file that begins
# after the expiry succeeds.  The grant's life bounds how long the kernel
# may keep the attributes it got (brk_fss_ttl: the expiry less 20 ms), and
# a cached read asks for stale attributes again, through the check.
# Before, the cached pages were read until the expiry was noticed and the
# pages dropped: 5-8 ms after the expiry (the reader below read on for that
# long).  A reader spins on a cached page until a read fails and prints
# when its last successful read began; that must be before the end of the
# expiry second.  Needs root (the broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "cached reads after expiry" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W"
head -c 300000 /dev/urandom >"$W/big.bin"
# Reads a cached page as fast as it can until a read fails; prints when
# (wall clock, ns) the last read that succeeded began, and how many did.
cat >"$W/spin.py" <<'END'
import os, time
fd = os.open("big.bin", os.O_RDONLY)
os.pread(fd, 300000, 0)
last, n = 0, 0
while True:
    t = time.time_ns()
    try:
        os.pread(fd, 4096, 0)
    except OSError:
        break
    last, n = t, n + 1
print(last, n)
END
chown -R 4249:4249 "$W"

S="$T_TMP/st"
srv_start "$S"
for run in 1 2; do
	agent_start "e$run" --tier medium --workspace "$W" --ttl 3
	EXP=$("$CTL" --state "$S" --json list --sandbox "e$run" | jget 'd[0]["exp"]')
	agent_do "e$run" "python3 spin.py" 150
	read -r LAST N <<<"$AOUT"
	END_NS=$(( (EXP + 1) * 1000000000 ))
	t_ok "run $run: $N cached reads, none begun after the token expired" \
		test "${N:-0}" -gt 1000 -a "${LAST:-0}" -gt 0 -a "${LAST:-0}" -lt "$END_NS"
	echo "# run $run: the last read began $(( (END_NS - ${LAST:-0}) / 1000 )) us before the end of the expiry second (negative: after it)"
	agent_stop "e$run"
done
t_ok "no line says pages outlived a loss" \
	sh -c "! grep -q 'did not drop the cached file pages in time' '$S/audit.jsonl'"
srv_stop
t_done
