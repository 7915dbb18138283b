#!/usr/bin/env bash
# 26-proc-pool.sh - issue 16, the warm pool: proc.exec takes a pre-built
# sandbox when one fits.  A pooled sandbox must behave exactly as a fresh
# one (the same tasks give the same results with defaults.pool_size 2 and
# 0), serve one task only (a task's files, processes and environment never
# reach the next), be handed over under the id of the task, with an audit
# line, after the token is checked (a token revoked while a sandbox waits in
# the pool does not run anything), and the pool refills.
. "$(dirname "$0")/../lib.sh"

BIND="$CB_TOP/tests/integration:/t"
for n in 2 0; do
	cat >"$T_TMP/p$n.conf" <<EOT
defaults = { pool_size = $n; };
tiers = { medium = { ceiling = [ "proc.exec:/usr/bin/dash", "proc.exec:/usr/bin/cat",
  "proc.exec:/usr/bin/true" ]; }; };
EOT
done
# No --workspace: its fs.read token would show the workspace to every
# proc.exec child, a bind the pool's sandboxes are not built with.
run_tasks() { # POOL_SIZE
	"$CB_BIN/capbroker" run --state "$T_TMP/st$1" --policy "$T_TMP/p$1.conf" --tier medium \
		--ro-bind "$BIND" --grant "proc.exec:/usr/bin/dash" --grant "proc.exec:/usr/bin/cat" \
		--grant "proc.exec:/usr/bin/true" -- /usr/bin/python3 /t/pool_agent.py tasks \
		>"$T_TMP/out$1" 2>"$T_TMP/err$1"
}
# until TENTHS CMD...: CMD succeeds within TENTHS tenths of a second.
until_ok() { local n=$1; shift
	while ! "$@" >/dev/null 2>&1; do n=$((n - 1)); [ "$n" -gt 0 ] || return 1; sleep 0.1; done; }
takes() { grep -c '"op":"sandbox.pool.take"' "$T_TMP/st$1/audit.jsonl"; }
# Each task's own id differs (…-x2, …-x3): everything else must be equal.
norm() { sed -E 's/sbx-[0-9a-f]+-x[0-9]+/ID/g' "$1"; }

t_ok "the tasks run with the pool (pool_size 2)" run_tasks 2
t_ok "... and without it (pool_size 0, as before the pool)" run_tasks 0
t_is "every task gives the same result from a pooled and a fresh sandbox" \
	"$(norm "$T_TMP/out2")" "$(norm "$T_TMP/out0")"
t_is "... seven results each" "$(wc -l <"$T_TMP/out2") $(wc -l <"$T_TMP/out0")" "7 7"
t_match "output, error output and status are relayed" "$(sed -n 1p "$T_TMP/out2")" \
	'"err": "err\\n", "out": "out\\n", "status": 3'
t_match "stdin is the request's data" "$(sed -n 2p "$T_TMP/out2")" '"out": "hello from stdin\\n"'
t_match "a pooled sandbox gets the task's id (hostname, /etc/hostname, CAPBROKER_SANDBOX)" \
	"$(sed -n 3p "$T_TMP/out2")" '"out": "id-given\\n'
t_match "a task's marker, file and environment do not reach the next task" \
	"$(sed -n 5p "$T_TMP/out2")" '"out": "clean\\nprocs: /proc/1 /proc/2\\nleak=none\\n"'
t_match "the low tier's one exec holds in a pooled sandbox" "$(sed -n 6p "$T_TMP/out2")" \
	'status=(126|127|2)|"status": (126|127|2)'
t_match "... /tmp is its own, empty and writable" "$(sed -n 7p "$T_TMP/out2")" '"out": "tmp: /tmp/\*\\nwrote\\n"'
n2=$(takes 2)
t_ok "with the pool, the tasks after the first were handed pooled sandboxes ($n2 of 7)" \
	test "$n2" -ge 6
