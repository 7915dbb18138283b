#!/usr/bin/env bash
# 919-fs-served-host-new-file.sh - a file made outside the mount (by the
# user on the host, by capcall, by another sandbox on the same workspace)
# after the agent looked for it shows within about a second.  The kernel
# remembered "no such name" as long as it keeps a name, 10 s
# (BRK_FSS_TIMEOUT), so an agent told "I have created config.yaml" that had
# looked for it before found nothing, `ls config.yaml` included, for up to
# 10 s.  Now a name's absence is kept 1 s (fsrv_cfg.negative_timeout;
# docs/fsrv.md), names that exist still 10 s (git status runs from them).
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "a file made on the host shows" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W"
# The agent looks for late.txt (twice: the second lookup would be the
# cached one), says so through a file the host sees at once, then tries
# every 0.1 s for 8 s and prints how many tries it took.
timeout 120 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/bash -c '
	ls late.txt 2>/dev/null; cat late.txt 2>/dev/null; echo >looked
	for i in $(seq 80); do
		if cat late.txt >/dev/null 2>&1; then echo "seen $i"; exit 0; fi
		sleep 0.1
	done
	echo "not seen"' >"$T_TMP/out" 2>&1 &
AG=$!
for i in $(seq 300); do [ -e "$W/looked" ] && break; sleep 0.05; done
echo hello >"$W/late.txt"
wait "$AG"
tries=$(sed -n 's/^seen \([0-9]*\)$/\1/p' "$T_TMP/out")
t_match "the agent sees a file the host made after it looked" "$(cat "$T_TMP/out")" "^seen [0-9]+$"
t_ok "... within 2 s, not the 10 s names are kept (tries of 0.1 s: ${tries:-none})" \
	test "${tries:-999}" -le 20
t_is "a name the agent made itself is there at once, and gone at once" \
	"$(timeout 60 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c \
	'cat new 2>/dev/null; echo x >new && cat new && rm new && cat new 2>&1 | grep -c "No such"')" \
	"$(printf 'x\n1')"
t_done
