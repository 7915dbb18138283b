#!/usr/bin/env bash
# 47-client-timeout.sh - clients never wait forever for a broker that does
# not answer (stopped, wedged): capcall (the C library) and the Python
# module give up after their timeout with the contract's 75 / RequestExpired
# ('timed-out'); a late reply does not confuse the next call; a SIGSTOPped
# broker is the real case.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

# A "broker" that reads requests and never answers: capcall on the other end.
cat >"$T_TMP/silent.py" <<'EOF2'
import os, socket, subprocess, sys, time
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
env = dict(os.environ, CAPBROKER_FD=str(b.fileno()), CAPBROKER_TIMEOUT="1")
t0 = time.monotonic()
p = subprocess.run([sys.argv[1], "fs.stat", "/etc/hostname"], pass_fds=[b.fileno()], env=env,
                   capture_output=True, text=True, timeout=30)
print("rc=%d secs=%.1f err=%s" % (p.returncode, time.monotonic() - t0, p.stderr.strip()))
EOF2
out=$("$PYTHON" "$T_TMP/silent.py" "$CB_BIN/capcall")
t_match "capcall against a silent broker exits 75" "$out" "^rc=75 "
t_match "... after about its timeout (1 s), not forever" "$out" "secs=(1|2)\."
t_match "... saying the broker did not answer" "$out" "did not answer"

cat >"$T_TMP/silent_py.py" <<'EOF2'
import socket, sys, time, threading
sys.path.insert(0, sys.argv[1])
import capbroker, msgpack
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
cb = capbroker.Client(fd=b.detach(), timeout=1)
t0 = time.monotonic()
try:
    cb.ping(); print("answered?")
except capbroker.RequestExpired as e:
    print("expired name=%s code=%s secs=%.1f" % (e.name, e.code, time.monotonic() - t0))
# the late reply to the first ping, then the answer to a second one
first = msgpack.unpackb(a.recv(65536))
def answer():
    second = msgpack.unpackb(a.recv(65536))
    a.send(msgpack.packb({"id": first["id"], "ok": True}))
    a.send(msgpack.packb({"id": second["id"], "ok": True}))
threading.Thread(target=answer).start()
cb.ping(); print("second call ok")
EOF2
out=$("$PYTHON" "$T_TMP/silent_py.py" "$CB_TOP/client/python" 2>&1)
t_match "Python: a silent broker raises RequestExpired('timed-out')" "$out" "expired name=timed-out code=-10 secs=1\."
t_match "... and a late reply does not break the next call" "$out" "second call ok"

# The real thing: a SIGSTOPped broker.
W="$T_TMP/ws"; S="$T_TMP/st"; mkdir -p "$W"; echo x >"$W/f"
srv_start "$S"
agent_start a1 --tier medium --workspace "$W" --grant "fs.read:$W/**"
kill -STOP "$SRV"
agent_do a1 "CAPBROKER_TIMEOUT=1 capcall fs.read $W/f" 100
t_is "capcall against a SIGSTOPped broker: 75" "$ARC" 75
kill -CONT "$SRV"
# The late reply to the call that gave up is still on the channel: the
# next call reads it and fails once (a reply to an id it never sent);
# the one after works.
agent_do a1 "capcall fs.read $W/f >/dev/null 2>&1; capcall fs.read $W/f"
t_is "... and once it continues, calls work again" "$AOUT" x
t_done
