#!/usr/bin/env bash
# 89-cluster-net.sh - the cluster across a network, and the audit heads it
# keeps (docs/cluster.md).  Three hosts, each a network namespace of its
# own: the database host (a private PostgreSQL, listening on TCP there) and
# two broker hosts, each joined to the database host by a veth pair
# (10.77.K.0/24); the brokers reach PostgreSQL over TCP.  Nothing is added
# to the machine's own namespace.  A sandbox "task" runs on broker 1.
#  - the network cut: broker 1's link down.  It keeps honouring a token up
#    to the staleness bound; a revoke on broker 2 meanwhile is
#    acknowledged, and by then broker 1 refuses every token (cluster-stale)
#    and issues nothing; link up: broker 1 catches up, the revoked token is
#    denied as revoked, the other honoured again;
#  - audit checkpoints: each broker's head is recorded in cb_checkpoints;
#    `capctl audit verify --cluster` passes on an intact log, and fails
#    with a clear message when broker 2 is restarted on an older copy of
#    its state and log (consistent, so its own check passes: truncated
#    against the cluster) or on a new state and log (replaced).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
. "$(dirname "$0")/cluster_lib.sh"

declare -a HOLD
net_cleanup() {
	local p
	pg_cleanup
	adm_cleanup
	for p in "${HOLD[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
}
trap net_cleanup EXIT

if ! pg_have; then
	t_skip "cluster across a network" "PostgreSQL is not installed (apt-get install postgresql libpq-dev)"
	t_done
	exit
fi

# ns_new: a process holding a new network namespace (NSPID), checked to
# be another namespace than ours before anything is configured in it.
ns_new() {
	local i
	unshare -n sleep 600 &
	NSPID=$!
	HOLD+=("$NSPID")
	for i in $(seq 100); do
		[ "$(readlink "/proc/$NSPID/ns/net" 2>/dev/null)" != "$(readlink /proc/self/ns/net)" ] &&
			[ -n "$(readlink "/proc/$NSPID/ns/net" 2>/dev/null)" ] && return 0
		sleep 0.02
	done
	return 1
}
in_ns() { local p=$1; shift; nsenter -t "$p" -n "$@"; }
# net_setup: the database host HDB and broker hosts H[1], H[2].
declare -a H
net_setup() {
	local k
	[ "$(id -u)" -eq 0 ] || return 1
	ns_new || return 1
	HDB=$NSPID
	in_ns "$HDB" ip link set lo up || return 1
	for k in 1 2; do
		ns_new || return 1
		H[$k]=$NSPID
		in_ns "$HDB" ip link add "vd$k" type veth peer name eth0 netns "${H[$k]}" &&
			in_ns "$HDB" ip addr add "10.77.$k.1/24" dev "vd$k" &&
			in_ns "$HDB" ip link set "vd$k" up &&
			in_ns "${H[$k]}" ip addr add "10.77.$k.2/24" dev eth0 &&
			in_ns "${H[$k]}" ip link set eth0 up &&
			in_ns "${H[$k]}" ip link set lo up || return 1
	done
}
if ! net_setup 2>"$T_TMP/net.err"; then
	t_skip "cluster across a network" "network namespaces joined by veth pairs are not possible here ($(head -n 1 "$T_TMP/net.err"))"
	t_done
	exit
fi

PG_NETNS=$HDB
PG_LISTEN='*'
t_ok "a private PostgreSQL starts on the database host (TCP there)" pg_start
W="$T_TMP/ws"
mkdir -p "$W"
echo "net secret" >"$W/f.txt"
P="$T_TMP/policy.conf"
printf 'version = 1;\ndefaults = { cluster_stale = 3; };\n' >"$P"
chmod 0600 "$P"

# b_start N: broker N (state $T_TMP/sN) on host N, the database over TCP.
b_start() {
	local n=$1
	(close_agent_fds; exec nsenter -t "${H[$n]}" -n "$CB" serve --state "$T_TMP/s$n" --policy "$P" \
		--cluster "host=10.77.$n.1 port=5432 dbname=postgres user=cb" >>"$T_TMP/b$n.log" 2>&1) &
	BPID[$n]=$!
	_adm_pids+=("$!")
	wait_for 150 b_fresh "$n"
}
b_stop() { kill "${BPID[$1]}" 2>/dev/null; wait "${BPID[$1]}" 2>/dev/null; }
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
declare -A TOKS
issue() {
	local j
	j=$(ctl 1 --json issue --sandbox task --cap "fs.read:$W/**") || return 1
	TOKS[$1]=$(printf '%s' "$j" | jget 'd["token"]')
	TID=$(printf '%s' "$j" | jget 'd["id"]')
}
read_with() { agent_do "$1" "capcall --token ${TOKS[$2]} fs.read $W/f.txt"; }

for n in 1 2; do
	t_ok "broker $n starts on host $n and reaches the database over TCP" b_start "$n"
done
t_match "both are registered in the database" "$(pg_sql 'SELECT count(*) FROM cb_brokers')" '^2$'
b_agent a1 1
t_ok "a token on broker 1" issue gone
GONE=$TID
t_ok "another" issue kept
read_with a1 gone
t_is "the first works" "$ARC/$AOUT" "0/net secret"

