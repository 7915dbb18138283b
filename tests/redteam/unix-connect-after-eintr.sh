#!/bin/bash
# Red team, fifth pass (2026-12-02 evening), R5-1 (open, low): an agent's
# blocking AF_UNIX connect() to a full listener, interrupted by a signal,
# returns EINTR and (as the kernel's would) should leave the socket
# unconnected; but the broker's worker (brk_nconn_unix_connect) is still in
# its own connect() of that very socket until its next cut (up to 100 ms),
# and when the listener makes room meanwhile it connects the socket behind
# the agent's back: the peer accepts a connection its caller gave up on, and
# a retried connect() (SA_RESTART, PEP 475) fails EISCONN.  Run as root
# after `make`, from the top of the tree: bash tests/redteam/unix-connect-after-eintr.sh
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
ws=$(mktemp -d /tmp/rv5-eintr.XXXXXX)
trap 'rm -rf "$ws"' EXIT
cp "$top/tests/redteam/unix-connect-after-eintr.py" "$ws/t.py"
echo "on the host (the kernel's semantics):"
python3 "$ws/t.py"
bad=0
for i in 1 2 3 4 5 6; do
	out=$(timeout 60 "$top/bin/capbroker" run --tier medium --workspace "$ws" -- python3 "$ws/t.py" 2>&1)
	rc=$?
	echo "sandbox try $i: ${out##*$'\n'}"
	[ $rc -eq 1 ] && bad=$((bad + 1))
done
echo "observed: $bad of 6 interrupted connects connected afterwards (should be: 0)"
[ $bad -eq 0 ]
