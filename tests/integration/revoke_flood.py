# revoke_flood.py - the agent of tests/integration/950: floods its served
# workspace from many threads (opens, reads of files held open, writes to
# one held open, stats and directory reads) and from two processes
# reading mapped files (shared and private), and records, per kind, the
# wall time at which the last operation that succeeded began.  It runs
# until /tmp/stop exists, then prints "last KIND TIME" lines and how the
# mapping processes ended.  A mapping process dies of SIGBUS once its
# pages are gone and the server refuses to read them in again.
import mmap, os, sys, threading, time, signal
kinds = {}
lock = threading.Lock()
stop = False
def ok(k, t):
    with lock:
        kinds[k] = max(kinds.get(k, 0), t)
def opener(name):
    while not stop:
        t0 = time.time()
        try:
            with open(name, "rb") as f:
                f.read(65536)
            ok("open-read", t0)
        except OSError:
            pass
def preader(fd):
    while not stop:
        try:
            t0 = time.time(); os.pread(fd, 4096, 0); ok("pread-open-fd", t0)
            t0 = time.time(); os.pread(fd, 4096, 200000); ok("pread-open-fd", t0)
        except OSError:
            pass
def stat_(name):
    while not stop:
        try:
            t0 = time.time(); os.stat(name); ok("stat", t0)
            t0 = time.time(); os.listdir("."); ok("listdir", t0)
        except OSError:
            pass
def writer(fd):
    while not stop:
        try:
            t0 = time.time(); os.pwrite(fd, b"x" * 100, 0); ok("pwrite-open-fd", t0)
        except OSError:
            pass
fds = [os.open("big%d.bin" % i, os.O_RDONLY) for i in range(4)]
wfd = os.open("w.bin", os.O_RDWR)
# mmap readers: in children, as a SIGBUS kills the process
def mchild(name, shared):
    pid = os.fork()
    if pid == 0:
        fd = os.open(name, os.O_RDONLY)
        m = mmap.mmap(fd, 0, mmap.MAP_SHARED if shared else mmap.MAP_PRIVATE, mmap.PROT_READ)
        out = "/tmp/m.%s.%d" % (name, shared)
        n = len(m)
        while not os.path.exists("/tmp/stop"):
            t0 = time.time()
            for off in range(0, n, 4096):
                _ = m[off]
            with open(out + ".tmp", "w") as f:
                f.write("%f" % t0)
            os.rename(out + ".tmp", out)
        os._exit(0)
    return pid
kids = [mchild("big0.bin", True), mchild("big1.bin", False)]
ths = []
for i in range(4):
    ths.append(threading.Thread(target=opener, args=("big%d.bin" % i,)))
    ths.append(threading.Thread(target=preader, args=(fds[i],)))
ths.append(threading.Thread(target=stat_, args=("big2.bin",)))
ths.append(threading.Thread(target=writer, args=(wfd,)))
for t in ths: t.daemon = True; t.start()
open("/tmp/started", "w").close()
while not os.path.exists("/tmp/stop"):
    time.sleep(0.05)
stop = True
for t in ths: t.join()
st = {}
for k in kids:
    _, s = os.waitpid(k, 0); st[k] = s
for k in sorted(kinds):
    print("last", k, "%f" % kinds[k])
for name in ("big0.bin.1", "big1.bin.0"):
    try:
        print("last mmap-" + name, open("/tmp/m." + name).read())
    except OSError:
        print("last mmap-" + name, "0")
print("kids", st)
