"""capbroker - the Python client for an agent inside a capbroker sandbox.

Runs in the agent's process, inside the sandbox.  It never forks or execs
(a low-tier agent may not), opens nothing but the broker channel it is
given, and uses only the standard library and msgpack (Debian's
python3-msgpack).  Every file, network and process operation is asked of the
broker over the SOCK_SEQPACKET socket named by $CAPBROKER_FD; the broker
checks the token presented and answers with a result or a file descriptor.
The protocol is docs/protocol.md; the API is docs/client-library.md.

    import capbroker
    cb = capbroker.Client()
    text = cb.read_file("/work/notes.txt").decode()
    try:
        cb.read_file("/etc/shadow")
    except capbroker.Denied as e:
        print("denied:", e.name, e.reason)

A Client may be shared by threads: replies are matched to requests by id,
and whichever thread is reading hands the others their replies.
"""

from __future__ import annotations

import array
import collections
import os
import select
import socket
import threading
import time

import msgpack

# Type names for checkers only: importing typing would cost every agent's
# start-up a few milliseconds for nothing at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any, Iterable

__version__ = "0.1"

__all__ = [
    "__version__", "Client", "Error", "Denied", "BrokerUnavailable", "RequestExpired", "OperationError",
    "Entry", "Stat", "ExecResult", "Grant", "TokenInfo",
    "CREATE", "TRUNC", "APPEND", "EXCL",
]

ENV_FD = "CAPBROKER_FD"
REQ_MAX = 64 * 1024         # WIRE_REQ_MAX
REPLY_MAX = 200 * 1024      # WIRE_REPLY_MAX
DATA_MAX = 56 * 1024        # WIRE_DATA_MAX
ARGV_MAX = 1024             # WIRE_ARGV_MAX
MAX_FDS = 8                 # room to receive (and close) a few stray fds

CREATE, TRUNC, APPEND, EXCL, _MEDIATED = 0x01, 0x02, 0x04, 0x08, 0x10

# The broker's codes (common/common.h) that mean "refused": the request was
# understood and judged, and the answer is no.
_REFUSALS = {
    -4, -40, -41, -42, -43, -44, -45, -46, -47, -48, -49, -50, -51, -52,
    -93, -94, -95, -96,
} | set(range(-29, -19))            # a token that does not decode
_EXPIRED = {-97, -10}               # request expired undecided, timed out
_UNAVAILABLE = {-90, -91, -92, -101}    # protocol, unknown op, audit, closed

_NAMES = {
    -1: "no-memory", -2: "invalid", -3: "io", -4: "permission", -5: "not-found",
    -6: "exists", -7: "too-big", -8: "internal", -9: "busy", -10: "timed-out",
    -11: "unsupported", -40: "bad-signature", -41: "unknown-key", -42: "expired",
    -43: "not-yet-valid", -44: "wrong-audience", -45: "revoked", -46: "uses-spent",
    -47: "not-covered", -48: "exceeds-policy", -49: "no-token", -50: "widens-parent",
    -51: "key-retired", -52: "unknown-token", -90: "protocol", -91: "unknown-op",
    -92: "audit-failed", -93: "escape", -94: "file-type", -95: "never-reachable",
    -96: "denied", -97: "request-expired", -98: "connection-refused",
    -99: "resolve-failed", -100: "rate-limited", -101: "closed", -102: "cluster-stale",
    -103: "stopping",
}


class Error(Exception):
    """A failed broker call.  .code is the broker's negative code, .name its
    stable identifier ('not-covered', 'not-found', ...), .reason its sentence."""

    def __init__(self, name: str, reason: str, code: int | None = None) -> None:
        super().__init__("%s: %s" % (name, reason))
        self.name = name
        self.reason = reason
        self.code = code


class Denied(Error):
    """The broker refused: no token covers it, the token expired or was
    revoked, it exceeds the policy, a human said no, the path escapes..."""


class RequestExpired(Error):
    """An elevation request expired undecided, or an operation timed out."""


class BrokerUnavailable(Error):
    """No broker channel, or the channel failed (closed, malformed reply)."""


class OperationError(Error):
    """The broker tried and the operation failed (not found, exists, ...)."""


