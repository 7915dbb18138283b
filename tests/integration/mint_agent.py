#!/usr/bin/python3
"""mint_agent.py - an agent that tries to mint tokens without bound, for
tests/integration/64-elevation-instance.sh (issue 10, holes 7 and 9).
Runs inside a sandbox and talks raw msgpack on CAPBROKER_FD.

  mint_agent.py derive-other N CAP [M]  derive N tokens of CAP for other
                                      audiences (from held token 0):
                                      "MINTED k"; then M requests for CAP
  mint_agent.py request N CAP         ask for CAP N times (auto or session
                                      grants need no human): "GRANTED k",
                                      a "TOKEN text" line per grant and
                                      "REFUSED name" per distinct refusal
"""
import os
import socket
import sys

import msgpack

S = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
S.settimeout(60)
NEXT = [1000]


def call(op, **f):
    NEXT[0] += 1
    m = {k: v for k, v in f.items() if v is not None}
    m["id"] = NEXT[0]
    m["op"] = op
    S.send(msgpack.packb(m, use_bin_type=True))
    while True:
        data, anc, _, _ = S.recvmsg(300000, socket.CMSG_SPACE(4 * 4), socket.MSG_CMSG_CLOEXEC)
        for lvl, typ, payload in anc:
            if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                os.close(int.from_bytes(payload[:4], sys.byteorder, signed=True))
        if not data:
            raise EOFError("broker closed the channel")
        r = msgpack.unpackb(data, raw=False)
        if r.get("id") == NEXT[0]:
            return r


def derive_other(n):
    ok = 0
    for i in range(int(n)):
        r = call("derive", caps=[call_cap[0]], th=0, aud="other-%d" % i)
        if r.get("ok") and "token" in r:
            ok += 1
    print("MINTED %d" % ok, flush=True)


def request(n, cap):
    ok, refused = 0, set()
    for _ in range(int(n)):
        r = call("request", cap=cap, ttl=60, reason="once more")
        if r.get("ok") and "token" in r:
            ok += 1
            print("TOKEN %s" % r["token"], flush=True)
        else:
            refused.add(r.get("name"))
    print("GRANTED %d" % ok, flush=True)
    for name in sorted(str(x) for x in refused):
        print("REFUSED %s" % name, flush=True)


call_cap = [None]


def ttl_edge(cap):
    """ttls past the documented maximum (366 days) on the wire."""
    for ttl in (2**63 - 1, 31622401):
        r = call("derive", caps=[cap], th=0, ttl=ttl)
        print("DERIVE %d %s" % (ttl, "ok" if r.get("ok") else r.get("name")), flush=True)
        r = call("request", cap=cap, ttl=ttl, reason="forever")
        print("REQUEST %d %s" % (ttl, "ok" if r.get("ok") else r.get("name")), flush=True)


def procs(n):
    """n proc.exec of sleep at once, then one that prints its own limits;
    every reply collected: how many ran, how many were refused, and the
    memory (data) limit the last child was given."""
    ids = {}
    for i in range(int(n) + 1):
        NEXT[0] += 1
        argv = ["/usr/bin/sleep", "3"] if i < int(n) else ["/usr/bin/cat", "/proc/self/limits"]
        S.send(msgpack.packb({"id": NEXT[0], "op": "proc.exec", "argv": argv}, use_bin_type=True))
        ids[NEXT[0]] = argv[0]
    ran, refused, limits = 0, {}, None
    while ids:
        data, anc, _, _ = S.recvmsg(300000, socket.CMSG_SPACE(16), socket.MSG_CMSG_CLOEXEC)
        r = msgpack.unpackb(data, raw=False)
        prog = ids.pop(r.get("id"), None)
        if prog is None:
            continue
        if r.get("ok"):
            if prog == "/usr/bin/sleep":
                ran += 1
            else:
                out = r.get("out", b"").decode(errors="replace")
                limits = [l for l in out.splitlines() if l.startswith("Max data size")]
        else:
            refused[r.get("name")] = refused.get(r.get("name"), 0) + 1
    print("RAN %d" % ran, flush=True)
    for k, v in refused.items():
        print("REFUSED %s %d" % (k, v), flush=True)
    if limits:
        print("DATA %s" % limits[0].split()[3], flush=True)


def main():
    mode = sys.argv[1]
    if mode == "procs":
        procs(sys.argv[2])
    if mode == "ttl-edge":
        ttl_edge(sys.argv[2])
    if mode == "derive-other":
        call_cap[0] = sys.argv[3]
        derive_other(sys.argv[2])
        if len(sys.argv) > 4:
            request(sys.argv[4], sys.argv[3])
    elif mode == "request":
        request(sys.argv[2], sys.argv[3])
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
