#!/usr/bin/python3
"""redteam_agent.py - a hostile (prompt-injected) agent for
tests/integration/16-broker-redteam.sh.  Runs inside a sandbox and talks raw
msgpack on CAPBROKER_FD.  Usage: redteam_agent.py MODE WORKSPACE [ARGS...]

Each check prints "PASS title" or "FAIL title :: detail"; the last line is
"DONE" when the agent got through all of them.  A check whose title
starts with "KNOWN BUG:" asserts the secure behaviour the broker does not
have yet: it fails until the broker is fixed (never weaken it).  Other
lines ("INFO ...", "TID ...") are for the test script.
"""
import base64
import os
import socket
import sys
import time

import msgpack

S = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
S.settimeout(30)
NEXT = [1000]
FAILS = [0]


def check(title, cond, detail=""):
    print(("PASS %s" % title) if cond else ("FAIL %s :: %s" % (title, detail)), flush=True)
    if not cond:
        FAILS[0] += 1


def info(*a):
    print("INFO", *a, flush=True)


def send(op, **f):
    NEXT[0] += 1
    m = {k: v for k, v in f.items() if v is not None}
    m["id"] = NEXT[0]
    m["op"] = op
    S.send(msgpack.packb(m, use_bin_type=True))
    return NEXT[0]


def recv():
    data, anc, flags, _ = S.recvmsg(300000, socket.CMSG_SPACE(4 * 4), socket.MSG_CMSG_CLOEXEC)
    fd = None
    for lvl, typ, payload in anc:
        if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fd = int.from_bytes(payload[:4], sys.byteorder, signed=True)
    if not data:
        raise EOFError("broker closed the channel")
    return msgpack.unpackb(data, raw=False), fd


def call(op, **f):
    """One request, its reply (dict with 'fd' replaced by the fd or None)."""
    rid = send(op, **f)
    while True:
        r, fd = recv()
        if r.get("id") == rid:
            r["_fd"] = fd
            return r
        if fd is not None:
            os.close(fd)


def close_fd(r):
    if r.get("_fd") is not None:
        os.close(r["_fd"])
        r["_fd"] = None


def ok(r):
    close_fd(r)
    return r.get("ok") is True


def denied(r, *names):
    """Refused, and (when names are given) for one of those reasons."""
    close_fd(r)
    return r.get("ok") is False and (not names or r.get("name") in names)


def desc(r):
    return "%s/%s: %s" % (r.get("ok"), r.get("name"), r.get("reason"))


def read_fd(r):
    fd = r.get("_fd")
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        r["_fd"] = None
        return f.read()


