#!/usr/bin/python3
"""fakebroker.py - a stand-in broker for testing the clients (test code).

Serves the agent<->broker protocol (docs/protocol.md) on one end of a
SOCK_SEQPACKET socketpair, mapping the agent's paths /w/NAME onto files
under a test directory, so capcall and the Python module can be tested
without the real broker.  Paths under /denied are refused (not-covered),
/escape... is refused as an escape, anything else under / is not found.
A --mode makes the first reply hostile or odd (garbage, eof, big, ...).

As a program:  fakebroker.py --root DIR [--mode MODE] -- CMD [ARGS...]
runs CMD with CAPBROKER_FD set to the agent's end and exits with CMD's
status.  Each request is appended to DIR/requests.jsonl (without data).
Imported: FakeBroker(sock, root, mode).serve() in a thread.
"""

import array
import json
import os
import socket
import stat as st
import subprocess
import sys
import threading

import msgpack

REPLY_MAX = 200 * 1024

ERRS = {
    -5: "not-found", -6: "exists", -10: "timed-out", -40: "bad-signature",
    -47: "not-covered", -48: "exceeds-policy", -49: "no-token", -50: "widens-parent",
    -90: "protocol",
    -91: "unknown-op", -93: "escape", -96: "denied", -97: "request-expired",
    -98: "connection-refused",
}


