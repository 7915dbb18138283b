#!/usr/bin/env python3
"""bench/split.py - what spreading the broker over both cores could give
(issue 16, throughput): a prototype measurement, not a part of `make bench`.

The broker serves every channel on one loop thread.  The design asked for is
two loops, each owning half the channels.  Its upper bound can be measured
without writing it: two `capbroker serve` daemons (two processes, nothing
shared, so no lock costs) with N/2 sandboxes each, against one daemon with
all N and against the floor (`floor tput open`, one epoll server thread),
interleaved, R rounds.  For each broker run the loop threads' CPU time
(schedstat of each daemon's main thread) is divided by the operations it
served: CPU per operation on the loop, which other load inflates much less
than the rates.

    CB_BIN=bin CB_BUILD=build python3 bench/split.py [N] [ROUNDS]

Prints one JSON line per measurement, then a summary.  Host side, trusted.
"""
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (reads CB_BIN and CB_BUILD)

DUR_MS, REPS, GAP_MS = 1000, 3, 200


def loop_ns(pid):
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def broker_run(serves, n, ws):
    """n sandboxes spread round-robin over the daemons; returns (ops/s per
    window summed, loop ns per op over all windows)."""
    start = time.time_ns() + int(1.5e9) + n * 40 * 1000000
    procs = [bench.spawn(bench.connect_cmd(serves[i % len(serves)].sock, ws,
                                           ["tput", str(start), str(DUR_MS), str(REPS),
                                            str(GAP_MS), f"{ws}/file"]))
             for i in range(n)]
    # Wait for the common start, then read the loops' CPU around the windows.
    time.sleep(max(0, (start - time.time_ns()) / 1e9 - 0.05))
    c0 = [loop_ns(s.p.pid) for s in serves]
    recs = bench.collect(procs, timeout=300)
    c1 = [loop_ns(s.p.pid) for s in serves]
    tot = [0.0] * REPS
    for rec in recs:
        for i, c in enumerate(rec["samples"]):
            tot[i] += c
    ops = sum(tot)
    # The CPU read after collect includes the gaps and the agents' exit:
    # an upper bound on the loop's CPU per operation.
    return [t * 1000.0 / DUR_MS for t in tot], (sum(c1) - sum(c0)) / max(ops, 1)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    wd = tempfile.mkdtemp(prefix="capbroker-split.", dir="/var/tmp")
    ws = os.path.join(wd, "ws")
    os.makedirs(ws)
    with open(os.path.join(ws, "file"), "w") as f:
        f.write("hello from the workspace\n")
    os.chmod(wd, 0o755)
    res = {"floor": [], "one": [], "two": [], "one_loop_ns": [], "two_loop_ns": []}
    serves = []
    try:
        one = [bench.Serve(os.path.join(wd, "s1"))]
        two = [bench.Serve(os.path.join(wd, "s2a")), bench.Serve(os.path.join(wd, "s2b"))]
        serves = one + two
        for r in range(rounds):
            for rec in bench.run([os.path.join(bench.BB, "floor"), "tput", "open", str(n),
                                  str(DUR_MS), str(REPS), ws], timeout=300):
                res["floor"] += rec["samples"]
            order = [("one", one), ("two", two)]
            for tag, sv in order[r % 2:] + order[:r % 2]:
                rates, ns = broker_run(sv, n, ws)
                res[tag] += rates
                res[tag + "_loop_ns"].append(ns)
            print(json.dumps({"round": r, "load": os.getloadavg()[0],
                              **{k: v[-REPS:] if k in ("floor", "one", "two") else v[-1:]
                                 for k, v in res.items()}}), flush=True)
    finally:
        for s in serves:
            s.stop()
        shutil.rmtree(wd, ignore_errors=True)
    med = {k: bench.pct(v, 50) for k, v in res.items() if v}
    print(f"{n} sandboxes, {rounds} rounds, medians: floor {med['floor'] / 1000:.1f} k/s; "
          f"one daemon {med['one'] / 1000:.1f} k/s ({med['one'] / med['floor']:.0%}), "
          f"loop {med['one_loop_ns'] / 1000:.2f} us/op; two daemons "
          f"{med['two'] / 1000:.1f} k/s ({med['two'] / med['floor']:.0%}), "
          f"loops {med['two_loop_ns'] / 1000:.2f} us/op")


if __name__ == "__main__":
    main()
