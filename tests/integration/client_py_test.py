#!/usr/bin/python3
"""client_py_test.py - the Python client module against the fake broker
(tests/integration/fakebroker.py), in-process: every operation, the
exceptions for each kind of failure, replies out of order and across
threads, hostile replies, and no fd leaked.  Prints TAP (run by
42-client-python.sh).  Test code (trusted).
"""

import os
import socket
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "client", "python"))
sys.path.insert(0, HERE)

import capbroker            # noqa: E402
from fakebroker import FakeBroker   # noqa: E402


def nfds():
    return len(os.listdir("/proc/self/fd"))


def _forbidden(*a, **kw):
    raise AssertionError("the client library must never fork or exec")


# The library may not fork or exec (a low-tier agent cannot): make any
# attempt fail loudly for the whole run.
for _name in ("fork", "forkpty", "execv", "execve", "execvp", "execvpe", "execl",
              "execlp", "execle", "system", "popen", "posix_spawn", "posix_spawnp", "spawnv"):
    if hasattr(os, _name):
        setattr(os, _name, _forbidden)


class Base(unittest.TestCase):
    mode = None

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.base_fds = nfds()
        b, a = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.fake = FakeBroker(b, self.root, self.mode, os.path.join(self.root, "log"))
        self.thread = threading.Thread(target=self.fake.serve, daemon=True)
        self.thread.start()
        self.cb = capbroker.Client(fd=a.detach())

    def tearDown(self):
        self.cb.close()
        self.thread.join(5)
        self.tmp.cleanup()
        self.assertEqual(nfds(), self.base_fds, "fds leaked")

    def put(self, name, data):
        with open(os.path.join(self.root, name), "wb") as f:
            f.write(data)

    def get(self, name):
        with open(os.path.join(self.root, name), "rb") as f:
            return f.read()


class TestOpen(unittest.TestCase):
    def setUp(self):
        self.saved = os.environ.pop("CAPBROKER_FD", None)
        self.base = nfds()

    def tearDown(self):
        if self.saved is not None:
            os.environ["CAPBROKER_FD"] = self.saved
        else:
            os.environ.pop("CAPBROKER_FD", None)
        self.assertEqual(nfds(), self.base, "fds leaked")

    def test_unset(self):
        with self.assertRaises(capbroker.BrokerUnavailable) as cm:
            capbroker.Client()
        self.assertIn("CAPBROKER_FD is not set", cm.exception.reason)

    def test_garbage(self):
        os.environ["CAPBROKER_FD"] = "3x"
        self.assertRaises(capbroker.BrokerUnavailable, capbroker.Client)

    def test_not_open(self):
        os.environ["CAPBROKER_FD"] = "9999"
        self.assertRaises(capbroker.BrokerUnavailable, capbroker.Client)

    def test_not_seqpacket(self):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with a, b:
            os.environ["CAPBROKER_FD"] = str(a.fileno())
            self.assertRaises(capbroker.BrokerUnavailable, capbroker.Client)

    def test_env_fd_is_duplicated(self):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with a, b:
            os.environ["CAPBROKER_FD"] = str(a.fileno())
            c = capbroker.Client()
            c.close()
            os.fstat(a.fileno())      # still open: close() took only its copy


