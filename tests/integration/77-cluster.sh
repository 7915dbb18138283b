#!/usr/bin/env bash
# 77-cluster.sh - three brokers, one revocation, through PostgreSQL
# (docs/cluster.md).  A private PostgreSQL (initdb, pg_ctl, a unix socket in
# a temporary directory) and three `capbroker serve --cluster`, each in a
# network namespace of its own standing for a host of its own.  A sandbox
# called "task" runs on broker 1 and on broker 3.
#  - a token minted on broker 1 verifies on broker 3;
#  - a revoke on broker 2 denies the very next operation on brokers 1 and 3;
#  - kill -9 of broker 2 in the middle of a stream of revokes, and of
#    PostgreSQL in the middle of another: every acknowledged revocation is
#    in the database and denied on brokers 1 and 3;
#  - the database stops answering (its processes stopped, as a cut network
#    leaves them): after the staleness bound broker 3 denies a valid token
#    (cluster-stale) and broker 1 issues nothing; when it answers again
#    they resume.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
. "$(dirname "$0")/cluster_lib.sh"

trap cl_cleanup EXIT

cl_need_pg "cluster"
cl_netns

t_ok "a private PostgreSQL starts (unix socket only)" pg_start
W="$T_TMP/ws"
mkdir -p "$W"
echo "fleet secret" >"$W/f.txt"
P="$T_TMP/policy.conf"
printf 'version = 1;\ndefaults = { cluster_stale = 1; };\n' >"$P"
chmod 0600 "$P"

b_kill9() { kill -9 "${BPID[$1]}" 2>/dev/null; wait "${BPID[$1]}" 2>/dev/null; }

# b_agent NAME N: the agent loop of admin_lib.sh as sandbox "task" on broker N.
b_agent() {
	local name=$1 n=$2 fd
	rm -f "$T_TMP/$name.in"
	mkfifo "$T_TMP/$name.in"
	(close_agent_fds; exec "$CB" run --connect "$T_TMP/s$n/admin.sock" --id task --tier medium \
		--workspace "$W" -- /bin/sh -c "$_AGENT_LOOP" <"$T_TMP/$name.in" >"$T_TMP/$name.out" \
		2>"$T_TMP/$name.err") &
	APID[$name]=$!
	_adm_pids+=("$!")
	exec {fd}>"$T_TMP/$name.in"
	AFD[$name]=$fd
	ASEQS[$name]=0
	agent_do "$name" true
}

# issue NAME: a token for "task" minted on broker 1; TOK (its text, also
# TOKS[NAME]) and TID set.
declare -A TOKS
issue() {
	local j
	j=$(ctl 1 --json issue --sandbox task --cap "fs.read:$W/**") || return 1
	TOK=$(printf '%s' "$j" | jget 'd["token"]')
	TID=$(printf '%s' "$j" | jget 'd["id"]')
	TOKS[$1]=$TOK
}
# read_with AGENT NAME: fs.read presenting exactly the token NAME (base64url
# and dots: safe in the agent's shell line).
read_with() { agent_do "$1" "capcall --token ${TOKS[$2]} fs.read $W/f.txt"; }

for n in 1 2 3; do
	t_ok "broker $n starts in the cluster and catches up" b_start "$n"
done
t_match "each broker is registered in the database" "$(pg_sql 'SELECT count(*) FROM cb_brokers')" '^3$'
t_match "... and its key published" "$(pg_sql 'SELECT count(*) FROM cb_keys')" '^3$'
b_agent a1 1
b_agent a3 3

