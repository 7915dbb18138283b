#!/usr/bin/python3
# net_reset_fastopen_fd.py - escape attempt: the socket net.connect hands over, once reset, connects anywhere by sendto(MSG_FASTOPEN).
#
# Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
# every try failed in the expected way.  Metadata read by run.sh:
# TIER: high
# EXIT: 0
# OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
# ARGS: @HOSTPORT@
#
# The explicit net.connect (docs/protocol.md) passes the broker's
# connected socket, made in the host's network namespace.  The host
# service closes it; a write draws a reset.  A socket the kernel still
# counted as connecting was then disconnected by sendto(MSG_FASTOPEN), and
# the next one connected it to 127.0.0.2:PORT, which no token covers.
import errno
import os
import socket
import sys
import time

import msgpack

port = int(sys.argv[1])
chan = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
chan.send(msgpack.packb({"id": 1, "op": "net.connect", "host": "127.0.0.1", "port": port}))
msg, fds, _, _ = socket.recv_fds(chan, 65536, 1)
if not fds:
    print("net.connect failed:", msgpack.unpackb(msg, raw=False))
    sys.exit(2)
s = socket.socket(fileno=fds[0])
s.recv(16)
for _ in range(3):
    try:
        s.send(b"x", socket.MSG_NOSIGNAL)
    except OSError:
        pass
    time.sleep(0.1)
bad = 0
for i in range(2):
    try:
        s.sendto(b"x", socket.MSG_FASTOPEN | socket.MSG_NOSIGNAL, ("127.0.0.2", port))
        print("ESCAPE: sendto(MSG_FASTOPEN) connected the broker's socket to 127.0.0.2:%d" % port)
        bad += 1
        break
    except OSError as e:
        if e.errno != errno.EISCONN:
            print("ESCAPE: sendto(MSG_FASTOPEN) failed with %s, expected EISCONN" % os.strerror(e.errno))
            bad += 1
if bad:
    sys.exit(1)
print("held: the socket net.connect handed over stays connected after a reset")
