#!/usr/bin/env bash
# unix-queued-linger-worker.sh - open (lower), left by F12's fix (951): the
# broker's copy of an agent's AF_UNIX socket is closed on a worker, and a
# lingering TCP socket the agent queued on it holds that worker for the
# linger the agent chose (up to 2^31 s), after the sandbox has ended too:
# at most 32 a sandbox (its places in flight), but summed over sandboxes
# without bound, each keeping a thread and the ended sandbox's memory.
# Run as root from the top of the tree after make:
#   CB_BIN=$PWD/bin CB_BUILD=$PWD/build CB_TOP=$PWD PYTHON=/usr/bin/python3 \
#     bash tests/redteam/unix-queued-linger-worker.sh
# Prints the broker's threads before the agent, after it ended, and what
# it should have seen (as many after as before).
. "$CB_TOP/tests/lib.sh"
. "$CB_TOP/tests/integration/admin_lib.sh"
W="$T_TMP/ws"
mkdir -p "$W"
cp "$CB_TOP/tests/integration/unix_queue_agent.py" "$W/a.py"
chown -R 4248:4248 "$W"
"$PYTHON" -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])' >"$T_TMP/port" &
_adm_pids+=("$!")
wait_for 50 test -s "$T_TMP/port"
PORT=$(cat "$T_TMP/port")
cat >"$T_TMP/p.conf" <<EOT
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**", "net.connect:127.0.0.1:*" ]; }; };
EOT
S="$T_TMP/st"
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start o1 --tier medium --workspace "$W" --grant "net.connect:127.0.0.1:$PORT"
sleep 1
before=$(ls /proc/"$SRV"/task | wc -l)
agent_do o1 "python3 a.py $PORT 3600 20 0" 1200
won=$(printf '%s\n' "$AOUT" | sed -n 's/^won //p')
agent_stop o1
sleep 3
after=$(ls /proc/"$SRV"/task | wc -l)
echo "the broker's threads: $before before, $after after the sandbox ended ($won closes were the broker's)"
echo "expected: $before after (each worker held for the agent's linger, 3600 s, instead)"
srv_stop
