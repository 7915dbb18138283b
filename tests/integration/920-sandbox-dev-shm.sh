#!/usr/bin/env bash
# 920-sandbox-dev-shm.sh - POSIX semaphores and shared memory work where a
# tier may fork.  glibc keeps them in /dev/shm (sem_open, shm_open), which
# the sandbox's /dev did not have, so Python's multiprocessing failed with
# FileNotFoundError at its first Lock, Pool or ProcessPoolExecutor (pytest
# -n, black, compileall -j...), and shared_memory too.  Now /dev/shm is a
# link to the sandbox's own private /tmp in the medium and high tiers
# (docs/sandbox.md, "What the agent sees"); the low tier, which cannot fork,
# sees no more than before.  Needs no workspace, so no root.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

PROG='import multiprocessing as mp, concurrent.futures as cf, os
from multiprocessing import shared_memory
mp.Lock()
with mp.Pool(2) as p:
    print(p.map(abs, [-1, -2]))
with cf.ProcessPoolExecutor(2) as ex:
    print(list(ex.map(abs, [-3])))
s = shared_memory.SharedMemory(create=True, size=4096)
s.buf[:2] = b"ok"
t = shared_memory.SharedMemory(s.name)
print(bytes(t.buf[:2]).decode(), os.path.exists("/tmp/" + s.name))
t.close()
s.close()
s.unlink()'
for tier in medium high; do
	out=$(cd "$T_TMP" && timeout 120 "$CB" run --tier $tier --approve deny -- "$PYTHON" -c "$PROG" 2>&1)
	t_is "$tier: multiprocessing's Lock, Pool, ProcessPoolExecutor and shared_memory work" "$out" \
		"$(printf '[1, 2]\n[3]\nok True')"
done
t_is "... /dev/shm is a link to the sandbox's /tmp" \
	"$(cd "$T_TMP" && timeout 60 "$CB" run --tier medium --approve deny -- /usr/bin/readlink /dev/shm 2>&1)" "/tmp"
t_is "the low tier has no /dev/shm (it cannot fork; nothing more to see)" \
	"$(cd "$T_TMP" && timeout 60 "$CB" run --tier low -- "$PYTHON" -c \
	'import os; print(os.path.lexists("/dev/shm"))' 2>&1)" "False"
t_done