# -- the network cut ------------------------------------------------------------
t_ok "host 1's link goes down" in_ns "${H[1]}" ip link set eth0 down
read_with a1 kept
t_is "within the bound (3 s) broker 1 still honours a token it holds" "$ARC/$AOUT" "0/net secret"
t0=$EPOCHREALTIME
t_ok "a revoke on broker 2 meanwhile is acknowledged" ctl 2 revoke "$GONE"
# it waited for broker 1 until broker 1 had to be stale (the bound and a margin)
echo "# the revoke took $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }') s"
read_with a1 gone
t_is "by then broker 1 refuses the revoked token" "$ARC" 77
t_match "... as stale: it cannot know of the revocation" "$AOUT" "cluster database is unreachable"
read_with a1 kept
t_is "... and every other token" "$ARC" 77
t_match "... saying why" "$AOUT" "cluster database is unreachable"
t_exit "broker 1 issues nothing while cut off" 1 ctl 1 issue --sandbox task --cap "fs.read:$W/**"
t_match "capctl status says STALE" "$(ctl 1 status)" "STALE"
t_ok "its log says since when and why" wait_for 200 grep -q '"op":"cluster.stale"' "$T_TMP/s1/audit.jsonl"
t_ok "host 1's link comes up" in_ns "${H[1]}" ip link set eth0 up
t_ok "broker 1 reconnects and catches up" wait_for 150 b_fresh 1
read_with a1 gone
t_is "the token revoked during the cut is denied on broker 1" "$ARC" 77
t_match "... as revoked" "$AOUT" "revoked"
t_ok "... the revocation is in broker 1's log, naming broker 2" \
	wait_for 200 grep -q "\"op\":\"revoke\",\"resource\":\"$GONE\".*by broker .*/s2 of the cluster" "$T_TMP/s1/audit.jsonl"
read_with a1 kept
t_is "the other token is honoured again" "$ARC/$AOUT" "0/net secret"

# -- audit checkpoints held by the cluster -----------------------------------------
heads_of() { pg_sql "SELECT coalesce(max(seq), -1) FROM cb_checkpoints WHERE broker LIKE '%/s$1'"; }
both_heads() { [ "$(heads_of 1)" -ge 0 ] && [ "$(heads_of 2)" -ge 0 ]; }
t_ok "each broker's audit head is recorded in cb_checkpoints" wait_for 100 both_heads
t_ok "broker 1's intact log verifies against the cluster" ctl 1 audit verify --cluster
t_match "... holding the head recorded for it" "$(cat "$T_TMP/out")" "^cluster: holds the head the cluster recorded"
t_match "... and listing both brokers' heads and their age" \
	"$(grep -cE '/s[12]  log [0-9a-f]{32}  line [0-9]+  recorded [0-9.]+ s ago  live' "$T_TMP/out")" '^2$'
j=$(ctl 1 --json audit verify --cluster)
t_match "--json says so too" "$(printf '%s' "$j" | jget 'd["cluster"]["intact"], len(d["cluster"]["heads"])')" \
	'^\(True, 2\)$'

# Broker 2 on an older copy of its state and log: consistent, so it starts
# and its own check passes; only the cluster remembers how far it reached.
b_stop 2
cp -a "$T_TMP/s2" "$T_TMP/s2.old"
snap_lines=$(wc -l <"$T_TMP/s2.old/audit.jsonl")
t_ok "broker 2 starts again" b_start 2
for i in 1 2 3; do ctl 2 rotate-key >/dev/null || break; done
past_snap() { [ "$(heads_of 2)" -ge "$snap_lines" ]; }
t_ok "its head moves on in the cluster, past the copy's last line" wait_for 100 past_snap
rec=$(heads_of 2)
b_stop 2
rm -rf "$T_TMP/s2"
mv "$T_TMP/s2.old" "$T_TMP/s2"
t_ok "broker 2 starts on the older copy" b_start 2
t_ok "... whose log alone verifies" ctl 2 audit verify
t_exit "audit verify --cluster finds it" 1 ctl 2 audit verify --cluster
t_match "... truncated against the head the cluster recorded" "$(cat "$T_TMP/out")" \
	"^cluster: NOT INTACT \(truncated\): against the head the cluster recorded for broker .*/s2 \(line $((rec + 1)),"
t_match "... the report as a whole is NOT INTACT" "$(cat "$T_TMP/out")" "^NOT INTACT"
t_ok "broker 2 says so in its log" wait_for 50 grep -q '"op":"cluster.audit"' "$T_TMP/s2/audit.jsonl"
sleep 1.2
t_is "... and leaves the cluster's record as it was" "$(heads_of 2)" "$rec"

# Broker 2 on a new state and log (a replacement, signed with a new key).
b_stop 2
mv "$T_TMP/s2" "$T_TMP/s2.rolled"
t_ok "broker 2 starts on a new state" b_start 2
t_ok "... whose new log alone verifies" ctl 2 audit verify
t_exit "audit verify --cluster finds it" 1 ctl 2 audit verify --cluster
t_match "... replaced: the cluster recorded another log for it" "$(cat "$T_TMP/out")" \
	"^cluster: NOT INTACT \(replaced\): the cluster recorded another audit log for broker .*/s2"
t_ok "broker 1's log still verifies against the cluster" ctl 1 audit verify --cluster

agent_stop a1
for n in 1 2; do
	b_stop "$n"
	t_ok "broker $n's log verifies after the run" ctl "$n" audit verify
done
t_done
