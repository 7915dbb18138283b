#!/usr/bin/env bash
# 934-run-relay-nowait.sh - review finding: `capbroker run` relayed the
# agent's stdout and stderr to its own with blocking writes on the loop
# thread, which is its broker's.  When the reader of run's output stopped
# reading (a pager, a stopped terminal, a slow pipe) and the pipe filled,
# the broker stopped with it: the agent's requests went unanswered, and
# the tick (expiries) and the file server's grant updates waited.  Now the
# relay writes without blocking (a non-blocking reopening of a pipe or
# terminal, MSG_DONTWAIT on a socket) and holds what does not go while it
# stops reading the agent's pipe: the back-pressure reaches the agent only.
#
# The agent writes 1 MB to stdout from one thread (it blocks: run's stdout
# is a FIFO nobody reads yet) and pings the broker from another.  Before the
# fix the ping was answered only once the reader started reading.
. "$(dirname "$0")/../lib.sh"

AGENT='
import sys, threading, time, capbroker
def flood():
    sys.stdout.buffer.write(b"x" * 1000000)
    sys.stdout.flush()
t = threading.Thread(target=flood, daemon=True)
t.start()
time.sleep(0.5)
c = capbroker.Client()
c.ping()
sys.stderr.write("ping answered\n")
sys.stderr.flush()
t.join()
'
mkfifo "$T_TMP/out"
# The reader opens the FIFO at once but reads only once "$T_TMP/go" exists.
( exec 7<"$T_TMP/out"; while [ ! -e "$T_TMP/go" ]; do sleep 0.05; done
  cat <&7 | wc -c >"$T_TMP/count" ) &
READER=$!
"$CB_BIN/capbroker" run --state "$T_TMP/st" -- /usr/bin/python3 -c "$AGENT" \
	>"$T_TMP/out" 2>"$T_TMP/err" &
RUN=$!
t_ok "the agent's request is answered while run's output waits for a reader" \
	bash -c 'for i in $(seq 200); do grep -q "ping answered" "$1" && exit 0; sleep 0.05; done; exit 1' \
	- "$T_TMP/err"
touch "$T_TMP/go"
wait "$RUN"
t_is "the agent exits 0" "$?" 0
wait "$READER"
t_is "its output arrives whole once it is read (1000000 bytes)" "$(cat "$T_TMP/count")" 1000000
t_is "... and its stderr" "$(cat "$T_TMP/err")" "ping answered"

# The same with the agent's stderr as the stuck stream (stdout a file).
AGENT2="${AGENT//stdout/stderr}"
AGENT2="${AGENT2//sys.stderr.write(\"ping answered\\n\")/print(\"ping answered\", flush=True)}"
rm -f "$T_TMP/go"
( exec 7<"$T_TMP/out"; while [ ! -e "$T_TMP/go" ]; do sleep 0.05; done
  cat <&7 | wc -c >"$T_TMP/count" ) &
READER=$!
"$CB_BIN/capbroker" run --state "$T_TMP/st" -- /usr/bin/python3 -c "$AGENT2" \
	>"$T_TMP/out2" 2>"$T_TMP/out" &
RUN=$!
t_ok "stderr: the request is answered while it waits for a reader" \
	bash -c 'for i in $(seq 200); do grep -q "ping answered" "$1" && exit 0; sleep 0.05; done; exit 1' \
	- "$T_TMP/out2"
touch "$T_TMP/go"
wait "$RUN"
t_is "the agent exits 0" "$?" 0
wait "$READER"
t_is "its stderr arrives whole (1000000 bytes)" "$(cat "$T_TMP/count")" 1000000
t_done
