#!/usr/bin/env bash
# 71-fs-served.sh - the medium tier's workspace, served by the broker's file
# server (broker/fs_served.c over fsrv/), for real: `run --workspace DIR`
# alone issues the workspace token and the agent starts in DIR, where
# unmodified tools work (pwd, ls, cat, echo >, mkdir, mv, rm, git, pytest,
# make, grep -r, find); nothing beside the workspace is reachable, a
# symlink out of it leads nowhere, a workspace file cannot be run without a
# proc.exec token, files belong to the workspace's owner and every open and
# create is audited.  Under `serve`, revoking the workspace token stops the
# next cat and a read on a file the agent already had open.  The agent as
# the attacker: a symlink swap and a rename race in the served tree never
# reach the host, and a request flood stalls neither the broker nor another
# sandbox.  Needs root (the broker mounts FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "the served workspace" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4243
W="$T_TMP/ws"
mkdir -p "$W/proj" "$W/c" "$W/sub"
echo hello >"$W/a.txt"
head -c 100000 /dev/urandom >"$W/big.bin"
echo needle >"$W/sub/hay.txt"
echo "host secret" >"$T_TMP/beside.txt"
ln -s "$T_TMP/beside.txt" "$W/out-link"
ln -s ../beside.txt "$W/up-link"
printf 'def test_one():\n    assert 1 + 1 == 2\n' >"$W/proj/test_one.py"
printf '#include <stdio.h>\nint main(void) { puts("built"); return 0; }\n' >"$W/c/hello.c"
printf 'hello: hello.c\n\tcc -o hello hello.c\n' >"$W/c/Makefile"
chown -R "$OWN:$OWN" "$W"

run() { timeout 120 "$CB" run --tier medium --workspace "$W" --approve deny "$@"; }
sh_in() { run -- /bin/sh -c "$1" 2>&1; }

# -- ordinary tools, unmodified --------------------------------------------------
t_is "pwd prints the workspace" "$(sh_in pwd)" "$W"
t_match "ls -la lists it" "$(sh_in 'ls -la')" "a\.txt"
t_is "cat reads a file" "$(sh_in 'cat a.txt')" "hello"
t_is "echo > file writes one" "$(sh_in 'echo written > new.txt && cat new.txt')" "written"
t_is "... which is on the host" "$(cat "$W/new.txt")" "written"
t_is "... and belongs to the workspace's owner" "$(stat -c %u:%g "$W/new.txt")" "$OWN:$OWN"
t_is "mkdir, mv, rm, rmdir" \
	"$(sh_in 'mkdir d && echo x >d/f && mv d/f d/g && cat d/g && rm d/g && rmdir d && ls -d d 2>/dev/null; echo end')" \
	"$(printf 'x\nend')"