class TestOps(Base):
    def test_ping(self):
        self.cb.ping()

    def test_read_file(self):
        self.put("a.txt", b"hello\n")
        self.assertEqual(self.cb.read_file("/w/a.txt"), b"hello\n")

    def test_read_big_binary(self):
        data = os.urandom(300000)
        self.put("big", data)
        self.assertEqual(self.cb.read_file("/w/big"), data)

    def test_open_read_text(self):
        self.put("t", "é\n".encode())
        with self.cb.open_read("/w/t", "r", encoding="utf-8") as f:
            self.assertEqual(f.read(), "é\n")

    def test_open_fd_cloexec(self):
        self.put("a", b"x")
        fd = self.cb.open_fd("/w/a")
        try:
            self.assertFalse(os.get_inheritable(fd))
        finally:
            os.close(fd)

    def test_denied(self):
        with self.assertRaises(capbroker.Denied) as cm:
            self.cb.read_file("/denied/secret")
        e = cm.exception
        self.assertEqual(e.name, "not-covered")
        self.assertEqual(e.code, -47)
        self.assertEqual(e.reason, "fs.read:/denied/secret is not covered by any token of this sandbox")
        self.cb.ping()      # a refusal leaves the channel usable

    def test_escape_is_denied(self):
        with self.assertRaises(capbroker.Denied) as cm:
            self.cb.stat("/escape/x")
        self.assertEqual(cm.exception.name, "escape")

    def test_not_found(self):
        with self.assertRaises(capbroker.OperationError) as cm:
            self.cb.read_file("/w/nope")
        self.assertEqual(cm.exception.name, "not-found")
        self.assertNotIsInstance(cm.exception, capbroker.Denied)

    def test_write_file(self):
        self.assertEqual(self.cb.write_file("/w/o", b"one\n"), 4)
        self.cb.write_file("/w/o", "two\n", append=True)
        self.assertEqual(self.get("o"), b"one\ntwo\n")
        self.cb.write_file("/w/o", b"three")
        self.assertEqual(self.get("o"), b"three")

    def test_write_big(self):
        data = os.urandom(300000)
        self.cb.write_file("/w/big", data)
        self.assertEqual(self.get("big"), data)

    def test_open_write_exclusive(self):
        with self.cb.open_write("/w/x", exclusive=True) as f:
            f.write(b"1")
        with self.assertRaises(capbroker.OperationError) as cm:
            self.cb.open_write("/w/x", exclusive=True)
        self.assertEqual(cm.exception.name, "exists")

    def test_write_small(self):
        self.assertEqual(self.cb.write_small("/w/s", b"abc"), 3)
        self.assertEqual(self.get("s"), b"abc")
        self.assertRaises(capbroker.OperationError, self.cb.write_small, "/w/s", b"x" * (56 * 1024 + 1))

    def test_write_denied(self):
        self.assertRaises(capbroker.Denied, self.cb.write_file, "/denied/x", b"")

    def test_list_dir(self):
        os.mkdir(os.path.join(self.root, "d"))
        self.put("d/f", b"")
        os.mkdir(os.path.join(self.root, "d/sub"))
        os.symlink("f", os.path.join(self.root, "d/l"))
        got = self.cb.list_dir("/w/d")
        self.assertEqual(got, [("f", "file"), ("l", "link"), ("sub", "dir")])
        self.assertEqual(got[0].name, "f")
        self.assertFalse(got.truncated)

    def test_list_undecodable_name_round_trips(self):
        os.mkdir(os.path.join(self.root, "d"))
        open(os.path.join(self.root.encode(), b"d/n\xff"), "wb").close()
        (e,) = self.cb.list_dir("/w/d")
        self.assertEqual(os.fsencode(e.name), b"n\xff")
        self.cb.delete("/w/d/" + e.name)       # the same bytes go back
        self.assertEqual(os.listdir(os.path.join(self.root, "d")), [])

    def test_stat(self):
        self.put("a", b"12345")
        os.chmod(os.path.join(self.root, "a"), 0o640)
        s = self.cb.stat("/w/a")
        self.assertEqual((s.type, s.size, s.mode), ("file", 5, 0o640))
        self.assertGreater(s.mtime, 1600000000)

    def test_mkdir_delete_rename(self):
        self.cb.mkdir("/w/d", mode=0o700)
        self.assertEqual(os.stat(os.path.join(self.root, "d")).st_mode & 0o777, 0o700)
        self.cb.rename("/w/d", "/w/e")
        self.assertTrue(os.path.isdir(os.path.join(self.root, "e")))
        self.cb.delete("/w/e")
        self.assertFalse(os.path.exists(os.path.join(self.root, "e")))
        self.assertRaises(capbroker.Denied, self.cb.rename, "/w/a", "/denied/b")

    def test_connect(self):
        with self.cb.connect("echo", 7, timeout=2) as s:
            s.sendall(b"ping")
            s.shutdown(socket.SHUT_WR)
            self.assertEqual(s.recv(100), b"ping")
        self.assertRaises(ValueError, self.cb.connect, "echo", 0)

    def test_connect_refused_and_timeout(self):
        with self.assertRaises(capbroker.OperationError) as cm:
            self.cb.connect("refused", 80)
        self.assertEqual(cm.exception.name, "connection-refused")
        with self.assertRaises(capbroker.RequestExpired) as cm:
            self.cb.connect("slow", 80, timeout=1.5)
        self.assertIn("1500 ms", cm.exception.reason)
        self.assertRaises(capbroker.Denied, self.cb.connect, "example.org", 443)

    def test_exec(self):
        status, out, err = self.cb.exec(["/bin/echo", "hi", "there"])
        self.assertEqual((status, out, err), (0, b"hi there\n", b""))
        r = self.cb.exec(["/usr/bin/mix", "5"], timeout=3)
        self.assertEqual((r.status, r.out, r.err, r.truncated), (5, b"to stdout\n", b"to stderr\n", True))
        self.assertRaises(capbroker.Denied, self.cb.exec, ["/bin/sh", "-c", "id"])
        self.assertRaises(ValueError, self.cb.exec, [])

    def test_request(self):
        g = self.cb.request("fs.write:/w/x", ttl=60, reason="need it")
        self.assertEqual(g, ("cap1.granted", "00112233445566778899aabbccddeeff", 7))
        with self.assertRaises(capbroker.Denied) as cm:
            self.cb.request("fs.write:/deny", reason="r")
        self.assertEqual((cm.exception.name, cm.exception.reason), ("denied", "denied by alice: not today"))
        with self.assertRaises(capbroker.RequestExpired) as cm:
            self.cb.request("fs.write:/expire", reason="r")
        self.assertEqual(cm.exception.name, "request-expired")
        with self.assertRaises(capbroker.Denied) as cm:
            self.cb.request("fs.write:/policy", reason="r")
        self.assertEqual(cm.exception.name, "exceeds-policy")

    def test_tokens(self):
        t = self.cb.tokens()
        self.assertEqual(len(t), 2)
        self.assertEqual(t[0].caps, ["fs.read:/w/**", "fs.list:/w/**"])
        self.assertEqual((t[0].uses, t[0].elevated), (None, False))
        self.assertEqual((t[1].th, t[1].uses, t[1].elevated, t[1].exp), (7, 3, True, 2000000100))

    def test_token_presentation(self):
        import json
        log = os.path.join(self.root, "log")
        last = lambda: json.loads(open(log).read().splitlines()[-1])      # noqa: E731
        self.cb.ping()
        self.assertNotIn("tok", last())
        self.assertNotIn("th", last())
        self.cb.use_token("cap1.good")
        self.cb.ping()
        self.assertEqual(last()["tok"], "cap1.good")
        self.cb.use_handle(4)
        self.cb.ping()
        self.assertEqual((last().get("tok"), last()["th"]), (None, 4))
        self.cb.use_token("cap1.forged")
        with self.assertRaises(capbroker.Denied) as cm:
            self.cb.ping()
        self.assertEqual(cm.exception.name, "bad-signature")

    def test_token_add_derive(self):
        self.assertEqual(self.cb.token_add("cap1.good"), 9)
        g = self.cb.derive(["fs.read:/w/a"], ttl=30, uses=2, aud="child")
        self.assertEqual(g.token, "cap1.child")
        with self.assertRaises(capbroker.Denied) as cm:
            self.cb.derive("fs.write:/w/a")
        self.assertEqual(cm.exception.name, "widens-parent")

    def test_mediated(self):
        self.put("m", b"0123456789")
        h = self.cb.open_handle("/w/m")
        self.assertEqual(self.cb.io_read(h, 4), b"0123")
        self.assertEqual(self.cb.io_read(h), b"456789")
        self.assertEqual(self.cb.io_read(h), b"")
        self.cb.io_close(h)
        h = self.cb.open_handle("/w/n", write=True)
        self.assertEqual(self.cb.io_write(h, b"abc"), 3)
        self.cb.io_close(h)
        self.assertEqual(self.get("n"), b"abc")

    def test_closed_client(self):
        self.cb.close()
        self.assertRaises(capbroker.BrokerUnavailable, self.cb.ping)


