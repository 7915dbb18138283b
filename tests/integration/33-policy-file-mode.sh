#!/usr/bin/env bash
# 33-policy-file-mode.sh - issue 10, hole 11: a policy file any local user
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
# A policy reached through a symlink: the link, and every directory on the
# way, must be one only root (or the broker's user) may change, or its owner
# could point it at another file before the next start or reload.  Found
# by the red team (a root-owned policy through a symlink in a 0777
# directory, then re-pointed by nobody); these fail without the check.
mkdir -m 0755 "$T_TMP/safe"; cp "$P" "$T_TMP/safe/p.conf"
ln -s "$T_TMP/safe/p.conf" "$T_TMP/open/link.conf"
t_exit "a symlink in a directory others can write is refused" 1 \
	"$CB_BIN/capbroker" check-policy "$T_TMP/open/link.conf"
t_match "... naming the directory on the way" "$(cat "$T_TMP/err")" "directory .*open on the way"
ln -s "$T_TMP/safe/p.conf" "$T_TMP/safe/root-link.conf"
t_ok "a root-owned symlink in a safe directory is fine" \
	"$CB_BIN/capbroker" check-policy "$T_TMP/safe/root-link.conf"
ln -s "$T_TMP/safe/p.conf" "$T_TMP/safe/nobody-link.conf"
chown -h nobody "$T_TMP/safe/nobody-link.conf"
t_exit "a symlink nobody owns is refused, wherever it is" 1 \
	"$CB_BIN/capbroker" check-policy "$T_TMP/safe/nobody-link.conf"
t_match "... naming the symlink and its owner" "$(cat "$T_TMP/err")" "symlink .*nobody-link.conf .*owned by uid"
ln -s "$T_TMP/open" "$T_TMP/safe/opendir"
t_exit "a path through a symlink to a directory others can write is refused" 1 \
	"$CB_BIN/capbroker" check-policy "$T_TMP/safe/opendir/p.conf"
mkdir -m 1777 "$T_TMP/sticky"; chmod 1777 "$T_TMP/sticky"
ln -s "$T_TMP/safe/p.conf" "$T_TMP/sticky/link.conf"
t_ok "a root-owned symlink in a sticky directory is fine (others cannot replace it)" \
	"$CB_BIN/capbroker" check-policy "$T_TMP/sticky/link.conf"
t_done
