#!/usr/bin/env bash
# 31-policy-file-mode.sh - issue 10, hole 11: a policy file any local user
# could rewrite (ceilings, administrators, requestable rules for the next
# start) is refused like a key file: by check-policy, by `capbroker run` and
# by `capbroker serve`, which does not start on it.  So is an @include'd
# file others can write, and a file in a directory others can write.
. "$(dirname "$0")/../lib.sh"

P="$T_TMP/p.conf"
printf 'admins = { uids = [ 4242 ]; };\n' >"$P"
chmod 0644 "$P"
t_ok "a 0644 policy of ours passes check-policy" "$CB_BIN/capbroker" check-policy "$P"
chmod 0666 "$P"
t_exit "a world-writable policy fails check-policy (1)" 1 "$CB_BIN/capbroker" check-policy "$P"
t_match "... saying why" "$(cat "$T_TMP/err")" "not writable by group or others"
t_exit "capbroker run refuses to start on it (125)" 125 \
	"$CB_BIN/capbroker" run --policy "$P" --tier low -- /bin/true
t_exit "capbroker serve refuses to start on it (125)" 125 \
	timeout 20 "$CB_BIN/capbroker" serve --state "$T_TMP/st" --policy "$P"
t_ok "... and never opened its admin socket" test ! -e "$T_TMP/st/admin.sock"
chmod 0664 "$P"
t_exit "a group-writable one too" 1 "$CB_BIN/capbroker" check-policy "$P"
chmod 0644 "$P"
printf 'version = 1;\n@include "more.conf"\n' >"$T_TMP/main.conf"
printf 'defaults = { ttl = 60; };\n' >"$T_TMP/more.conf"
chmod 0666 "$T_TMP/more.conf"
t_exit "an @include'd file others can write is refused" 1 "$CB_BIN/capbroker" check-policy "$T_TMP/main.conf"
mkdir -m 0777 "$T_TMP/open"; chmod 0777 "$T_TMP/open"
cp "$P" "$T_TMP/open/p.conf"
t_exit "a policy in a directory others can write is refused" 1 "$CB_BIN/capbroker" check-policy "$T_TMP/open/p.conf"
t_match "... naming the directory" "$(cat "$T_TMP/err")" "directory .*open"
t_done