if TYPE_CHECKING:
    from typing import NamedTuple

    class Entry(NamedTuple):
        name: str
        type: str           # 'file', 'dir', 'link' or 'other'

    class Stat(NamedTuple):
        type: str
        size: int
        mode: int
        mtime: int

    class Grant(NamedTuple):
        token: str | None
        tid: str | None
        th: int | None

    class TokenInfo(NamedTuple):
        th: int
        id: str
        caps: list[str]
        exp: int
        uses: int | None
        elevated: bool

    class _ExecResult(NamedTuple):
        status: int
        out: bytes
        err: bytes
else:
    Entry = collections.namedtuple("Entry", "name type")        # type: file dir link other
    Stat = collections.namedtuple("Stat", "type size mode mtime")
    Grant = collections.namedtuple("Grant", "token tid th")
    TokenInfo = collections.namedtuple("TokenInfo", "th id caps exp uses elevated")
    _ExecResult = collections.namedtuple("ExecResult", "status out err")

_TYPES = {"f": "file", "d": "dir", "l": "link"}


class ExecResult(_ExecResult):
    """(status, out, err); .truncated when the broker cut the output."""
    truncated = False


class DirList(list["Entry"]):
    """A list of Entry; .truncated when the broker cut the listing short."""
    truncated = False


def _error(reply: dict[str, Any]) -> Error:
    code = reply.get("err")
    if not isinstance(code, int) or code >= 0:
        return BrokerUnavailable("protocol", "failed reply without an error code")
    name = reply.get("name")
    if not isinstance(name, str):
        name = _NAMES.get(code, "unknown")
    reason = reply.get("reason")
    if not isinstance(reason, str) or not reason:
        reason = name
    if code in _REFUSALS:
        cls = Denied
    elif code in _EXPIRED:
        cls = RequestExpired
    elif code in _UNAVAILABLE:
        cls = BrokerUnavailable
    else:
        cls = OperationError
    return cls(name, reason, code)


def _unique_map(pairs: Iterable[tuple[Any, Any]]) -> dict[str, Any]:
    """object_pairs_hook: a key twice is a malformed reply, as in wire/."""
    d = {}
    for k, v in pairs:
        if not isinstance(k, str) or k in d:
            raise ValueError("duplicate or non-string key")
        d[k] = v
    return d


def _get(reply: dict[str, Any], key: str, typ: type, default: Any = None,
         required: bool = False) -> Any:
    """A reply field checked for its type (bool is not an int here)."""
    if key not in reply:
        if required:
            raise BrokerUnavailable("protocol", "reply lacks %r" % key)
        return default
    v = reply[key]
    if typ is int and isinstance(v, bool) or not isinstance(v, typ):
        raise BrokerUnavailable("protocol", "reply field %r has the wrong type" % key)
    return v


# How long a call waits for its reply (seconds) before RequestExpired
# ('timed-out', code -10; capcall exits 75 for the same): a stopped or wedged
# broker never hangs an agent.  A request waits for a human: longer.  A
# connect or exec with a timeout of its own waits that on top.
TIMEOUT = 60.0
REQUEST_TIMEOUT = 30 * 60.0
ENV_TIMEOUT = "CAPBROKER_TIMEOUT"


def _default_timeout() -> float:
    s = os.environ.get(ENV_TIMEOUT, "")
    return float(s) if s.isdigit() else TIMEOUT


