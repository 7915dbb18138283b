#!/usr/bin/env bash
# 954-net-dns-burst.sh - many lookups at once, as a parallel fetcher or a
# thread pool makes them: glibc opens a TCP connection to the resolver per
# lookup (use-vc), and a sandbox may hold 8 resolver connections; the 9th
# used to fail at once with EAGAIN, which glibc reports as a temporary
# failure in name resolution (48 of 64 threads failed).  Now it waits for
# one of the 8 to close (up to 5 s).  Runs in a mount and network
# namespace of its own (dns_lib.sh), the name in that namespace's
# /etc/hosts.
. "$(dirname "$0")/dns_lib.sh"
dns_need "lookups at once past the resolver connections"

dns_files '127.0.0.1 localhost\n10.1.2.3 a.test.invalid\n' \
	'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n'
dns_probe
S="$T_TMP/st"
mkdir -p "$S"
lookups() {
	"$CB_BIN/capbroker" run --state "$S" --tier high --grant 'net.connect:*.test.invalid:443' -- python3 -c '
import collections, socket, sys, threading
n = int(sys.argv[1])
ends = collections.Counter()
lock = threading.Lock()
go = threading.Barrier(n)
def one():
    go.wait()
    try:
        r = sorted({a[4][0] for a in socket.getaddrinfo(sys.argv[2], 443)})
        r = ",".join(r)
    except socket.gaierror as e:
        r = "gaierror %d" % e.errno
    with lock:
        ends[r] += 1
ts = [threading.Thread(target=one) for _ in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join("%s=%d" % kv for kv in sorted(ends.items())))' "$@" 2>&1
}
t_is "64 threads looking a granted name up at once all get its address" \
	"$(lookups 64 a.test.invalid)" "10.1.2.3=64"
t_is "... and 32 looking up a name no token covers all get NXDOMAIN (EAI_NONAME), none a temporary failure" \
	"$(lookups 32 b.other.invalid)" "gaierror -2=32"
# Eight connections held open by the agent: a lookup then waits its 5 s
# for one of them to close, and fails as a temporary failure (EAI_AGAIN).
out=$("$CB_BIN/capbroker" run --state "$S" --tier high --grant 'net.connect:*.test.invalid:443' -- python3 -c '
import socket, time
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
held = [socket.create_connection((ns, 53)) for _ in range(8)]
t0 = time.monotonic()
try:
    socket.getaddrinfo("a.test.invalid", 443)
    r = "resolved"
except socket.gaierror as e:
    r = "gaierror %d" % e.errno
print(r, "late" if time.monotonic() - t0 >= 4.5 else "early")' 2>&1)
t_is "a lookup past 8 resolver connections held open waits 5 s, then is a temporary failure" \
	"$out" "gaierror -3 late"
t_done
