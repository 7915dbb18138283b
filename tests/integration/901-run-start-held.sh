#!/usr/bin/env bash
# 901-run-start-held.sh - a local `capbroker run` builds a low-tier sandbox
# while its broker opens the state and the log, the agent held before its
# exec (docs/broker.md, "Sandboxes and their life"): the agent runs only
# after its sandbox is on the record, and a broker that cannot open its
# state still fails closed (125) with the agent never started and no
# sandbox process left behind.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

# The log of a run with --state: the broker's start, then the sandbox's,
# then its end, in that order, and the chain verifies.
t_exit "a low-tier run starts its agent" 0 "$CB" run --state "$T_TMP/st" --id held-ok \
	--tier low -- /bin/echo ran
t_is "... which ran once" "$(cat "$T_TMP/out")" "ran"
ops=$(grep -o '"op":"\(broker\.start\|sandbox\.start\|sandbox\.stop\)"' "$T_TMP/st/audit.jsonl" |
	tr '\n' ' ')
t_is "the log has broker.start, sandbox.start, sandbox.stop in order" "$ops" \
	'"op":"broker.start" "op":"sandbox.start" "op":"sandbox.stop" '
t_ok "... and verifies" "$CTL" --state "$T_TMP/st" audit verify

# A state another broker holds: the sandbox was spawned before the state was
# tried, so it must be ended unstarted.
srv_start "$T_TMP/busy"
t_exit "a run on a state in use exits 125" 125 "$CB" run --state "$T_TMP/busy" --id held-busy \
	--tier low -- /bin/echo ran
t_match "... saying why" "$(cat "$T_TMP/err")" "in use by a running broker"
t_is "... and its agent never ran" "$(cat "$T_TMP/out")" ""
t_is "... and no process of its sandbox is left" \
	"$(pgrep -f -- '--id held-busy' | wc -l)" 0
srv_stop

# The medium tier's start needs its grants' tokens (served trees): it is
# spawned after the state is open, and starts all the same.
t_exit "a medium-tier run starts too" 3 "$CB" run --tier medium --workspace "$T_TMP" \
	-- /bin/sh -c 'exit 3'
t_done
