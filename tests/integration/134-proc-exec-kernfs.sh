#!/usr/bin/env bash
# 134-proc-exec-kernfs.sh - proc.exec never shows its tool a kernel file
# system.  A proc.exec child sees the roots of the presenting token's
# fs.read grants, bound recursively; with a procfs mounted beneath such a
# root on the host (a chroot's /proc), the tool read the host's process
# list and every process's command line, which capcall fs.read refuses
# (red team; docs/threat-model.md, "Reach the broker itself").  Such a root
# is now left out, as one that does not resolve; one without a kernel file
# system beneath it is bound as before.  Runs in a mount namespace of its
# own.  Needs root (mount).
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
	t_skip "kernel file systems beneath a proc.exec root" "needs root and unshare"
	t_done
	exit
fi

K="$T_TMP/chroot"
P="$T_TMP/plain"
mkdir -p "$K/proc" "$P"
echo inside >"$K/f"
echo plain >"$P/f"
chmod 0755 "$T_TMP" "$K" "$P"

cat >"$T_TMP/inner.sh" <<EOF
mount -t proc proc '$K/proc' || exit 3
timeout 60 '$CB' run --tier high --approve deny --grant 'fs.read:$K/**' --grant 'fs.read:$P/**' \
	--grant proc.exec:/usr/bin/cat --grant proc.exec:/usr/bin/ls -- /bin/sh -c "
	capcall proc.exec -- /usr/bin/ls '$K/proc' >/dev/null 2>&1; echo l=\\\$?
	capcall proc.exec -- /usr/bin/cat '$K/proc/1/cmdline' >/dev/null 2>&1; echo c=\\\$?
	capcall proc.exec -- /usr/bin/cat '$K/f' >/dev/null 2>&1; echo f=\\\$?
	capcall proc.exec -- /usr/bin/cat '$P/f'"
EOF
out=$(unshare -m --propagation private bash "$T_TMP/inner.sh" 2>&1)
echo "$out" | sed 's/^/# /'
t_match "a tool cannot list a procfs beneath its fs.read root" "$out" "l=[12]"
t_match "... nor read a host process's command line there" "$out" "c=1"
t_match "... the root is not shown at all" "$out" "f=1"
t_match "a root without a kernel file system beneath is shown" "$out" "^plain$"
t_done
