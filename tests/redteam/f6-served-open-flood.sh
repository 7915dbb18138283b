#!/usr/bin/env bash
# F6: the served workspace (medium tier) audits every open(), and allowed
# operations are never charged to the sandbox's audit budget: an ordinary
# open()/close() loop on one file, no protocol needed, grows the audit log
# at megabytes a second.  Expect: the sandbox throttled or stopped after a
# bounded number of lines (as denials are), the log growing by at most a
# few MiB.
cd "$(dirname "$0")/../.." || exit 2
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
mkdir "$t/ws" "$t/st"
timeout 60 ./bin/capbroker run --state "$t/st" --tier medium --workspace "$t/ws" -- python3 -c '
import os, time
open("f", "w").write("x")
n, end = 0, time.time() + 10
while time.time() < end:
    try:
        os.close(os.open("f", os.O_RDONLY)); n += 1
    except OSError:
        pass
print("agent: %d opens in 10 s" % n)'
echo "observed: audit.jsonl $(du -h "$t/st/audit.jsonl" | cut -f1), $(grep -c '"op":"fs.open"' "$t/st/audit.jsonl") fs.open lines in 10 s"
echo "expected: the sandbox throttled or stopped after a bounded number of lines (a few MiB at most)"
