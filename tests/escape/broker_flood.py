#!/usr/bin/python3
# broker_flood.py - escape attempt: an agent that floods the broker and never reads its replies is cut off (exit 137).
#
# Runs as the agent inside the sandbox (untrusted domain); it is expected to
# be killed.  Metadata read by run.sh:
# TIER: low
# EXIT: 137
#
# Requests whose replies the agent never reads would pile up in the broker
# (its memory, its other sandboxes' service).  The broker must stop reading
# a sandbox whose replies back up and, its channel closed, the sandbox dies
# (docs/sandbox.md: the broker closing its end is exit 137).  Surviving 20
# seconds of flooding, or the send failing otherwise, is a failure.
import os
import socket
import sys
import time

import msgpack

sock = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
sock.setblocking(False)
# "tokens" has the largest reply an agent can ask for without a token.
packet = msgpack.packb({"id": 1, "op": "tokens"})
sent = 0
start = time.monotonic()
while time.monotonic() - start < 20:
    try:
        sock.send(packet)
        sent += 1
    except BlockingIOError:
        time.sleep(0.001)
    except OSError as e:
        # The broker closed its end a moment before the stub kills us.
        time.sleep(5)
        print("ESCAPE: still alive 5 s after the channel failed (%s) after %d requests" % (e, sent))
        sys.exit(1)
print("ESCAPE: %d requests in 20 s without reading a reply, and not cut off" % sent)
sys.exit(1)