class TestReorder(Base):
    mode = "reorder"

    def test_out_of_order(self):
        self.put("a", b"A")
        self.put("b", b"B")
        r1 = self.cb.send("fs.read", path="/w/a")
        r2 = self.cb.send("fs.read", path="/w/b")
        rep1, fd1 = self.cb.recv(r1)        # b's reply arrives first and is kept
        rep2, fd2 = self.cb.recv(r2)
        self.assertEqual((rep1["id"], rep2["id"]), (r1, r2))
        with os.fdopen(fd1, "rb") as f1, os.fdopen(fd2, "rb") as f2:
            self.assertEqual((f1.read(), f2.read()), (b"A", b"B"))
        self.assertRaises(ValueError, self.cb.recv, r1)


class TestThreads(Base):
    mode = "reorder"

    def test_threads_share_a_client(self):
        for i in range(8):
            self.put("f%d" % i, b"%d" % i)
        got, errs = {}, []

        def work(i):
            try:
                got[i] = self.cb.read_file("/w/f%d" % i)
            except Exception as e:      # reported below
                errs.append(e)
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(10)
        self.assertEqual(errs, [])
        self.assertEqual(got, {i: b"%d" % i for i in range(8)})


def hostile(mode, exc=capbroker.BrokerUnavailable, breaks=True):
    class T(Base):
        def test(self):
            self.put("a", b"x")
            with self.assertRaises(exc):
                self.cb.read_file("/w/a")
            if breaks:
                self.assertRaises(capbroker.BrokerUnavailable, self.cb.ping)
            else:
                self.cb.ping()
    T.mode = mode
    T.__name__ = T.__qualname__ = "TestHostile_" + mode
    return T


