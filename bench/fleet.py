#!/usr/bin/env python3
# bench/fleet.py - the cluster's revocation, measured (docs/cluster.md,
# docs/performance.md): a private PostgreSQL (initdb and pg_ctl from
# /usr/lib/postgresql/N/bin, a unix socket in a temporary directory, no TCP
# port) and three `capbroker serve --cluster`, each in a network namespace
# of its own when unshare -n is allowed.
#
#  - propagation: 100 revocations one after another on broker 2; each is
#    acknowledged only once committed in PostgreSQL and applied by brokers 1
#    and 3 (their next operation on the token is denied), so its latency at
#    the admin socket bounds the propagation to the other brokers;
#  - sustained rate: REVOKES revocations from 16 admin connections per
#    broker, all three brokers at once.
#
# With --tmpfs the brokers' state directories are on /dev/shm and every key
# ends in ".tmpfs": each revoke is also a decision synced to the revoking
# broker's own state and audit log, and that disk flush, not the cluster,
# bounds the sustained rate on disk.
#
# Prints JSON lines {"name", "unit", "samples"} for bench.py; a line
# starting "#" is a remark.  Usage: fleet.py CB_BIN [REVOKES] [--tmpfs]
import json, os, selectors, shutil, socket, subprocess, sys, tempfile, time

import msgpack

TMPFS = "--tmpfs" in sys.argv[1:]
ARGS = [a for a in sys.argv[1:] if a != "--tmpfs"]
CB_BIN = ARGS[0]
REVOKES = int(ARGS[1]) if len(ARGS) > 1 else 3000
SUFFIX = ".tmpfs" if TMPFS else ""
CB = os.path.join(CB_BIN, "capbroker")
PER_SBX = 1000          # BRK_MINT_MAX is 1024 tokens per sandbox


def out(name, unit, samples):
    print(json.dumps({"name": name + SUFFIX, "unit": unit, "samples": samples}), flush=True)


