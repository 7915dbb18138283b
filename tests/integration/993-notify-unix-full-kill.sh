#!/usr/bin/env bash
# 993-notify-unix-full-kill.sh - red team, fifth pass (2026-12-02 evening): in
# a `capbroker serve`, sandbox A fills its 32 places with blocking AF_UNIX
# connects to a full listener of its own (no SO_SNDTIMEO: each worker
# waits as long as its caller does, 8 more calls left in the kernel, the
# listener unread), then is killed by capctl.  Meanwhile sandbox B's 32
# connects and lookups all end at once and capctl answers; once A is
# killed its workers end within their cut (0.1 s) and give A back: capctl
# sandboxes no longer lists it within 3 s, and the broker stops cleanly
# (sanitizer too: CB_BIN=build-san/bin).  Same namespace and probe as 954.
. "$(dirname "$0")/dns_lib.sh"
. "$(dirname "$0")/admin_lib.sh"
dns_need "AF_UNIX connects filling one sandbox against another in a serve"

dns_files '127.0.0.1 localhost\n10.1.2.3 a.test.invalid\n' \
	'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n'
dns_probe
S="$T_TMP/st"
mkdir -p "$S"
srv_start "$S" || { echo "Bail out! serve did not start: $(cat "$T_TMP/serve.log")"; exit 1; }
"$CB" run --connect "$S/admin.sock" --id rv5a --tier high \
    --grant 'net.connect:*.test.invalid:443' -- python3 -c '
import errno, os, socket, threading, time
name = b"\0rv5-full-%d" % os.getpid()
l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind(name)
l.listen(0)
fill = []
for _ in range(8):
    f = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    f.setblocking(False)
    try:
        f.connect(name)
    except OSError as e:
        if e.errno != errno.EAGAIN:
            raise
        break
    fill.append(f)
def one():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(name)
    except OSError:
        pass
for _ in range(40):
    threading.Thread(target=one, daemon=True).start()
time.sleep(0.5)
print("full", flush=True)
time.sleep(60)' >"$T_TMP/a.out" 2>&1 &
A=$!
_adm_pids+=("$A")
wait_for 100 grep -q full "$T_TMP/a.out" || { echo "Bail out! A never started: $(cat "$T_TMP/a.out")"; exit 1; }
sleep 0.5
nthr() { ls "/proc/$SRV/task" | wc -l; }
busy=$(nthr)
t_ok "A's 32 places are held by broker workers ($busy threads)" test "$busy" -ge 33
t0=$(date +%s%N)
b=$(timeout 30 "$CB" run --connect "$S/admin.sock" --id rv5b --tier high \
    --grant 'net.connect:*.test.invalid:443' -- python3 -c '
import collections, socket, threading
ends = collections.Counter()
lock = threading.Lock()
def one():
    try:
        r = socket.getaddrinfo("a.test.invalid", 443)[0][4][0]
    except socket.gaierror as e:
        r = "gaierror %d" % e.errno
    with lock:
        ends[r] += 1
ts = [threading.Thread(target=one) for _ in range(32)]
for t in ts: t.start()
for t in ts: t.join()
print(" ".join("%s=%d" % kv for kv in sorted(ends.items())))' 2>&1)
ms=$((($(date +%s%N) - t0) / 1000000))
t_is "while sandbox A's AF_UNIX connects fill it, B's 32 lookups all resolve" "$b" "10.1.2.3=32"
t_ok "... in under 4 s ($ms ms: none waited for A's room)" test "$ms" -lt 4000
t0=$(date +%s%N)
"$CTL" --state "$S" sandboxes >"$T_TMP/sbx" 2>&1
ms=$((($(date +%s%N) - t0) / 1000000))
t_ok "capctl answers at once meanwhile ($ms ms) and lists A" grep -q rv5a "$T_TMP/sbx"
"$CTL" --state "$S" kill rv5a >/dev/null 2>&1
wait "$A" 2>/dev/null
gone() { ! "$CTL" --state "$S" sandboxes 2>/dev/null | grep -q rv5a; }
t_ok "A killed with its 32 AF_UNIX connects waiting is gone within 3 s" \
	wait_for 30 gone
idle=$(nthr)
t_ok "... and its workers ended with it ($idle threads left)" test "$idle" -le $((busy - 32))
srv_stop
rc=$?
t_is "the broker stops cleanly" "$rc" 0
t_ok "... with no sanitizer report" sh -c '! grep -qE "Sanitizer|runtime error" "$1"' _ "$T_TMP/serve.log"
t_done
