#!/usr/bin/env bash
# 973-run-request-waits-said.sh - a `capbroker run` whose stdin is not a
# terminal (a script, CI, an agent host) decides elevation requests by
# administrator (--approve admin is its default then), and now says so on
# its stderr when one arrives: which request, for what, for how long, and
# the capctl command that decides it, with the admin socket's path.
# Before, nothing was said: a run without --state keeps that socket in a
# temporary directory no one was told of, so `capcall request` waited the
# policy's full request expiry (300 s by default) and then said "no one
# decided in time" (tried: 5 minutes for a new user's first request).  The
# decision itself is unchanged: only an administrator's approve grants.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"
CTL="$CB_BIN/capctl"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "a waiting request is announced by run" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W"
chown 4264:4264 "$W"
CAP="proc.exec:$W/prog"

timeout 60 "$CB" run --tier medium --workspace "$W" -- /bin/sh -c \
	"capcall request '$CAP' --ttl 60 --reason 'run what I built'; echo rc=\$?" \
	</dev/null >"$T_TMP/out" 2>"$T_TMP/err" &
RUN=$!
for _ in $(seq 100); do grep -q 'waits for an administrator' "$T_TMP/err" && break; sleep 0.1; done
t_match "run says a request waits for an administrator" "$(cat "$T_TMP/err")" \
	"^capbroker: request 1 of sandbox sbx-[0-9a-f]+ for $CAP waits for an administrator \(300 s, then it is denied\)"
t_match "... and the command that decides it" "$(cat "$T_TMP/err")" \
	"capctl --socket /[^ ]+/admin.sock approve 1 \(or deny 1\)"
SOCK=$(sed -n 's/.*capctl --socket \([^ ]*\) approve.*/\1/p' "$T_TMP/err")
t_is "the agent is still waiting" "$(cat "$T_TMP/out")" ""
t_is "that command approves it" "$("$CTL" --socket "$SOCK" approve 1 2>&1)" "approved request 1"
wait "$RUN"
t_match "... and the agent has its token" "$(cat "$T_TMP/out")" "^[0-9a-f]{32}
rc=0$"

# --approve deny refuses at once, and says nothing of a wait.
timeout 60 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c \
	"capcall request '$CAP' --ttl 60 --reason x; echo rc=\$?" </dev/null >"$T_TMP/out" 2>"$T_TMP/err"
t_match "with --approve deny the request is refused" "$(cat "$T_TMP/out")" "rc=77$"
t_is "... and run announces no wait" "$(grep -c 'waits for an administrator' "$T_TMP/err")" 0
t_done
