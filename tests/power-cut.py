#!/usr/bin/env python3
"""tests/power-cut.py - what a power cut can leave of the state directory.

A `capbroker serve` with one sandbox takes a few administrative decisions
(issue, revoke, rotate-key, issue, retire-key) while strace records every
write and sync it makes to its state directory, and every acknowledgement
it sends on the admin socket.  From that record the script builds each
state a power cut could leave, and starts a broker on each:

  at every sync point (each fsync/fdatasync as it returns) and at the end,
  - all:     every write so far reached the disk;
  - synced:  only what a sync covered did (per file: the writes before its
             last fsync/fdatasync); a file created since the snapshot exists
             only once its directory was synced;
  - F-lost:  for each file F with unsynced writes, those alone were lost and
             the other files' unsynced writes made it (writes reordered
             across files).

Each state must either start consistent - `capctl audit verify` intact,
every decision acknowledged before the cut in the state (`list`) and in the
log, the history from before the record still there - or refuse to start
with a one-line reason (exit status non-zero).  Identical states are tried
once.  Prints TAP (one line per state) and a summary; exit 0 when every
state passes.

Host side, trusted test code.  Needs strace, root (ptrace of the broker,
user namespaces for the sandbox) and the built programs: CB_BIN, as the
integration tests (tests/run.sh) set it, or bin/ of the tree.  Model: the
writes of one file reach the disk in order up to its last sync and in any
subset beyond it, which the three families above bracket; torn writes
(part of one write) are not modelled (SQLite's WAL frames and the audit
log's lines carry their own checks for those, tested by
tests/integration/58-admin-durable.sh).  See docs/state.md.
"""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CB_BIN", os.path.join(TOP, "bin"))
CB = os.path.join(BIN, "capbroker")
CTL = os.path.join(BIN, "capctl")
KEEP = os.environ.get("T_KEEP")

_n = 0
_failed = 0


def tap(ok, title, why=""):
    global _n, _failed
    _n += 1
    if not ok:
        _failed += 1
    print(("ok" if ok else "not ok") + f" {_n} - {title}", flush=True)
    if not ok and why:
        for line in why.splitlines()[:8]:
            print(f"#   {line}")