t_is "without it, none" "$(takes 0)" 0
t_ok "the pool refilled: more tasks were handed over than it holds (2)" test "$n2" -gt 2

# The audit line of each hand-over names the task's sandbox id, which is
# the id the task itself saw, and precedes the task's proc.exec line.
ids=$(sed -n 's/.*"op":"sandbox.pool.take","resource":"\([^"]*\)".*/\1/p' "$T_TMP/st2/audit.jsonl")
t_is "every hand-over is audited under a distinct task id" \
	"$(sort -u <<<"$ids" | wc -l)" "$n2"
t_match "... named like a fresh child (PARENT-xN)" "$(head -1 <<<"$ids")" '^sbx-[0-9a-f]+-x[0-9]+$'
t_ok "... each pooled sandbox is a different process (stub pid)" test \
	"$(grep -o '"op":"sandbox.pool.take".*stub pid [0-9]*' "$T_TMP/st2/audit.jsonl" |
		sed 's/.*stub pid //' | sort -u | wc -l)" = "$n2"
first=$(grep -n '"op":"sandbox.pool.take"' "$T_TMP/st2/audit.jsonl" | head -1 | cut -d: -f1)
t_match "... followed by the task's proc.exec decision" \
	"$(sed -n "$((first + 1))p" "$T_TMP/st2/audit.jsonl")" '"op":"proc.exec","resource":"/usr/bin/[a-z]+".*"decision":"allow"'

# A token revoked while a sandbox waits in the pool runs nothing: the pool
# holds no token, the request is checked when it comes.
"$CB_BIN/capbroker" run --state "$T_TMP/str" --policy "$T_TMP/p2.conf" --tier medium \
	--ro-bind "$BIND" --grant "proc.exec:/usr/bin/true" \
	-- /usr/bin/python3 /t/pool_agent.py revoked 3 >"$T_TMP/outr" 2>"$T_TMP/errr" &
rpid=$!
t_ok "the agent's first exec ran and the pool filled" until_ok 100 grep -q WARM "$T_TMP/outr"
tid=$(sed -n 's/.*"op":"issue","resource":"proc.exec:\/usr\/bin\/true","token":"\([0-9a-f]*\)".*/\1/p' \
	"$T_TMP/str/audit.jsonl" | head -1)
t_ok "the token is revoked while pooled sandboxes wait" \
	"$CB_BIN/capctl" --socket "$T_TMP/str/admin.sock" revoke "$tid"
wait "$rpid"
t_match "... and the next exec is refused" "$(tail -1 "$T_TMP/outr")" '"refused": "revoked"'
t_is "... without a hand-over" "$(takes r)" 0

# A pooled sandbox waits with its agent process already forked and locked
# (no capability, no new privileges, the tier's seccomp filter): the hand-
# over adds only the task's own steps (docs/sandbox.md, "The warm pool").
"$CB_BIN/capbroker" run --state "$T_TMP/stl" --policy "$T_TMP/p2.conf" --tier medium \
	--ro-bind "$BIND" --grant "proc.exec:/usr/bin/true" \
	-- /usr/bin/python3 /t/pool_agent.py revoked 60 >"$T_TMP/outl" 2>"$T_TMP/errl" &
lpid=$!
waiting() { # the agents waiting in lpid's pooled sandboxes (outer stub > pid 1 > agent)
	local s p
	for s in $(pgrep -P "$lpid" -x capbroker-stub); do
		for p in $(pgrep -P "$s"); do pgrep -P "$p" -x capbroker-stub; done
	done
}
some_waiting() { test -n "$(waiting)"; }
t_ok "a pooled sandbox's agent is forked before its hand-over" until_ok 150 some_waiting
a=$(waiting | head -1)
t_match "... with no capability, no new privileges and the seccomp filter on" \
	"$(grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' "/proc/$a/status" 2>&1 | tr -s '\t\n' '  ')" \
	'^CapPrm: 0+ CapEff: 0+ CapBnd: 0+ NoNewPrivs: 1 Seccomp: 2 $'
