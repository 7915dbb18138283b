#!/usr/bin/env bash
# 95-fs-served-no-slots.sh - defaults.fs_slots = 0 (docs/policy.md): the
# broker makes no slot at a sandbox's start, so a tree granted while it
# runs, even with fs.write, is read-only to unmodified programs (Landlock
# gives write only beneath a slot's root), while capcall still writes
# (the broker decides).  As test 96's part past the slots, with none.
# Needs root (the broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "no slots for trees granted later" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4296
W="$T_TMP/ws"
O="$T_TMP/other/data"
mkdir -p "$W" "$O"
echo "granted later" >"$O/f.txt"
chown -R "$OWN:$OWN" "$W" "$T_TMP/other"
chmod 0755 "$T_TMP"

printf 'defaults = { fs_slots = 0; };\n' >"$T_TMP/p.conf"
t_ok "check-policy takes fs_slots = 0" "$CB" check-policy "$T_TMP/p.conf"
S="$T_TMP/st"
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start s1 --tier high --workspace "$W"

"$CTL" --state "$S" issue --sandbox s1 --cap "fs.read:$O/**" --cap "fs.write:$O/**" >/dev/null
t_ok "a tree granted later is served" wait_for 100 grep -q \
	"\"sandbox\":\"s1\",\"op\":\"fs.serve\",\"resource\":\"$O\"" "$S/audit.jsonl"
t_ok "... with no slot: read-only to unmodified programs" grep -q \
	"\"sandbox\":\"s1\",\"op\":\"fs.serve\",\"resource\":\"$O\".*no slot left" "$S/audit.jsonl"
agent_do s1 "for i in \$(seq 50); do cat '$O/f.txt' 2>/dev/null && break; sleep 0.1; done; echo w >'$O/f.txt'"
t_is "cat reads it, and an unmodified write fails (Landlock) despite fs.write" \
	"$(printf '%s' "$AOUT" | head -n 1)$ARC" "granted later2"
t_match "... (permission denied)" "$AOUT" "Permission denied"
t_is "... the host file is unchanged" "$(cat "$O/f.txt")" "granted later"
agent_do s1 "echo w | capcall fs.write '$O/f.txt' && cat '$O/f.txt'"
t_is "... while capcall writes it" "$AOUT" "w"

agent_stop s1
t_ok "the audit log verifies" "$CTL" --state "$S" audit verify
t_done