class Client:
    """A connection to the broker.

    Client() uses $CAPBROKER_FD (duplicated, so close() leaves the inherited
    fd to others); Client(fd=N) adopts fd N.  token= presents that token
    text with every request; by default the broker picks the first token the
    sandbox holds that covers each request (see use_token, use_handle).
    timeout= (seconds, None: no limit) bounds every call's wait for its
    reply, request_timeout= that of request(); defaults TIMEOUT (or
    $CAPBROKER_TIMEOUT) and REQUEST_TIMEOUT.
    """

    def __init__(self, fd: int | None = None, token: str | None = None,
                 timeout: float | None = -1, request_timeout: float | None = -1) -> None:
        self._sock = None
        self.timeout = _default_timeout() if timeout == -1 else timeout
        self.request_timeout = REQUEST_TIMEOUT if request_timeout == -1 else request_timeout
        if fd is None:
            s = os.environ.get(ENV_FD, "")
            if not s:
                raise BrokerUnavailable("not-found", "%s is not set (not inside a sandbox?)" % ENV_FD)
            if not s.isdigit():
                raise BrokerUnavailable("invalid", "%s=%r is not a file descriptor" % (ENV_FD, s))
            try:
                fd = os.dup(int(s))         # non-inheritable, like F_DUPFD_CLOEXEC
            except OSError as e:
                raise BrokerUnavailable("invalid", "%s=%s: %s" % (ENV_FD, s, e.strerror))
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd)
        except OSError as e:
            os.close(fd)
            raise BrokerUnavailable("invalid", "fd %d is not a broker channel: %s" % (fd, e.strerror))
        try:
            typ = sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE)
        except OSError:
            typ = None
        if typ != socket.SOCK_SEQPACKET:
            sock.close()
            raise BrokerUnavailable("invalid", "fd %d is not a SOCK_SEQPACKET socket" % fd)
        self._sock = sock
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._next = int.from_bytes(os.urandom(4), "little")
        self._pending = set()       # ids sent, reply not yet collected
        self._done = {}             # id -> (reply, fd) arrived for another waiter
        self._late = set()          # ids given up on (timed out): drop their replies
        self._reading = False
        self._broken = None         # the BrokerUnavailable that broke the channel
        self._tok = token
        self._th = None

    # ---- lifetime ------------------------------------------------------
    def close(self) -> None:
        """Close the channel and any fds of replies never collected."""
        with self._lock:
            for _, fd in self._done.values():
                if fd is not None:
                    os.close(fd)
            self._done.clear()
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._broken is None:
                self._broken = BrokerUnavailable("closed", "client closed")
            self._cv.notify_all()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_sock", None) is not None:
            self.close()

    # ---- token presentation ----------------------------------------------
    def use_token(self, token: str | None) -> None:
        """Present this token text with later requests (None: let the broker pick)."""
        self._tok, self._th = token, None

    def use_handle(self, th: int | None) -> None:
        """Present the held token with this handle (from tokens() or token_add())."""
        self._tok, self._th = None, th

    # ---- low level: send, receive ---------------------------------------------
    def send(self, op: str, **fields: Any) -> int:
        """Send one request; returns its id for recv().  Fields as in
        docs/protocol.md; None values are left out."""
        msg = {k: v for k, v in fields.items() if v is not None}
        if "tok" not in msg and "th" not in msg:
            if self._tok is not None:
                msg["tok"] = self._tok
            elif self._th is not None:
                msg["th"] = self._th
        with self._lock:
            if self._broken is not None:
                raise self._broken
            rid = self._next
            while rid in self._pending or rid in self._done:
                rid = (rid + 1) & 0xffffffff
            self._next = (rid + 1) & 0xffffffff
            msg["id"] = rid
            msg["op"] = op
            # surrogateescape: a path that came from list_dir as undecodable
            # bytes goes back as the same bytes (as os.fsencode would)
            data = msgpack.packb(msg, use_bin_type=True, unicode_errors="surrogateescape")
            if len(data) > REQ_MAX:
                raise OperationError("too-big", "request larger than the protocol allows", -7)
            self._pending.add(rid)
            sock = self._sock
        # Sent without the lock: a send that blocks must not stop the
        # reading thread from handing out replies.  One packet is one
        # message, so concurrent sends cannot interleave.
        try:
            sock.send(data, socket.MSG_NOSIGNAL)
        except OSError as e:
            with self._lock:
                self._pending.discard(rid)
                raise self._break("the broker channel failed: %s" % (e.strerror or e))
        return rid

    def _give_up(self, rid: int, timeout: float | None) -> "RequestExpired":
        # Called with the lock held: the channel stays in step, and the
        # late reply is dropped when it comes.
        self._pending.discard(rid)
        self._late.add(rid)
        return RequestExpired("timed-out", "the broker did not answer within %g s "
                              "(stopped or overloaded?)" % timeout, -10)

    def recv(self, rid: int, timeout: float | None = None) -> tuple[dict[str, Any], int | None]:
        """Wait for the reply to rid: (reply dict, fd or None).  The fd is
        the caller's.  Replies for other ids are kept for their waiters.
        A reply with ok false is returned as it is, not raised.  timeout:
        seconds (None: no limit); RequestExpired('timed-out') after it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                if rid in self._done:
                    self._pending.discard(rid)
                    return self._done.pop(rid)
                if rid not in self._pending:
                    raise ValueError("no request in flight with id %r" % rid)
                if self._broken is not None:
                    raise self._broken
                if not self._reading:
                    self._reading = True
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise self._give_up(rid, timeout)
                self._cv.wait(left)
        # We are the reader: take packets until ours arrives, handing the
        # others to their waiters.
        grace = None
        try:
            while True:
                limit = deadline if grace is None or (deadline is not None and deadline < grace) \
                    else grace
                left = None if limit is None else limit - time.monotonic()
                if left is not None and (left <= 0 or not self._wait_readable(left)):
                    with self._cv:
                        if limit is grace:
                            raise self._break("reply to a request never sent")
                        raise self._give_up(rid, timeout)
                reply, fd = self._recv_packet()
                with self._cv:
                    got = reply["id"]
                    if got in self._late:
                        self._late.discard(got)
                        if fd is not None:
                            os.close(fd)
                        continue
                    if got not in self._pending and got not in self._done and grace is None:
                        # The channel is shared by the sandbox's processes:
                        # perhaps the late reply to a call another process
                        # gave up on.  Drop it; wait a moment for ours.
                        if fd is not None:
                            os.close(fd)
                        grace = time.monotonic() + 1.0
                        continue
                    if got not in self._pending or got in self._done:
                        if fd is not None:
                            os.close(fd)
                        raise self._break("reply to a request never sent")
                    if got == rid:
                        self._pending.discard(rid)
                        return reply, fd
                    self._done[got] = (reply, fd)
                    self._cv.notify_all()
        finally:
            with self._cv:
                self._reading = False
                self._cv.notify_all()

    def _wait_readable(self, left: float) -> bool:
        sock = self._sock
        if sock is None:
            return True     # _recv_packet says why
        while True:
            try:
                r, _, _ = select.select([sock], [], [], left)
                return bool(r)
            except InterruptedError:
                continue

    def _break(self, why: str) -> BrokerUnavailable:
        # Called with the lock held or from the reader: the channel is dead.
        self._broken = BrokerUnavailable("closed", why, -101)
        return self._broken

    def _recv_packet(self) -> tuple[dict[str, Any], int | None]:
        sock = self._sock
        if sock is None:
            raise BrokerUnavailable("closed", "client closed", -101)
        while True:
            try:
                data, anc, flags, _ = sock.recvmsg(
                    REPLY_MAX, socket.CMSG_SPACE(MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC)
                break
            except InterruptedError:
                continue
            except OSError as e:
                with self._lock:
                    raise self._break("the broker channel failed: %s" % (e.strerror or e))
        fds = []
        for level, typ, payload in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(payload[:len(payload) - len(payload) % a.itemsize])
                fds.extend(a)
        try:
            if not data and not fds:
                raise self._break("the broker closed the channel")
            if flags & socket.MSG_TRUNC:
                raise self._break("reply larger than the protocol allows")
            if flags & socket.MSG_CTRUNC or len(fds) > 1:
                raise self._break("reply carried more than one descriptor")
            try:
                reply = msgpack.unpackb(data, raw=False, use_list=True,
                                        unicode_errors="surrogateescape",
                                        object_pairs_hook=_unique_map)
            except Exception:
                raise self._break("malformed reply from the broker")
            if (not isinstance(reply, dict) or not isinstance(reply.get("id"), int)
                    or isinstance(reply.get("id"), bool) or not isinstance(reply.get("ok"), bool)):
                raise self._break("malformed reply from the broker")
        except BrokerUnavailable:
            for fd in fds:
                os.close(fd)
            raise
        return reply, (fds[0] if fds else None)

    def _timeout_for(self, op: str, fields: dict[str, Any]) -> float | None:
        t = self.request_timeout if op == "request" else self.timeout
        if op == "proc.exec" and fields.get("timeout") is None:
            t = self.request_timeout    # a tool may run the tier's whole wall clock
        if t is not None and op in ("net.connect", "proc.exec") and fields.get("timeout"):
            t += fields["timeout"] / 1000.0
        return t

    def call(self, op: str, want_fd: bool = False, **fields: Any) -> Any:
        """Send a request and wait for its reply; raise on failure.
        Returns the reply dict, or (reply, fd) when want_fd."""
        reply, fd = self.recv(self.send(op, **fields), self._timeout_for(op, fields))
        try:
            if reply["ok"] is not True:
                raise _error(reply)
            if bool(reply.get("fd")) != (fd is not None):
                raise BrokerUnavailable("protocol", "reply promised a descriptor but none came"
                                        if fd is None else "reply carried an unannounced descriptor")
            if want_fd:
                if fd is None:
                    raise BrokerUnavailable("protocol", "reply lacks the expected descriptor")
                got, fd = fd, None
                return reply, got
            return reply
        finally:
            if fd is not None:
                os.close(fd)

    # ---- operations ---------------------------------------------------------
    def ping(self) -> None:
        self.call("ping")

    def open_fd(self, path: str) -> int:
        """Open path read-only through the broker; the raw fd (yours to close)."""
        return self.call("fs.read", want_fd=True, path=path)[1]

    def open_read(self, path: str, mode: str = "rb", **kw: Any) -> IO[Any]:
        """A file object reading path ('rb' by default, or 'r' with encoding=...)."""
        if "w" in mode or "a" in mode or "+" in mode or "x" in mode:
            raise ValueError("open_read is for reading; use open_write")
        return os.fdopen(self.open_fd(path), mode, **kw)

    def read_file(self, path: str) -> bytes:
        """The content of path, as bytes."""
        with self.open_read(path) as f:
            return f.read()

    def open_write(self, path: str, append: bool = False, exclusive: bool = False,
                   mode: int | None = None, text: bool = False, **kw: Any) -> IO[Any]:
        """A file object writing path: created and truncated by default,
        appended to with append=True, created only if new with exclusive=True."""
        if append:
            flags = CREATE | APPEND
        elif exclusive:
            flags = CREATE | EXCL
        else:
            flags = CREATE | TRUNC
        _, fd = self.call("fs.write", want_fd=True, path=path, flags=flags, mode=mode)
        return os.fdopen(fd, ("a" if append else "w") + ("" if text else "b"), **kw)

    def write_file(self, path: str, data: bytes | str, append: bool = False,
                   mode: int | None = None) -> int:
        """Write data (bytes, or str as UTF-8) to path; returns the byte count."""
        if isinstance(data, str):
            data = data.encode()
        with self.open_write(path, append=append, mode=mode) as f:
            f.write(data)
        return len(data)

    def write_small(self, path: str, data: bytes | str, append: bool = False,
                    mode: int | None = None) -> int:
        """Have the broker write data (at most 56 KiB) itself; no fd needed."""
        if isinstance(data, str):
            data = data.encode()
        if len(data) > DATA_MAX:
            raise OperationError("too-big", "more data than one request may carry", -7)
        r = self.call("fs.write", path=path, data=bytes(data), mode=mode,
                      flags=(CREATE | APPEND) if append else (CREATE | TRUNC))
        return _get(r, "n", int, required=True)

    def list_dir(self, path: str) -> DirList:
        """The entries of directory path: a list of Entry(name, type) with
        type 'file', 'dir', 'link' or 'other'; .truncated if cut short."""
        r = self.call("fs.list", path=path)
        out = DirList()
        for e in _get(r, "entries", list, default=[]):
            if not isinstance(e, dict) or not isinstance(e.get("n"), str) or not isinstance(e.get("t"), str):
                raise BrokerUnavailable("protocol", "malformed directory entry")
            out.append(Entry(e["n"], _TYPES.get(e["t"], "other")))
        out.truncated = bool(_get(r, "trunc", bool, default=False))
        return out

    def stat(self, path: str) -> Stat:
        """Stat(type, size, mode, mtime) of path."""
        s = _get(self.call("fs.stat", path=path), "st", dict, required=True)
        return Stat(_TYPES.get(_get(s, "type", str, required=True), "other"),
                    _get(s, "size", int, required=True), _get(s, "mode", int, required=True),
                    _get(s, "mtime", int, required=True))

    def mkdir(self, path: str, mode: int | None = None) -> None:
        self.call("fs.mkdir", path=path, mode=mode)

    def delete(self, path: str) -> None:
        self.call("fs.delete", path=path)

    def rename(self, src: str, dst: str) -> None:
        self.call("fs.rename", path=src, path2=dst)

    def connect(self, host: str, port: int, timeout: float | None = None) -> socket.socket:
        """A TCP connection the broker opened to host:port (a socket object).
        timeout: seconds the broker may take to connect."""
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError("port must be 1-65535")
        ms = None if timeout is None else max(1, int(timeout * 1000))
        _, fd = self.call("net.connect", want_fd=True, host=host, port=port, timeout=ms)
        return socket.socket(fileno=fd)

    def exec(self, argv: Iterable[object], timeout: float | None = None) -> ExecResult:
        """Run argv (argv[0] an absolute path) in a sandbox of its own:
        ExecResult(status, out, err) with .truncated."""
        argv = [str(a) for a in argv]
        if not argv or len(argv) > ARGV_MAX:
            raise ValueError("argv must have 1 to %d elements" % ARGV_MAX)
        ms = None if timeout is None else max(1, int(timeout * 1000))
        r = self.call("proc.exec", argv=argv, timeout=ms)
        res = ExecResult(_get(r, "status", int, required=True),
                         _get(r, "out", bytes, default=b""), _get(r, "errout", bytes, default=b""))
        res.truncated = bool(_get(r, "trunc", bool, default=False))
        return res

    def request(self, cap: str, ttl: int | None = None, reason: str | None = None) -> Grant:
        """Ask a human for elevation to cap; blocks until decided.
        Grant(token, tid, th) on approval (the sandbox holds the token from
        now on); Denied (name 'denied' or 'exceeds-policy') or RequestExpired."""
        r = self.call("request", cap=cap, ttl=ttl, reason=reason)
        return Grant(_get(r, "token", str), _get(r, "tid", str), _get(r, "th", int))

    def tokens(self) -> list[TokenInfo]:
        """The tokens this sandbox holds: a list of TokenInfo(th, id, caps
        (list), exp, uses (None: unlimited), elevated)."""
        out = []
        for t in _get(self.call("tokens"), "tokens", list, default=[]):
            if not isinstance(t, dict):
                raise BrokerUnavailable("protocol", "malformed token entry")
            out.append(TokenInfo(_get(t, "th", int, required=True), _get(t, "id", str, required=True),
                                 _get(t, "caps", str, required=True).split(),
                                 _get(t, "exp", int, required=True), _get(t, "uses", int),
                                 bool(_get(t, "elev", bool, default=False))))
        return out

    def token_add(self, token: str) -> int:
        """Hand the broker a token once; returns its handle (see use_handle)."""
        return _get(self.call("token.add", tok=token), "th", int, required=True)

    def derive(self, caps: str | Iterable[str], ttl: int | None = None, uses: int | None = None,
               aud: str | None = None) -> Grant:
        """A narrower child of the presented token: Grant(token, tid, th)."""
        if isinstance(caps, str):
            caps = [caps]
        r = self.call("derive", caps=list(caps), ttl=ttl, uses=uses, aud=aud)
        return Grant(_get(r, "token", str, required=True), _get(r, "tid", str), _get(r, "th", int))

    # ---- mediated I/O: the broker keeps the file, bytes go through it ------------
    def open_handle(self, path: str, write: bool = False, append: bool = False,
                    mode: int | None = None) -> int:
        """A broker-side handle on path for io_read / io_write / io_close."""
        flags = _MEDIATED
        if write:
            flags |= (CREATE | APPEND) if append else (CREATE | TRUNC)
        r = self.call("fs.write" if write else "fs.read", path=path, flags=flags,
                      mode=mode if write else None)   # fs.read takes no mode
        return _get(r, "h", int, required=True)

    def io_read(self, h: int, n: int = DATA_MAX) -> bytes:
        """Up to n bytes (at most 56 KiB) from a handle; b'' at EOF."""
        n = max(1, min(int(n), DATA_MAX))
        data = _get(self.call("io.read", h=h, len=n), "data", bytes, required=True)
        if len(data) > n:
            raise BrokerUnavailable("protocol", "io.read returned more than asked")
        return data

    def io_write(self, h: int, data: bytes) -> int:
        """Write up to 56 KiB through a handle; returns the count written."""
        if len(data) > DATA_MAX:
            raise OperationError("too-big", "more data than one request may carry", -7)
        return _get(self.call("io.write", h=h, data=bytes(data)), "n", int, required=True)

    def io_close(self, h: int) -> None:
        self.call("io.close", h=h)