kill -KILL "$a"
t_ok "... a waiting agent that dies takes its sandbox out of the pool (audited)" until_ok 100 \
	grep -q '"op":"sandbox.pool.failed".*exited before its hand-over' "$T_TMP/stl/audit.jsonl"
kill -TERM "$lpid"
wait "$lpid"

# A workspace (an fs.read grant) is shown to every proc.exec child: the pool
# builds sandboxes with that bind too, and hands one over only while the
# path still names the directory it was built with.
W="$T_TMP/ws"
mkdir -p "$W" && echo old >"$W/f"
cat >"$T_TMP/pw.conf" <<EOT
defaults = { pool_size = 2; };
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**", "proc.exec:/usr/bin/cat", "proc.exec:/usr/bin/true" ]; }; };
EOT
"$CB_BIN/capbroker" run --state "$T_TMP/stw" --policy "$T_TMP/pw.conf" --tier medium --workspace "$W" \
	--ro-bind "$BIND" --grant "proc.exec:/usr/bin/cat" --grant "proc.exec:/usr/bin/true" \
	-- /usr/bin/python3 /t/pool_agent.py ws "$W/f" 3 >"$T_TMP/outw" 2>"$T_TMP/errw" &
wpid=$!
t_ok "with a workspace, the tasks run" until_ok 150 grep -q WARM "$T_TMP/outw"
t_is "... and see it, from a pooled sandbox too" "$(sed -n 's/.*"out": "\([a-z]*\)\\n".*/\1/p' "$T_TMP/outw")" \
	"old
old"
t_ok "... which was built with the workspace bind" test "$(takes w)" -ge 1
before=$(takes w)
mv "$W" "$T_TMP/ws-moved" && mkdir "$W" && echo new >"$W/f" && chmod 755 "$W"
wait "$wpid"
t_is "a workspace replaced while sandboxes wait: the next task sees the new one" \
	"$(tail -1 "$T_TMP/outw" | sed -n 's/.*"out": "\([a-z]*\)\\n".*/\1/p')" new
t_is "... not from a sandbox built with the old one (no hand-over)" "$(takes w)" "$before"

# A broker that ends with sandboxes in its pool ends them in order: their
# cgroups (root only) are removed, none is left behind.  Only cgroups made
# after the stamp count: a shared machine can hold stale ones of an earlier
# process that had the same pid (pid_max is often 32768).
if [ "$(id -u)" = 0 ]; then
	touch "$T_TMP/cg-stamp"
	"$CB_BIN/capbroker" run --state "$T_TMP/stc" --policy "$T_TMP/p2.conf" --tier medium \
		--ro-bind "$BIND" --grant "proc.exec:/usr/bin/true" \
		-- /usr/bin/python3 /t/pool_agent.py revoked 0.5 >"$T_TMP/outc" 2>&1 &
	cpid=$!
	wait "$cpid"
	t_is "a broker ending with a full pool leaves no cgroup behind" \
		"$(find /sys/fs/cgroup -maxdepth 5 -name "capbroker.$cpid.*" -newer "$T_TMP/cg-stamp" \
		2>/dev/null)" ""
fi

# The policy key.
t_match "show-policy prints defaults.pool_size" "$("$CB_BIN/capbroker" show-policy)" 'pool_size = 2;'
printf 'defaults = { pool_size = 17; };\n' >"$T_TMP/bad.conf"
t_exit "a pool_size above 16 is refused" 1 "$CB_BIN/capbroker" check-policy "$T_TMP/bad.conf"
printf 'defaults = { pool_size = -1; };\n' >"$T_TMP/bad.conf"
t_exit "a negative pool_size is refused" 1 "$CB_BIN/capbroker" check-policy "$T_TMP/bad.conf"
t_done
