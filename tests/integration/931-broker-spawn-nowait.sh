#!/usr/bin/env bash
# 931-broker-spawn-nowait.sh - review finding: when a start failed after its
# stub was spawned (no pidfd for it, a descriptor that could not be made
# non-blocking), sbx_spawn_start killed the stub and waited for it with a
# blocking waitpid() - on the broker's loop thread for a proc.exec child
# and for a `run --connect` sandbox.  A stub that does not die at once (stuck
# in the kernel, a pid 1 slow to end its sandbox) froze the service of every
# sandbox until it did.  Now sbx_spawn_start leaves the killed stub's pid to
# its caller and the broker reaps it without waiting (broker/reap.c).
#
# fault_shim.c (CB_FAULT_CALL=pidfd_open), preloaded into the broker, makes
# the launcher's pidfd_open() of the matching stub fail and drops the
# SIGKILL that follows.  Before the fix the broker froze until the stub's
# program ended (30 s), and other sandboxes' requests timed out.
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
serve_faulty() {
	CB_FAULT_CALL=pidfd_open CB_FAULT_ARM=$ARM CB_FAULT_MATCH=$3 LD_PRELOAD=$SHIM \
		srv_start "$1" --policy "$2"
}
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
gone() { ! [ -e "/proc/$1" ]; }

# 1. A fresh proc.exec child (the loop thread spawns it).
serve_faulty "$T_TMP/s0" "$T_TMP/p0.conf" "--id a1-x"
agent_start a1 --tier medium --grant proc.exec:/usr/bin/sleep
agent_start a2 --tier medium --grant proc.exec:/usr/bin/true
touch "$ARM"
agent_send a1 "capcall proc.exec -- /usr/bin/sleep 30"
SEQ1=$ASEQ
t_ok "the failure path is taken (no pidfd for the child's stub)" wait_for 100 test ! -e "$ARM"
STUB=$(cat "$ARM.pid")
agent_do a2 "capcall proc.exec -- /usr/bin/true && echo served" 100
t_is "another sandbox is served meanwhile" "$ARC $AOUT" "0 served"
t_ok "... while the child's stub still lives: the loop did not wait for it" alive "$STUB"
agent_wait a1 "$SEQ1" 100
t_match "the request whose child could not be watched is refused" "$ARC $AOUT" \
	"^1 capcall: proc.exec /usr/bin/sleep: "
kill -9 "$STUB"
t_ok "the stub is reaped once it ends (no zombie left)" wait_for 150 gone "$STUB"
agent_stop a1
agent_stop a2
srv_stop

# 2. A `run --connect` sandbox (the loop thread spawns it too): its stub
# ends by itself once the broker closes its status socket (a sandbox does
# not outlive its broker's interest), so this checks that the caller now
# reaps what sbx_spawn_start leaves it, and refuses the start.
rm -f "$ARM.pid"
serve_faulty "$T_TMP/s2" "$T_TMP/p0.conf" "--id c1 "
agent_start a2 --tier medium --grant proc.exec:/usr/bin/true
touch "$ARM"
adm_nofifos "$CB" run --connect "$SRV_STATE/admin.sock" --id c1 -- /usr/bin/sleep 30 \
	>"$T_TMP/c1.out" 2>&1 &
C1=$!
_adm_pids+=("$C1")
t_ok "the failure path is taken (no pidfd for the sandbox's stub)" wait_for 100 test ! -e "$ARM"
STUB=$(cat "$ARM.pid")
wait "$C1"
t_is "the sandbox that could not be watched is refused (exit 125)" "$?" 125
agent_do a2 "capcall proc.exec -- /usr/bin/true && echo served" 100
t_is "another sandbox is served" "$ARC $AOUT" "0 served"
t_ok "the stub is reaped (no zombie left)" wait_for 150 gone "$STUB"
agent_stop a2
srv_stop

# 3. A pooled sandbox (the pool thread spawns it): the loop reaps it.
rm -f "$ARM.pid"
serve_faulty "$T_TMP/s1" "$T_TMP/p1.conf" "--id pooled"
agent_start b1 --tier medium --grant proc.exec:/usr/bin/true
touch "$ARM"
agent_do b1 "capcall proc.exec -- /usr/bin/true && echo served"
t_is "control: the first proc.exec is served (and asks the pool for a sandbox)" "$ARC $AOUT" "0 served"
t_ok "the failure path is taken (no pidfd for the pooled stub)" wait_for 300 test ! -e "$ARM"
STUB=$(cat "$ARM.pid")
t_ok "the pooled stub, its status socket closed, ends and is reaped" wait_for 100 gone "$STUB"
agent_do b1 "capcall proc.exec -- /usr/bin/true && echo served" 100
t_is "proc.exec still works" "$ARC $AOUT" "0 served"
agent_stop b1
t_done
