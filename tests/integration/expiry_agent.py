# expiry_agent.py - run by 136-fs-served-expiry-stall.sh inside a sandbox:
# maps FILE privately, reads every page (the kernel caches them), optionally
# derives a child of the workspace token with a 2 s ttl, waits WAIT seconds
# (the child expires meanwhile), then prints how many of the mapping's pages
# are still in the page cache (mincore): "resident N of M".
import ctypes
import mmap
import sys
import time

sys.path.insert(0, "/capbroker/python")
import capbroker  # noqa: E402

path, derive, wait = sys.argv[1], sys.argv[2], float(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
f = open(path, "rb")
m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
npages = len(m) // 4096
total = 0
for i in range(0, len(m), 4096):
    total += m[i]
if derive != "-":
    capbroker.Client().derive(derive, ttl=2)
print("ready", flush=True)
time.sleep(wait)
vec = (ctypes.c_ubyte * npages)()
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
if libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(len(m)), vec) != 0:
    print("mincore failed", ctypes.get_errno())
    sys.exit(1)
print("resident %d of %d" % (sum(1 for v in vec if v & 1), npages), flush=True)
