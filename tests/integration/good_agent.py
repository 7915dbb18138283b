#!/usr/bin/python3
"""good_agent.py - a well-behaved agent: N reads of one file through the
broker; prints how many succeeded and its latencies (p50/p99 in us)."""
import sys
import time

import capbroker

path, n = sys.argv[1], int(sys.argv[2])
cb = capbroker.Client()
ok = 0
lat = []
for i in range(n):
    t = time.perf_counter()
    try:
        if cb.read_file(path) == b"payload\n":
            ok += 1
    except capbroker.Error as e:
        print("error:", e, file=sys.stderr)
    lat.append(time.perf_counter() - t)
    time.sleep(0.002)
lat.sort()
print("ok %d p50 %.0f p99 %.0f" % (ok, lat[len(lat) // 2] * 1e6, lat[int(len(lat) * 0.99)] * 1e6))
