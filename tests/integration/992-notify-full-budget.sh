#!/usr/bin/env bash
# 992-notify-full-budget.sh - red team, fifth pass (2026-12-02 evening):
# the audit budget's pause meeting the full state.  64 threads connect at
# once, half of them to addresses no token covers (each an audited denial,
# on distinct ports so none is coalesced: past a burst of 20 the sandbox is
# throttled, the listener paused), half to a granted listener (waiting in
# flight); the listener is both paused and full while they drain.  Every
# call must end with its answer, and a connect made afterwards must work:
# the pause and brk_notify_put each re-arm the listener, and neither may
# leave it unread.
. "$(dirname "$0")/../lib.sh"
W="$T_TMP/ws"; mkdir -p "$W"
cat >"$T_TMP/p.conf" <<EOT
defaults = { audit_budget = 5; audit_burst = 20; audit_throttle_max = 20; };
tiers = { medium = { ceiling_add = [ "net.connect:127.0.0.1:*" ]; }; };
EOT
cat >"$W/bud.py" <<'EOT'
import collections, errno, socket, sys, threading, time
port = int(sys.argv[1])
ends = collections.Counter(); lock = threading.Lock()
go = threading.Barrier(64)
def one(i):
    go.wait()
    s = socket.socket()
    s.settimeout(25)
    if i % 2:
        e = s.connect_ex(("127.0.0.%d" % (2 + i), port + i))
    else:
        e = s.connect_ex(("127.0.0.1", port))
    with lock:
        ends[errno.errorcode.get(e, "ok") if e else "ok"] += 1
    s.close()
ts = [threading.Thread(target=one, args=(i,)) for i in range(64)]
for t in ts: t.start()
for t in ts: t.join()
s = socket.socket(); s.settimeout(25)
last = s.connect_ex(("127.0.0.1", port))
print(" ".join("%s=%d" % kv for kv in sorted(ends.items())), "then", errno.errorcode.get(last, "ok") if last else "ok")
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
for k in 1 2 3; do
	t0=$(date +%s%N)
	out=$(timeout 60 "$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier medium --workspace "$W" \
	    --grant "net.connect:127.0.0.1:$P" -- python3 "$W/bud.py" "$P" 2>&1)
	ms=$((($(date +%s%N) - t0) / 1000000))
	t_is "run $k: 32 denials past the budget and 32 granted connects at once all end, then one more connects ($ms ms)" \
		"$out" "EACCES=32 ok=32 then ok"
done
t_done
