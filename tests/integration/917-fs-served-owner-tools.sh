#!/usr/bin/env bash
# 917-fs-served-owner-tools.sh - `sed -i`, `cp -a` and `tar xpf` in a root
# broker's workspace say nothing but their work.  The agent (nobody) is not
# the tree's owner, whose files its user namespace does not map, so the
# kernel took every served file for someone else's and refused, before the
# file server was asked, the POSIX ACL that sed -i and cp -a copy after
# every file: "sed: preserving permissions for './sedXXXX': Operation not
# permitted" on every edit (an agent reads that as a failed edit).  Now the
# server reports the owner's files as the agent's (fsrv_cfg.owner_as_agent;
# docs/fsrv.md, "Ownership"): the ACL reaches it and is EOPNOTSUPP, which
# both take for "no ACLs here", as under a broker that is not root.  What
# is acted on is unchanged: the host files keep their owner, a chown to
# anyone else is still refused, and so is a mode past the root's.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "tools that copy ownership and ACLs in a root broker's workspace" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4245
W="$T_TMP/ws"
mkdir -p "$W/d/e"
printf 'a\nb\n' >"$W/s.txt"
echo x >"$W/d/e/f"
chown -R "$OWN:$OWN" "$W"

run() { timeout 120 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c "$1"; }

run 'sed -i s/a/A/ s.txt' >"$T_TMP/o" 2>"$T_TMP/e"
t_is "sed -i exits 0" "$?" 0
t_is "... says nothing (no 'preserving permissions')" "$(cat "$T_TMP/e")" ""
t_is "... and edited the file" "$(cat "$W/s.txt" | tr '\n' ' ')" "A b "
t_is "... which keeps its owner and mode on the host" "$(stat -c '%u:%g %a' "$W/s.txt")" "$OWN:$OWN 644"
run 'cp -a d d2' >"$T_TMP/o" 2>"$T_TMP/e"
t_is "cp -a exits 0" "$?" 0
t_is "... and says nothing" "$(cat "$T_TMP/e")" ""
t_is "... the copy is the owner's" "$(stat -c '%u' "$W/d2/e/f")" "$OWN"
run 'tar cf t.tar d && mkdir x && tar xpf t.tar -C x && cat x/d/e/f' >"$T_TMP/o" 2>"$T_TMP/e"
t_is "tar cf, tar xpf: the file back" "$(cat "$T_TMP/o")" "x"
t_is "... and nothing said" "$(cat "$T_TMP/e")" ""
t_is "a chown to the owner shown (the agent's uid) is a no-op" \
	"$(run 'chown "$(id -u):$(id -g)" s.txt && echo done' 2>&1)" "done"
t_is "... the host file keeps its owner" "$(stat -c '%u:%g' "$W/s.txt")" "$OWN:$OWN"
t_match "a chown to anyone else is still refused" "$(run 'chown 0 s.txt; echo rc=$?' 2>&1)" "rc=1$"
t_match "a chmod past the root's permissions is still refused" \
	"$(run 'chmod 0777 .; echo rc=$?' 2>&1)" "rc=1$"
t_done
