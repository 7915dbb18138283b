#!/usr/bin/env bash
# 21-clone-private.sh - a checkout in a private (0700) directory works as
# root: `git clone` into a mktemp -d and `make demo` there (issue 10, hole 2:
# bind sources were opened with the agent's credentials, and the agent is
# nobody under a root broker, so capcall under root's 0700 home could not be
# bound and every sandbox failed to start).  The full `make check` from such
# a clone is the manual check in docs/threat-model.md.
. "$(dirname "$0")/../lib.sh"

if [ "$(id -u)" != 0 ]; then
	t_skip "make demo from a clone in a 0700 directory" "only a root broker runs its agent as nobody"
elif ! git -C "$CB_TOP" rev-parse --git-dir >/dev/null 2>&1; then
	t_skip "make demo from a clone in a 0700 directory" "not a git checkout"
else
	P=$(mktemp -d "$T_TMP/private.XXXXXX"); chmod 0700 "$P"
	t_ok "git clone into a 0700 directory" git clone -q "$CB_TOP" "$P/cb"
	# The clone builds and runs on its own: nothing of this run's make or
	# test environment may leak into it.
	t_ok "make demo there (as root: the agent is nobody)" env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
		-u CB_BIN -u CB_BUILD -u CB_TOP make -C "$P/cb" -j2 demo
	t_match "... the demo's agent ran in its sandbox and the audit log verifies" "$(cat "$T_TMP/out")" 'intact: '
fi
t_done