t_is "... leave nothing behind" "$(ls -d "$W/d" 2>/dev/null)" ""
out=$(sh_in 'git init -q && git add a.txt sub && git -c user.email=a@b.c -c user.name=agent commit -qm first &&
	echo more >>a.txt && git status --short && git log --oneline')
t_match "git init, add, commit, status" "$out" "^ M a\.txt$"
t_match "... log" "$out" "^[0-9a-f]+ first$"
t_is "... its objects belong to the owner" "$(stat -c %u "$W/.git/HEAD")" "$OWN"
if /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
	t_match "python3 -m pytest on a small project" "$(sh_in 'cd proj && python3 -m pytest -q -p no:cacheprovider')" \
		"1 passed"
else
	t_skip "python3 -m pytest on a small project" "python3-pytest is not installed"
fi
t_ok "make builds a small C program" run -- make -C c
t_is "... whose binary is on the host, the owner's" "$(stat -c %u "$W/c/hello" 2>&1)" "$OWN"
t_is "... and runs on the host" "$("$W/c/hello")" "built"
t_exit "... but not in the sandbox without a proc.exec token" 126 run -- /bin/sh -c './c/hello'
t_match "grep -r finds text" "$(sh_in 'grep -r needle .')" "^\./sub/hay\.txt:needle$"
t_match "find lists the tree" "$(sh_in 'find . -name hay.txt')" "^\./sub/hay\.txt$"

# -- nothing else ----------------------------------------------------------------
t_exit "/etc/shadow cannot be read" 1 run -- /bin/cat /etc/shadow
t_exit "a file beside the workspace cannot be read" 1 run -- /bin/cat "$T_TMP/beside.txt"
t_exit "a workspace symlink to it (absolute) leads nowhere" 1 run -- /bin/cat out-link
t_exit "... nor a relative one" 1 run -- /bin/cat up-link
t_is "the parent directory shows only the workspace" "$(sh_in "ls -A '$T_TMP/'")" "ws"
(cd "$W" && timeout 60 "$CB" run --tier medium --approve deny -- /bin/sh -c 'pwd; ls '"$W" \
	>"$T_TMP/nows.out" 2>&1)
t_match "without --workspace nothing is served (cwd is not a grant)" "$(cat "$T_TMP/nows.out")" \
	"^/tmp"$'\n'".*No such file"
t_exit "the low tier sees no workspace" 2 timeout 60 "$CB" run --tier low --workspace "$W" --approve deny \
	-- /bin/ls "$W"

# -- audit ------------------------------------------------------------------------
A="$T_TMP/st-audit"
timeout 60 "$CB" run --state "$A" --id aud1 --tier medium --workspace "$W" --approve deny -- /bin/sh -c \
	'echo x >audited.txt; cat audited.txt >/dev/null; mv audited.txt moved.txt; rm moved.txt;
	cat big.bin >/dev/null' >/dev/null 2>&1
t_ok "a create is audited (served)" grep -q "\"op\":\"fs.create\",\"resource\":\"$W/audited.txt\".*\"decision\":\"allow\"" "$A/audit.jsonl"
t_ok "an open is audited" grep -q "\"op\":\"fs.open\",\"resource\":\"$W/audited.txt\".*\"decision\":\"allow\"" "$A/audit.jsonl"
t_ok "a rename is one line with both names" grep -q "\"op\":\"fs.rename\",\"resource\":\"$W/audited.txt -> $W/moved.txt\"" "$A/audit.jsonl"
t_ok "a close says how many bytes moved" grep -q "\"op\":\"fs.close\",\"resource\":\"$W/audited.txt\".*\"detail\":\"served, 0 bytes read, 2 written\"" "$A/audit.jsonl"
t_ok "... also for a large (spliced) read" grep -q "\"op\":\"fs.close\",\"resource\":\"$W/big.bin\".*\"detail\":\"served, 100000 bytes read, 0 written\"" "$A/audit.jsonl"
t_ok "a delete is audited" grep -q "\"op\":\"fs.delete\",\"resource\":\"$W/moved.txt\"" "$A/audit.jsonl"
t_is "no line per read or lookup" "$(grep -c '"op":"fs.\(read\|lookup\|getattr\)"' "$A/audit.jsonl")" 0
t_ok "the log still verifies" "$CTL" --state "$A" audit verify
# The server queues its lines and the loop writes them in batches (a
# wake-up per line cost more than the open): none is lost or repeated.
# With direct I/O (fs_cache_data = false) every open reads through the
# broker, so each writes a close line with its byte count.
B="$T_TMP/st-batch"
printf 'tiers = { medium = { fs_cache_data = false; }; };\n' >"$T_TMP/direct.conf"
timeout 60 "$CB" run --state "$B" --id aud2 --policy "$T_TMP/direct.conf" --tier medium --workspace "$W" \
	--approve deny -- /bin/bash -c 'for i in $(seq 1000); do read -r l <a.txt; done' >/dev/null 2>&1
t_is "1000 opens in a burst: 1000 open lines" \
	"$(grep -c "\"op\":\"fs.open\",\"resource\":\"$W/a.txt\"" "$B/audit.jsonl")" 1000
t_is "... and 1000 close lines" \
	"$(grep -c "\"op\":\"fs.close\",\"resource\":\"$W/a.txt\"" "$B/audit.jsonl")" 1000
# By default the kernel keeps the file's pages: every open is still checked
# and audited, but only the first moved data through the broker (a close
# line counts the bytes the broker read from the host, not cached reads).
B="$T_TMP/st-batch2"
timeout 60 "$CB" run --state "$B" --id aud3 --tier medium --workspace "$W" --approve deny -- /bin/bash -c \
	'for i in $(seq 1000); do read -r l <a.txt; done' >/dev/null 2>&1
t_is "cached: 1000 opens in a burst, 1000 open lines" \
	"$(grep -c "\"op\":\"fs.open\",\"resource\":\"$W/a.txt\"" "$B/audit.jsonl")" 1000
t_is "... and one close line (the one open that read from the host)" \
	"$(grep -c "\"op\":\"fs.close\",\"resource\":\"$W/a.txt\"" "$B/audit.jsonl")" 1

# -- under serve: the token is listed and revocable, open files included ------
S="$T_TMP/st"
# The high tier's writable binds are served the same way (revocable).
mkdir -p "$T_TMP/rw"
chmod 0777 "$T_TMP/rw"
chown "$OWN:$OWN" "$T_TMP/rw"
printf 'tiers = { high = { rw_binds = [ "%s:/data" ]; }; };\n' "$T_TMP/rw" >"$T_TMP/rw.conf"
srv_start "$S" --policy "$T_TMP/rw.conf"
agent_start a1 --tier medium --workspace "$W"
ID=$("$CTL" --state "$S" --json list --sandbox a1 | jget 'd[0]["id"]')
t_match "capctl list shows the workspace token" "$("$CTL" --state "$S" list --sandbox a1)" \
	"fs\.write:$W/\*\*"
