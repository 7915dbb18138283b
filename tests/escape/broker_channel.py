#!/usr/bin/python3
# broker_channel.py - escape attempt: the broker's channel grants nothing without a valid token and survives abuse.
#
# Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
# every try failed in the expected way.  Metadata read by run.sh:
# TIER: low
# EXIT: 0
# OPTS: --state @STATEDIR@ --grant proc.exec:/usr/bin/cat
# ARGS: @STATEKID@
#
# The agent's only channel is its socketpair to the broker (docs/protocol.md).
# It holds one token, proc.exec:/usr/bin/cat (the run's --grant).  Without a
# token every operation must be refused; beyond its token too; forged tokens
# (an unknown key id, and the serving broker's real key id from run.sh, with
# a signature we made up) are unknown; a real token re-signed by nobody (its
# capabilities widened within the tier's ceiling, its expiry moved, its
# audience changed) has a bad signature; a token derived for another sandbox
# is worthless here; the granted tool runs in a sandbox of its own that sees
# no more than we do; an elevation request is denied (--approve deny);
# malformed packets, oversized packets and descriptors sent to the broker
# get a protocol error; and the broker still answers afterwards.  Debian's
# python3-msgpack builds the packets.
import array
import base64
import os
import socket
import sys
import time

import msgpack

bad = 0
sock = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))


def escaped(what):
    global bad
    bad += 1
    print("ESCAPE:", what, flush=True)


def recv():
    return msgpack.unpackb(sock.recv(300000), raw=False)


def call(msg):
    sock.send(msgpack.packb(msg, use_bin_type=True))
    return recv()


def refused(msg, names, what):
    """The request must be refused with one of names, and echo its id."""
    r = call(msg)
    if r.get("ok") is not False or r.get("name") not in names:
        escaped("%s: %r, expected refusal %s" % (what, r, "/".join(names)))
    elif r.get("id") != msg.get("id"):
        escaped("%s: reply id %r for request %r" % (what, r.get("id"), msg.get("id")))


