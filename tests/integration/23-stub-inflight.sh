#!/usr/bin/env bash
# 23-stub-inflight.sh - a sandbox starts while other processes of the
# agent's host uid have many descriptors in flight (SCM_RIGHTS not yet
# received).  The kernel counts those per uid and refuses another passing
# (ETOOMANYREFS) while they exceed the sender's RLIMIT_NOFILE: the stub's
# passing of its seccomp listener waits for such a burst to pass instead of
# failing the start (every sandbox of a root broker is uid nobody).
. "$(dirname "$0")/../lib.sh"

if [ "$(id -u)" = 0 ]; then
	AS=(runuser -u nobody --)
else
	AS=()
fi
chmod 0711 "$T_TMP"
mkdir -m 0777 "$T_TMP/pub"
cat >"$T_TMP/p.conf" <<EOT
tiers = { low = { limits = { open_files = 32; }; }; };
EOT
# 200 descriptors in flight for ~1.5 s, sent by the agent's uid: more than
# the sandbox's 32.
"${AS[@]}" "$PYTHON" -c '
import os, socket, sys, time
a, b = socket.socketpair()
fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(200)]
for i in range(0, 200, 10):
    socket.send_fds(a, [b"x"], fds[i:i + 10])
open(sys.argv[1], "w").write("ready\n")
time.sleep(1.5)
' "$T_TMP/pub/ready" &
held=$!
for _ in $(seq 100); do [ -s "$T_TMP/pub/ready" ] && break; sleep 0.05; done
t_ok "the descriptors are in flight" test -s "$T_TMP/pub/ready"
t_ok "a sandbox still starts (its listener waits for the burst)" \
	"$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier low -- /bin/true
wait "$held"
t_done
