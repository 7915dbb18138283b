#!/usr/bin/env bash
# F8: every file an agent holds open in a served tree costs the broker one
# descriptor, up to max_handles (4,096) per tree, and nothing bounds the sum
# over trees and sandboxes against the broker's own RLIMIT_NOFILE.  An agent
# in the medium tier forks (its own open-files limit is per process) and
# holds 4,096 files of its workspace open; the broker, shared by every
# sandbox under `serve`, runs out of descriptors and fails other sandboxes'
# operations and starts.  Here the broker's limit is lowered to 4,400 so one
# hostile sandbox shows it (the hard limit on this machine is 20,000: five
# such sandboxes, or one with five granted trees).
# Expect: the calm sandbox's cat and a new sandbox's start still work.
cd "$(dirname "$0")/../.." || exit 2
CB=${CB:-./bin/capbroker}; CTL=${CTL:-./bin/capctl}
t=$(mktemp -d /var/tmp/f8.XXXXXX); chmod 755 "$t"; mkdir "$t/ws" "$t/ws2" "$t/st"
trap 'kill $SRV $H 2>/dev/null; wait 2>/dev/null; rm -rf "$t"' EXIT
echo x >"$t/ws/f"; echo hello >"$t/ws2/a.txt"
( ulimit -n 4400; exec "$CB" serve --state "$t/st" ) & SRV=$!
for _ in $(seq 50); do [ -S "$t/st/admin.sock" ] && break; sleep 0.1; done
"$CB" run --connect "$t/st/admin.sock" --id hostile --tier medium --workspace "$t/ws" --timeout 60 -- \
	python3 -c '
import os, time
for k in range(5):
    if os.fork() == 0:
        fds = []
        try:
            while True: fds.append(os.open("f", os.O_RDONLY))
        except OSError: pass
        time.sleep(30); os._exit(0)
time.sleep(30)' & H=$!
sleep 4
echo "broker descriptors: $(ls /proc/$SRV/fd 2>/dev/null | wc -l) (limit 4400)"
echo "calm sandbox cat: $("$CB" run --connect "$t/st/admin.sock" --id calm --tier medium --workspace "$t/ws2" -- cat a.txt 2>&1; echo " rc=$?")"
echo "a low-tier sandbox start: $("$CB" run --connect "$t/st/admin.sock" --id calm2 -- true 2>&1; echo " rc=$?")"
echo "expected: the calm sandbox prints hello (rc=0) and the start works (rc=0)"
