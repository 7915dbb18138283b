#!/usr/bin/python3
# files_broker_paths.py - escape attempt: broker-served paths stay beneath their grant (symlinks, proc.exec binds, /proc, /sys).
#
# Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
# every try failed in the expected way.  Metadata read by run.sh:
# TIER: high
# EXIT: 0
# OPTS: --grant fs.read:@PATHS@/ws/** --grant fs.read:@PATHS@/ws/link/secret.txt --grant fs.read:@PATHS@/ws/dirlink --grant proc.exec:/usr/bin/cat --grant proc.exec:/usr/bin/ls --grant fs.read:/proc/** --grant fs.list:/proc/** --grant fs.read:/sys/** --grant fs.list:/sys/**
# ARGS: @PATHS@
#
# run.sh prepares PATHS/ws with link -> PATHS/outside and dirlink -> the same
# directory, which holds secret.txt (TOPSECRET).  The agent holds fs.read on
# the workspace, on the file through the link and on the link itself (all
# inside the tier's ceiling), and proc.exec of cat and ls.  It tries: the
# broker's own fs.read through the link; proc.exec of cat/ls on those paths,
# which bind the held fs.read roots into the tool's sandbox (they were bound
# by path string, following the link: issue 10, hole 1); and with fs.read and
# fs.list on /proc and /sys, the broker's own /proc (its memory holds the
# signing key): listing the processes, reading /proc/1 and /proc/self, every
# numeric entry it can guess near its own pid, and sysfs.
import os
import socket
import sys

import msgpack

bad = 0
paths = sys.argv[1]
ws = paths + "/ws"
sock = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
seq = 0


def escaped(what):
    global bad
    bad += 1
    print("ESCAPE:", what, flush=True)


def call(op, **fields):
    """One request; a descriptor in the reply is dropped (not received)."""
    global seq
    seq += 1
    fields.update(id=seq, op=op)
    sock.send(msgpack.packb(fields, use_bin_type=True))
    return msgpack.unpackb(sock.recv(300000), raw=False)


def refused(op, path):
    r = call(op, path=path)
    if r.get("ok") is not False:
        escaped("%s %s: served %r" % (op, path, r)[:300])


def execute(argv):
    r = call("proc.exec", argv=argv)
    return r.get("out", b"") if r.get("ok") is not False else b""


refused("fs.read", ws + "/link/secret.txt")
refused("fs.list", ws + "/dirlink")
for argv in (["/usr/bin/cat", ws + "/link/secret.txt"], ["/usr/bin/cat", ws + "/dirlink/secret.txt"],
             ["/usr/bin/ls", ws + "/dirlink/"], ["/usr/bin/ls", ws + "/link/"]):
    out = execute(argv)
    if b"TOPSECRET" in out or b"secret.txt" in out:
        escaped("proc.exec %r showed the symlink's target: %r" % (argv, out[:80]))
out = execute(["/usr/bin/cat", ws + "/ok.txt"])
if out != b"wsfile\n":
    escaped("control: proc.exec of a real file in the grant printed %r" % out[:80])

refused("fs.list", "/proc")
refused("fs.list", "/sys")
refused("fs.read", "/sys/kernel/uevent_seqnum")
for p in ("/proc/1/status", "/proc/1/environ", "/proc/self/status", "/proc/thread-self/status",
          "/proc/self/mem", "/proc/kcore", "/proc/sys/kernel/hostname"):
    refused("fs.read", p)
    refused("fs.stat", p)
# The broker is a near relative of our own host pid: try a window of pids.
for pid in range(1, 400):
    refused("fs.read", "/proc/%d/cmdline" % pid)

print("broker paths: %s" % ("ESCAPED" if bad else "every try refused"), flush=True)
sys.exit(1 if bad else 0)
