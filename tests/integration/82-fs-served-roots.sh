#!/usr/bin/env bash
# 82-fs-served-roots.sh - a grant's root is the owner's, not the agent's:
#  - with fs.write on WS/** the agent may change what is beneath the
#    workspace, but not widen the workspace directory's own mode (chmod
#    0777 . would open it to every user of the host); keeping or removing
#    bits and setting its times still work;
#  - a served tree whose root is moved (or removed) on the host while the
#    sandbox runs is no longer served: the tokens name the path, and the
#    directory the broker held open is not there any more.
# Needs root (the broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "a grant's root" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4244
W="$T_TMP/ws"
mkdir -p "$W/sub"
echo hello >"$W/a.txt"
chmod 0755 "$W" "$W/sub"
chown -R "$OWN:$OWN" "$W"

S="$T_TMP/st"
srv_start "$S"
agent_start r1 --tier medium --workspace "$W"

# -- the root's mode -------------------------------------------------------------
agent_do r1 "chmod 0777 ."
t_is "chmod 0777 of the workspace root is refused" "$ARC" 1
t_is "... and its mode is unchanged on the host" "$(stat -c %a "$W")" 755
agent_do r1 "chmod 0777 '$W'"
t_is "... by its full path too" "$(stat -c %a "$W")" 755
agent_do r1 "chmod g+s,o+t ."
t_is "... nor a set-id or sticky bit" "$(stat -c %a "$W")" 755
agent_do r1 "chmod 0750 . && chmod 0755 . && echo ok"
t_match "removing bits and putting them back works" "$AOUT" "^ok"
t_is "... leaving the mode it had" "$(stat -c %a "$W")" 755
agent_do r1 "touch -d '2001-02-03 04:05:06' . && echo ok"
t_match "its times may be set" "$AOUT" "^ok"
agent_do r1 "chmod 0777 sub && chmod 0600 a.txt && echo ok"
t_match "what is beneath the root is the agent's to change" "$AOUT" "^ok"
t_is "... (a directory)" "$(stat -c %a "$W/sub")" 777
t_is "... (a file)" "$(stat -c %a "$W/a.txt")" 600
t_ok "the refused chmod is audited" wait_for 200 grep -q "\"sandbox\":\"r1\",\"op\":\"fs.setattr\",\"resource\":\"$W\".*\"decision\":\"deny\",\"reason\":\"permission\".*keeps its mode" "$S/audit.jsonl"
chmod 0644 "$W/a.txt"

# -- the root moved on the host ----------------------------------------------------
agent_start r2 --tier medium --workspace "$W"
agent_do r2 "cat a.txt"
t_match "the agent reads its workspace" "$AOUT" "^hello"
mv "$W" "$T_TMP/moved"
mkdir -p "$W"
chown "$OWN:$OWN" "$W"
moved() { grep -q "\"sandbox\":\"r2\",\"op\":\"fs.serve\",\"resource\":\"$W\".*moved or removed" "$S/audit.jsonl"; }
t_ok "the move is noticed within seconds, and audited" wait_for 50 moved
agent_do r2 "cat '$W/a.txt'"
t_is "a read through the old path fails" "$ARC" 1
agent_do r2 "echo x >'$W/new.txt'"
t_is "... and so does a write" "$ARC" 2
t_is "... which reached neither the moved directory" "$(ls "$T_TMP/moved")" "a.txt"$'\n'"sub"
t_is "... nor the new one at the path" "$(ls -A "$W")" ""
agent_do r1 "ls '$W' >/dev/null 2>&1; echo rc=\$?"
t_match "the other sandbox serving it stops too" "$AOUT" "rc=[12]"
t_ok "the broker is alive" "$CTL" --state "$S" status
t_done
