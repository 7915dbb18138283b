"""pool_backoff_agent.py MODE DIR SECONDS - an agent (inside a sandbox) for
984-proc-pool-fail-shape.sh.  "victim": proc.exec /usr/bin/true every 0.1 s.
"attack": in a loop, derive fs.read on DIR/s (made afresh), proc.exec
/usr/bin/true (the pool starts building that shape, DIR/s a bind), and
rename DIR/s at once, so that the build fails.  Prints the rounds done."""
import os
import socket
import sys
import time

import msgpack
S = socket.socket(fileno=int(os.environ["CAPBROKER_FD"])); S.settimeout(60)
N=[0]
def call(m):
    N[0]+=1; m["id"]=N[0]; S.send(msgpack.packb(m, use_bin_type=True))
    while True:
        d,_,_,_ = S.recvmsg(300000, socket.CMSG_SPACE(16))
        r = msgpack.unpackb(d, raw=False)
        if r.get("id")==N[0]: return r
mode, W, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
end = time.time() + secs; n = 0
while time.time() < end:
    if mode == "attack":
        d = "%s/s" % W
        os.makedirs(d, exist_ok=True)
        r = call({"op":"derive","caps":["fs.read:%s/**" % d],"ttl":2})
        call({"op":"proc.exec","argv":["/usr/bin/true"]})
        os.rename(d, "%s/s.%d" % (W, n))
        time.sleep(0.05)
    else:
        call({"op":"proc.exec","argv":["/usr/bin/true"]}); time.sleep(0.1)
    n += 1
print(mode, "rounds", n, flush=True)
