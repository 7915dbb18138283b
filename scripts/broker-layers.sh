#!/usr/bin/env bash
# scripts/broker-layers.sh ROOT - check the layering inside broker/ that
# docs/architecture.md describes, from the #include lines of ROOT/broker:
#  - the program (main.c, service.c) sees broker.h only: no private header;
#  - the channel (chan.c) calls no handler, no dispatcher and nothing that
#    owns a sandbox (it reports a closed channel through brk.chan_closed);
#  - a handler (ops_*.c) never calls the dispatcher back;
#  - nothing below the sandbox's owner (sbx.c) or the admin socket
#    (admin.c) calls them: the dispatcher, the handlers, the approvals, the
#    connect notifier, the resolver, /etc/hosts and the file server reach them only
#    through the callbacks brk_new sets (core.h: chan_closed, sbx_free,
#    request_arrived, tokens_changed);
#  - the leaves (commit.c, budget.c, hostaddr.c, work.c, reap.c, tokens.c) call
#    nothing above them.
# Prints one line per broken rule and exits 1; exits 0 when all hold.
set -u
root=${1:?usage: broker-layers.sh ROOT}
b="$root/broker"
bad=0

# includes FILE: the broker headers FILE includes, one per line.
includes() {
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"broker\/\([a-z_]*\.h\)".*/\1/p' "$1"
}

# forbid FILE HEADER...: FILE includes none of HEADER.
forbid() {
	local f=$1 h
	shift
	[ -f "$b/$f" ] || return 0
	for h in "$@"; do
		if includes "$b/$f" | grep -qx "$h"; then
			echo "broker/$f includes broker/$h"
			bad=1
		fi
	done
}

# Every header of broker/ but the program's own (broker.h, service.h) is
# private to the broker's files.
private=$(cd "$b" && ls ./*.h 2>/dev/null | sed 's|^\./||' | grep -vx -e broker.h -e service.h)
# shellcheck disable=SC2086 # word splitting is the point
forbid main.c $private
# shellcheck disable=SC2086
forbid service.c $private
forbid chan.c dispatch.h ops.h sbx.h approval.h admin.h tokens.h commit.h work.h fs_served.h
for f in "$b"/ops_*.c; do
	[ -f "$f" ] && forbid "$(basename "$f")" dispatch.h admin.h
done
for f in dispatch.c approval.c notify.c dns.c hosts.c fs_served.c "$b"/ops_*.c; do
	forbid "$(basename "$f")" sbx.h admin.h
done
for f in commit.c budget.c hostaddr.c work.c reap.c; do
	forbid "$f" chan.h dispatch.h ops.h tokens.h sbx.h approval.h admin.h fs_served.h
done
# tokens.c tells the file server through brk.tokens_changed, never directly.
forbid tokens.c chan.h dispatch.h ops.h sbx.h approval.h admin.h fs_served.h
exit $bad
