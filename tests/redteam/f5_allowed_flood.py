#!/usr/bin/python3
"""An agent with an ordinary workspace grant grows the audit log without a
budget: allowed operations are not budgeted (broker/budget.c), each is a
line.  argv: PATH SECONDS"""
import sys, time
import capbroker
c = capbroker.Client()
path, limit = sys.argv[1], float(sys.argv[2])
n = 0; start = time.monotonic()
while time.monotonic() - start < limit:
    c.stat(path); n += 1
print("allowed", n, flush=True)