# ---- token text surgery (docs/tokens.md) ---------------------------------
def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64e(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def tok_split(text):
    assert text.startswith("cap1.")
    body, sig = text[5:].split(".")
    return msgpack.unpackb(b64d(body), raw=False), b64d(sig)


def tok_join(body, sig):
    return "cap1." + b64e(msgpack.packb(body, use_bin_type=True)) + "." + b64e(sig)


def derive(caps, **kw):
    return call("derive", caps=caps, **kw)


# ---- modes ----------------------------------------------------------------
def mode_tok(w):
    """Forging, replaying and widening tokens (medium tier, grant fs.*:W/**
    is given by the script as th 0)."""
    f = w + "/f"
    r = call("fs.read", path=f)
    check("control: the granted token reads the workspace", ok(r), desc(r))

    # derive a narrower child: works; wider: refused
    r = derive([f"fs.read:{f}"], th=0, ttl=600)
    check("derive of a narrower child succeeds", r.get("ok") is True and "token" in r, desc(r))
    child = r.get("token")
    r = derive(["fs.read:/etc/**"], th=0)
    check("derive of a capability outside the parent is refused (widens-parent)",
          denied(r, "widens-parent"), desc(r))
    r = derive([f"fs.read:{w}/**", "fs.read:/**"], th=0)
    check("derive with one wider capability among narrower ones is refused", denied(r), desc(r))

    # ttl / uses edge values
    r = derive([f"fs.read:{f}"], th=0, ttl=2**64 - 1)
    if r.get("ok"):
        body, _ = tok_split(r["token"])
        info("derive ttl=2^64-1 gave nbf", body["nbf"], "exp", body["exp"])
        check("derive with ttl 2^64-1 never outlives its parent (and is not minted already expired)",
              body["exp"] <= time.time() + 3700 and body["exp"] >= body["nbf"], repr(body))
    else:
        check("derive with ttl 2^64-1 (now + ttl wraps) is refused as invalid", denied(r, "invalid"),
              desc(r))
    r = call("derive", caps=[f"fs.read:{f}"], th=0, ttl=-1)
    check("derive with a negative ttl is a protocol error", denied(r, "protocol"), desc(r))
    r = call("derive", caps=[f"fs.read:{f}"], th=0, uses=2**32)
    check("derive with uses 2^32 is a protocol error (no truncation to 0)", denied(r, "protocol"), desc(r))
    r = derive([f"fs.read:{f}"], th=0, uses=0)
    if r.get("ok"):
        r2 = call("fs.read", path=f, tok=r["token"])
        check("a child derived with uses 0 can never be used", denied(r2, "uses-spent"), desc(r2))
    else:
        check("a child derived with uses 0 can never be used", True)

    # use limits: a uses=1 token
    r = derive([f"fs.read:{f}"], th=0, uses=1)
    one = r.get("token")
    check("derive of a uses=1 child succeeds", one is not None, desc(r))
    # children of the uses=1 token, each claiming 1 use, made before it is spent
    kids = []
    for _ in range(5):
        r = derive([f"fs.read:{f}"], tok=one, uses=1)
        if r.get("ok"):
            kids.append(r["token"])
    reads = 0
    for t in [one] + kids:
        r = call("fs.read", path=f, tok=t)
        if ok(r):
            reads += 1
    r = call("fs.read", path=f, tok=one)
    check("a uses=1 token cannot be used twice", denied(r, "uses-spent"), desc(r))
    info("reads obtained from one uses=1 token and its children:", reads)
    check("a uses=1 token and everything derived from it allow at most 1 operation "
          "(got %d: derive copies the claimed limit, spending never charges the parent)" % reads,
          reads <= 1, "reads=%d" % reads)
    r = derive([f"fs.read:{f}"], tok=one, uses=1)
    check("derive from a spent token is refused", denied(r, "uses-spent"), desc(r))
    r = derive([f"fs.read:{f}"], tok=one)
    check("derive without a limit from a limited parent is refused", denied(r), desc(r))

    # forging: same signature, edited body
    body, sig = tok_split(child)
    b2 = dict(body)
    b2["caps"] = [f"fs.write:{w}/**"]
    r = call("fs.write", path=w + "/forged", flags=1, data=b"x", tok=tok_join(b2, sig))
    check("a token whose capabilities were edited fails its signature", denied(r, "bad-signature"), desc(r))
    b3 = dict(body)
    b3["exp"] = body["exp"] + 10**6
    r = call("fs.read", path=f, tok=tok_join(b3, sig))
    check("a token whose expiry was extended fails its signature", denied(r, "bad-signature"), desc(r))
    b4 = dict(body)
    b4["elev"] = True
    b4["caps"] = ["fs.read:/etc/**"]
    r = call("fs.read", path="/etc/hostname", tok=tok_join(b4, sig))
    check("a token edited to claim elevation is refused", denied(r), desc(r))
    b5 = dict(body)
    b5.pop("par", None)
    r = call("fs.read", path=f, tok=tok_join(b5, sig))
    check("a token with its parent link stripped is refused", denied(r), desc(r))
    b6 = dict(body)
    b6["id"] = os.urandom(16)
    r = call("fs.read", path=f, tok=tok_join(b6, sig))
    check("a token with a fresh id is unknown to the broker", denied(r, "unknown-token", "bad-signature"),
          desc(r))
    r = call("fs.read", path=f, tok=child + "A")
    check("a token with trailing base64 garbage is refused", denied(r), desc(r))
    r = call("fs.read", path=f, tok=child.replace("cap1.", "CAP1."))
    check("a token with a wrong-case prefix is refused", denied(r, "token-prefix"), desc(r))
    # the same bytes re-encoded differently (non-canonical msgpack: uint64 for nbf)
    raw = b64d(child[5:].split(".")[0])
    r = call("fs.read", path=f, tok="cap1." + b64e(raw) + "." + b64e(sig[:-1] + bytes([sig[-1] ^ 1])))
    check("a token with one signature bit flipped is refused", denied(r, "bad-signature"), desc(r))

    # audience: a token made for another sandbox
    r = derive([f"fs.read:{f}"], th=0, aud="some-other-sandbox")
    info("derive for another audience:", desc(r))
    if r.get("ok"):
        other = r["token"]
        r2 = call("token.add", tok=other)
        check("token.add of a token bound to another sandbox is refused", denied(r2, "wrong-audience"),
              desc(r2))
        r2 = call("fs.read", path=f, tok=other)
        check("a token bound to another sandbox does not work here", denied(r2, "wrong-audience"),
              desc(r2))
    r = derive([f"fs.read:{f}"], th=0, aud="../../etc")
    check("derive for an invalid audience is refused", denied(r), desc(r))

    # handles
    r = call("fs.read", path=f, th=2**32 - 1)
    check("token handle 2^32-1 is refused", denied(r, "no-token"), desc(r))
    r = call("fs.read", path=f, th=2**32)
    check("token handle 2^32 is a protocol error", denied(r, "protocol"), desc(r))

    # the table: forged (well-formed, unsigned) tokens fill it
    for i in range(70):
        bf = dict(body)
        bf["id"] = os.urandom(16)
        call("ping", tok=tok_join(bf, sig))
    r = derive([f"fs.read:{f}"], th=0)
    fresh = r.get("token")
    r2 = call("fs.read", path=f, tok=fresh) if fresh else {"ok": False, "name": "no token"}
    check("after 70 forged tokens were presented, a freshly derived valid token "
          "still works (brk_held_add stores unverified tokens; 64 forgeries fill the table)",
          ok(r2), desc(r2))
    r = call("fs.read", path=f, th=0)
    check("the granted token still works after the forgery flood", ok(r), desc(r))


def mode_fs(w):
    """Path tricks.  Grants (script): fs.read:W/pub/**, fs.list:W/**,
    fs.write:W/out/**, fs.delete:W/out/**, fs.read:W/*.txt"""
    r = call("fs.read", path=w + "/pub/ok")
    check("control: read W/pub/ok", ok(r), desc(r))
    bad = {
        "a symlink to /etc inside the root": w + "/pub/esc/passwd",
        "a final symlink pointing outside the root": w + "/pub/lnk",
        "a final symlink to /proc/self/root": w + "/pub/procroot/etc/hostname",
        "a .. component": w + "/pub/../secret",
        "a . component": w + "/pub/./ok",
        "an empty component": w + "/pub//ok",
        "a trailing slash": w + "/pub/ok/",
        "a relative path": "pub/ok",
        "a sibling outside the glob": w + "/secret",
        "a prefix look-alike (W/pubx)": w + "/pubx/ok",
        "a FIFO (no hang)": w + "/pub/fifo",
        "a character device": w + "/pub/null",
        "a directory (the root itself)": w + "/pub",
        "a path of 1100 bytes": w + "/pub/" + "a" * 1100,
        "a path of 70 components": w + "/pub" + "/a" * 70,
        "a newline in the path": w + "/pub/ok\n",
        "a DEL byte": w + "/pub/ok\x7f",
        "a NFD spelling of an NFC name": w + "/pub/caf" + "e\u0301",
        "/proc/self/root": "/proc/self/root" + w + "/secret",
        "/proc/1/cwd": "/proc/1/cwd/secret",
    }
    for what, p in bad.items():
        t0 = time.monotonic()
        r = call("fs.read", path=p)
        dt = time.monotonic() - t0
        check("fs.read through %s is refused" % what, denied(r) and dt < 5, desc(r))
    # A host writer is blocked opening W/pub/wfifo until a reader comes:
    # the broker must refuse the FIFO without opening it (an open of a
    # special file can have side effects: a FIFO wakes its writer, a
    # watchdog device arms, a tape rewinds).  The script checks the writer.
    r = call("fs.read", path=w + "/pub/wfifo")
    check("fs.read of a FIFO with a waiting writer is refused", denied(r, "file-type"), desc(r))
    r = call("fs.read", path=w + "/pub/caf\u00e9")
    check("control: the NFC name itself reads", ok(r), desc(r))
    r = call("fs.read", path=w + "/pub/hard")
    info("hard link planted by the host:", desc(r))
    for what, p in (("a symlink dir", w + "/pub/esc"), ("/proc", "/proc/self")):
        r = call("fs.list", path=p)
        check("fs.list of %s is refused" % what, denied(r), desc(r))
    r = call("fs.stat", path=w + "/pub/esc")
    check("fs.stat does not follow a symlink out", denied(r) or (r.get("st", {}).get("type") != "d"), desc(r))
    r = call("fs.list", path=w + "/pub")
    names = sorted(e["n"] for e in r.get("entries", []))
    check("fs.list of W/pub works and shows the planted names", "ok" in names and "esc" in names, desc(r))
    # glob *.txt: dot files documented as matched, deeper names not
    r = call("fs.read", path=w + "/a.txt")
    check("fs.read:W/*.txt reads W/a.txt", ok(r), desc(r))
    r = call("fs.read", path=w + "/sub/b.txt")
    check("fs.read:W/*.txt does not reach W/sub/b.txt", denied(r, "not-covered"), desc(r))
    r = call("fs.read", path=w + "/.txt")
    info("W/.txt under W/*.txt (documented: * matches dot files):", desc(r))
    # write side
    r = call("fs.write", path=w + "/out/new", flags=1, mode=0o7777, data=b"data")
    check("fs.write creates W/out/new", ok(r), desc(r))
    r = call("fs.stat", path=w + "/out/new")
    mode = r.get("st", {}).get("mode", 0o7777)
    check("a created file never gets set-id or sticky bits (mode %o)" % mode, mode & 0o7000 == 0, desc(r))
    r = call("fs.write", path=w + "/out/esc/x", flags=1, data=b"x")
    check("fs.write through a symlinked directory is refused", denied(r), desc(r))
    r = call("fs.write", path=w + "/out/dangling", flags=1, data=b"x")
    check("fs.write onto a dangling symlink does not create its target", denied(r), desc(r))
    r = call("fs.rename", path=w + "/out/new", path2=w + "/pub/new")
    check("rename into a read-only area is refused", denied(r, "not-covered"), desc(r))
    r = call("fs.rename", path=w + "/pub/ok", path2=w + "/out/stolen")
    check("rename out of a read-only area is refused", denied(r, "not-covered"), desc(r))
    r = call("fs.rename", path=w + "/out/esc", path2=w + "/out/esc2")
    info("rename of a symlink inside the write area:", desc(r))
    r = call("fs.read", path=w + "/out/esc2/passwd")
    check("a renamed symlink still cannot be followed", denied(r), desc(r))
    r = call("fs.delete", path=w + "/out/esc2")
    check("fs.delete removes a symlink itself", ok(r), desc(r))
    r = call("fs.mkdir", path=w + "/out", mode=0o777)
    check("fs.mkdir of the existing write root says exists", denied(r, "exists"), desc(r))
    r = call("fs.delete", path=w + "/out")
    check("fs.delete of the non-empty write root is refused", denied(r, "exists"), desc(r))
    r = call("fs.write", path=w + "/out/fifo", flags=1 | 2, data=b"x")
    check("fs.write to a FIFO is refused without hanging", denied(r, "file-type"), desc(r))
    r = call("fs.write", path=w + "/out/big", flags=1, data=b"x" * (56 * 1024 + 1))
    check("inline data over 56 KiB is refused", denied(r, "too-big"), desc(r))
    r = call("fs.read", path=w + "/pub/ok", flags=1)
    check("fs.read with CREATE is refused", denied(r), desc(r))
    r = call("fs.read", path=w + "/pub/ok", flags=2**31)
    check("unknown flag bits are a protocol error", denied(r, "protocol"), desc(r))
    # fd handed over is read-only
    r = call("fs.read", path=w + "/pub/ok")
    fd = r.get("_fd")
    wr = None
    if fd is not None:
        try:
            os.write(fd, b"x")
            wr = "written"
        except OSError as e:
            wr = e.errno
        os.close(fd)
    check("the fd fs.read hands over cannot be written", wr not in (None, "written"), repr(wr))


def mode_mediated(w):
    """Mediated handles and use limits (grant fs.read:W/**)."""
    f = w + "/f"
    r = derive([f"fs.read:{f}"], th=0, uses=1)
    one = r.get("token")
    r = call("fs.read", path=f, tok=one, flags=16)
    h = r.get("h")
    check("a mediated open with a uses=1 token succeeds", r.get("ok") is True and h is not None, desc(r))
    r = call("io.read", h=h if h is not None else 0, len=100)
    check("the mediated handle opened with the last use of a token can be read "
          "(brk_op_io re-checks uses-spent after the open spent it)", r.get("ok") is True, desc(r))
    r = call("io.read", h=2**32 - 1)
    check("io.read of handle 2^32-1 is refused", denied(r), desc(r))
    hs = []
    for _ in range(70):
        r = call("fs.read", path=f, th=0, flags=16)
        if r.get("ok"):
            hs.append(r["h"])
    check("at most 64 mediated handles per sandbox", len(hs) <= 64, "got %d" % len(hs))
    for h in hs:
        call("io.close", h=h)
    r = call("io.read", h=hs[0] if hs else 0)
    check("io.read on a closed handle is refused", denied(r), desc(r))


def mode_revoke(w, flag):
    """Revocation mid-stream: prints TID, waits for the script to revoke."""
    f = w + "/f"
    r = derive([f"fs.read:{f}"], th=0)
    kid = r.get("token")
    r = call("fs.read", path=f, th=0, flags=16)
    h = r.get("h")
    check("mediated open before revocation", h is not None, desc(r))
    r = call("io.read", h=h, len=3)
    check("io.read before revocation", r.get("ok") is True, desc(r))
    r = call("fs.read", path=f, th=0)
    kept = r.get("_fd")
    r = call("tokens")
    print("TID", r["tokens"][0]["id"], flush=True)
    for _ in range(400):
        if os.path.exists(flag):
            break
        time.sleep(0.05)
    check("the script revoked the grant", os.path.exists(flag))
    r = call("io.read", h=h, len=3)
    check("io.read after revocation is refused (revoked)", denied(r, "revoked"), desc(r))
    r = call("io.read", h=h, len=3)
    check("the cut handle is gone", denied(r), desc(r))
    r = call("fs.read", path=f, tok=kid)
    check("a child derived before the revocation is revoked with its parent", denied(r, "revoked"), desc(r))
    r = call("derive", caps=[f"fs.read:{f}"], th=0)
    check("derive from a revoked token is refused", denied(r, "revoked"), desc(r))
    r = call("fs.read", path=f)
    check("no held token reads the file any more", denied(r), desc(r))
    if kept is not None:
        os.lseek(kept, 0, 0)
        info("descriptor handed over before revocation still reads (documented):",
             len(os.read(kept, 100)))
        os.close(kept)


def mode_net(w, port):
    """net.connect forms (high tier, grant net.connect:*:* and
    net.connect:127.0.0.1:PORT as th 1, script listens on 127.0.0.1:PORT)."""
    port = int(port)
    forms = ["127.0.0.1", "127.1", "2130706433", "0x7f.1", "0177.0.0.1", "0.0.0.0", "0", "::1",
             "::", "::ffff:127.0.0.1", "::ffff:7f00:1", "::127.0.0.1", "64:ff9b::127.0.0.1",
             "2002:7f00:1::1", "fe80::1%lo", "::1%1", "[::1]", "localhost", "LOCALHOST.",
             "localhost.localdomain", "ip6-localhost", "127.0.0.1 ", " 127.0.0.1",
             "127.0.0.1\n", "169.254.169.254", "100.100.100.200", "::ffff:0:7f00:1",
             "10.0.0.1", "192.168.0.1", "224.0.0.1", "255.255.255.255"]
    for h in forms:
        r = call("net.connect", host=h, port=port, th=0, timeout=2000)
        check("net.connect:*:* cannot reach %r:%d" % (h, port), denied(r), desc(r))
    for p in (0, 65536, 2**32 - 1):
        r = call("net.connect", host="127.0.0.1", port=p, th=1, timeout=2000)
        check("port %d is refused" % p, denied(r), desc(r))
    r = call("net.connect", host="127.0.0.1", port=2**32 + port, th=1)
    check("port 2^32+PORT is a protocol error, not truncated", denied(r, "protocol"), desc(r))
    r = call("net.connect", host="127.0.0.1", port=port + 1, th=1, timeout=2000)
    check("the explicit 127.0.0.1:PORT grant does not cover another port", denied(r, "not-covered"),
          desc(r))
    r = call("net.connect", host="127.0.0.2", port=port, th=1, timeout=2000)
    check("the explicit 127.0.0.1 grant does not cover 127.0.0.2", denied(r), desc(r))
    r = call("net.connect", host="127.0.0.1", port=port, th=1, timeout=2000)
    got = r.get("_fd") is not None
    check("control: the explicit 127.0.0.1:PORT grant connects", r.get("ok") is True and got, desc(r))
    close_fd(r)
    r = call("net.connect", host="::ffff:127.0.0.1", port=port, th=1, timeout=2000)
    check("control: the IPv4-mapped spelling is the same address", r.get("ok") is True, desc(r))
    close_fd(r)
    r = call("net.connect", host="a" * 254, port=port, th=0)
    check("a 254-byte host name is refused before any lookup", denied(r, "invalid"), desc(r))
    r = call("net.connect", host="127.0.0.1", port=port)
    check("KNOWN BUG (functional): with no token presented, the held explicit 127.0.0.1:PORT grant "
          "is found (brk_net_judge stops at the first covering token, *:*, and its range refusal)",
          r.get("ok") is True, desc(r))
    close_fd(r)


def mode_proc(w):
    """proc.exec (high tier; grants proc.exec:/usr/bin/*, fs.read:W/pub/**)."""
    r = call("proc.exec", argv=["/usr/bin/env"], timeout=10000)
    out = r.get("out", b"")
    check("the child's environment has no broker channel (no CAPBROKER_FD)", r.get("ok") is True and
          b"CAPBROKER_FD" not in out, desc(r) + repr(out[:200]))
    r = call("proc.exec", argv=["/usr/bin/ls", "/proc/self/fd"], timeout=10000)
    fds = sorted(r.get("out", b"").split())
    check("the child has only stdio (+ ls's own dir fd)", r.get("ok") is True and len(fds) <= 4,
          repr(fds))
    r = call("proc.exec", argv=["/usr/bin/cat", w + "/pub/ok"], timeout=10000)
    check("control: the child reads a granted fs.read root", r.get("status") == 0, desc(r))
    r = call("proc.exec", argv=["/usr/bin/cat", w + "/secret"], timeout=10000)
    check("the child cannot read what no fs.read grant names", r.get("status") != 0 and
          b"SECRET" not in r.get("out", b""), desc(r) + repr(r.get("out")))
    r = call("proc.exec", argv=["/usr/bin/cat", w + "/pub/esc/shadow"], timeout=10000)
    check("the child following a symlink in a granted root sees no host /etc/shadow",
          b"root:" not in r.get("out", b""), repr(r.get("out", b"")[:100]))
    r = call("proc.exec", argv=["sleep", "1"])
    check("a relative program is refused", denied(r), desc(r))
    r = call("proc.exec", argv=["/usr/bin/../bin/sh", "-c", "id"])
    check("a program path with .. is refused", denied(r), desc(r))
    r = call("proc.exec", argv=["/usr/bin/env"] + ["x"] * 1024)
    check("1025 argv entries (WIRE_ARGV_MAX + 1) are refused by the decoder",
          denied(r, "protocol", "too-big"), desc(r))
    r = call("proc.exec", argv=[])
    check("an empty argv is refused", denied(r), desc(r))
    t0 = time.monotonic()
    r = call("proc.exec", argv=["/usr/bin/yes", "A" * 1000], timeout=2000)
    dt = time.monotonic() - t0
    check("an output flood is bounded at 64 KiB with trunc set", len(r.get("out", b"")) == 65536 and
          r.get("trunc") is True, desc(r) + " len %d" % len(r.get("out", b"")))
    check("... and the 2 s timeout stops it (%.1fs)" % dt, dt < 8, "took %.1f" % dt)
    # 40 at once: never queued unboundedly; since issue 10 the children
    # share their parent's budget: at most 4 run at once, the rest are busy
    ids = [send("proc.exec", argv=["/usr/bin/sleep", "2"], timeout=10000) for _ in range(40)]
    names = []
    for _ in ids:
        rr, fd = recv()
        if fd is not None:
            os.close(fd)
        names.append(rr.get("name") if not rr.get("ok") else rr.get("status"))
    check("at most 4 proc.exec children at once, within the parent's budget (busy after)",
          1 <= names.count(0) <= 4 and names.count("busy") == 40 - names.count(0), repr(names))
    # broker responsiveness while 16 floods run
    ids = [send("proc.exec", argv=["/usr/bin/yes"], timeout=3000) for _ in range(16)]
    worst = 0.0
    t_end = time.monotonic() + 2.5
    pings = 0
    while time.monotonic() < t_end:
        t0 = time.monotonic()
        rid = send("ping")
        while True:
            rr, fd = recv()
            if fd is not None:
                os.close(fd)
            if rr.get("id") == rid:
                break
            if rr.get("id") in ids:
                ids.remove(rr["id"])
        worst = max(worst, time.monotonic() - t0)
        pings += 1
    info("ping worst latency during 16 output floods: %.3fs over %d pings" % (worst, pings))
    check("the broker answers pings within 1 s while 16 children flood output", worst < 1.0,
          "worst %.3fs" % worst)
    while ids:
        rr, fd = recv()
        if rr.get("id") in ids:
            ids.remove(rr["id"])


def mode_proc_bind(w):
    """proc.exec shows the child "what the sandbox could read through the
    broker anyway".  Grants (script): fs.read:W/pub/**, proc.exec:/usr/bin/cat.
    W/pub/lnk is a symlink to W/secret, W/pub/out a symlink to a directory
    outside W: the broker refuses both; a derived exact-path token for the
    link name makes brk_proc_bind ask for a bind of the link, which the stub
    must refuse rather than follow."""
    r = call("fs.read", path=w + "/pub/lnk")
    check("control: the broker itself refuses to follow W/pub/lnk", denied(r, "escape"), desc(r))
    r = call("proc.exec", argv=["/usr/bin/cat", w + "/pub/lnk"], timeout=10000)
    check("control: without a derived token the child cannot read W/pub/lnk",
          b"SECRET" not in r.get("out", b""), desc(r))
    r1 = derive([f"fs.read:{w}/pub/lnk"], th=0)
    r2 = derive([f"fs.read:{w}/pub/out"], th=0)
    check("derive of exact-path tokens for the two link names succeeds",
          r1.get("ok") is True and r2.get("ok") is True, desc(r1) + " / " + desc(r2))
    r = call("proc.exec", argv=["/usr/bin/cat", w + "/pub/lnk"], timeout=10000)
    out = r.get("out", b"")
    check("a proc.exec child never reads W/secret through a symlink the broker refuses "
          "(a derived exact-path token naming the link)", b"SECRET" not in out, repr(out[:60]))
    info("child reading W/pub/lnk:", desc(r), r.get("status"), r.get("errout", b"")[:200])
    r = call("proc.exec", argv=["/usr/bin/cat", w + "/pub/out/topsecret"], timeout=10000)
    out = r.get("out", b"")
    check("a proc.exec child never reads a directory outside the workspace through a "
          "symlinked exact-path grant", b"TOPSECRET" not in out, repr(out[:60]))
    info("child reading W/pub/out/topsecret:", desc(r), r.get("status"), r.get("errout", b"")[:200])


def mode_elev_give(w, other):
    """Ask for an elevation (a human approves it for this sandbox), then
    derive a child of the elevated token for sandbox `other` and print it."""
    r = call("request", cap="fs.read:/etc/hostname", ttl=600, reason="need the host name")
    check("the elevation request was approved", r.get("ok") is True and "token" in r, desc(r))
    el = r.get("token", "")
    r = call("fs.read", path="/etc/hostname", tok=el)
    check("control: the approved token reads /etc/hostname here", ok(r), desc(r))
    r = derive(["fs.read:/etc/hostname"], tok=el, aud=other)
    info("derive of the elevated token for %s:" % other, desc(r))
    print("GIVE", r.get("token", "none"), flush=True)


def mode_elev_take(w, token):
    """Sandbox `other`: never asked for anything, tries the gift."""
    r = call("token.add", tok=token)
    info("token.add of the gift:", desc(r))
    r = call("fs.read", path="/etc/hostname", tok=token)
    got = read_fd(r) if r.get("ok") else None
    check("an elevation a human approved for one sandbox cannot be handed to another "
          "(brk_op_derive accepts any aud; the approver never saw this sandbox)",
          r.get("ok") is not True, desc(r) + " read %r" % (got,))


def mode_proc_orphan(w, tag="531"):
    """Start a long child with timeout_ms = 2^32-1 and exit at once.  The
    test names the children by TAG (the sleeps' fraction), unique to its run,
    so that another copy of the suite on the machine cannot be mistaken for
    them."""
    send("proc.exec", argv=["/usr/bin/sleep", "97." + tag], timeout=2**32 - 1)
    send("proc.exec", argv=["/usr/bin/sleep", "86." + tag], timeout=2**32 - 1001)
    time.sleep(1.5)
    print("SENT", flush=True)
    time.sleep(3)       # alive a while: the test inspects the children now


def mode_request(w, reason):
    """An elevation request with an agent-chosen reason."""
    reason = reason.replace("@ESC@", "\x1b").replace("@BEL@", "\x07").replace("@CR@", "\r").replace("@C1@", "\u009b")
    # (a ttl above 366 days is refused as invalid, issue 10: ask for an hour)
    r = call("request", cap="fs.read:/etc/hostname", ttl=3600, reason=reason)
    info("request:", desc(r))


def mode_flood_derive(w, n, junk=0):
    """Mint as many tokens as possible: every derive is a signature and a
    durable state write on the broker's only thread.  With junk > 0, that
    many malformed frames (each a cheap audited denial) follow every derive,
    so audit checkpoints (signed by the audit thread) come more often."""
    n = int(n)
    junk = int(junk)
    t0 = time.monotonic()
    okc = 0
    window = 64
    inflight = 0
    sent = 0
    while sent < n or inflight:
        while sent < n and inflight < window:
            send("derive", caps=[f"fs.read:{w}/f"], th=0)
            sent += 1
            inflight += 1
            for _ in range(junk):
                S.send(b"\xc1")
                inflight += 1
        rr, fd = recv()
        inflight -= 1
        if rr.get("ok") and "token" in rr:
            okc += 1
    dt = time.monotonic() - t0
    print("MINTED %d %.2f" % (okc, dt), flush=True)


def main():
    mode, w = sys.argv[1], sys.argv[2]
    fn = {"tok": mode_tok, "fs": mode_fs, "mediated": mode_mediated, "revoke": mode_revoke,
          "net": mode_net, "proc": mode_proc, "proc-bind": mode_proc_bind, "proc-orphan": mode_proc_orphan,
          "elev-give": mode_elev_give, "elev-take": mode_elev_take,
          "request": mode_request, "flood-derive": mode_flood_derive}[mode]
    fn(w, *sys.argv[3:])
    print("DONE", flush=True)
    sys.exit(1 if FAILS[0] else 0)


if __name__ == "__main__":
    main()