def ctl(state, *args, timeout=20):
    return subprocess.run([CTL, "--state", state] + list(args), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def wait_for(fn, tenths):
    for _ in range(tenths):
        if fn():
            return True
        time.sleep(0.1)
    return False


# ---- recording ------------------------------------------------------------------------

TRACED = ("openat,open,creat,write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync,"
          "sync_file_range,ftruncate,rename,renameat,renameat2,unlink,unlinkat,sendmsg,"
          "sendto,lseek")


def record(wd):
    """Run the broker and the decisions under strace.  Returns (state dir,
    base snapshot, trace path, the acknowledged decisions in order, facts)."""
    st = os.path.join(wd, "s")
    ws = os.path.join(wd, "ws")
    os.makedirs(ws)
    with open(os.path.join(ws, "f"), "w") as f:
        f.write("x\n")
    srv = subprocess.Popen([CB, "serve", "--state", st], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(wd, "serve.log"), "w"))
    procs = [srv]
    try:
        if not wait_for(lambda: ctl(st, "status").returncode == 0, 100):
            raise RuntimeError("capbroker serve did not come up")
        agent = subprocess.Popen([CB, "run", "--connect", os.path.join(st, "admin.sock"), "--id", "a1",
                                  "--tier", "medium", "--workspace", ws, "--grant", f"fs.read:{ws}/**",
                                  "--", "/bin/sh", "-c", "read x"], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(agent)

        def one_sandbox():
            r = ctl(st, "--json", "status")
            return r.returncode == 0 and json.loads(r.stdout).get("sandboxes") == 1
        if not wait_for(one_sandbox, 100):
            raise RuntimeError("the sandbox did not start")
        facts = {"history": [t["id"] for t in json.loads(ctl(st, "--json", "list").stdout)]}
        facts["old_kid"] = sorted(os.listdir(os.path.join(st, "keys")))[0].split(".")[0]
        # Idle for a while: the audit writer syncs each batch and SQLite
        # each commit, so the files as they are now are what the disk has.
        time.sleep(1.0)
        base = os.path.join(wd, "base")
        shutil.copytree(st, base, ignore=shutil.ignore_patterns("admin.sock"))
        trace = os.path.join(wd, "trace")
        stp = subprocess.Popen(["strace", "-f", "-p", str(srv.pid), "-o", trace, "-xx", "-s", "4000000",
                                "-yy", "-e", "trace=" + TRACED], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(stp)
        # strace says "Process N attached" once it is (on stderr)
        line = stp.stderr.readline()
        if "attached" not in line:
            raise RuntimeError("strace did not attach: " + line)
        time.sleep(0.2)
        acks = []

        def decide(what, *args):
            r = ctl(st, "--json", *args)
            if r.returncode != 0:
                raise RuntimeError(f"capctl {' '.join(args)}: {r.stderr.strip()}")
            acks.append((what, json.loads(r.stdout)))
            return acks[-1][1]

        t1 = decide("issue", "issue", "--sandbox", "a1", "--cap", f"fs.read:{ws}/**", "--ttl", "3600")
        decide("revoke", "revoke", t1["id"])
        decide("rotate-key", "rotate-key")
        decide("issue", "issue", "--sandbox", "a1", "--cap", f"fs.read:{ws}/f", "--ttl", "3600")
        decide("retire-key", "retire-key", facts["old_kid"])
        time.sleep(0.3)
        srv.send_signal(signal.SIGKILL)     # the cut: nothing after this
        srv.wait()
        stp.wait(timeout=20)
        agent.stdin.close()
        agent.wait(timeout=20)
        return st, base, trace, acks, facts
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# ---- the trace ------------------------------------------------------------------------

HEX = re.compile(r'\\x([0-9a-f]{2})')
LINE = re.compile(r'^(\d+) (\w+)\((.*)$')
FDANN = re.compile(r'^(-?\d+|AT_FDCWD)<((?:\\x[0-9a-f]{2})*)>')


def unhex(s):
    return bytes(int(h, 16) for h in HEX.findall(s))


def strings(args):
    """The quoted string arguments, as bytes (strace -xx: every byte \\xNN)."""
    return [unhex(m) for m in re.findall(r'"((?:\\x[0-9a-f]{2})*)"', args)]


def events(trace, st, base):
    """The trace as events in the order they completed: ("write", rel, off,
    data), ("trunc", rel, size), ("sync", rel), ("create", rel), ("unlink",
    rel), ("rename", a, b), ("ack",).  Paths outside st are dropped.  The
    files of the base snapshot give the sizes to start from (where an
    O_APPEND write lands)."""
    pend = {}
    out = []
    pos = {}                        # (rel, fd) -> file offset of write() (no O_APPEND)
    size = {}                       # rel -> size in the full timeline
    for root, dirs, fnames in os.walk(base):
        for fn in fnames + dirs:
            pth = os.path.join(root, fn)
            size[os.path.relpath(pth, base)] = os.path.getsize(pth) if os.path.isfile(pth) else 0
    append = set()
    prefix = st.rstrip("/") + "/"

    def rel(p):
        p = p.decode(errors="replace")
        if p == st.rstrip("/"):
            return ""               # the state directory itself (its fsync)
        return p[len(prefix):] if p.startswith(prefix) else None
    with open(trace) as f:
        lines = f.read().splitlines()
    for raw in lines:
        pm = re.match(r'^(\d+)\s+(.*)$', raw)
        if not pm:
            continue
        pid, rest = pm.group(1), pm.group(2)
        if rest.endswith("<unfinished ...>"):
            pend[pid] = rest[:-len("<unfinished ...>")]
            continue
        m = re.match(r'^<\.\.\. \w+ resumed>(.*)$', rest)
        if m:
            rest = pend.pop(pid, "") + m.group(1)
        m = LINE.match(pid + " " + rest)
        if not m:
            continue
        name, args = m.group(2), m.group(3)
        res = args.rsplit(") = ", 1)
        if len(res) != 2 or res[1].startswith("-1"):
            continue
        args, ret = res
        fdm = FDANN.match(args)
        fdpath = unhex(fdm.group(2)) if fdm else b""
        r = rel(fdpath) if fdm else None
        if name in ("sendmsg", "sendto", "write") and re.match(r'^\d+<UNIX:', args) and \
                b"/admin.sock" in unhex(args.split("]>", 1)[0]):
            out.append(("ack",))    # a reply on an admin connection
            continue
        if name in ("openat", "open", "creat"):
            rm = re.match(r'^(\d+)<((?:\\x[0-9a-f]{2})*)>', ret)
            r = rel(unhex(rm.group(2))) if rm else None
            if r is None:
                continue
            flags = args
            if r not in size:       # not in the snapshot: created now
                mm = re.search(r', (0[0-7]+)$', args)
                out.append(("create", r, int(mm.group(1), 8) if mm else 0o600))
                size[r] = 0
            if "O_TRUNC" in flags:
                out.append(("trunc", r, 0))
                size[r] = 0
            pos[(r, rm.group(1))] = 0
            if "O_APPEND" in flags:
                append.add(r)
            continue
        if r is None:
            continue
        if name in ("write", "pwrite64", "writev", "pwritev", "pwritev2"):
            data = b"".join(strings(args))
            n = int(ret.split()[0])
            data = data[:n]
            fd = fdm.group(1)
            if name.startswith("pwrite"):
                off = int(args.rsplit(",", 1)[1].strip().split()[0])
            elif r in append:
                off = size.get(r, 0)
            else:
                off = pos.get((r, fd), size.get(r, 0))
                pos[(r, fd)] = off + n
            out.append(("write", r, off, data))
            size[r] = max(size.get(r, 0), off + n)
        elif name == "lseek":
            pos[(r, fdm.group(1))] = int(ret.split()[0])
        elif name == "ftruncate":
            n = int(args.rsplit(",", 1)[1].strip())
            out.append(("trunc", r, n))
            size[r] = n
        elif name in ("fsync", "fdatasync", "sync_file_range"):
            out.append(("sync", r))
        elif name in ("unlink", "unlinkat"):
            s = strings(args)
            if s and rel(s[-1]) is not None:
                out.append(("unlink", rel(s[-1])))
        elif name.startswith("rename"):
            s = strings(args)
            if len(s) >= 2 and rel(s[0]) is not None and rel(s[1]) is not None:
                out.append(("rename", rel(s[0]), rel(s[1])))
    return out


# ---- crash states ----------------------------------------------------------------------

def build(base, evs, k, lost):
    """The files after events[:k] when the writes in lost(rel, i) are lost.
    Returns {rel: bytes or None (absent)}."""
    files = {}

    def get(r):
        if r not in files:
            p = os.path.join(base, r)
            files[r] = bytearray(open(p, "rb").read()) if os.path.isfile(p) else None
        return files[r]
    for i, e in enumerate(evs[:k]):
        if e[0] == "create":
            if get(e[1]) is None and not lost(e[1], i):
                files[e[1]] = bytearray()
        elif e[0] == "write":
            b = get(e[1])
            if b is None or lost(e[1], i):
                continue
            off, data = e[2], e[3]
            if len(b) < off:
                b.extend(b"\0" * (off - len(b)))
            b[off:off + len(data)] = data
        elif e[0] == "trunc":
            b = get(e[1])
            if b is not None and not lost(e[1], i):
                del b[e[2]:]
                b.extend(b"\0" * (e[2] - len(b)))
        elif e[0] == "unlink":
            if not lost(e[1], i):
                get(e[1])
                files[e[1]] = None
        elif e[0] == "rename":
            if not lost(e[2], i):
                files[e[2]] = get(e[1])
                files[e[1]] = None
    return {r: (bytes(b) if b is not None else None) for r, b in files.items()}


def synced_before(evs, k):
    """For each file, the index of its last sync in events[:k], and for each
    directory the same; a file's writes at or after it are unsynced."""
    last = {}
    for i, e in enumerate(evs[:k]):
        if e[0] == "sync":
            last[e[1]] = i
    return last


def crash_states(base, evs):
    """Yield (name, files, acks) for every state a cut could leave."""
    syncs = [i for i, e in enumerate(evs) if e[0] == "sync"]
    # just after each sync returned, just before it did, and the end
    points = [i + 1 for i in syncs] + syncs + [len(evs)]
    for s in syncs:
        # the cut in the middle of the writes a sync was about to cover:
        # each prefix of them reached the disk (in order), the rest did not
        f = evs[s][1]
        last = synced_before(evs, s)
        mine = [i for i, e in enumerate(evs[:s]) if e[0] == "write" and e[1] == f and
                last.get(f, -1) < i]
        acks = sum(1 for e in evs[:s] if e[0] == "ack")
        for j in range(1, len(mine)):
            yield (f"cut {s}/{len(evs)} ({acks} acks): {j} of {len(mine)} unsynced writes of {f}",
                   build(base, evs, s, lambda r, i, f=f, keep=set(mine[:j]):
                         r == f and last.get(f, -1) < i and i not in keep), acks)
    for k in sorted(set(points)):
        acks = sum(1 for e in evs[:k] if e[0] == "ack")
        last = synced_before(evs, k)

        def unsynced(r, i):
            if any(e[0] == "create" and e[1] == r for e in evs[:i + 1]):
                d = os.path.dirname(r)
                created = max(j for j, e in enumerate(evs[:i + 1]) if e[0] == "create" and e[1] == r)
                if last.get(d, -1) < created:
                    return True     # its directory entry was never synced
            return last.get(r, -1) < i
        yield f"cut {k}/{len(evs)} ({acks} acks): all", build(base, evs, k, lambda r, i: False), acks
        yield f"cut {k}/{len(evs)} ({acks} acks): synced", build(base, evs, k, unsynced), acks
        touched = sorted({e[1] for e in evs[:k] if e[0] in ("write", "trunc", "create")})
        for f in touched:
            if any(unsynced(f, i) for i, e in enumerate(evs[:k]) if len(e) > 1 and e[1] == f):
                yield (f"cut {k}/{len(evs)} ({acks} acks): {f} lost",
                       build(base, evs, k, lambda r, i, f=f: r == f and unsynced(r, i)), acks)


# ---- checks -----------------------------------------------------------------------------

def check(wd, base, name, files, acks, decisions, facts, modes):
    d = tempfile.mkdtemp(prefix="cut.", dir=wd)
    os.rmdir(d)
    shutil.copytree(base, d)
    for r, b in files.items():
        p = os.path.join(d, r)
        if b is None:
            if os.path.exists(p):
                os.unlink(p)
            continue
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(b)
        os.chmod(p, modes.get(r, 0o600))
    errf = os.path.join(d + ".err")
    srv = subprocess.Popen([CB, "serve", "--state", d], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=open(errf, "w"))
    try:
        up = wait_for(lambda: srv.poll() is not None or ctl(d, "status").returncode == 0, 150)
        if srv.poll() is not None:
            err = open(errf).read().strip()
            ok = srv.returncode != 0 and err != "" and len(err.splitlines()) <= 2
            return ("refused" if ok else "bad",
                    f"{name}: refuses: {err.splitlines()[0] if err else '(no message)'}",
                    f"exit {srv.returncode}: {err}")
        if not up:
            return "bad", f"{name}: neither starts nor refuses", ""
        problems = []
        v = ctl(d, "audit", "verify")
        if v.returncode != 0:
            problems.append("audit verify: " + (v.stdout + v.stderr).strip())
        toks = {t["id"]: t for t in json.loads(ctl(d, "--json", "list").stdout or "[]")}
        for tid in facts["history"]:
            if tid not in toks:
                problems.append(f"token {tid} from before the record is gone")
        log = open(os.path.join(d, "audit.jsonl"), "rb").read().decode(errors="replace")
        for what, reply in decisions[:acks]:
            if what == "issue":
                if reply["id"] not in toks:
                    problems.append(f"acknowledged issue {reply['id']} not in the state")
                if f'"op":"issue"' not in log or reply["id"] not in log:
                    problems.append(f"acknowledged issue {reply['id']} not in the log")
            elif what == "revoke":
                if toks.get(reply["id"], {}).get("state") != "revoked":
                    problems.append(f"acknowledged revoke of {reply['id']} not in the state")
                if '"op":"revoke"' not in log:
                    problems.append("acknowledged revoke not in the log")
            elif what == "rotate-key":
                for ext in ("key", "pub"):
                    if not os.path.exists(os.path.join(d, "keys", reply["kid"] + "." + ext)):
                        problems.append(f"acknowledged rotate-key: keys/{reply['kid']}.{ext} missing")
                if '"op":"rotate-key"' not in log and reply["kid"] not in log:
                    problems.append("acknowledged rotate-key not in the log")
            elif what == "retire-key":
                if '"op":"retire-key"' not in log:
                    problems.append("acknowledged retire-key not in the log")
        return "started" if not problems else "bad", f"{name}: starts consistent", "\n".join(problems)
    finally:
        if srv.poll() is None:
            srv.send_signal(signal.SIGTERM)
            try:
                srv.wait(timeout=20)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
        if not KEEP:
            shutil.rmtree(d, ignore_errors=True)


def main():
    if os.geteuid() != 0 or shutil.which("strace") is None:
        print("1..0 # SKIP needs root and strace")
        return 0
    wd = tempfile.mkdtemp(prefix="cbcut.", dir=os.environ.get("CB_TEST_TMPDIR", "/var/tmp"))
    os.chmod(wd, 0o755)
    try:
        st, base, trace, decisions, facts = record(wd)
        evs = events(trace, st, base)
        modes = {e[1]: e[2] for e in evs if e[0] == "create"}
        nsync = sum(1 for e in evs if e[0] == "sync")
        nack = sum(1 for e in evs if e[0] == "ack")
        print(f"# recorded {len(evs)} events: {sum(1 for e in evs if e[0] == 'write')} writes, "
              f"{nsync} syncs, {nack} acknowledgements of {len(decisions)} decisions")
        tap(nack == len(decisions), f"the record holds every acknowledgement ({nack})")
        seen = {}
        tally = {"started": 0, "refused": 0, "bad": 0}
        for name, files, acks in crash_states(base, evs):
            key = hashlib.sha256(repr((sorted((r, b) for r, b in files.items() if b is not None),
                                       sorted(r for r, b in files.items() if b is None),
                                       acks)).encode()).hexdigest()
            if key in seen:
                continue
            seen[key] = name
            res, title, why = check(wd, base, name, files, acks, decisions, facts, modes)
            tap(res != "bad", title, why)
            tally[res] += 1
        print(f"# {len(seen)} distinct crash states: {tally['started']} start consistent, "
              f"{tally['refused']} refuse with a reason, {tally['bad']} wrong")
        # The checker must be able to fail: a broker that acknowledged
        # before its writes were durable, and lost them (every write to the
        # state and the log after the first acknowledgement gone).
        first = next(i for i, e in enumerate(evs) if e[0] == "ack")
        files = build(base, evs, len(evs), lambda r, i: i > first and r in ("state.db-wal", "audit.jsonl"))
        res, title, why = check(wd, base, "self-test", files, len(decisions), decisions, facts, modes)
        tap(res == "bad", "self-test: a state that lost acknowledged decisions is caught",
            f"{res}: {title} {why}")
        # ... and a state that lost them while its log kept them (a state
        # that went backwards) must be refused, not started.
        files = build(base, evs, len(evs), lambda r, i: i > first and r == "state.db-wal")
        res, title, why = check(wd, base, "self-test", files, len(decisions), decisions, facts, modes)
        tap(res == "refused", f"self-test: a state behind its log is refused ({title})",
            f"{res}: {why}")
    finally:
        if not KEEP:
            shutil.rmtree(wd, ignore_errors=True)
        else:
            print(f"# kept {wd}")
    print(f"1..{_n}")
    return 0 if _failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
