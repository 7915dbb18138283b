#!/usr/bin/env bash
# 88-cluster-same-name.sh - one name, one broker (docs/cluster.md).  A
# broker's name in the cluster is HOST:STATE_DIR; a host cloned with its
# state (same hostname, same state path) runs a second broker under the
# same name.  Here the clone is the same host with another directory
# mounted at broker 1's state path, in a mount namespace of its own.
#  - the clone is refused at start (exit 125, why on stderr and in its
#    log) and writes nothing under the name: one row in cb_brokers (broker
#    1's instance), broker 1's key alone, broker 1 still fresh;
#  - broker 1 killed with kill -9 and started again: it takes its name
#    back once its old row is no longer live;
#  - broker 1 stopped longer than the bound while the clone starts: the
#    clone takes the name; broker 1, resumed, finds it held, says so
#    (cluster.conflict) and fails closed; the clone stopped, broker 1 takes
#    its name back and is fresh again.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
. "$(dirname "$0")/cluster_lib.sh"

trap cl_cleanup EXIT

cl_need_pg "brokers with the same name"
if ! unshare -m true 2>/dev/null; then
	t_skip "brokers with the same name" "unshare -m is not permitted here (a clone needs a mount namespace)"
	t_done
	exit
fi
NETNS=()

t_ok "a private PostgreSQL starts (unix socket only)" pg_start
P="$T_TMP/policy.conf"
printf 'version = 1;\ndefaults = { cluster_stale = 1; };\n' >"$P"
chmod 0600 "$P"
mkdir -p "$T_TMP/s1" "$T_TMP/clone"

# The clone: its own state directory, mounted at broker 1's state path.
# Its admin socket is $T_TMP/clone/admin.sock from here.  Run in the
# background, its pid is the broker's (every step execs the next).
clone_serve() {
	exec unshare -m sh -c 'mount --bind "$1" "$2" && exec "$3" serve --state "$2" --policy "$4" --cluster "$5"' \
		sh "$T_TMP/clone" "$T_TMP/s1" "$CB" "$P" "$PG_CONN"
}
clone_fresh() { "$CTL" --state "$T_TMP/clone" status 2>/dev/null | grep -q '^cluster .*, fresh,'; }
b1_stale() { ctl 1 status 2>/dev/null | grep -q '^cluster .*STALE'; }
rows() { pg_sql "SELECT count(*) FROM cb_brokers"; }
inst() { pg_sql "SELECT encode(instance, 'hex') FROM cb_brokers WHERE name = '$NAME'"; }

t_ok "broker 1 starts in the cluster" b_start 1
NAME=$(pg_sql "SELECT name FROM cb_brokers")
I1=$(inst)
t_match "it holds its name with an instance token of its own" "$I1" '^[0-9a-f]{32}$'

clone_serve >"$T_TMP/clone.out" 2>"$T_TMP/clone.err" &
CPID=$!
_adm_pids+=("$CPID")
# refused after the bound (1 s) and a second: not a crashed predecessor's row
for i in $(seq 150); do kill -0 "$CPID" 2>/dev/null || break; sleep 0.1; done
kill -9 "$CPID" 2>/dev/null	# still serving after 15 s: it was not refused
wait "$CPID"
t_is "a second broker under the same name is refused at start (exit 125)" "$?" 125
t_match "... and says why on stderr" "$(cat "$T_TMP/clone.err")" \
	"broker $NAME: another live broker holds this broker's name in the cluster \(instance ${I1:0:8}.*refusing to start"
t_ok "... and in its audit log" grep -q '"op":"cluster.conflict".*refusing to start' "$T_TMP/clone/audit.jsonl"
t_is "the cluster still lists one broker under that name, broker 1's instance" "$(rows) $(inst)" "1 $I1"
t_is "the clone published no key under the name" \
	"$(pg_sql "SELECT count(*) FROM cb_keys WHERE broker = '$NAME'")" 1
t_ok "broker 1 is still fresh" b_fresh 1
t_ok "... and reads the cluster's views" ctl 1 list --cluster

# A crash is not a clone: its row stops being live within the bound.
{ kill -9 "${BPID[1]}"; wait "${BPID[1]}"; } 2>/dev/null
t_ok "broker 1 killed with kill -9 starts again under its name" b_start 1
I2=$(inst)
t_ok "... with a new instance token" test "$I2" != "$I1" -a "$(rows)" = 1

# Away longer than the bound while the clone starts: the clone takes the
# name; broker 1 comes back to find it held.
kill -STOP "${BPID[1]}"
sleep 1.5
clone_serve >"$T_TMP/clone2.out" 2>"$T_TMP/clone2.err" &
CPID=$!
_adm_pids+=("$CPID")
t_ok "broker 1 stopped beyond the bound: the clone takes the name" wait_for 100 clone_fresh
I3=$(inst)
kill -CONT "${BPID[1]}"
t_ok "broker 1, resumed, fails closed" wait_for 100 b1_stale
t_ok "... and says that its name is held" \
	wait_for 200 grep -q '"op":"cluster.conflict".*failing closed until it stops' "$T_TMP/s1/audit.jsonl"
t_is "... while the clone keeps the name (one row, its instance)" "$(rows) $(inst)" "1 $I3"
t_ok "... and the clone stays fresh" clone_fresh
kill -TERM "$CPID"
wait "$CPID"
t_is "the clone stops cleanly" "$?" 0
t_ok "broker 1 takes its name back and is fresh again" wait_for 100 b_fresh 1
t_is "... under its own instance" "$(rows) $(inst)" "1 $I2"
t_done