class Admin:
    """One admin connection; one command in flight at a time."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(path)
        self.n = 0

    def send(self, cmd, **kw):
        self.n += 1
        m = {"id": self.n, "cmd": cmd}
        m.update(kw)
        self.s.send(msgpack.packb(m))

    def recv(self):
        while True:
            r = msgpack.unpackb(self.s.recv(1 << 20), raw=False)
            if r.get("id") == self.n:
                return r

    def call(self, cmd, **kw):
        self.send(cmd, **kw)
        r = self.recv()
        if not r.get("ok"):
            raise RuntimeError(f"{cmd}: {r.get('reason')}")
        return r


def pg_bin():
    base = "/usr/lib/postgresql"
    vers = sorted((v for v in os.listdir(base) if os.path.isdir(os.path.join(base, v, "bin"))),
                  key=lambda v: int(v) if v.isdigit() else 0) if os.path.isdir(base) else []
    if not vers:
        return None
    return os.path.join(base, vers[-1], "bin")


def as_owner(cmd):
    return (["runuser", "-u", "nobody", "--"] + cmd) if os.geteuid() == 0 else cmd


def main():
    pb = pg_bin()
    if not pb:
        print("# fleet: PostgreSQL is not installed (apt-get install postgresql): skipped")
        return
    wd = tempfile.mkdtemp(prefix="capbroker-bench-fleet.", dir="/var/tmp")
    pgd = os.path.join(wd, "pg")
    os.mkdir(pgd)
    os.chmod(wd, 0o755)
    if os.geteuid() == 0:
        shutil.chown(pgd, "nobody")
    procs = []
    netns = ["unshare", "-n"] if subprocess.run(["unshare", "-n", "true"],
                                                stderr=subprocess.DEVNULL).returncode == 0 else []
    started = False
    try:
        subprocess.run(as_owner([os.path.join(pb, "initdb"), "-D", pgd + "/data", "-A", "trust",
                                 "-U", "cb", "--no-sync", "-E", "UTF8"]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(as_owner([os.path.join(pb, "pg_ctl"), "-D", pgd + "/data", "-l", pgd + "/log",
                                 "-w", "-o", f"-k {pgd} -c listen_addresses= -c max_connections=40"
                                 " -c shared_buffers=32MB", "start"]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = True
        conn = f"host={pgd} dbname=postgres user=cb"
        pol = os.path.join(wd, "policy.conf")
        with open(pol, "w") as f:
            f.write("version = 1;\ndefaults = { cluster_stale = 2; };\n")
        os.chmod(pol, 0o600)
        socks = []
        sbase = tempfile.mkdtemp(prefix="capbroker-bench-fleet.", dir="/dev/shm") if TMPFS else wd
        for n in (1, 2, 3):
            st = os.path.join(sbase, f"s{n}")
            procs.append(subprocess.Popen(netns + [CB, "serve", "--state", st, "--policy", pol,
                                                   "--cluster", conn],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            socks.append(os.path.join(st, "admin.sock"))
        for s in socks:
            for _ in range(200):
                try:
                    if Admin(s).call("status").get("cluster_fresh"):
                        break
                except (OSError, RuntimeError):
                    pass
                time.sleep(0.05)
            else:
                raise RuntimeError(f"broker {s} did not catch up with the cluster")
        out("fleet.brokers", "brokers", [3])

        # Sandboxes on broker 1 to issue for (each may be given PER_SBX tokens).
        need = 100 + REVOKES
        nsbx = (need + PER_SBX - 1) // PER_SBX
        for i in range(nsbx):
            procs.append(subprocess.Popen([CB, "run", "--connect", socks[0], "--id", f"fleet{i}",
                                           "--", "/bin/sleep", "600"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        a1 = Admin(socks[0])
        for i in range(nsbx):
            for _ in range(200):
                try:
                    a1.call("issue", sandbox=f"fleet{i}", caps=["proc.exec:/usr/bin/ls"], ttl=3600)
                    break
                except RuntimeError:
                    time.sleep(0.05)
        tids = []
        for k in range(need):
            tids.append(a1.call("issue", sandbox=f"fleet{k // PER_SBX}",
                                caps=["proc.exec:/usr/bin/ls"], ttl=3600)["tid"])
        time.sleep(0.5)         # every broker has taken the tokens in

        # Propagation: 100 revocations on broker 2, one at a time.
        a2 = Admin(socks[1])
        lat = []
        for tid in tids[:100]:
            t0 = time.perf_counter()
            a2.call("revoke", tid=tid)
            lat.append((time.perf_counter() - t0) * 1e3)
        out("fleet.revoke_ms", "ms", lat)
        lat.sort()
        out("fleet.revoke_p50_ms", "ms", [lat[len(lat) // 2]])
        out("fleet.revoke_p99_ms", "ms", [lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))]])

        # Sustained: 16 connections to each broker, one revoke in flight on each.
        conns = [Admin(s) for s in socks for _ in range(16)]
        todo = list(tids[100:])
        busy = {}
        t0 = time.perf_counter()
        done = 0
        sel = selectors.DefaultSelector()
        for c in conns:
            if todo:
                c.send("revoke", tid=todo.pop())
                sel.register(c.s, selectors.EVENT_READ, c)
                busy[c] = True
        while busy:
            for key, _ in sel.select(timeout=10):
                c = key.data
                r = c.recv()
                if not r.get("ok"):
                    raise RuntimeError(f"revoke: {r.get('reason')}")
                done += 1
                if todo:
                    c.send("revoke", tid=todo.pop())
                else:
                    sel.unregister(c.s)
                    del busy[c]
        dt = time.perf_counter() - t0
        out("fleet.revoke_rate", "revocations/s", [done / dt])
        print(f"# fleet: {done} revocations in {dt:.2f} s from {len(conns)} connections")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if started:
            subprocess.run(as_owner([os.path.join(pb, "pg_ctl"), "-D", pgd + "/data", "-m",
                                     "immediate", "-w", "stop"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(wd, ignore_errors=True)
        if TMPFS and "sbase" in locals():
            shutil.rmtree(sbase, ignore_errors=True)


if __name__ == "__main__":
    main()
