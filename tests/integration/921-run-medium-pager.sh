#!/usr/bin/env bash
# 921-run-medium-pager.sh - git on a terminal in the medium tier shows its
# output without an error first.  `capbroker run` from a terminal gives the
# agent a pty, git then pages its log and diff through `pager` (less), and
# the medium tier may start only its listed programs, no pager among them:
# every `git log` began "fatal: cannot exec 'pager': Permission denied"
# (git went on without it).  The medium tier's environment now says
# PAGER=cat (docs/sandbox.md, "Environment"); --setenv still replaces it,
# and the high tier, which may run any pager, is not told.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "git's pager on a medium sandbox's terminal" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W"
git -C "$W" init -q
git -C "$W" -c user.email=a@b.c -c user.name=t commit -q --allow-empty -m "the first commit"
chown -R 4247:4247 "$W"
pty() { "$PYTHON" "$CB_TOP/tests/integration/ptydrive.py" "" "$CB" run --approve deny \
	--workspace "$W" "$@" 2>&1 | tr -d '\r'; }

out=$(pty --tier medium -- /bin/sh -c 'test -t 1 && echo on-a-tty; git log --oneline -1')
t_is "medium, on a terminal: git log shows the log" \
	"$(printf '%s' "$out" | grep -E -c '^on-a-tty$|the first commit')" 2
t_is "... with no pager error" "$(printf '%s' "$out" | grep -c "cannot exec")" 0
t_is "... its environment says PAGER=cat" \
	"$(pty --tier medium -- /bin/sh -c 'echo "P=$PAGER"' | grep '^P=')" "P=cat"
t_is "--setenv PAGER replaces it" \
	"$(pty --tier medium --setenv PAGER more -- /bin/sh -c 'echo "P=$PAGER"' | grep '^P=')" "P=more"
t_is "the high tier (any pager may run) is not told" \
	"$(pty --tier high -- /bin/sh -c 'echo "P=${PAGER-unset}"' | grep '^P=')" "P=unset"
t_done
