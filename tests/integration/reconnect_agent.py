# reconnect_agent.py - the hostile agent of 912: a connected socket (the
# broker's, installed by a mediated connect) with SO_LINGER and unsent data
# towards a peer that reads nothing is connect()ed again, so that the
# broker takes a copy of it (pidfd_getfd) to answer EISCONN, and the
# agent closes its own copy at once: the broker's close may be the last.
# Then a ping over the channel says whether the broker's loop waited.
# Usage: reconnect_agent.py PORT LINGER_S.  Prints "errno E ping S".
import os, socket, struct, sys, time
import msgpack

port, linger = int(sys.argv[1]), int(sys.argv[2])
ch = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
s = socket.socket()
s.connect(("127.0.0.1", port))
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, linger))
s.setblocking(False)
try:
    while True:
        s.send(b"x" * 65536)
except BlockingIOError:
    pass
err = 0
try:
    s.connect(("127.0.0.1", port))
except OSError as e:
    err = e.errno
os.close(s.detach())
t = time.monotonic()
ch.send(msgpack.packb({"id": 1, "op": "ping"}))
ch.recv(65536)
print("errno %d ping %.3f" % (err, time.monotonic() - t), flush=True)
