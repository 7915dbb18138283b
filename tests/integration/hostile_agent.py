#!/usr/bin/python3
"""hostile_agent.py - runs inside a sandbox and attacks the broker channel
with malformed frames; prints "PASS name" / "FAIL name: why" per check."""
import os
import socket
import sys
import time

import msgpack

s = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
s.settimeout(10)
fails = 0


def check(name, cond, why=""):
    global fails
    print(("PASS %s" if cond else "FAIL %s: " + why) % name, flush=True)
    if not cond:
        fails += 1


def reply():
    return msgpack.unpackb(s.recv(300000), raw=False)


def expect_err(name, frame, code, rid=None):
    s.send(frame)
    r = reply()
    ok = r.get("ok") is False and r.get("err") == code and (rid is None or r.get("id") == rid)
    check(name, ok, repr(r))


good = msgpack.packb({"id": 9, "op": "ping"})
expect_err("truncated frame", good[:-2], -90)
expect_err("oversized frame", b"\x80" + b"x" * 70000, -7)
expect_err("wrong type for op", msgpack.packb({"id": 1, "op": 5}), -90)
expect_err("deep nesting", b"\x91" * 200 + b"\x01", -90)
expect_err("unknown op keeps its id", msgpack.packb({"id": 2, "op": "rm -rf"}), -91, 2)
expect_err("empty packet", b"", -90)
expect_err("huge declared array", msgpack.packb({"id": 3, "op": "proc.exec"})[:-0 or None][:-1] +
           b"", -90)
expect_err("array32 of 4G elements", b"\x82\xa2id\x03\xa4argv\xdd\xff\xff\xff\xff", -90)
expect_err("map32 of 268M pairs", b"\xdf\x0f\xff\xff\xff", -90)
expect_err("NUL inside a path", msgpack.packb({"id": 4, "op": "fs.read", "path": "/a\0b"}), -90)
expect_err("unknown key", msgpack.packb({"id": 5, "op": "ping", "evil": 1}), -90)
expect_err("float id", msgpack.packb({"id": 1.5, "op": "ping"}), -90)
expect_err("a key its op does not take", msgpack.packb({"id": 8, "op": "fs.read", "path": "/x", "mode": 0o777}), -90, 8)
s.send(msgpack.packb({"id": 10, "op": "fs.stat", "path": "/x", "data": b"x"}))
r = reply()
check("the refusal names the foreign key", r.get("ok") is False and r.get("id") == 10 and
      "data" in str(r.get("reason")), repr(r))
expect_err("garbage token", msgpack.packb({"id": 6, "op": "fs.read", "path": "/x", "tok": "cap1.!!!"}), -21, 6)
expect_err("token handle out of range", msgpack.packb({"id": 7, "op": "fs.read", "path": "/x", "th": 99999}), -49, 7)

# fd flood: every descriptor we send must be refused by the kernel (the
# broker's end takes none: SO_PASSRIGHTS, Linux 6.16) or closed by the
# broker, unread.
null = os.open("/dev/null", os.O_RDONLY)
sent = 0
for i in range(200):
    try:
        s.sendmsg([good], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(__import__("array").array("i", [null] * 8)))])
        sent += 1
    except PermissionError:
        pass
check("frames carrying fds are all refused by the kernel or all sent", sent in (0, 200), "%d sent" % sent)
print("FDFRAMES %d" % sent, file=sys.stderr)
bad = 0
for i in range(sent):
    r = reply()
    if r.get("err") != -90:
        bad += 1
check("200 frames carrying 8 fds each are refused", bad == 0, "%d not refused" % bad)

# request flood: many pings pipelined; all answered (rate limit only slows)
n = 5000
t0 = time.time()
sent = 0
got = 0
s.setblocking(False)
while got < n:
    while sent < n and sent - got < 64:
        try:
            s.send(msgpack.packb({"id": 100 + sent, "op": "ping"}))
            sent += 1
        except BlockingIOError:
            break
    try:
        r = msgpack.unpackb(s.recv(65536), raw=False)
        got += 1
    except BlockingIOError:
        time.sleep(0.0005)
    if time.time() - t0 > 30:
        break
s.setblocking(True)
check("a flood of %d pings is answered" % n, got == n, "%d of %d" % (got, n))

s.send(good)
r = reply()
check("the channel still works after all that", r.get("ok") is True and r.get("id") == 9, repr(r))
sys.exit(1 if fails else 0)
