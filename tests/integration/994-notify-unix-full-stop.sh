#!/usr/bin/env bash
# 994-notify-unix-full-stop.sh - red team, fifth pass (2026-12-02 evening): in
# a `capbroker serve`, sandbox A fills its 32 places with blocking AF_UNIX
# connects to a full listener of its own (no SO_SNDTIMEO: each worker
# waits as long as its caller does), and the broker is then stopped
# (SIGTERM): its workers must end with A's processes and be drained
# (brk_work_drain) before the wake pipe closes, the broker stopping
# cleanly and soon, with the sanitizer silent (CB_BIN=build-san/bin).
. "$(dirname "$0")/dns_lib.sh"
. "$(dirname "$0")/admin_lib.sh"
dns_need "a serve stopped while AF_UNIX connects fill a sandbox"

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
srv_stop
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
t_is "the broker, stopped with A's 32 AF_UNIX connects waiting, stops cleanly" "$rc" 0
t_ok "... within 5 s ($ms ms)" test "$ms" -lt 5000
t_ok "... with no sanitizer report" sh -c '! grep -qE "Sanitizer|runtime error" "$1"' _ "$T_TMP/serve.log"
t_done