agent_do a1 "cat a.txt"
t_match "the agent reads with it" "$AOUT" "^hello"
agent_do a1 "stat -c %s a.txt sub/hay.txt >/dev/null && exec 7<a.txt && echo opened"
t_match "... and holds a file open" "$AOUT" "opened"
t_ok "capctl revoke returns" "$CTL" --state "$S" revoke "$ID"
# Names and attributes are cached for 10 s: the revocation drops them.
agent_do a1 "for i in 1 2 3 4 5 6 7 8 9 10; do stat sub/hay.txt >/dev/null 2>&1 || { echo gone; break; }; sleep 0.1; done"
t_match "a stat of a cached name fails within a second of the revocation" "$AOUT" "^gone"
agent_do a1 "cat a.txt"
t_is "the next cat fails" "$ARC" 1
t_match "... with permission denied" "$AOUT" "Permission denied"
agent_do a1 "cat <&7"
t_is "a read on the file it had open fails too" "$ARC" 1
agent_do a1 "echo again >a.txt"
t_is "... and so does a write" "$ARC" 2
t_is "the host file is unchanged" "$(head -n 1 "$W/a.txt")" "hello"
t_ok "the revoked cat is audited as denied" wait_for 200 grep -q "\"sandbox\":\"a1\",\"op\":\"fs\.[a-z]*\",\"resource\":\"$W/a.txt\".*\"decision\":\"deny\",\"reason\":\"not-covered\"" "$S/audit.jsonl"

agent_start h1 --tier high
HID=$("$CTL" --state "$S" --json list --sandbox h1 | jget 'd[0]["id"]')
t_match "a high-tier writable bind gets a token of its own" "$("$CTL" --state "$S" list --sandbox h1)" \
	"fs\.write:$T_TMP/rw/\*\*"
agent_do h1 "echo bound >/data/f && cat /data/f"
t_match "the agent writes through the served bind" "$AOUT" "^bound"
t_is "... as the bind's owner" "$(stat -c %u "$T_TMP/rw/f")" "$OWN"
t_ok "revoking the bind's token returns" "$CTL" --state "$S" revoke "$HID"
agent_do h1 "echo again >/data/g"
t_is "the next write through the bind fails" "$ARC" 2
t_is "... and nothing was written" "$(ls "$T_TMP/rw")" "f"

# -- the agent as the attacker -------------------------------------------------
# A directory swapped for a symlink to the host's tree, raced against reads
# through it: the server resolves every request with no symlink followed,
# and the kernel follows links in the agent's own view, where the host's
# tree does not exist.
agent_start a2 --tier medium --workspace "$W"
agent_do a2 "mkdir -p race && cp a.txt race/beside.txt && \
	( i=0; while [ \$i -lt 200 ]; do mv race race.d; ln -s '$T_TMP' race; rm race; mv race.d race; i=\$((i+1)); done ) & \
	k=0; leak=0; while [ \$k -lt 1000 ]; do c=\$(cat race/beside.txt 2>/dev/null); [ \"\$c\" = 'host secret' ] && leak=\$((leak+1)); k=\$((k+1)); done; wait; echo leaks=\$leak"
t_match "a symlink swap raced against reads never reaches the host" "$AOUT" "leaks=0"
agent_do a2 "( i=0; while [ \$i -lt 200 ]; do mkdir -p r1/x && mv r1 r2 && mv r2 r1 && rmdir r1/x; i=\$((i+1)); done ) & \
	( i=0; while [ \$i -lt 200 ]; do ln -sfn / r3; rm -f r3; i=\$((i+1)); done ) & \
	k=0; while [ \$k -lt 300 ]; do ls r1 r2 r3/etc >/dev/null 2>&1; k=\$((k+1)); done; wait; ls r1 2>&1; cat r3/etc/shadow 2>&1; echo done"
t_match "a rename race in the tree stays inside it" "$AOUT" "done"
t_is "... and left the host's tree alone" "$(ls -A "$T_TMP" | grep -c '^r[123]$')" 0
# A flood of requests from one sandbox stalls neither the broker nor another.
agent_start a3 --tier medium --workspace "$W"
agent_send a3 "for j in 1 2 3 4 5 6; do ( end=\$((\$(date +%s) + 3)); while [ \$(date +%s) -lt \$end ]; do stat -c %s a.txt sub sub/hay.txt nx1 nx2 >/dev/null 2>&1; find . >/dev/null 2>&1; done ) & done; wait; echo flooded"
F=$ASEQ
sleep 1
t0=$(date +%s%N)
agent_do a2 "cat sub/hay.txt"
t1=$(date +%s%N)
t_match "another sandbox reads during the flood" "$AOUT" "needle"
t_ok "... within a second ($(( (t1 - t0) / 1000000 )) ms)" test $(( (t1 - t0) / 1000000 )) -lt 1000
t_ok "the broker answers capctl during the flood" timeout 2 "$CTL" --state "$S" status
agent_wait a3 "$F" 200
t_match "the flooding agent finished" "$AOUT" "flooded"
t_done
