#!/usr/bin/env bash
# 950-fs-served-revoke-flood.sh - a revocation bites at once on a served
# workspace under load: while the agent floods the mount from ten threads
# (new opens, reads of files it holds open, writes to one, stats,
# directory reads) and two processes read files they mapped (shared and
# private), capctl revoke of its workspace token must leave no operation
# begun after it returned succeeding, whichever kind: the snapshot of the
# grants is rebuilt before the answer, and the cached and mapped pages are
# dropped before it too (docs/threat-model.md).  Red team, 2026-12-02
# (third pass): held.  Wall times inside the sandbox and outside are one
# clock (no time namespace for CLOCK_REALTIME).  Needs root (the broker
# mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "a revocation under a flood of the served workspace" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W"
for i in 0 1 2 3; do head -c 300000 /dev/urandom >"$W/big$i.bin"; done
head -c 4096 /dev/zero >"$W/w.bin"
cp "$CB_TOP/tests/integration/revoke_flood.py" "$W/flood.py"
chown -R 4248:4248 "$W"

S="$T_TMP/st"
srv_start "$S"
agent_start r1 --tier medium --workspace "$W"
ID=$("$CTL" --state "$S" --json list --sandbox r1 | jget 'd[0]["id"]')
agent_do r1 "python3 flood.py >/tmp/flood.out 2>&1 & for i in \$(seq 100); do [ -e /tmp/started ] && break; sleep 0.1; done; ls /tmp"
t_match "the flood runs" "$AOUT" "started"
sleep 2
"$CTL" --state "$S" revoke "$ID" >"$T_TMP/revoke.out" 2>&1
REVOKED=$(date +%s.%N)
t_ok "capctl revoke succeeded" grep -q "revoked" "$T_TMP/revoke.out"
sleep 3
agent_do r1 "touch /tmp/stop; wait; cat /tmp/flood.out" 600
echo "$AOUT" | sed 's/^/# /'
for k in open-read pread-open-fd pwrite-open-fd stat listdir mmap-big0.bin.1 mmap-big1.bin.0; do
	last=$(echo "$AOUT" | awk -v k="$k" '$1 == "last" && $2 == k { print $3 }')
	t_ok "$k succeeded before the revocation" awk -v l="${last:-0}" 'BEGIN { exit !(l > 0) }'
	t_ok "... and none begun after it returned" \
		awk -v l="${last:-0}" -v r="$REVOKED" 'BEGIN { exit !(l < r) }'
done
t_match "both mapping processes died of SIGBUS" "$AOUT" "kids \{[0-9]+: 7, [0-9]+: 7\}"
agent_stop r1
srv_stop
t_ok "the log verifies" "$CTL" --state "$S" audit verify
t_done
