#!/usr/bin/env bash
# 910-net-mediated-mapped-addr.sh - red team: a mediated connect()'s
# address is copied out of the agent's memory, and the agent chooses the
# pages.  One in a served file nothing has read yet is read in by the
# sandbox's own file server; while that server waited on the loop for the
# sandbox's audit budget (a flood of opens), the loop's copy waited for
# the server: a deadlock no timeout ended, every sandbox and the admin
# socket unserved until the broker was killed (2 of 2 runs before the
# fix; the loop's stack in filemap_fault under process_vm_readv).  Now the
# copy runs on a worker (broker/notify.c, brk_nconn_read_work): the
# other sandbox is served, capctl answers, and the agent's connects are
# answered too once the server goes on.  Needs root (the broker mounts
# FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "a mediated connect's address in a served file's page" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws" W2="$T_TMP/ws2"
mkdir -p "$W" "$W2"
# 64 pages a MiB apart that the sandbox's mount has never read
head -c 64M /dev/zero >"$W/big.bin"
cp "$CB_TOP/tests/integration/mapped_addr_agent.py" "$W/a.py"
echo other >"$W2/o.txt"
chown -R 4248:4248 "$W" "$W2"
# A smaller burst, so that the flood reaches the budget in a second, not in
# many (a sanitized broker serves it slowly), and a slow refill, so that a
# throttled open waits long enough for the agent to see it (at the default
# 1 MiB/s the waits were short enough that one run in three never saw one
# over 50 ms in 30 s); well under audit_throttle_max's 30 s for the test.
cat >"$T_TMP/p.conf" <<EOT
defaults = { audit_bytes = "128K"; audit_bytes_burst = "4M"; };
EOT
S="$T_TMP/st"
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start r1 --tier medium --workspace "$W"
agent_start o1 --tier medium --workspace "$W2"
agent_send r1 "python3 a.py 4"
t_ok "the hostile agent's file server waits for its budget" \
	wait_for 400 grep -q '^throttled' "$T_TMP/r1.out"
t_ok "... and it calls connect() with an address in an unread page" \
	wait_for 100 grep -q '^connect 0 ' "$T_TMP/r1.out"
# The broker's loop: another sandbox's request over its channel, capctl
agent_do o1 "capcall tokens >/dev/null && cat o.txt" 150
t_is "another sandbox is served through the broker's loop meanwhile" "$ARC/$AOUT" "0/other"
t_ok "capctl answers" timeout 10 "$CTL" --state "$S" sandboxes
t_ok "every connect of the hostile agent is answered" \
	wait_for 600 grep -q '^connects done' "$T_TMP/r1.out"
grep -c '^connect ' "$T_TMP/r1.out" | sed 's/^/# connects answered: /'
# A wedged broker ends its clients never: kill it before waiting for them.
timeout 10 "$CTL" --state "$S" status >/dev/null 2>&1 || srv_kill9
agent_stop o1
agent_do r1 true 100
agent_stop r1
srv_stop
t_ok "the log verifies" "$CTL" --state "$S" audit verify
t_done
