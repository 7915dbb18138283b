#!/usr/bin/env bash
# 96-fs-served-later-write.sh - unmodified programs write in a tree granted
# while the sandbox runs, when a live fs.write token covers it (issue 14).
# Landlock fixes the agent's rules at its start, so the broker makes a few
# empty FUSE mounts ("slots") before the start, Landlock gives the agent
# write beneath each slot's root, and a later tree is served in a slot that
# pid 1 attaches at its host path (docs/sandbox.md, "Trees granted while
# the sandbox runs").  Every operation is still the broker's to decide:
# writes without fs.write, after the revocation, through a symlink out of
# the tree or outside any served tree all fail; Landlock still refuses
# writes it refused before (/proc, /dev).  Past the slots a later tree is
# read-only to unmodified programs (capcall still writes).  The high tier
# (capctl issue reaches beyond the workspace there; the medium tier gets
# later trees by elevation, served the same way).  Needs root (the
# broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "writes in trees granted while the sandbox runs" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4296
W="$T_TMP/ws"
O="$T_TMP/other/data"
OUT="$T_TMP/outside"
mkdir -p "$W" "$O/keep" "$OUT"
echo "in the workspace" >"$W/w.txt"
echo "granted later" >"$O/f.txt"
echo "untouched" >"$OUT/o.txt"
ln -s "$OUT" "$O/abs"		# an absolute link out of the tree
ln -s ../../outside "$O/rel"	# a relative one (host: $T_TMP/outside)
chown -R "$OWN:$OWN" "$W" "$T_TMP/other"
chown -h "$OWN:$OWN" "$O/abs" "$O/rel"
chmod 0755 "$T_TMP"

S="$T_TMP/st"
srv_start "$S"
agent_start w1 --tier high --workspace "$W"

# -- no token: the tree is not there; a read grant: not writable --------------------
agent_do w1 "echo x >'$O/new.txt'"
t_is "before any grant the later tree cannot be written" "$ARC" 2
"$CTL" --state "$S" --json issue --sandbox w1 --cap "fs.read:$O/**" --cap "fs.list:$O/**" \
	>"$T_TMP/r.json"
RID=$(jget 'd["id"]' <"$T_TMP/r.json")
agent_do w1 "for i in \$(seq 50); do cat '$O/f.txt' 2>/dev/null && break; sleep 0.1; done"
t_is "a read grant mounts the tree (cat reads it)" "$AOUT" "granted later"
t_ok "... in a slot (audited as writable where fs.write covers it)" wait_for 200 grep -q \
	"\"sandbox\":\"w1\",\"op\":\"fs.serve\",\"resource\":\"$O\".*unmodified programs may write" \
	"$S/audit.jsonl"
agent_do w1 "echo x >'$O/new.txt'"
t_is "without an fs.write token an unmodified write fails" "$ARC" 2
t_match "... refused by the broker (permission denied)" "$AOUT" "Permission denied"
t_ok "... and the broker audited the denial" wait_for 30 grep -q \
	"\"sandbox\":\"w1\",\"op\":\"fs.create\",\"resource\":\"$O/new.txt\".*\"decision\":\"deny\"" \
	"$S/audit.jsonl"
t_is "... nothing was written" "$(ls "$O")" "$(printf 'abs\nf.txt\nkeep\nrel')"

# -- fs.write and fs.delete granted: unmodified programs write -----------------------
"$CTL" --state "$S" --json issue --sandbox w1 --cap "fs.write:$O/**" --cap "fs.delete:$O/**" \
	>"$T_TMP/w.json"
WID=$(jget 'd["id"]' <"$T_TMP/w.json")
agent_do w1 "for i in \$(seq 50); do echo hi >'$O/new.txt' 2>/dev/null && break; sleep 0.1; done; cat '$O/new.txt'"
t_is "with fs.write, echo > file works in the later tree" "$AOUT" "hi"
t_is "... the file is on the host, the tree owner's" "$(stat -c %u:%s "$O/new.txt")" "$OWN:3"
agent_do w1 "cd '$O' && mkdir d && mv new.txt d/moved.txt && rm f.txt && echo more >>d/moved.txt && ls"
t_is "mkdir, mv, rm and >> work there" "$AOUT" "$(printf 'abs\nd\nkeep\nrel')"
t_is "... as seen on the host" "$(cat "$O/d/moved.txt")" "$(printf 'hi\nmore')"
agent_do w1 "cd '$O' && git init -q repo && cd repo && echo 1 >a && git add a && git -c user.name=a -c user.email=a@b commit -qm one && git log --format=%s && git status --short"
t_is "git init, add, commit, log and status work there" "$AOUT" "one"
t_ok "... the repository is on the host" test -f "$O/repo/.git/HEAD"

