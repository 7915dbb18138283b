#!/usr/bin/env bash
# 933-proc-argv-limit.sh - review finding: the limits on a command's words
# disagreed along the way.  The protocol carried 64 (capcall, the client
# libraries, the decoder), the launcher 1024 for the stub's whole command
# line (its options took their share first, so `capbroker run` failed from
# about 985 words on, "input exceeds the hard size limit", depending on its
# binds), and a pooled sandbox's hand-over 1024 strings with its options.
# Now one limit holds everywhere: SBX_ARGV_MAX = WIRE_ARGV_MAX = 1024 words
# (the program and its arguments), and 128 KiB, sized beside every option
# at its maximum; beyond it, E2BIG: capcall and capbroker run exit 64 (a
# usage error) saying so, the decoder answers too-big.  Both sides of the
# limit, with a pooled and with a fresh sandbox.
. "$(dirname "$0")/../lib.sh"

for n in 2 0; do
	cat >"$T_TMP/p$n.conf" <<EOT
defaults = { pool_size = $n; };
tiers = { medium = { ceiling = [ "proc.exec:/usr/bin/echo" ]; }; };
EOT
done
# ex POOL SCRIPT: a medium sandbox that may exec echo runs sh -c SCRIPT.
ex() {
	"$CB_BIN/capbroker" run --state "$T_TMP/st$1" --policy "$T_TMP/p$1.conf" --tier medium \
		--grant proc.exec:/usr/bin/echo -- /bin/sh -c "$2" 2>&1
}
takes() { grep -c '"op":"sandbox.pool.take"' "$T_TMP/st$1/audit.jsonl"; }

# At the limit: echo and 1023 arguments, 1024 words, three times.  With the
# pool, the first asks it for sandboxes of its shape; given a moment to
# build them, the next ones are handed pooled sandboxes.
AT='for i in 1 2 3; do capcall proc.exec -- /usr/bin/echo $(seq 1023) | wc -w; [ $i = 1 ] && sleep 1; done'
t_is "fresh sandboxes: a command of 1024 words runs (all its arguments arrive)" \
	"$(ex 0 "$AT" | tr '\n' ' ')" "1023 1023 1023 "
t_is "... none of them pooled" "$(takes 0)" 0
t_is "pooled sandboxes: a command of 1024 words runs" "$(ex 2 "$AT" | tr '\n' ' ')" "1023 1023 1023 "
t_ok "... handed to pooled sandboxes ($(takes 2) of 3)" test "$(takes 2)" -ge 1

# One word over: E2BIG, a usage error, and no sandbox is spent on it.
OVER='capcall proc.exec -- /usr/bin/echo $(seq 1024); echo "rc=$?"'
for n in 0 2; do
	before=$(takes $n)
	t_is "pool_size $n: 1025 words are refused, saying why, exit 64" "$(ex $n "$OVER")" \
		"capcall: proc.exec /usr/bin/echo: more arguments than the protocol allows
rc=64"
	t_is "... and no sandbox was taken for it" "$(takes $n)" "$before"
done
BIG='capcall proc.exec -- /usr/bin/echo $(head -c 70000 /dev/zero | tr "\0" a); echo "rc=$?"'
t_is "a request over 64 KiB is refused too, exit 64" "$(ex 2 "$BIG")" \
	"capcall: proc.exec /usr/bin/echo: request larger than the protocol allows
rc=64"

# capbroker run: the same limit for the agent's own command, whatever the
# options (before: set-up failed, 125, from about 985 words on).
run() { "$CB_BIN/capbroker" run --state "$T_TMP/st-run" "$@"; }
t_ok "run: a command of 1024 words runs" run -- /bin/true $(seq 1023)
t_ok "... with binds and environment taking their share of the stub's command line" \
	run --ro-bind /usr/share:/host/share --setenv A 1 --setenv B 2 --unsetenv C \
	--tier medium -- /bin/true $(seq 1023)
t_exit "run: 1025 words are a usage error (64)" 64 run -- /bin/true $(seq 1024)
t_match "... saying the limit" "$(cat "$T_TMP/err")" \
	'^capbroker: the command is too long: at most 1024 words and 131072 bytes'
A=$(head -c 70000 /dev/zero | tr '\0' a)
run_big() { run -- /bin/true "$A" "$A" >/dev/null 2>&1; echo $?; }
t_is "run: more than 128 KiB is a usage error too" "$(run_big)" 64
t_done
