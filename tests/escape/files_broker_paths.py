#!/usr/bin/python3
# files_broker_paths.py - escape attempt: broker-served paths stay beneath their grant (symlinks, proc.exec binds, /proc, /sys).
#
# Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
# every try failed in the expected way.  Metadata read by run.sh:
# TIER: high
# EXIT: 0
# OPTS: --grant fs.write:@PATHS@/ws/** --grant fs.write:@PATHS@/stale/** --grant fs.read:@PATHS@/stale/cur/** --grant fs.write:@PATHS@/r/0/** --grant fs.write:@PATHS@/r/1/** --grant fs.write:@PATHS@/r/2/** --grant fs.write:@PATHS@/r/3/** --grant fs.write:@PATHS@/r/4/** --grant fs.write:@PATHS@/r/5/** --grant fs.write:@PATHS@/r/6/** --grant fs.write:@PATHS@/r/7/** --grant fs.write:@PATHS@/r/8/** --grant fs.write:@PATHS@/r/9/** --grant fs.write:@PATHS@/r/10/** --grant fs.write:@PATHS@/r/11/** --grant fs.write:@PATHS@/r/12/** --grant fs.write:@PATHS@/r/13/** --grant fs.write:@PATHS@/r/14/** --grant fs.write:@PATHS@/r/15/** --grant fs.write:@PATHS@/r/16/** --grant fs.read:@PATHS@/ws/** --grant fs.read:@PATHS@/ws/link/secret.txt --grant fs.read:@PATHS@/ws/dirlink --grant proc.exec:/usr/bin/cat --grant proc.exec:/usr/bin/ls --grant fs.read:/proc/** --grant fs.list:/proc/** --grant fs.read:/sys/** --grant fs.list:/sys/**
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
# numeric entry it can guess near its own pid, and sysfs.  Then: rewriting
# the set-uid and set-gid files in its workspace (a root broker kept the bit),
# reading a file of another uid hardlinked into it, moving its granted
# directory stale/cur away and making a new one (the broker kept resolving in
# the moved one), and a rename between the oldest of 16 cached roots and a
# 17th (the eviction closed the fd the rename still used, and the new root
# took its number: the rename acted in the wrong directory).
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

# Set-id files are never opened for writing; the bits stay.
for name, mode in (("suid", 0o4755), ("sgid", 0o2755)):
    r = call("fs.write", path=ws + "/" + name, data=b"pwned", flags=0x02)
    if r.get("ok") is not False:
        escaped("fs.write over the %s file was allowed: %r" % (name, r))
    st = call("fs.stat", path=ws + "/" + name).get("st", {})
    if st.get("mode") != mode or st.get("size") == 5:
        escaped("the %s file changed: %r" % (name, st))
refused("fs.read", ws + "/hl-foreign")

# A root moved away and replaced is resolved again.
stale = paths + "/stale"
r1 = call("fs.stat", path=stale + "/cur/a")
mv = call("fs.rename", path=stale + "/cur", path2=stale + "/old")
mk = call("fs.mkdir", path=stale + "/cur")
r2 = call("fs.stat", path=stale + "/cur/a")
if r1.get("ok") is not True or mv.get("ok") is not True or mk.get("ok") is not True:
    escaped("control: stat/rename/mkdir of stale/cur failed: %r %r %r" % (r1, mv, mk))
elif r2.get("ok") is not False:
    escaped("the moved-away root was still served: %r" % r2)

# 16 roots in use, then a rename from the oldest to a 17th.
for i in range(16):
    call("fs.stat", path="%s/r/%d/x" % (paths, i))
r = call("fs.rename", path=paths + "/r/0/x", path2=paths + "/r/16/y")
gone = call("fs.stat", path=paths + "/r/0/x")
kept = call("fs.stat", path=paths + "/r/16/x")
moved = call("fs.stat", path=paths + "/r/16/y")
if r.get("ok") is not True or gone.get("ok") is not False or kept.get("ok") is not True or \
        moved.get("st", {}).get("size") != len("from-0\n"):
    escaped("rename across 17 roots acted elsewhere: %r / r0/x %r / r16/x %r / r16/y %r"
            % (r, gone, kept, moved))

print("broker paths: %s" % ("ESCAPED" if bad else "every try refused"), flush=True)
sys.exit(1 if bad else 0)
