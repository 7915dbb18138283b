"""proc_flood_agent.py N TIMEOUT_MS ARGV... - an agent (inside a sandbox) for
982-proc-output-discard.sh: sends N proc.exec requests of ARGV at once, each
with TIMEOUT_MS, and prints one line per reply as it comes:
"done in S.SSs status=N out=BYTES trunc=BOOL"."""
import os
import socket
import sys
import time

import msgpack

S = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
S.settimeout(120)
n, timeout, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
for i in range(n):
    S.send(msgpack.packb({"op": "proc.exec", "argv": argv, "id": i + 1, "timeout": timeout},
                         use_bin_type=True))
t = time.time()
for i in range(n):
    data, _, _, _ = S.recvmsg(300000, socket.CMSG_SPACE(16))
    r = msgpack.unpackb(data, raw=False)
    print("done in %.2fs status=%s out=%d trunc=%s" % (time.time() - t, r.get("status"),
          len(r.get("out", b"")), r.get("trunc")), flush=True)