class FakeBroker:
    def __init__(self, sock, root, mode=None, log=None):
        self.sock = sock
        self.root = root
        self.mode = mode
        self.log = log
        self.count = 0
        self.held = None        # mode reorder: the first request, answered late
        self.echo_threads = []

    # ---- framing ---------------------------------------------------------
    def send(self, msg, fds=()):
        # surrogateescape: file names that are not UTF-8 go out as their bytes
        data = msgpack.packb(msg, use_bin_type=True, unicode_errors="surrogateescape")
        self.send_raw(data, fds)

    def send_raw(self, data, fds=()):
        anc = []
        if fds:
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        self.sock.sendmsg([data], anc)

    def reply(self, req, fds=(), **kw):
        msg = {"id": req["id"], "ok": True}
        msg.update(kw)
        if fds:
            msg["fd"] = True
        self.send(msg, fds)
        for fd in fds:
            os.close(fd)

    def error(self, req, code, reason):
        self.send({"id": req["id"], "ok": False, "err": code,
                   "name": ERRS.get(code, "unknown"), "reason": reason})

    # ---- paths -----------------------------------------------------------
    def host_path(self, req, key="path"):
        """The test file for /w/NAME, or None after sending the refusal."""
        p = req.get(key, "")
        if p.startswith("/denied"):
            self.error(req, -47, "%s:%s is not covered by any token of this sandbox"
                       % (req["op"] if req["op"] != "fs.stat" else "fs.read", p))
            return None
        if p.startswith("/escape"):
            self.error(req, -93, "%s would escape its root through a symlink" % p)
            return None
        if not p.startswith("/w/") and p != "/w":
            self.error(req, -5, "%s: no such file or directory" % p)
            return None
        return os.path.join(self.root, p[3:])

    # ---- serving -----------------------------------------------------------
    def serve(self):
        try:
            while True:
                try:
                    data, anc, flags, _ = self.sock.recvmsg(
                        64 * 1024, socket.CMSG_SPACE(16 * 4))
                except (ConnectionResetError, OSError):
                    return
                for lvl, typ, d in anc:
                    if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                        a = array.array("i")
                        a.frombytes(d[:len(d) - len(d) % a.itemsize])
                        for fd in a:
                            os.close(fd)
                if not data:
                    return
                req = msgpack.unpackb(data, raw=False, unicode_errors="surrogateescape")
                self.count += 1
                if self.log:
                    rec = {k: v for k, v in req.items() if k != "data"}
                    if "data" in req:
                        rec["data_len"] = len(req["data"])
                    with open(self.log, "a") as f:
                        f.write(json.dumps(rec) + "\n")
                if not self.hostile(req):
                    return
        finally:
            for t in self.echo_threads:
                t.join(5)
            self.sock.close()

    def hostile(self, req):
        """Apply the mode to the first request.  False: stop serving."""
        m = self.mode
        if not m or self.count > 1 and m != "reorder":
            self.handle(req)
            return True
        if m == "eof":
            return False
        if m == "garbage":
            self.send_raw(b"\xc1\xc1\xc1")
        elif m == "cut":
            self.send_raw(msgpack.packb({"id": req["id"], "ok": False, "err": -5,
                                         "reason": "a reason long enough to cut"})[:-5])
        elif m == "notmap":
            self.send_raw(msgpack.packb([1, 2, 3]))
        elif m == "big":
            self.send({"id": req["id"], "ok": True, "data": b"x" * (REPLY_MAX + 1000)})
        elif m == "wrongid":
            self.send({"id": (req["id"] + 12345) & 0xffffffff, "ok": True})
        elif m == "twofds":
            r, w = os.pipe()
            self.reply(req, fds=(r, w))
        elif m == "nofd":
            self.send({"id": req["id"], "ok": True, "fd": True})
        elif m == "strayfd":
            r, w = os.pipe()
            self.send({"id": req["id"], "ok": True}, (r,))
            os.close(r)
            os.close(w)
        elif m == "trailing":
            self.send_raw(msgpack.packb({"id": req["id"], "ok": True}) + b"\x00")
        elif m == "badtype":
            self.send({"id": str(req["id"]), "ok": True})
        elif m == "hang":
            return True        # never answers; the client must be killed
        elif m == "reorder":
            if self.held is None:
                self.held = req
                return True
            self.handle(req)
            first, self.held = self.held, None
            self.handle(first)
            self.mode = None
        else:
            raise SystemExit("unknown mode " + m)
        return True

    def handle(self, req):
        op = req.get("op")
        tok = req.get("tok")
        if tok is not None and tok != "cap1.good":
            return self.error(req, -40, "token signature does not verify")
        fn = getattr(self, "op_" + op.replace(".", "_"), None)
        if not fn:
            return self.error(req, -91, "unknown operation " + op)
        fn(req)

    def op_ping(self, req):
        self.reply(req)

    def op_fs_read(self, req):
        p = self.host_path(req)
        if p is None:
            return
        try:
            fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return self.error(req, -5, "%s: no such file" % req["path"])
        if req.get("flags", 0) & 16:
            h = 100 + fd
            self.handles[h] = fd
            return self.reply(req, h=h)
        self.reply(req, fds=(fd,))

    handles = {}

    def op_fs_write(self, req):
        p = self.host_path(req)
        if p is None:
            return
        fl = req.get("flags", 0)
        o = os.O_WRONLY | os.O_CLOEXEC
        o |= os.O_CREAT if fl & 1 else 0
        o |= os.O_TRUNC if fl & 2 else 0
        o |= os.O_APPEND if fl & 4 else 0
        o |= os.O_EXCL if fl & 8 else 0
        try:
            fd = os.open(p, o, req.get("mode", 0o644) & 0o777)
        except FileExistsError:
            return self.error(req, -6, "%s already exists" % req["path"])
        except FileNotFoundError:
            return self.error(req, -5, "%s: no such file" % req["path"])
        if "data" in req:
            n = os.write(fd, req["data"])
            os.close(fd)
            return self.reply(req, n=n)
        if fl & 16:
            h = 100 + fd
            self.handles[h] = fd
            return self.reply(req, h=h)
        self.reply(req, fds=(fd,))

    def op_io_read(self, req):
        fd = self.handles.get(req.get("h"))
        if fd is None:
            return self.error(req, -5, "no such handle")
        self.reply(req, data=os.read(fd, req.get("len", 4096)))

    def op_io_write(self, req):
        fd = self.handles.get(req.get("h"))
        if fd is None:
            return self.error(req, -5, "no such handle")
        self.reply(req, n=os.write(fd, req.get("data", b"")))

    def op_io_close(self, req):
        fd = self.handles.pop(req.get("h"), None)
        if fd is None:
            return self.error(req, -5, "no such handle")
        os.close(fd)
        self.reply(req)

    def op_fs_list(self, req):
        p = self.host_path(req)
        if p is None:
            return
        ents = []
        for n in sorted(os.listdir(p)):
            m = os.lstat(os.path.join(p, n)).st_mode
            t = "d" if st.S_ISDIR(m) else "l" if st.S_ISLNK(m) else "f" if st.S_ISREG(m) else "o"
            ents.append({"n": n, "t": t})
        self.reply(req, entries=ents)

    def op_fs_stat(self, req):
        p = self.host_path(req)
        if p is None:
            return
        try:
            s = os.lstat(p)
        except FileNotFoundError:
            return self.error(req, -5, "%s: no such file" % req["path"])
        t = "d" if st.S_ISDIR(s.st_mode) else "f" if st.S_ISREG(s.st_mode) else "o"
        self.reply(req, st={"size": s.st_size, "mtime": int(s.st_mtime),
                            "mode": s.st_mode & 0o7777, "type": t})

    def op_fs_mkdir(self, req):
        p = self.host_path(req)
        if p is None:
            return
        try:
            os.mkdir(p, req.get("mode", 0o755) & 0o777)
        except FileExistsError:
            return self.error(req, -6, "%s already exists" % req["path"])
        self.reply(req)

    def op_fs_delete(self, req):
        p = self.host_path(req)
        if p is None:
            return
        try:
            os.rmdir(p) if os.path.isdir(p) else os.unlink(p)
        except FileNotFoundError:
            return self.error(req, -5, "%s: no such file" % req["path"])
        self.reply(req)

    def op_fs_rename(self, req):
        a = self.host_path(req)
        if a is None:
            return
        b = self.host_path(req, "path2")
        if b is None:
            return
        os.rename(a, b)
        self.reply(req)

    def op_net_connect(self, req):
        host, port = req.get("host"), req.get("port")
        if host == "refused":
            return self.error(req, -98, "connection to refused:%d refused" % port)
        if host == "slow":
            return self.error(req, -10, "connect to slow:%d timed out after %d ms"
                              % (port, req.get("timeout", 0)))
        if host not in ("echo", "::1", "127.0.0.1"):
            return self.error(req, -47, "net.connect:%s:%d is not covered" % (host, port))
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

        def echo():
            with b:
                while True:
                    d = b.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
        t = threading.Thread(target=echo, daemon=True)
        t.start()
        self.echo_threads.append(t)
        self.reply(req, fds=(a.detach(),))

    def op_proc_exec(self, req):
        argv = req.get("argv", [])
        if not argv or argv[0] not in ("/bin/echo", "/bin/false", "/usr/bin/mix"):
            return self.error(req, -47, "proc.exec:%s is not covered" % (argv[0] if argv else ""))
        if argv[0] == "/bin/echo":
            self.reply(req, status=0, out=(" ".join(argv[1:]) + "\n").encode(), errout=b"")
        elif argv[0] == "/bin/false":
            self.reply(req, status=1, out=b"", errout=b"")
        else:
            self.reply(req, status=int(argv[1]) if len(argv) > 1 else 3,
                       out=b"to stdout\n", errout=b"to stderr\n", trunc=True)

    def op_request(self, req):
        cap = req.get("cap", "")
        if cap.endswith("/deny"):
            return self.error(req, -96, "denied by alice: not today")
        if cap.endswith("/expire"):
            return self.error(req, -97, "nobody decided within 300 seconds")
        if cap.endswith("/policy"):
            return self.error(req, -48, "%s is not requestable in this tier" % cap)
        self.reply(req, token="cap1.granted", tid="00112233445566778899aabbccddeeff", th=7)

    def op_tokens(self, req):
        self.reply(req, tokens=[
            {"th": 1, "id": "aa" * 16, "caps": "fs.read:/w/** fs.list:/w/**", "exp": 2000000000},
            {"th": 7, "id": "bb" * 16, "caps": "net.connect:echo:7", "exp": 2000000100,
             "uses": 3, "elev": True},
        ])

    def op_token_add(self, req):
        self.reply(req, th=9)

    def op_derive(self, req):
        if any(not c.startswith("fs.read:/w/") for c in req.get("caps", [])):
            return self.error(req, -50, "derived token would exceed its parent")
        self.reply(req, token="cap1.child", tid="cc" * 16)


def main():
    args = sys.argv[1:]
    root, mode = None, None
    while args and args[0] != "--":
        if args[0] == "--root":
            root = args[1]
            args = args[2:]
        elif args[0] == "--mode":
            mode = args[1]
            args = args[2:]
        else:
            raise SystemExit("usage: fakebroker.py --root DIR [--mode M] -- CMD...")
    cmd = args[1:]
    broker, agent = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fb = FakeBroker(broker, root, mode, os.path.join(root, "requests.jsonl"))
    t = threading.Thread(target=fb.serve, daemon=True)
    t.start()
    env = dict(os.environ, CAPBROKER_FD=str(agent.fileno()))
    p = subprocess.Popen(cmd, env=env, pass_fds=(agent.fileno(),))
    agent.close()
    rc = p.wait()
    sys.stdout.flush()
    os._exit(rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    main()
