#!/usr/bin/env bash
# 916-fs-served-umask.sh - files an agent makes have the modes its umask
# says, on the host too.  The broker runs with umask 077 (its state is its
# own), and both the agent (the stub inherited it) and the file server's
# thread (which creates the agent's files on the host) applied it: every
# file and directory an agent made in its workspace was private (a build's
# objects 0600, a clone's directories 0700) and an agent's own `umask 002`
# could not widen them.  Now the agent starts with umask 022 (docs/sandbox.md,
# "Environment") and the serving thread creates with the mode the kernel
# sent, which the agent's umask already narrowed (docs/fsrv.md).  Under
# `run`, `serve` + `run --connect`, and (with a private /dev/fuse node) a
# broker that is not root.  The broker's explicit creates (capcall fs.write,
# fs.mkdir) have the mode asked for.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "the agent's umask on served files" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4244
W="$T_TMP/ws"
mkdir -p "$W"
printf 'int main(void) { return 0; }\n' >"$W/p.c"
chown -R "$OWN:$OWN" "$W"
# What the agent does: print its umask, make a file, a directory and a
# program (cc sets the execute bits), then the same under umask 027.
AGENT='umask; echo a >f1; mkdir d1; cc -o p1 p.c; umask 027; echo b >f2; mkdir d2; mkdir -p d3/e;
	umask 002; echo c >f3'
modes() { (cd "$W" && stat -c '%n %a' f1 d1 p1 f2 d2 d3/e f3 2>&1 | tr '\n' ' '); }
WANT='f1 644 d1 755 p1 755 f2 640 d2 750 d3/e 750 f3 664 '

out=$(timeout 120 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c "$AGENT" 2>&1)
t_is "run: the agent starts with umask 0022" "$out" "0022"
t_is "... and what it makes in the workspace has its umask's modes on the host" "$(modes)" "$WANT"
t_is "... still the owner's" "$(stat -c %u "$W/f1")" "$OWN"
t_is "the low tier's agent has umask 0022 too (its /tmp files 0644)" \
	"$(timeout 60 "$CB" run --tier low -- "$PYTHON" -c 'import os
u = os.umask(0o22); open("/tmp/x", "w").close(); print("%04o %o" % (u, os.stat("/tmp/x").st_mode & 0o777))' 2>&1)" \
	"0022 644"
rm -rf "$W/f1" "$W/d1" "$W/p1" "$W/f2" "$W/d2" "$W/d3" "$W/f3"

# The broker's own creates for an agent (capcall, the client libraries,
# MCP's write_file) have the mode asked for, or the documented default
# (0644, 0755): the broker's 077 took the group's and others' bits.
timeout 120 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c "
	echo a | capcall fs.write '$W/w1' && echo b | capcall fs.write --mode 0640 '$W/w2' &&
	capcall fs.mkdir '$W/m1' && capcall fs.mkdir --mode 0750 '$W/m2' &&
	echo c | capcall fs.write '$W/w1'" >"$T_TMP/o" 2>&1
t_is "capcall fs.write, fs.mkdir: the modes asked for, or 0644 and 0755" \
	"$(cd "$W" && stat -c '%n %a' w1 w2 m1 m2 2>&1 | tr '\n' ' ')" "w1 644 w2 640 m1 755 m2 750 "
t_is "... a file written again keeps its mode and gets its data" "$(stat -c %a "$W/w1"; cat "$W/w1")" \
	"$(printf '644\nc')"
rm -rf "$W/w1" "$W/w2" "$W/m1" "$W/m2"

# A daemon's agents the same (the daemon's umask is 077 as well; under
# systemd UMask=0077 too: docs/service.md).
S="$T_TMP/st"
srv_start "$S"
out=$(timeout 120 "$CB" run --connect "$S/admin.sock" --tier medium --workspace "$W" -- \
	/bin/sh -c "$AGENT" 2>&1)
t_is "run --connect: the agent starts with umask 0022" "$out" "0022"
t_is "... and its files have its umask's modes on the host" "$(modes)" "$WANT"
srv_stop
rm -rf "$W/f1" "$W/d1" "$W/p1" "$W/f2" "$W/d2" "$W/d3" "$W/f3"

# A broker that is not root: its trees are mounted by pid 1 and served by
# the same thread.  /dev/fuse made usable in a private mount namespace (as
# in 83-fs-served-unpriv.sh), never the machine's.
if command -v setpriv >/dev/null && command -v unshare >/dev/null; then
	P=$(t_public "$CB_BIN/capbroker" "$CB_BIN/capbroker-stub" "$CB_BIN/capcall")
	mknod "$T_TMP/fuse" c 10 229
	chmod 0666 "$T_TMP/fuse"
	cat >"$T_TMP/inner.sh" <<EOF
mount --bind "$T_TMP/fuse" /dev/fuse || exit 99
cd "$W" && exec setpriv --reuid=$OWN --regid=$OWN --clear-groups -- \\
	"$P/capbroker" run --tier medium --workspace "$W" -- /bin/sh -c '$AGENT'
EOF
	out=$(unshare -m --propagation private bash "$T_TMP/inner.sh" 2>&1)
	t_is "an unprivileged broker: the agent starts with umask 0022" "$out" "0022"
	t_is "... and its files have its umask's modes on the host" "$(modes)" "$WANT"
else
	t_skip "an unprivileged broker: the agent's umask" "needs setpriv and unshare"
fi
t_done
