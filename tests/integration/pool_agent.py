"""pool_agent.py - an agent (inside a sandbox) for 26-proc-pool.sh: runs a
fixed list of proc.exec tasks over its raw channel, one at a time, a pause
between them so that the broker's warm pool refills, and prints one JSON
line per task (argv, status, stdout, stderr, or the refusal).

  pool_agent.py tasks      the comparison tasks (same list with the pool on
                           and off; the test compares the lines)
  pool_agent.py revoked S  one exec (the pool fills), "WARM", S seconds while
                           the test revokes the token, the same exec again
  pool_agent.py ws F S     cat F (a file in the workspace, which proc.exec
                           shows its child) three times, a pause between the
                           first two; "WARM" and S seconds before the third
                           (the test replaces the workspace then)
"""
import json
import os
import socket
import sys
import time

import msgpack

S = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
S.settimeout(60)
NEXT = [0]

SH = "/usr/bin/dash"
TASKS = [
    # output, error output and exit status are relayed
    ([SH, "-c", "echo out; echo err >&2; exit 3"], None),
    # stdin is the request's data
    (["/usr/bin/cat"], b"hello from stdin\n"),
    # what the program sees of itself: id, environment, directory, limits
    ([SH, "-c", 'read h </etc/hostname; [ "$h" = "$CAPBROKER_SANDBOX" ] && echo id-given; '
      'export -p | grep -v CAPBROKER_SANDBOX; echo pwd=$PWD; ulimit -n; ulimit -v; ulimit -t; '
      'ulimit -f; ulimit -u; echo pid=$$'], None),
    # a task leaves a marker, a file and an environment variable behind...
    ([SH, "-c", "echo $$ >/tmp/marker; echo left >/tmp/leftover; export LEAK=1; echo pid=$$"], None),
    # ... the next one sees none of them, and no other process
    ([SH, "-c", "if [ -e /tmp/marker ] || [ -e /tmp/leftover ]; then echo seen; else echo clean; fi; "
      "echo procs: /proc/[0-9]*; echo leak=${LEAK-none}"], None),
    # the low tier's one exec: a second one fails
    ([SH, "-c", "/usr/bin/true; echo status=$?"], None),
    # /tmp is the sandbox's own, empty, and writable
    ([SH, "-c", "echo tmp: /tmp/*; echo x >/tmp/y && echo wrote"], None),
]


def call(msg):
    NEXT[0] += 1
    msg["id"] = NEXT[0]
    S.send(msgpack.packb(msg, use_bin_type=True))
    while True:
        data, anc, _, _ = S.recvmsg(300000, socket.CMSG_SPACE(16), socket.MSG_CMSG_CLOEXEC)
        if not data:
            raise EOFError("broker closed the channel")
        r = msgpack.unpackb(data, raw=False)
        if r.get("id") == NEXT[0]:
            return r


def exec_(argv, data=None):
    m = {"op": "proc.exec", "argv": argv}
    if data is not None:
        m["data"] = data
    r = call(m)
    if not r.get("ok"):
        return {"argv": argv, "refused": r.get("name")}
    return {"argv": argv, "status": r.get("status"),
            "out": r.get("out", b"").decode(errors="replace"),
            "err": r.get("errout", b"").decode(errors="replace")}


def main():
    pause = float(os.environ.get("POOL_PAUSE", "0.4"))
    exec_(["/usr/bin/true"])        # the first: the pool starts filling
    time.sleep(pause * 2)
    if sys.argv[1] == "tasks":
        for argv, data in TASKS:
            print(json.dumps(exec_(argv, data), sort_keys=True), flush=True)
            time.sleep(pause)
    elif sys.argv[1] == "ws":
        for i in range(3):
            if i == 2:
                print("WARM", flush=True)
                time.sleep(float(sys.argv[3]))
            print(json.dumps(exec_(["/usr/bin/cat", sys.argv[2]]), sort_keys=True), flush=True)
            time.sleep(pause)
    elif sys.argv[1] == "revoked":
        print("WARM", flush=True)
        time.sleep(float(sys.argv[2]))
        print(json.dumps(exec_(["/usr/bin/true"]), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
