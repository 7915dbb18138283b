#!/usr/bin/env bash
# 953-notify-connect-burst.sh - many connect() calls at once, as parallel
# downloaders and test suites make them: a sandbox has 32 mediated
# connects in flight at most, and the 33rd used to fail with EAGAIN, which
# a blocking TCP connect() never returns and ordinary programs take as
# fatal (11 of 64 threads connecting at once, 64 of 200, failed).  Now
# the broker stops reading the sandbox's notifications while its places
# are taken, and the calls wait in the kernel until one is free; a
# blocking AF_UNIX connect to a full listener waits as the kernel's does
# (its SO_SNDTIMEO, then EAGAIN), its worker freed once the call is gone.
. "$(dirname "$0")/../lib.sh"
W="$T_TMP/ws"; mkdir -p "$W"
cat >"$T_TMP/p.conf" <<EOT
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**", "net.connect:127.0.0.1:*" ]; }; };
EOT
cat >"$W/burst.py" <<'EOT'
# burst.py PORT N MODE: N connects at once (threads; non-blocking sockets
# polled; threads to a full AF_UNIX listener, each with a 1 s
# SO_SNDTIMEO); prints how many ended in each way.
import collections, errno, select, socket, struct, sys, threading, time
port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ends = collections.Counter()
lock = threading.Lock()
def name(e):
    return errno.errorcode.get(e, str(e)) if e else "ok"
def together(one):
    go = threading.Barrier(n)
    def run():
        go.wait()
        one()
    ts = [threading.Thread(target=run) for _ in range(n)]
    for t in ts: t.start()
    for t in ts: t.join()
if mode == "threads":
    def tcp():
        s = socket.socket()
        e = s.connect_ex(("127.0.0.1", port))
        with lock:
            ends[name(e)] += 1
        s.close()
    together(tcp)
elif mode == "unix":
    # The kernel's answer after a blocking connect's SO_SNDTIMEO is EAGAIN
    # (and not before); a TCP connect made meanwhile still connects.
    full = b"\0cb-burst-full-%d" % port
    l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    l.bind(full)
    l.listen(0)
    fill = []
    for _ in range(4):
        f = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        f.setblocking(False)
        try:
            f.connect(full)
        except OSError:
            pass
        fill.append(f)
    def unix():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 1, 0))
        t0 = time.monotonic()
        e = s.connect_ex(full)
        late = time.monotonic() - t0 >= 0.9
        with lock:
            ends[name(e) + ("" if late else "-early")] += 1
    th = threading.Thread(target=together, args=(unix,))
    th.start()
    time.sleep(0.3)
    t = socket.socket()
    ends["tcp-" + name(t.connect_ex(("127.0.0.1", port)))] += 1
    th.join()
else:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.setblocking(False)
        e = s.connect_ex(("127.0.0.1", port))
        if e not in (0, errno.EINPROGRESS):
            ends[name(e)] += 1
            socks.remove(s)
    for s in socks:
        select.select([], [s], [], 10)
        ends[name(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))] += 1
print(" ".join("%s=%d" % kv for kv in sorted(ends.items())))
EOT
P=$($PYTHON -c 'import socket
s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
$PYTHON -c "
import socket
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1',$P)); s.listen(1024)
while True:
    c,_=s.accept(); c.close()
" &
SRVPID=$!
trap 'kill $SRVPID 2>/dev/null; t_cleanup' EXIT
for _ in $(seq 100); do
	[ -n "$(ss -Hltn "sport = :$P")" ] && break
	sleep 0.1
done
burst() {
	"$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier medium --workspace "$W" \
		--grant "net.connect:127.0.0.1:$P" -- /usr/bin/python3 burst.py "$@"
}
t_is "200 threads connecting at once all connect" "$(burst "$P" 200 threads)" "ok=200"
t_is "150 non-blocking connects begun at once all connect" "$(burst "$P" 150 sockets)" "ok=150"
# Still judged, each of them: a port the grant does not name.
t_is "... and 100 at once to a port not granted are all refused" \
	"$(burst "$((P == 65535 ? P - 1 : P + 1))" 100 threads)" "EACCES=100"
t_is "40 threads to a full AF_UNIX listener time out as the kernel's connect does; TCP still connects" \
	"$(burst "$P" 40 unix)" "EAGAIN=40 tcp-ok=1"
# curl's own parallel transfers, curl added to the built-in exec list by
# the policy's exec_add (the rest of the list kept: sort and uniq run), the
# host by ceiling_add (the workspace's own tokens kept: it writes there).
command -v curl >/dev/null && [ -x /usr/bin/curl ] && {
	H=$($PYTHON -c 'import socket
s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	(cd "$W" && exec $PYTHON -m http.server "$H" --bind 127.0.0.1 >/dev/null 2>&1) &
	HTTPPID=$!
	trap 'kill $SRVPID $HTTPPID 2>/dev/null; t_cleanup' EXIT
	for _ in $(seq 100); do
		[ -n "$(ss -Hltn "sport = :$H")" ] && break
		sleep 0.1
	done
	cat >"$T_TMP/p2.conf" <<EOT
tiers = { medium = { ceiling_add = [ "net.connect:127.0.0.1:*" ]; exec_add = [ "/usr/bin/curl" ]; }; };
EOT
	urls=$(for i in $(seq 40); do printf -- '-o /dev/null http://127.0.0.1:%s/burst.py?%d ' "$H" "$i"; done)
	out=$("$CB_BIN/capbroker" run --policy "$T_TMP/p2.conf" --tier medium --workspace "$W" \
		--grant "net.connect:127.0.0.1:$H" -- /bin/sh -c \
		"curl -sS -Z --parallel-max 40 -w '%{http_code}\\n' $urls | sort | uniq -c >out.txt; cat out.txt" 2>&1)
	t_match "curl, added by exec_add, makes 40 transfers at once (the tier's other tools and its workspace kept)" \
		"$out" '^ *40 200$'
}
t_done
