#!/usr/bin/env bash
# 83-fs-served-unpriv.sh - a broker that is not root serves files too (issue
# 14): it cannot mount FUSE, and a /dev/fuse opened outside the sandbox's
# user namespace cannot be mounted inside it, so pid 1 opens /dev/fuse in
# its own namespace, mounts the workspace and sends the connection to the
# broker (checked to be /dev/fuse), which serves it as it does for root.
# Where /dev/fuse is not usable by the broker's user (Debian's 0600 root),
# `run` fails with 125 and says why.  Run for real as an ordinary user
# (setpriv); /dev/fuse made usable for that user only in a private mount
# namespace of this test (a 0666 node of its own bound over it), so the
# machine's /dev/fuse is never touched.  Needs root to set that up.
. "$(dirname "$0")/../lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ] || ! command -v setpriv >/dev/null ||
	! command -v unshare >/dev/null; then
	t_skip "an unprivileged broker's file server" "needs root, /dev/fuse, setpriv and unshare"
	t_done
	exit
fi

U=4246
chmod 0755 "$T_TMP"
P=$(t_public "$CB_BIN/capbroker" "$CB_BIN/capbroker-stub" "$CB_BIN/capcall" "$CB_BIN/capctl")
W="$T_TMP/ws"
mkdir -p "$W"
echo hello >"$W/w.txt"
echo "host secret" >"$T_TMP/beside.txt"
chmod 0600 "$T_TMP/beside.txt"
chown -R "$U:$U" "$W"
mkdir -m 0700 "$T_TMP/st" && chown "$U:$U" "$T_TMP/st"
AS=(setpriv --reuid=$U --regid=$U --clear-groups --)

# -- neither way works: 125 and the reason -------------------------------------------
if "${AS[@]}" sh -c 'exec 3<>/dev/fuse' 2>/dev/null; then
	t_skip "without a usable /dev/fuse, run fails with 125" "/dev/fuse is usable by uid $U here"
	t_skip "... saying why" "/dev/fuse is usable by uid $U here"
else
	(cd "$W" && "${AS[@]}" "$P/capbroker" run --tier medium --workspace "$W" -- /bin/cat w.txt \
		>"$T_TMP/no.out" 2>"$T_TMP/no.err")
	t_is "without a usable /dev/fuse, run fails with 125" "$?" 125
	t_match "... saying why (/dev/fuse, run as root)" "$(cat "$T_TMP/no.err")" \
		"/dev/fuse usable by uid $U.*run capbroker as root"
fi
(cd "$W" && "${AS[@]}" "$P/capbroker" run --tier medium -- /bin/true)
t_is "... while a sandbox with nothing to serve starts" "$?" 0
if ! "${AS[@]}" sh -c 'exec 3<>/dev/fuse' 2>/dev/null; then
	t_is "... and one whose only tree is a grant's (not the workspace) starts: capcall answers" \
		"$(cd "$T_TMP" && "${AS[@]}" "$P/capbroker" run --tier medium --grant "fs.read:$W/**" -- \
		capcall fs.read "$W/w.txt" 2>&1)" hello
else
	t_skip "... and one whose only tree is a grant's starts" "/dev/fuse is usable by uid $U here"
fi

# -- /dev/fuse usable by the user: a private 0666 node bound over it ------------------
mknod "$T_TMP/fuse" c 10 229
chmod 0666 "$T_TMP/fuse"
cat >"$T_TMP/inner.sh" <<EOF
set -u
mount --bind "$T_TMP/fuse" /dev/fuse || exit 99
cd "$W"
AS=(${AS[*]})
# run: the workspace served by a broker that is not root
"\${AS[@]}" "$P/capbroker" run --tier medium --workspace "$W" -- /bin/sh -c \
	'pwd; cat w.txt; echo new >n.txt && cat n.txt; cat "$T_TMP/beside.txt" 2>/dev/null || echo denied' \
	>"$T_TMP/run.out" 2>"$T_TMP/run.err"
echo "run=\$?" >>"$T_TMP/run.out"
# serve: revocation bites on the next cat
S="$T_TMP/st"
"\${AS[@]}" "$P/capbroker" serve --state "\$S" >"$T_TMP/serve.log" 2>&1 &
srv=\$!
for i in \$(seq 100); do "\${AS[@]}" "$P/capctl" --state "\$S" status >/dev/null 2>&1 && break; sleep 0.1; done
mkfifo "$T_TMP/u1.in"
"\${AS[@]}" "$P/capbroker" run --connect "\$S/admin.sock" --id u1 --tier medium --workspace "$W" -- \
	/bin/sh -c 'cat w.txt; read line; cat w.txt; echo "again=\$?"' <"$T_TMP/u1.in" >"$T_TMP/u1.out" 2>&1 &
agent=\$!
exec 7>"$T_TMP/u1.in"
for i in \$(seq 100); do grep -q hello "$T_TMP/u1.out" 2>/dev/null && break; sleep 0.1; done
id=\$("\${AS[@]}" "$P/capctl" --state "\$S" --json list --sandbox u1 |
	"$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])')
"\${AS[@]}" "$P/capctl" --state "\$S" revoke "\$id" >/dev/null
echo go >&7
exec 7>&-
wait \$agent
kill \$srv
wait \$srv
EOF
unshare -m --propagation private bash "$T_TMP/inner.sh"
t_is "the mount namespace of the test is set up" "$?" 0
t_is "as an ordinary user with /dev/fuse usable, run serves the workspace" \
	"$(cat "$T_TMP/run.out")" "$(printf '%s\nhello\nnew\ndenied\nrun=0' "$W")"
t_is "... a file the agent wrote is on the host, the user's" "$(stat -c %u:%s "$W/n.txt")" "$U:4"
t_is "... and nothing else reached" "$(grep -c . "$T_TMP/run.err")" 0
t_match "under serve, the agent reads with its workspace token" "$(cat "$T_TMP/u1.out")" "^hello"
t_match "... and after the revocation its next cat fails" "$(cat "$T_TMP/u1.out")" \
	"Permission denied"$'\n'"again=1"
t_ok "the denial is audited" grep -q "\"sandbox\":\"u1\",\"op\":\"fs\.[a-z]*\",\"resource\":\"$W/w.txt\".*\"decision\":\"deny\"" \
	"$T_TMP/st/audit.jsonl"
t_done
