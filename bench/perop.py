#!/usr/bin/env python3
"""bench/perop.py - load-independent counts per agent operation (`make bench`
with BENCH_COUNTS=1, or alone: CB_BIN=bin CB_BUILD=build python3 bench/perop.py).

Runs the latency section's agent (`agent lat onecpu`: batches of cached
fs.read, ping and denied fs.read, everything on CPU 0) twice under perf:

  1. per process tree: every system call, context switch and wake-up of
     the broker, its threads, the stub and the agent, split into the three
     phases by the agent's own sleeps between batches, divided by the
     operations of each phase; wake-ups are named waker -> wakee by role
     (agent, broker.loop, broker.thread, broker.child, stub), so a thread
     that starts waking per request shows up as a new row; the agent's and
     the loop's calls are also counted by name (syscall.ROLE.NAME), so that
     a change of shape (an EAGAIN recvmsg, an epoll_wait, a poll) shows;
  2. CPU 0 as a whole (`perf record -a -C 0`, sched_switch): where the wall
     time of each batch went: the agent, capbroker (all its processes),
     other processes on CPU 0 (the machine's other load) and idle.  Idle
     time inside a batch would be a wait without work; "other" is what a
     loaded machine adds to the wall-clock ratios.

Counts do not depend on the machine's load the way times do, so they are
the figures to compare between trees (run each tree's build, alternated).
Needs root and perf; host side, trusted; it only starts and counts programs.
Writes one line per figure to stdout.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

CB_BIN = os.environ["CB_BIN"]
CB_BUILD = os.environ["CB_BUILD"]
CAPBROKER = os.path.join(CB_BIN, "capbroker")
AGENT = os.path.join(CB_BUILD, "bench", "agent")
NTOK, REPS, ITERS = 16, 5, 1000
SLEEPS = 4 * (REPS + 1)	# three phases and the raw pings: one warm-up and REPS batches each
# The agent sleeps once after each phase's 50 warm-up calls and once after
# each of its REPS batches (bench/agent.c, batches()); sleeps are counted
# from 0: reads (and the first uses) run before sleep 6, pings before 12,
# denials before 18, then the raw pings.
# The last figure of each is the operations of its REPS timed batches alone.
PHASES = [("read", 0, REPS + 1, NTOK - 1 + 50 + REPS * ITERS, REPS * ITERS),
          ("ping", REPS + 1, 2 * (REPS + 1), 50 + REPS * ITERS, REPS * ITERS),
          ("deny", 2 * (REPS + 1), 3 * (REPS + 1), 50 + REPS * (ITERS // 4), REPS * (ITERS // 4))]
# x86-64 numbers of the calls the request path makes, to name them in the
# per-call rows (syscall.ROLE.NAME); any other is shown by number.
NAMES = {"0": "read", "1": "write", "3": "close", "7": "poll", "44": "sendto", "46": "sendmsg",
         "47": "recvmsg", "202": "futex", "228": "clock_gettime", "232": "epoll_wait",
         "262": "newfstatat", "281": "epoll_pwait", "332": "statx", "437": "openat2"}
LINE = re.compile(r'\s*(\S.*?)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)')


def phase_of(nsleep):
    for name, lo, hi, _, _ in PHASES:
        if lo <= nsleep < hi:
            return name
    return None


def agent_cmd(ws):
    cmd = ["taskset", "-c", "0", CAPBROKER, "run", "--tier", "medium", "--workspace", ws]
    for _ in range(NTOK):
        cmd += ["--grant", f"fs.read:{ws}/**"]
    return cmd + ["--ro-bind", f"{AGENT}:/bench/agent", "--", "/bench/agent", "lat", "onecpu",
                  "0", f"{ws}/file", "/etc/hostname", str(NTOK), str(REPS), str(ITERS)]


def record(wd, ws, events, extra):
    data = os.path.join(wd, "perf.data")
    # 8 MiB of buffer per CPU: a busy CPU 0 must not make perf drop events.
    subprocess.run(["perf", "record", "-q", "-m", "2048", "-o", data, "-e", ",".join(events)] +
                   extra +
                   ["--"] + agent_cmd(ws), stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=300)
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,time,event,trace"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         check=True, timeout=300).stdout
    os.unlink(data)
    return out


class Roles:
    """Names a thread by what it is to the broker: the first capbroker
    process seen is the broker (its first thread the event loop)."""

    def __init__(self):
        self.broker = None
        self.tid_comm = {}

    def see(self, comm, pid, tid):
        self.tid_comm[tid] = comm
        if comm == "capbroker" and self.broker is None:
            self.broker = pid

    def of(self, comm, pid, tid):
        if comm == "agent":
            return "agent"
        if comm.startswith("capbroker-stub"):
            return "stub"
        if comm.startswith("capbroker"):
            if pid == self.broker:
                return "broker.loop" if tid == pid else "broker.thread"
            return "broker.child"
        return "kernel/other"

    def of_tid(self, comm, tid):
        if tid == self.broker:
            return "broker.loop"
        c = self.tid_comm.get(tid, comm)
        if c == "agent":
            return "agent"
        if c.startswith("capbroker-stub"):
            return "stub"
        if c.startswith("capbroker"):
            return "broker.thread"
        return "kernel/other"


def counts(wd, ws):
    out = record(wd, ws, ["sched:sched_wakeup", "sched:sched_switch", "raw_syscalls:sys_enter"],
                 [])
    roles, nsleep, started = Roles(), 0, False
    c = collections.defaultdict(collections.Counter)
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, tid, _, ev, tr = m.groups()
        roles.see(comm, pid, tid)
        # The sandbox's set-up is not an operation: count from the agent's exec.
        started = started or comm == "agent"
        if not started:
            continue
        who = roles.of(comm, pid, tid)
        if ev == "raw_syscalls:sys_enter":
            nr = re.search(r'NR (\d+)', tr).group(1)
            if who == "agent" and nr == "230":	# clock_nanosleep: between batches
                nsleep += 1
                continue
            ph = phase_of(nsleep)
            if ph:
                c[ph]["syscalls"] += 1
                c[ph][f"syscalls.{who}"] += 1
                if who in ("agent", "broker.loop"):
                    c[ph][f"syscall.{who}.{NAMES.get(nr, 'nr' + nr)}"] += 1
        elif ev == "sched:sched_switch":
            ph = phase_of(nsleep)
            if ph:
                c[ph]["switches"] += 1
                c[ph][f"switches.{who}"] += 1
        elif ev == "sched:sched_wakeup":
            ph = phase_of(nsleep)
            w = re.search(r'comm=(.*?) pid=(\d+)', tr)
            if ph and w:
                c[ph]["wakeups"] += 1
                c[ph][f"wakeups.{who}->{roles.of_tid(w.group(1), w.group(2))}"] += 1
    return c if nsleep == SLEEPS else None


def cpu0(wd, ws):
    out = record(wd, ws, ["sched:sched_switch", "syscalls:sys_enter_clock_nanosleep",
                          "syscalls:sys_exit_clock_nanosleep"], ["-a", "-C", "0"])
    t = collections.defaultdict(collections.Counter)
    nsleep, inbatch, last, running = 0, False, None, "agent"

    def kind(comm, pid):
        if pid == "0":
            return "idle"
        if comm == "agent":
            return "agent"
        return "capbroker" if comm.startswith("capbroker") else "other"

    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, _, ts, ev, tr = m.groups()
        ts = float(ts)
        # Only the timed batches: between the end of a sleep and the next,
        # unless that sleep follows a phase's first uses and warm-up calls.
        ph = phase_of(nsleep) if nsleep % (REPS + 1) != 0 else None
        if ev.endswith("sys_enter_clock_nanosleep") and comm == "agent":
            if inbatch and ph and last is not None:
                t[ph][running] += ts - last
            nsleep, inbatch = nsleep + 1, False
        elif ev.endswith("sys_exit_clock_nanosleep") and comm == "agent":
            inbatch, last, running = True, ts, "agent"
        elif ev == "sched:sched_switch":
            s = re.search(r'prev_comm=(.*?) prev_pid=(\d+) .*next_comm=(.*?) next_pid=(\d+)', tr)
            if not s:
                continue
            if inbatch and ph and last is not None:
                t[ph][kind(s.group(1), s.group(2))] += ts - last
            last, running = ts, kind(s.group(3), s.group(4))
    return t if nsleep == SLEEPS else None


def main():
    if os.geteuid() != 0 or not shutil.which("perf"):
        print("perop: needs root and perf (linux-perf)", file=sys.stderr)
        return 1
    wd = tempfile.mkdtemp(prefix="capbroker-perop.", dir="/var/tmp")
    try:
        ws = os.path.join(wd, "ws")
        os.makedirs(ws)
        with open(os.path.join(ws, "file"), "w") as f:
            f.write("hello from the workspace\n")
        os.chmod(wd, 0o755)
        c = counts(wd, ws)
        t = cpu0(wd, ws)
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    if c is None:
        print("perop: perf lost events (the agent's sleeps do not add up): no counts", file=sys.stderr)
        return 1
    for name, _, _, n, nb in PHASES:
        print(f"{name}: per operation, all threads: {c[name]['syscalls'] / n:.2f} system calls, "
              f"{c[name]['switches'] / n:.2f} context switches, {c[name]['wakeups'] / n:.2f} wake-ups")
        for k, v in sorted(c[name].items(), key=lambda kv: -kv[1]):
            if "." in k and v / n >= 0.01:
                print(f"  {k}: {v / n:.3f}")
        if t is None:
            print("  wall per operation on CPU 0: not measured (perf lost events)")
            continue
        us = {k: v / nb * 1e6 for k, v in t[name].items()}
        print(f"  wall per operation on CPU 0, timed batches: {sum(us.values()):.2f} us = " +
              ", ".join(f"{k} {us.get(k, 0.0):.2f}" for k in ("agent", "capbroker", "other", "idle")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