# -- one token, three hosts --------------------------------------------------
t_ok "capctl issue on broker 1" issue t1
T1ID=$TID
kid_hex=$(printf '%s' "$TOK" | "$PYTHON" -c 'import base64, sys
t = sys.stdin.read().split(".")[1]
b = base64.urlsafe_b64decode(t + "=" * (-len(t) % 4))
i = b.index(b"kid")
print(b[i + 5:i + 13].hex())')
t_ok "its key is broker 1's, not broker 3's own" test ! -e "$T_TMP/s3/keys/$kid_hex.pub"
read_with a3 t1
t_is "the token minted on broker 1 verifies on broker 3" "$ARC/$AOUT" "0/fleet secret"
read_with a1 t1
t_is "... and on broker 1" "$ARC/$AOUT" "0/fleet secret"

# -- a revoke on broker 2 ------------------------------------------------------
t_ok "capctl revoke on broker 2 returns" ctl 2 revoke "$T1ID"
read_with a1 t1
t_is "the very next operation on broker 1 is denied" "$ARC" 77
t_match "... as revoked" "$AOUT" "revoked"
read_with a3 t1
t_is "the very next operation on broker 3 is denied" "$ARC" 77
t_match "... as revoked" "$AOUT" "revoked"
t_match "the revocation is in the database" \
	"$(pg_sql "SELECT count(*) FROM cb_revocations WHERE token = decode('$T1ID','hex')")" '^1$'
t_ok "broker 3 audits it, naming broker 2" \
	wait_for 200 grep -q "\"op\":\"revoke\",\"resource\":\"$T1ID\".*by broker .*/s2 of the cluster" "$T_TMP/s3/audit.jsonl"
t_exit "an id no broker issued is refused (unknown id)" 2 ctl 2 revoke 0123456789abcdef0123456789abcdef
t_ok "broker 2's log still verifies" ctl 2 audit verify

# -- kill -9 of broker 2 in the middle of revoking -------------------------------
# revoke_stream N FROM: revoke tokens k1..kN on broker N in order, each
# acknowledged id appended to $T_TMP/acked.FROM.
N=40
declare -a KIDS
for i in $(seq 1 $N); do
	issue "k$i" || break
	KIDS[$i]=$TID
done
t_is "$N tokens issued on broker 1" "${#KIDS[@]}" "$N"
# wait_lines FILE K: until FILE has K lines (polled every 10 ms, 10 s at most).
wait_lines() {
	local i
	for i in $(seq 1000); do
		[ "$(wc -l <"$1")" -ge "$2" ] && return 0
		sleep 0.01
	done
	return 1
}
revoke_stream() {
	local tag=$1 i
	for i in $(seq 1 $N); do
		if "$CTL" --state "$T_TMP/s2" revoke "${KIDS[$i]}" >/dev/null 2>&1; then
			echo "$i" >>"$T_TMP/acked.$tag"
		fi
	done
}
: >"$T_TMP/acked.b"
revoke_stream b &
rs=$!
wait_lines "$T_TMP/acked.b" 3
b_kill9 2
wait "$rs"
nb=$(wc -l <"$T_TMP/acked.b")
t_ok "broker 2 was killed mid-stream ($nb of $N revokes acknowledged)" test "$nb" -lt "$N"
lost=0
for i in $(cat "$T_TMP/acked.b"); do
	c=$(pg_sql "SELECT count(*) FROM cb_revocations WHERE token = decode('${KIDS[$i]}','hex')")
	[ "$c" = 1 ] || lost=$((lost + 1))
	read_with a1 "k$i"; [ "$ARC" = 77 ] || lost=$((lost + 1))
	read_with a3 "k$i"; [ "$ARC" = 77 ] || lost=$((lost + 1))
done
t_is "every acknowledged revoke is in the database and denied on brokers 1 and 3" "$lost" 0
t_ok "broker 2 starts again on its state" b_start 2
t_ok "... its log verifies" ctl 2 audit verify

# -- kill -9 of PostgreSQL in the middle of revoking ----------------------------
for i in $(seq 1 $N); do issue "k$i" && KIDS[$i]=$TID; done
: >"$T_TMP/acked.p"
revoke_stream p &
rs=$!
wait_lines "$T_TMP/acked.p" 3
pg_kill9
wait "$rs"
np=$(wc -l <"$T_TMP/acked.p")
t_ok "PostgreSQL was killed mid-stream ($np of $N revokes acknowledged)" test "$np" -lt "$N"
t_ok "PostgreSQL starts again" eval '(close_agent_fds; pg_restart)'
for n in 1 2 3; do
	t_ok "broker $n reconnects and catches up" wait_for 100 b_fresh "$n"
done
lost=0
for i in $(cat "$T_TMP/acked.p"); do
	c=$(pg_sql "SELECT count(*) FROM cb_revocations WHERE token = decode('${KIDS[$i]}','hex')")
	[ "$c" = 1 ] || lost=$((lost + 1))
	read_with a1 "k$i"; [ "$ARC" = 77 ] || lost=$((lost + 1))
	read_with a3 "k$i"; [ "$ARC" = 77 ] || lost=$((lost + 1))
done
t_is "every acknowledged revoke survived and is denied on brokers 1 and 3" "$lost" 0

# -- the database stops answering: the staleness bound ------------------------------
t_ok "a fresh token on broker 1" issue live
read_with a3 live
t_is "it works on broker 3 while the database answers" "$ARC" 0
pg_pause
sleep 1.6
read_with a3 live
t_is "after the bound (1 s) broker 3 denies it" "$ARC" 77
t_match "... saying the cluster is stale" "$AOUT" "cluster database is unreachable"
t_ok "... and audits why" wait_for 200 grep -q '"op":"cluster.stale"' "$T_TMP/s3/audit.jsonl"
t_exit "broker 1 issues nothing meanwhile" 1 ctl 1 issue --sandbox task --cap "fs.read:$W/**"
t_match "capctl status says so" "$(ctl 3 status)" "STALE"
pg_resume
t_ok "the database answers again: broker 3 catches up" wait_for 100 b_fresh 3
read_with a3 live
t_is "... and honours the token again" "$ARC/$AOUT" "0/fleet secret"
t_ok "... noted in its log" wait_for 200 grep -q '"op":"cluster.fresh"' "$T_TMP/s3/audit.jsonl"

agent_stop a1
agent_stop a3
for n in 1 2 3; do
	kill "${BPID[$n]}" 2>/dev/null
	wait "${BPID[$n]}" 2>/dev/null
	t_ok "broker $n's log verifies after the run" ctl "$n" audit verify
done
t_done
