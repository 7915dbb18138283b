#!/usr/bin/env bash
# 93-broker-reap-nowait.sh - review finding: after a failure that follows a
# stub's spawn (an event that cannot be made, a failed hand-over), the
# broker killed the stub and waited for it with a blocking waitpid() on its
# loop thread.  A stub that does not die at once (stuck in the kernel, a pid
# 1 slow to end its sandbox) froze the service of every sandbox until it
# did.  Now such a stub is reaped without waiting (broker/reap.c).
#
# fault_shim.c, preloaded into the broker, makes the event on the stub's
# pidfd fail (the failure path) and drops the SIGKILL that follows (the stub
# that will not die).  Before the fix: a fresh proc.exec child's stub froze
# the broker until its program ended, a pooled one's for good.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

shim_build fault_shim
for n in 0 1; do
	cat >"$T_TMP/p$n.conf" <<EOT
defaults = { pool_size = $n; };
tiers = { medium = { ceiling = [ "proc.exec:/usr/bin/sleep", "proc.exec:/usr/bin/true" ]; }; };
EOT
done
ARM="$T_TMP/arm"
# serve_faulty STATE POLICY MATCH: a broker with the shim, for stubs whose
# command line contains MATCH.
serve_faulty() {
	CB_FAULT_ARM=$ARM CB_FAULT_MATCH=$3 LD_PRELOAD=$SHIM srv_start "$1" --policy "$2"
}
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
gone() { ! [ -e "/proc/$1" ]; }

# 1. A fresh proc.exec child whose exit cannot be watched.
serve_faulty "$T_TMP/s0" "$T_TMP/p0.conf" "--id a1-x"
agent_start a1 --tier medium --grant proc.exec:/usr/bin/sleep
agent_start a2 --tier medium --grant proc.exec:/usr/bin/true
touch "$ARM"
agent_send a1 "capcall proc.exec -- /usr/bin/sleep 30"
SEQ1=$ASEQ
t_ok "the failure path is taken (the event on the child's pidfd fails)" wait_for 100 test ! -e "$ARM"
STUB=$(cat "$ARM.pid")
agent_do a2 "capcall proc.exec -- /usr/bin/true && echo served" 100
t_is "another sandbox is served meanwhile" "$ARC $AOUT" "0 served"
t_ok "... while the child's stub still lives (its program runs 30 s): the loop did not wait for it" \
	alive "$STUB"
agent_wait a1 "$SEQ1" 100
t_match "the request whose child could not be watched is refused (out of memory)" "$ARC $AOUT" "^1 capcall: proc.exec /usr/bin/sleep: out of memory"
# It ends (the kill the shim dropped, sent now): the tick reaps it.
kill -9 "$STUB"
t_ok "the stub is reaped once it ends (no zombie left)" wait_for 150 gone "$STUB"
agent_stop a1
agent_stop a2
srv_stop

# 2. A pooled sandbox whose exit cannot be watched: its stub waits for a
# hand-over that never comes (before the fix the broker waited for good).
serve_faulty "$T_TMP/s1" "$T_TMP/p1.conf" "--id pooled"
agent_start b1 --tier medium --grant proc.exec:/usr/bin/true
agent_start b2 --tier medium --grant proc.exec:/usr/bin/true
rm -f "$ARM.pid"
touch "$ARM"
agent_do b1 "capcall proc.exec -- /usr/bin/true && echo served"
t_is "control: the first proc.exec is served (and asks the pool for a sandbox)" "$ARC $AOUT" "0 served"
t_ok "the failure path is taken (the event on the pooled stub's pidfd fails)" wait_for 300 test ! -e "$ARM"
STUB=$(cat "$ARM.pid")
agent_do b2 "capcall tokens >/dev/null && echo served" 100
t_is "another sandbox is served meanwhile" "$ARC $AOUT" "0 served"
t_ok "the pooled stub, its status socket closed, ends and is reaped" wait_for 100 gone "$STUB"
agent_do b1 "capcall proc.exec -- /usr/bin/true && echo served" 100
t_is "proc.exec still works (the pool refills or a fresh sandbox is built)" "$ARC $AOUT" "0 served"
agent_stop b1
agent_stop b2
t_done
