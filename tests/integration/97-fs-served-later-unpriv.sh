#!/usr/bin/env bash
# 97-fs-served-later-unpriv.sh - a broker that is not root serves trees
# granted while the sandbox runs, writable by unmodified programs (issue
# 14): pid 1 opens /dev/fuse for a few slots at the start (it cannot open
# one once the root has moved), sends their connections with the trees',
# and attaches a slot at a later tree's path when the broker asks; the
# agent's Landlock rules name the slots' roots (docs/sandbox.md, "Writing in
# a later tree: slots").  Without fs.write, after the revocation and outside
# the tree, writes fail.  Run for real as an ordinary user (setpriv), with
# /dev/fuse usable by that user only in a private mount namespace of this
# test (as 83-fs-served-unpriv.sh).  Needs root to set that up.
. "$(dirname "$0")/../lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ] || ! command -v setpriv >/dev/null ||
	! command -v unshare >/dev/null; then
	t_skip "an unprivileged broker's later trees" "needs root, /dev/fuse, setpriv and unshare"
	t_done
	exit
fi

U=4297
chmod 0755 "$T_TMP"
P=$(t_public "$CB_BIN/capbroker" "$CB_BIN/capbroker-stub" "$CB_BIN/capcall" "$CB_BIN/capctl")
W="$T_TMP/ws"
O="$T_TMP/later"
mkdir -p "$W" "$O"
echo hello >"$W/w.txt"
echo "granted later" >"$O/f.txt"
# The agent's steps, one per line it reads (the test says when).
cat >"$W/agent.sh" <<EOF
cat w.txt
read go
for i in \$(seq 50); do cat '$O/f.txt' 2>/dev/null && break; sleep 0.1; done
echo x >'$O/nowrite.txt' 2>/dev/null; echo "nowrite=\$?"
read go
for i in \$(seq 50); do echo hi >'$O/new.txt' 2>/dev/null && break; sleep 0.1; done
cat '$O/new.txt'; mkdir '$O/d' && mv '$O/new.txt' '$O/d/' && echo "moved=\$?"
echo x >'$T_TMP/beside.txt' 2>/dev/null; echo "beside=\$?"
echo x >/proc/self/comm 2>/dev/null; echo "proc=\$?"
read go
echo x >'$O/after.txt' 2>/dev/null; echo "after=\$?"
EOF
chown -R "$U:$U" "$W" "$O"
mkdir -m 0700 "$T_TMP/st" && chown "$U:$U" "$T_TMP/st"
mknod "$T_TMP/fuse" c 10 229
chmod 0666 "$T_TMP/fuse"
AS=(setpriv --reuid=$U --regid=$U --clear-groups --)

cat >"$T_TMP/inner.sh" <<EOF
set -u
mount --bind "$T_TMP/fuse" /dev/fuse || exit 99
AS=(${AS[*]})
S="$T_TMP/st"
ctl() { "\${AS[@]}" "$P/capctl" --state "\$S" "\$@"; }
upto() { for i in \$(seq 100); do grep -q "\$1" "$T_TMP/a.out" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
"\${AS[@]}" "$P/capbroker" serve --state "\$S" >"$T_TMP/serve.log" 2>&1 &
srv=\$!
for i in \$(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.1; done
mkfifo "$T_TMP/a.in"
cd "$W"
"\${AS[@]}" "$P/capbroker" run --connect "\$S/admin.sock" --id u1 --tier high --workspace "$W" -- \
	/bin/sh agent.sh <"$T_TMP/a.in" >"$T_TMP/a.out" 2>&1 &
agent=\$!
exec 7>"$T_TMP/a.in"
upto hello
ctl issue --sandbox u1 --cap "fs.read:$O/**" --cap "fs.list:$O/**" >/dev/null
echo go >&7
upto nowrite=
wid=\$(ctl --json issue --sandbox u1 --cap "fs.write:$O/**" |
	"$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["id"])')
echo go >&7
upto proc=
ctl revoke "\$wid" >/dev/null
echo go >&7
exec 7>&-
wait \$agent
echo "agent=\$?" >>"$T_TMP/a.out"
kill \$srv
wait \$srv
EOF
unshare -m --propagation private bash "$T_TMP/inner.sh"
t_is "the mount namespace of the test is set up" "$?" 0
OUTP=$(cat "$T_TMP/a.out")
t_match "a broker that is not root mounts a tree granted later (cat reads it)" "$OUTP" \
	"^hello"$'\n'"granted later"
t_match "... in a slot" "$(cat "$T_TMP/st/audit.jsonl")" \
	"\"op\":\"fs.serve\",\"resource\":\"$O\",[^}]*unmodified programs may write"
t_match "without fs.write an unmodified write there fails" "$OUTP" "nowrite=2"
t_ok "... refused by the broker, which audited it (not by the kernel before it)" grep -q \
	"\"op\":\"fs.create\",\"resource\":\"$O/nowrite.txt\".*\"decision\":\"deny\"" "$T_TMP/st/audit.jsonl"
t_match "with fs.write echo > file, mkdir and mv work there" "$OUTP" "hi"$'\n'"moved=0"
t_is "... the file is on the host, the broker user's" "$(stat -c %u:%s "$O/d/new.txt")" "$U:3"
t_match "writing beside the tree fails" "$OUTP" "beside=2"
t_match "Landlock still refuses /proc" "$OUTP" "proc=2"
t_match "after the revocation a write fails" "$OUTP" "after=2"
t_ok "... nothing was written" test ! -e "$O/after.txt" -a ! -e "$O/nowrite.txt" -a ! -e "$T_TMP/beside.txt"
t_match "the agent ended normally" "$OUTP" "agent=0"
t_done
