#!/usr/bin/env bash
# 903-run-exit-reported.sh - a local `capbroker run` of a sandbox without
# served trees (the low tier) is over when its pid 1 reports the agent's
# exit, before the kernel has torn its namespaces down (docs/broker.md,
# "Sandboxes and their life"): the broker writes sandbox.stop and closes
# its log meanwhile, and still waits for the stub before it exits.  So when
# `run` returns, its status is the agent's, the log is complete and no
# process of the sandbox is left.  Without a report (a timeout) the stub's
# exit says, as before.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

t_exit "a low-tier run exits with its agent's status" 3 \
	"$CB" run --state "$T_TMP/st" --id rep-st --tier low -- /bin/sh -c 'exit 3'
t_is "... and nothing of its sandbox is left when it returns" \
	"$(pgrep -f -- "--id rep-st( |\$)" | wc -l)" 0
log="$T_TMP/st/audit.jsonl"
t_match "... its sandbox.stop says the agent's status" \
	"$(grep '"op":"sandbox.stop"' "$log")" '"detail":"exit 3"'
ops=$(grep -o '"op":"\(sandbox\.stop\|broker\.stop\)"\|"ev":"close"' "$log" | tr '\n' ' ')
t_is "... then the broker's stop and the log's close, all in the file" "$ops" \
	'"op":"sandbox.stop" "op":"broker.stop" "ev":"close" '
t_ok "... and the log verifies" "$CTL" --state "$T_TMP/st" audit verify

t_exit "an agent killed by a signal: 128 + the signal" 137 \
	"$CB" run --state "$T_TMP/st2" --tier low -- /bin/sh -c 'kill -9 $$'
t_match "... in its sandbox.stop too" \
	"$(grep '"op":"sandbox.stop"' "$T_TMP/st2/audit.jsonl")" '"detail":"exit 137"'
t_exit "a timed-out agent (no report; its stub's exit says): 124" 124 \
	"$CB" run --tier low --timeout 1 -- /bin/sh -c 'while :; do :; done'

# The report races the namespaces' teardown: many times, never a process
# of the sandbox left behind and always the agent's status.
left=0 bad=0
for i in $(seq 1 20); do
	"$CB" run --tier low --id "rep-$i" -- /bin/sh -c "exit $((i % 7))" >/dev/null 2>&1
	[ $? = $((i % 7)) ] || bad=$((bad + 1))
	left=$((left + $(pgrep -f -- "--id rep-$i( |\$)" | wc -l)))
done
t_is "20 runs: each exited with its agent's status" "$bad" 0
t_is "... and none left a process of its sandbox" "$left" 0
t_done