def raw_refused(data, names, what, fds=None):
    if fds:
        # Refused by the kernel where the broker's end takes no descriptors
        # (SO_PASSRIGHTS, Linux 6.16), else by the broker.
        try:
            sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        except PermissionError:
            return
    else:
        sock.send(data)
    r = recv()
    if r.get("ok") is not False or r.get("name") not in names:
        escaped("%s: %r, expected refusal %s" % (what, r, "/".join(names)))


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def d64(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def tampered(tok, **change):
    """tok with its body changed and its signature kept."""
    _, body, sig = tok.split(".")
    b = msgpack.unpackb(d64(body), raw=False)
    b.update(change)
    return "cap1." + b64(msgpack.packb(b, use_bin_type=True)) + "." + sig


def forged(kid):
    now = int(time.time())
    body = msgpack.packb({"v": 1, "kid": kid, "id": os.urandom(16), "aud": "escape",
                          "nbf": now - 60, "exp": now + 3600,
                          "caps": ["fs.read:/**", "proc.exec:/**", "net.connect:*:*"]},
                         use_bin_type=True)
    return "cap1." + b64(body) + "." + b64(os.urandom(64))


if len(sys.argv) != 2 or len(sys.argv[1]) != 16:
    print("usage: broker_channel.py KID(16 hex digits)")
    sys.exit(2)
real_kid = bytes.fromhex(sys.argv[1])
me = os.environ.get("CAPBROKER_SANDBOX", "")

# Beyond the one token held: nothing.  (With no token at all the name is
# no-token; holding one, every request it does not cover is not-covered.)
no = ("not-covered",)
refused({"id": 1, "op": "fs.read", "path": "/etc/shadow"}, no, "fs.read beyond the token")
refused({"id": 2, "op": "fs.stat", "path": "/etc/shadow"}, no, "fs.stat beyond the token")
refused({"id": 3, "op": "fs.list", "path": "/"}, no, "fs.list beyond the token")
refused({"id": 4, "op": "fs.write", "path": "/tmp/x", "data": b"x", "flags": 1}, no,
        "fs.write beyond the token")
refused({"id": 5, "op": "fs.mkdir", "path": "/tmp/escape-dir"}, no, "fs.mkdir beyond the token")
refused({"id": 6, "op": "fs.delete", "path": "/tmp"}, no, "fs.delete beyond the token")
refused({"id": 7, "op": "fs.rename", "path": "/tmp", "path2": "/tmp2"}, no,
        "fs.rename beyond the token")
refused({"id": 8, "op": "proc.exec", "argv": ["/bin/sh", "-c", "id"]}, no,
        "proc.exec beyond the token")
refused({"id": 9, "op": "net.connect", "host": "127.0.0.1", "port": 22},
        ("not-covered",), "net.connect beyond the token")
refused({"id": 10, "op": "proc.exec", "argv": ["/usr/bin/ls", "/"]}, ("not-covered",),
        "proc.exec of another tool")
refused({"id": 11, "op": "fs.read", "path": "/tmp/../etc/shadow"}, ("cap-dotdot",),
        "fs.read of a .. path")
refused({"id": 12, "op": "io.read", "h": 0, "len": 10}, ("invalid",), "io.read of no handle")
r = call({"id": 13, "op": "tokens"})
toks = r.get("tokens") or []
if r.get("ok") is not True or len(toks) != 1 or toks[0].get("caps") != "proc.exec:/usr/bin/cat":
    escaped("the sandbox holds other tokens than its grant: %r" % (r,))
    sys.exit(1)
th = toks[0]["th"]
refused({"id": 14, "op": "derive", "caps": ["proc.exec:/usr/bin/ls"], "th": th},
        ("widens-parent",), "derive of a wider token")

# The granted tool runs in a sandbox of its own: no host secrets, no pid 1.
for i, path in enumerate(("/etc/shadow", "/proc/1/environ", "/root")):
    r = call({"id": 15 + i, "op": "proc.exec", "argv": ["/usr/bin/cat", path]})
    if r.get("ok") is not True or r.get("status") != 1 or r.get("out") != b"":
        escaped("proc.exec cat %s: %r" % (path, r))

# A real token, changed without the key: the signature must not hold.
mine = call({"id": 18, "op": "derive", "caps": ["proc.exec:/usr/bin/cat"], "th": th})
other = call({"id": 19, "op": "derive", "caps": ["proc.exec:/usr/bin/cat"], "th": th,
              "aud": "escape-other"})
if mine.get("ok") is not True or other.get("ok") is not True:
    escaped("derive of the same capability failed: %r %r" % (mine, other))
    sys.exit(1)
cat = {"op": "proc.exec", "argv": ["/usr/bin/cat", "/etc/hostname"]}
r = call(dict(cat, id=40, tok=mine["token"]))
if r.get("ok") is not True or r.get("status") != 0:
    escaped("the derived token does not work, the checks below prove nothing: %r" % (r,))
refused(dict(cat, id=41, tok=other["token"]), ("wrong-audience",),
        "a token derived for another sandbox")
refused({"id": 42, "op": "proc.exec", "argv": ["/usr/bin/ls", "/"],
         "tok": tampered(mine["token"], caps=["proc.exec:/usr/bin/ls"])}, ("bad-signature",),
        "a token whose capabilities were widened")
refused(dict(cat, id=43, tok=tampered(mine["token"], exp=int(time.time()) + 10 ** 8)),
        ("bad-signature",), "a token whose expiry was moved")
refused(dict(cat, id=44, tok=tampered(other["token"], aud=me)), ("bad-signature",),
        "another sandbox's token re-addressed to us")
refused({"id": 45, "op": "token.add", "tok": tampered(other["token"], aud=me)},
        ("bad-signature",), "token.add of a re-addressed token")

# Forged tokens (ids the broker never issued): an unknown key id, and the
# serving broker's own key id.
unknown = ("unknown-token", "unknown-key", "bad-signature")
for i, kid in enumerate((os.urandom(8), real_kid)):
    tok = forged(kid)
    refused(dict(cat, id=20 + i, tok=tok), unknown, "proc.exec with a forged token")
    refused({"id": 22 + i, "op": "token.add", "tok": tok}, unknown, "token.add of a forged token")
    refused({"id": 24 + i, "op": "ping", "tok": tok}, unknown, "ping presenting a forged token")
# The broker keeps every token presented to it in the sandbox's table, even
# refused ones (reported to the lead: broker/tokens.c brk_held_add runs before
# any check).  Whatever the table holds, only the two real tokens may work.
r = call({"id": 26, "op": "tokens"})
real = (th, mine.get("th"))
for t in r.get("tokens") or []:
    tries = [["/usr/bin/ls", "/"]] + ([] if t["th"] in real else [["/usr/bin/cat", "/etc/hostname"]])
    for argv in tries:
        rr = call({"id": 27, "op": "proc.exec", "argv": argv, "th": t["th"]})
        if rr.get("ok") is not False or \
                rr.get("name") not in unknown + ("not-covered", "wrong-audience"):
            escaped("held entry %r runs %s: %r" % (t, argv[0], rr))
refused({"id": 28, "op": "proc.exec", "argv": ["/usr/bin/ls", "/"]},
        unknown + ("not-covered",), "proc.exec of ls with whatever the broker keeps")

# Elevation: denied (the run says --approve deny), nothing held after.
refused({"id": 30, "op": "request", "cap": "fs.read:/etc/shadow", "ttl": 60,
         "reason": "escape suite"}, ("denied",), "an elevation request")

# Malformed input: a protocol error each, never a crash or a hang.
proto = ("protocol",)
raw_refused(b"", proto, "an empty packet")
raw_refused(b"\xdf\xff\xff\xff\xff", proto, "a map claiming 2^32 entries")
raw_refused(b"\x91" * 100 + b"\x01", proto, "arrays nested 100 deep")
raw_refused(b"\x82\xa2id\x01\xa2op\xcb" + b"\0" * 8, proto, "a float op")
raw_refused(msgpack.packb({"id": 40, "op": "ping", "x": 1}), proto, "an unknown key")
raw_refused(msgpack.packb({"id": 41, "op": "ping", "id2": 1, "op2": "x"}), proto, "unknown keys")
raw_refused(b"\x82\xa2id\x01\xa2id\x02", proto, "a duplicate key")
raw_refused(msgpack.packb({"id": 42, "op": "ping"}) + b"\xc0", proto, "trailing bytes")
raw_refused(b"\0" * 65537, ("too-big",), "a packet over 64 KiB")
rd, wr = os.pipe()
raw_refused(msgpack.packb({"id": 43, "op": "ping"}), proto, "descriptors sent to the broker",
            fds=[rd, wr, 0, 1, 2] * 8)

# The broker is still there, and still ours.
r = call({"id": 50, "op": "ping"})
if r != {"id": 50, "ok": True}:
    escaped("the broker no longer answers: %r" % (r,))
if bad:
    sys.exit(1)
print("held: requests beyond the token, forged, tampered and foreign tokens, elevation, "
      "malformed packets and descriptors all refused; the broker still answers")
