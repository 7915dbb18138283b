#!/usr/bin/env python3
"""dns_probe.py - the host's resolver in the DNS tests' network namespace
(tests/integration/dns_lib.sh): listens on 127.0.0.1:53, UDP and TCP, and
appends every name it is asked for to LOG, one a line.  It answers nothing
(a lookup then times out: the tests' resolv.conf says timeout:1) except the
names given as NAME ADDR CMD triples after LOG: an A question for NAME gets
ADDR (an AAAA question an empty answer), over UDP, after the shell command
CMD (if not empty) has run, once, to its end.  CMD is how a test acts while
the broker's lookup is under way (tests/integration/91-net-dns-hardening.sh
revokes the token there).

usage: dns_probe.py LOG [NAME ADDR CMD]...
"""
import socket
import struct
import subprocess
import sys
import threading

log = open(sys.argv[1], "a", buffering=1)
answers = {}
for k in range(2, len(sys.argv) - 2, 3):
    answers[sys.argv[k]] = [sys.argv[k + 1], sys.argv[k + 2]]


def question(m):
    """(name, end of the question, qtype) of the DNS message m."""
    i, out = 12, []
    while i < len(m) and m[i]:
        out.append(m[i + 1:i + 1 + m[i]].decode("ascii", "replace"))
        i += 1 + m[i]
    qtype = struct.unpack(">H", m[i + 1:i + 3])[0] if i + 3 <= len(m) else 0
    return ".".join(out), i + 5, qtype


def answer(m):
    """The reply to m, or None when m asks for a name not to answer."""
    name, end, qtype = question(m)
    a = answers.get(name)
    if a is None or end > len(m):
        return None
    if a[1]:
        subprocess.run(a[1], shell=True, check=False)
        a[1] = ""
    an = 1 if qtype == 1 else 0
    r = struct.pack(">HHHHHH", struct.unpack(">H", m[:2])[0], 0x8180, 1, an, 0, 0) + m[12:end]
    if an:
        r += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 5, 4) + socket.inet_aton(a[0])
    return r


def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 53))
    while True:
        m, peer = u.recvfrom(4096)
        log.write(question(m)[0] + "\n")
        r = answer(m)
        if r is not None:
            u.sendto(r, peer)


def tcp():
    t = socket.socket()
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("127.0.0.1", 53))
    t.listen(8)
    while True:
        c, _ = t.accept()
        log.write(question(c.recv(4096)[2:])[0] + "\n")
        c.close()


threading.Thread(target=tcp, daemon=True).start()
udp()