# -- what stays refused --------------------------------------------------------------
agent_do w1 "echo x >'$O/abs/o.txt'"
t_is "a write through an absolute symlink out of the tree fails" "$ARC" 2
agent_do w1 "echo x >'$O/rel/o.txt'"
t_is "... through a relative one too" "$ARC" 2
t_is "... and the file outside is untouched" "$(cat "$OUT/o.txt")" "untouched"
agent_do w1 "echo x >'$T_TMP/other/beside.txt'"
t_is "writing beside the later tree (the sandbox's own root) fails" "$ARC" 2
t_ok "... nothing appeared on the host" test ! -e "$T_TMP/other/beside.txt"
agent_do w1 "echo x >/etc/hostname"
t_is "... /etc stays unwritable" "$ARC" 2
agent_do w1 "echo x >/proc/self/comm"
t_is "Landlock still refuses writes under /proc" "$ARC" 2
t_match "... (permission denied, not a read-only file system)" "$AOUT" "Permission denied"
agent_do w1 "echo x >/dev/urandom"
t_is "... and to /dev/urandom" "$ARC" 2

# -- a directory and a symlink out of the tree exchanged on the host -----------------
# renameat2(RENAME_EXCHANGE): the name always exists, as a directory or as a
# link to $OUT, while the agent writes beneath it; the kernel inside still
# holds it as the directory it looked up.
mkdir "$O/sw"
ln -s "$OUT" "$O/swl"
chown -h "$OWN:$OWN" "$O/sw" "$O/swl"
"$PYTHON" - "$O/sw" "$O/swl" <<'PY' &
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b = (p.encode() for p in sys.argv[1:3])
end = time.monotonic() + 30
while time.monotonic() < end and os.getppid() != 1:
    libc.renameat2(-100, a, -100, b, 2)
PY
SWAP=$!
# Shell built-ins only (no process per try) while the host swaps.
agent_do w1 "c=0; for t in \$(seq 1500); do { echo x >'$O/sw/race.txt'; } 2>/dev/null && c=\$((c+1)); done; echo \$c" 400
kill "$SWAP"
wait "$SWAP" 2>/dev/null
echo "# $AOUT of 1500 tries written"
t_match "the agent wrote through the swapped name while it was a directory" "$AOUT" "^[1-9][0-9]*$"
t_is "... and never into the symlink's target outside" "$(ls "$OUT")" "o.txt"

# -- the revocation bites, on new writes and on a file already open ------------------
agent_do w1 "exec 5>>'$O/held.txt' && echo one >&5 && echo opened"
t_is "a file opened for writing before the revocation" "$AOUT" "opened"
t_ok "capctl revoke of the write token returns" "$CTL" --state "$S" revoke "$WID"
agent_do w1 "echo two >&5"
t_is "after the revocation a write on the open file fails" "$ARC" 1
agent_do w1 "echo x >'$O/after.txt'"
t_is "... and a new write fails" "$ARC" 2
t_is "... the host file holds only what came before" "$(cat "$O/held.txt")" "one"
agent_do w1 "exec 5>&-; cat '$O/d/moved.txt'"
t_is "... while the read grant still reads" "$AOUT" "$(printf 'hi\nmore')"
t_ok "capctl revoke of the read token returns" "$CTL" --state "$S" revoke "$RID"
agent_do w1 "cat '$O/d/moved.txt'"
t_is "... and after it, nothing" "$ARC" 1

# -- past the slots: read-only to unmodified programs --------------------------------
for k in 1 2 3 4 5; do
	mkdir -p "$T_TMP/more/t$k"
	echo "t$k" >"$T_TMP/more/t$k/f"
	chown -R "$OWN:$OWN" "$T_TMP/more"
	"$CTL" --state "$S" issue --sandbox w1 --cap "fs.read:$T_TMP/more/t$k/**" \
		--cap "fs.write:$T_TMP/more/t$k/**" >/dev/null
done
wait_for 200 at_least 5 "$S/audit.jsonl" "\"op\":\"fs.serve\",\"resource\":\"$T_TMP/more/"
# Slots: 4 (the default defaults.fs_slots); one went to $O.  (0 slots: test 95.)
t_is "three more trees are served in slots" \
	"$(grep "\"op\":\"fs.serve\",\"resource\":\"$T_TMP/more/" "$S/audit.jsonl" | grep -c 'may write')" 3
t_ok "... the next ones say they are read-only to unmodified programs" grep -q \
	"\"op\":\"fs.serve\",\"resource\":\"$T_TMP/more/t4\".*no slot left" "$S/audit.jsonl"
agent_do w1 "echo w >'$T_TMP/more/t3/f' && cat '$T_TMP/more/t3/f'"
t_is "a slot tree is written" "$AOUT" "w"
agent_do w1 "cat '$T_TMP/more/t5/f'; echo w >'$T_TMP/more/t5/f'"
t_is "past the slots the tree reads, and an unmodified write fails (Landlock)" \
	"$(printf '%s' "$AOUT" | head -n 1)$ARC" "t52"
t_match "... (permission denied)" "$AOUT" "cannot create.*Permission denied"
agent_do w1 "echo w | capcall fs.write '$T_TMP/more/t5/f' && cat '$T_TMP/more/t5/f'"
t_is "... while capcall writes it" "$AOUT" "w"

agent_stop w1
t_ok "the audit log verifies" "$CTL" --state "$S" audit verify
t_done