for _m, _breaks in (("eof", True), ("garbage", True), ("cut", True), ("notmap", True), ("big", True),
                    ("wrongid", True), ("twofds", True), ("trailing", True), ("badtype", True),
                    ("nofd", False), ("strayfd", False)):
    globals()["TestHostile_" + _m] = hostile(_m, breaks=_breaks)


class TestSource(unittest.TestCase):
    def test_no_fork_or_exec_in_the_module(self):
        src = open(capbroker.__file__).read()
        for bad in ("subprocess", "os.fork", "os.exec", "os.system", "os.popen",
                    "posix_spawn", "os.spawn", "multiprocessing"):
            self.assertNotIn(bad, src)


class TAPResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.n = 0

    def _line(self, ok, test, note=""):
        self.n += 1
        print("%s %d - %s%s" % ("ok" if ok else "not ok", self.n, test.id().split(".", 1)[-1], note))
        sys.stdout.flush()

    def addSuccess(self, test):
        self._line(True, test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(False, test)
        for ln in self._exc_info_to_string(err, test).splitlines():
            print("#   " + ln)

    addError = addFailure

    def addSkip(self, test, reason):
        self._line(True, test, " # SKIP " + reason)


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    res = TAPResult()
    suite.run(res)
    print("1..%d" % res.n)
    sys.exit(0 if res.wasSuccessful() else 1)
