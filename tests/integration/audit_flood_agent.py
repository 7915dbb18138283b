#!/usr/bin/python3
"""audit_flood_agent.py MODE [SECONDS] - a hostile agent that sends denied
requests at full speed (issue 10, hole 8): MODE "vary" asks for a new path
each time (nothing to coalesce), "same" repeats one request.  It keeps up to
64 requests in flight and reads every reply, so only the broker's budget
slows it.  Prints how many denials it got, if it lives to print."""
import os
import socket
import sys
import time

import msgpack

mode = sys.argv[1]
limit = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
s = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
sent = got = 0
start = time.monotonic()
try:
    while time.monotonic() - start < limit:
        while sent - got < 64:
            path = "/no/such/file-%d" % sent if mode == "vary" else "/no/such/file"
            s.send(msgpack.packb({"id": sent + 1, "op": "fs.read", "path": path}))
            sent += 1
        r = msgpack.unpackb(s.recv(65536), raw=False)
        if r.get("ok") is not False:
            print("FAIL: a denied request succeeded: %r" % r, flush=True)
            sys.exit(2)
        got += 1
except OSError as e:
    print("channel closed after %d denials: %s" % (got, e), flush=True)
    time.sleep(5)
    sys.exit(3)
print("still served after %d denials in %.0f s" % (got, limit), flush=True)
