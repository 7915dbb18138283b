#!/usr/bin/python3
"""audit_allowed_agent.py PATH SECONDS [RATE] - an agent with an ordinary grant that
asks for allowed operations only, as fast as it can: fs.stat of PATH in a
loop, RATE a second if given (red-team finding F5: before every audit byte was budgeted, one such
agent wrote 109 MiB of audit log in 10 s).  Prints "ok N" every 200
successful stats and at the end, so the count survives a kill.  A stat
refused with audit-failed (the log's writer behind on a loaded machine:
back-pressure, nothing done) is tried again."""
import sys
import time

import capbroker

path, limit = sys.argv[1], float(sys.argv[2])
rate = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
c = capbroker.Client()
n = refused = 0
start = time.monotonic()
try:
    while time.monotonic() - start < limit:
        if rate and n >= (time.monotonic() - start) * rate:
            time.sleep(0.001)
            continue
        try:
            c.stat(path)
        except capbroker.Error as e:
            # the log's writer behind (a loaded machine): back-pressure,
            # not the budget; the stat was refused before it was done
            if e.name != "audit-failed":
                raise
            refused += 1
            time.sleep(0.01)
            continue
        n += 1
        if n % 200 == 0:
            print("ok", n, flush=True)
except (capbroker.Error, OSError) as e:
    print("ok", n, flush=True)
    print("stopped:", e, flush=True)
    time.sleep(5)
    sys.exit(3)
print("ok", n, flush=True)
print("done in %.1f s (%d refused for want of room in the log)" % (time.monotonic() - start, refused),
      flush=True)
