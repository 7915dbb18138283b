# mapped_addr_agent.py - the hostile agent of 910: connect() whose sockaddr
# lies in a page of a served file that nothing has read yet, while the
# sandbox's file server waits on the broker's loop for its audit budget
# (opens of a long path flooded by other processes).  The broker reads the
# address out of the agent's memory; if it does so on its loop, the page's
# read waits for the file server, which waits for the loop.
# Usage: mapped_addr_agent.py FLOODERS.  Prints "throttled" once an open
# waits, "connect N errno E" per connect, then "connects done".
import ctypes, mmap, os, socket, sys, time

libc = ctypes.CDLL(None, use_errno=True)
d = "d"
for i in range(3):
    d += "/" + chr(97 + i) * 250	# lines of about 1 KiB: the budget goes fast
os.makedirs(d, exist_ok=True)
long = d + "/f"
open(long, "w").close()
big = os.open("big.bin", os.O_RDONLY)
size = os.fstat(big).st_size
m = mmap.mmap(big, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
kids = []
for k in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        while True:
            try:
                os.close(os.open(long, os.O_RDONLY))
            except OSError:
                pass
    kids.append(pid)
# Until the file server waits for the budget (an open held), at most 30 s.
end = time.monotonic() + 30
while time.monotonic() < end:
    t = time.monotonic()
    os.close(os.open(long, os.O_RDONLY))
    if time.monotonic() - t > 0.05:
        print("throttled", flush=True)
        break
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
for n, off in enumerate(range(0, size, 1 << 20)):
    libc.connect(s.fileno(), ctypes.c_void_p(base + off), 16)
    print("connect", n, "errno", ctypes.get_errno(), flush=True)
for pid in kids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print("connects done", flush=True)
