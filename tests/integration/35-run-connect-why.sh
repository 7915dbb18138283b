#!/usr/bin/env bash
# 35-run-connect-why.sh - `run --connect` tells its user why the sandbox
# could not be set up (a bind source missing, say), as a local `run` does:
# the broker keeps the stub's one-line reason and sends it with the exit.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

S="$T_TMP/st"
srv_start "$S"
t_exit "a local run with a missing bind source exits 125" 125 \
	"$CB" run --tier high --ro-bind "$T_TMP/missing" -- /bin/true
t_match "... saying which and why" "$(cat "$T_TMP/err")" "bind source $T_TMP/missing: No such file or directory"
t_exit "run --connect with the same bind source exits 125" 125 \
	"$CB" run --connect "$S/admin.sock" --tier high --ro-bind "$T_TMP/missing" -- /bin/true
t_match "... and says the same reason" "$(cat "$T_TMP/err")" "^capbroker: .*bind source $T_TMP/missing: No such file or directory"
t_is "... in one line" "$(wc -l <"$T_TMP/err")" 1
t_exit "a sandbox that starts passes its own exit status through" 3 \
	"$CB" run --connect "$S/admin.sock" --tier high -- /bin/sh -c 'exit 3'
t_is "... with no reason line" "$(cat "$T_TMP/err")" ""
t_done
