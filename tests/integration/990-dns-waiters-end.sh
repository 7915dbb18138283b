#!/usr/bin/env bash
# 990-dns-waiters-end.sh - red team, fifth pass (2026-12-02 evening): the
# resolver connects waiting for room (brk_nconn_dns_wait: past a sandbox's
# 8 resolver connections, up to 5 s) when their sandbox ends under them,
# and when the broker ends with them still waiting (brk_notify_stop frees
# them with the sandbox).  Meant for the sanitized build as well
# (CB_BIN=build-san/bin): no leak, no double free, no use after free, and
# the broker neither hangs nor crashes.  Same namespace and probe as 954.
. "$(dirname "$0")/dns_lib.sh"
dns_need "resolver connects waiting when their sandbox ends"

dns_files '127.0.0.1 localhost\n10.1.2.3 a.test.invalid\n' \
	'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n'
dns_probe
S="$T_TMP/st"
mkdir -p "$S"
# 8 held, 40 threads connecting to the resolver (32 counted as waiters, the
# rest left in the kernel, the listener full), then the agent ends at once:
# by SIGKILL of itself ($1 = kill) or by its own exit ($1 = exit).
agent() {
	timeout 30 "$CB_BIN/capbroker" run --state "$S" --tier high \
	    --grant 'net.connect:*.test.invalid:443' -- python3 -c '
import os, signal, socket, sys, threading, time
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
held = [socket.create_connection((ns, 53)) for _ in range(8)]
done = []
def one():
    try:
        socket.create_connection((ns, 53))
    except OSError:
        pass
    done.append(1)
for _ in range(40):
    threading.Thread(target=one, daemon=True).start()
time.sleep(0.5)
print("ending with %d of 40 answered" % len(done), flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
os._exit(3)' "$1" 2>&1
	echo "rc=$?"
}
for how in kill exit; do
	t0=$(date +%s%N)
	out=$(agent "$how")
	ms=$((($(date +%s%N) - t0) / 1000000))
	want=$([ "$how" = kill ] && echo 137 || echo 3)
	t_is "an agent with 32 resolver connects waiting ends ($how): the broker exits as the agent did" \
		"$(printf '%s\n' "$out" | grep -E '^(ending|rc=)' | tr '\n' ' ')" "ending with 0 of 40 answered rc=$want "
	t_ok "... with no sanitizer report" sh -c '! printf "%s" "$1" | grep -qE "Sanitizer|runtime error|LeakSanitizer"' _ "$out"
	t_ok "... within 10 s ($ms ms)" test "$ms" -lt 10000
done
t_done
