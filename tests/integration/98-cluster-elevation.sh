#!/usr/bin/env bash
# 98-cluster-elevation.sh - elevation across the cluster, the --cluster views
# and a revoke that names the broker that did not confirm (docs/cluster.md).
# A private PostgreSQL and three `capbroker serve --cluster`, each in a
# network namespace of its own; sandbox "task" runs on broker 1, "other" on
# broker 3.
#  - a request asked on broker 1 is listed by `capctl pending` on brokers 2
#    and 3 with its cluster-wide id and its broker; approved on broker 3, it
#    reaches the sandbox on broker 1 (the agent gets and uses the token);
#    both logs say who decided where; a second approval is refused;
#  - requests of two brokers get distinct ids (both states number from 1);
#  - an approve on broker 2 and a deny on broker 3 of the same request at
#    the same instant: exactly one wins, and the agent gets that one;
#  - `capctl --cluster sandboxes` and `list --cluster` show every broker's,
#    with each sandbox's counts (tokens held, requests sent) as its broker
#    has them;
#  - a revoke while broker 3 is stopped names broker 3 as unconfirmed;
#  - broker 1 killed: its pending request is no longer listed after the
#    bound, and an approval of it is refused.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
. "$(dirname "$0")/cluster_lib.sh"

trap cl_cleanup EXIT

cl_need_pg "cluster elevation"
cl_netns

t_ok "a private PostgreSQL starts (unix socket only)" pg_start
W="$T_TMP/ws"
mkdir -p "$W"
HOST=$(cat /etc/hostname)
P="$T_TMP/policy.conf"
printf 'version = 1;\ndefaults = { cluster_stale = 2; };\n' >"$P"
chmod 0600 "$P"

# b_agent NAME N ID: the agent loop of admin_lib.sh as sandbox ID on broker N.
b_agent() {
	local name=$1 n=$2 id=$3 fd
	rm -f "$T_TMP/$name.in"
	mkfifo "$T_TMP/$name.in"
	(close_agent_fds; exec "$CB" run --connect "$T_TMP/s$n/admin.sock" --id "$id" --tier medium \
		--workspace "$W" -- /bin/sh -c "$_AGENT_LOOP" <"$T_TMP/$name.in" >"$T_TMP/$name.out" \
		2>"$T_TMP/$name.err") &
	APID[$name]=$!
	_adm_pids+=("$!")
	exec {fd}>"$T_TMP/$name.in"
	AFD[$name]=$fd
	ASEQS[$name]=0
	agent_do "$name" true
}
# rid_on N CAP: RID, the id of the pending request for CAP as broker N
# lists it (waiting up to 10 s), and RBROKER, its broker.
rid_on() {
	local i j
	RID= RBROKER=
	for i in $(seq 100); do
		j=$(ctl "$1" --json pending 2>/dev/null |
			jget '([str(r["rid"]) + " " + r.get("broker", "") for r in d if r["cap"] == sys.argv[2]] + [""])[0]' "$2" 2>/dev/null)
		if [ -n "$j" ]; then
			RBROKER=${j#* }
			RID=${j%% *}
			return 0
		fi
		sleep 0.1
	done
	return 1
}

for n in 1 2 3; do
	t_ok "broker $n starts in the cluster and catches up" b_start "$n"
done
B1=$(pg_sql "SELECT name FROM cb_brokers WHERE name LIKE '%/s1'")
B3=$(pg_sql "SELECT name FROM cb_brokers WHERE name LIKE '%/s3'")
N1=$(pg_sql "SELECT num FROM cb_broker_ids WHERE name = '$B1'")
N3=$(pg_sql "SELECT num FROM cb_broker_ids WHERE name = '$B3'")
t_match "each broker has a number of its own in the cluster" "$N1 $N3" '^[0-9]+ [0-9]+$'
b_agent a1 1 task
b_agent a3 3 other

# -- requested on broker 1, approved on broker 3 -----------------------------
agent_do a1 "capcall fs.read /etc/hostname"
t_is "before: /etc/hostname is beyond the medium ceiling on broker 1 (77)" "$ARC" 77
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 30 --reason 'need the host name' && capcall fs.read /etc/hostname"
N=$ASEQ
rid_on 3 fs.read:/etc/hostname
t_match "capctl pending on broker 3 lists broker 1's request" "$RID" '^[0-9]+$'
t_is "... naming broker 1 as its holder" "$RBROKER" "$B1"
t_is "... with a cluster-wide id: broker 1's number, then its own id" "$((RID / 1000000000))" "$N1"
R=$RID
rid_on 2 fs.read:/etc/hostname
t_is "capctl pending on broker 2 lists it too" "$RID" "$R"
ctl 2 pending >"$T_TMP/p2.txt"
t_match "... as a table with the broker under it" "$(cat "$T_TMP/p2.txt")" "broker: +$B1"
t_ok "the agent is still waiting" sh -c "! grep -q '^@@$N ' '$T_TMP/a1.out'"
t_exit "capctl approve on broker 3: 0 (once broker 1 applied it)" 0 ctl 3 approve "$RID"
agent_wait a1 "$N"
t_is "the approval reached the sandbox on broker 1: it used the token" "$ARC" 0
t_match "... reading /etc/hostname" "$AOUT" "$HOST"
t_ok "broker 1 audits the approval: who (uid) and where (broker 3)" \
	grep -q "\"sandbox\":\"task\",\"op\":\"approve\",\"resource\":\"fs.read:/etc/hostname\",.*\"actor\":\"uid:$(id -u)\",\"detail\":\"ttl 30s, scope once; request $RID, decided on broker $B3 of the cluster\"" "$T_TMP/s1/audit.jsonl"
t_ok "broker 3 audits that its administrator decided broker 1's request" \
	wait_for 200 grep -q "\"op\":\"cluster.approve\",\"resource\":\"fs.read:/etc/hostname\",.*\"detail\":\"request $RID of broker $B1: decided here, applied there\"" "$T_TMP/s3/audit.jsonl"
t_is "the database records the decision and that it was applied" \
	"$(pg_sql "SELECT state, decided_on = '$B3', applied_at IS NOT NULL, outcome FROM cb_requests WHERE id = $RID")" \
	"approved|t|t|0"
t_exit "approving it again on broker 2: 1" 1 ctl 2 approve "$RID"
t_match "... already approved, by whom and where" "$(cat "$T_TMP/err")" "already approved by uid:[0-9]+ on broker $B3"
t_exit "an id no broker holds: 2" 2 ctl 2 approve 999999999999
t_is "nothing is pending any more" "$(ctl 2 --json pending)" "[]"

# -- two brokers' requests: distinct ids; capctl watch on broker 2 hears both ---------
(close_agent_fds; exec "$CTL" --state "$T_TMP/s2" --json watch </dev/null >"$T_TMP/watch.out" 2>&1) &
WPID=$!
_adm_pids+=("$WPID")
sleep 1	# it watches and listed what was pending (nothing) by now
agent_send a1 "capcall request fs.read:/etc/os-release --ttl 30 --reason one"
N1S=$ASEQ
agent_send a3 "capcall request fs.read:/etc/os-release --ttl 30 --reason other"
N3S=$ASEQ
for i in $(seq 100); do
	[ "$(ctl 2 --json pending | jget 'len(d)')" = 2 ] && break
	sleep 0.1
done
ctl 2 --json pending >"$T_TMP/p.json"
t_is "broker 2 lists both brokers' requests" "$(jget 'sorted(r["broker"] for r in d)' <"$T_TMP/p.json")" \
	"$(printf '%s\n' "$B1" "$B3" | sort | "$PYTHON" -c 'import sys; print(sorted(sys.stdin.read().split()))')"
t_is "... under distinct ids" "$(jget 'len(set(r["rid"] for r in d))' <"$T_TMP/p.json")" 2
R3=$(jget '[r["rid"] for r in d if r["broker"] == sys.argv[2]][0]' "$B3" <"$T_TMP/p.json")
R1=$(jget '[r["rid"] for r in d if r["broker"] == sys.argv[2]][0]' "$B1" <"$T_TMP/p.json")
watch_has() { grep -q "\"event\":\"request\",\"rid\":$1,.*\"broker\":\"$2\"" "$T_TMP/watch.out"; }
t_ok "capctl watch on broker 2 streams broker 1's new request, naming its broker" wait_for 50 watch_has "$R1" "$B1"
t_ok "... and broker 3's" wait_for 50 watch_has "$R3" "$B3"
kill "$WPID" 2>/dev/null
wait "$WPID" 2>/dev/null
t_exit "broker 1 denies broker 3's request: 0" 0 ctl 1 deny "$R3" --reason "not today"
agent_wait a3 "$N3S"
t_is "the denial reached the sandbox on broker 3 (77)" "$ARC" 77
t_match "... with the reason" "$AOUT" "not today"
t_ok "broker 3 audits the denial, naming broker 1" \
	grep -q "\"sandbox\":\"other\",\"op\":\"deny\",.*\"detail\":\"not today; request $R3, decided on broker $B1 of the cluster\"" "$T_TMP/s3/audit.jsonl"

# -- an approve and a deny at the same instant on two brokers ----------------------
# race RID: approve on broker 2 and deny on broker 3 together; prints both
# exit statuses.
race() {
	(ctl 2 approve "$1" >/dev/null 2>&1; echo "a $?" >"$T_TMP/race.a") &
	local pa=$!
	(ctl 3 deny "$1" --reason raced >/dev/null 2>&1; echo "d $?" >"$T_TMP/race.d") &
	wait "$pa" $!
	echo "$(cat "$T_TMP/race.a") $(cat "$T_TMP/race.d")"
}
bad=0
RES=$(race "$R1")
agent_wait a1 "$N1S"
case "$RES" in
"a 0 d 1") [ "$ARC" = 0 ] && [ "$(pg_sql "SELECT state FROM cb_requests WHERE id = $R1")" = approved ] || bad=1 ;;
"a 1 d 0") [ "$ARC" = 77 ] && [ "$(pg_sql "SELECT state FROM cb_requests WHERE id = $R1")" = denied ] || bad=1 ;;
*) bad=1 ;;
esac
t_is "approve and deny at once: exactly one wins, and the agent got that one ($RES)" "$bad" 0
for k in 1 2 3; do
	agent_send a1 "capcall request fs.read:/etc/passwd --ttl 5 --reason race$k"
	NR=$ASEQ
	rid_on 2 fs.read:/etc/passwd
	RES=$(race "$RID")
	agent_wait a1 "$NR"
	case "$RES" in
	"a 0 d 1") [ "$ARC" = 0 ] || bad=1 ;;
	"a 1 d 0") [ "$ARC" = 77 ] || bad=1 ;;
	*) bad=1 ;;
	esac
	echo "# race $k: $RES, agent $ARC"
done
t_is "... three more times" "$bad" 0
t_is "broker 1 applied one decision per request" \
	"$(grep -cE "\"op\":\"(approve|deny)\",\"resource\":\"fs.read:/etc/(os-release|passwd)\"" "$T_TMP/s1/audit.jsonl")" 4

# -- the --cluster views -----------------------------------------------------------
sbx_view() { ctl 2 --cluster --json sandboxes | jget 'sorted(s["id"] + "@" + s["broker"] for s in d)'; }
want="['other@$B3', 'task@$B1']"
for i in $(seq 50); do [ "$(sbx_view)" = "$want" ] && break; sleep 0.1; done
t_is "capctl --cluster sandboxes on broker 2 shows broker 1's and broker 3's, each with its broker" \
	"$(sbx_view)" "$want"
t_match "... and as a table with a BROKER column" "$(ctl 2 sandboxes --cluster)" "task .*$B1"
t_is "capctl sandboxes without --cluster: broker 2's own (none)" "$(ctl 2 --json sandboxes)" "[]"
# counts N ID [--cluster]: "TOKENS REQUESTS" of sandbox ID as broker N lists it
counts() {
	ctl "$1" ${3:-} --json sandboxes |
		jget '(["%s %s" % (s["tokens"], s["requests"]) for s in d if s["id"] == sys.argv[2]] + [""])[0]' "$2"
}
# same_counts ID N: broker 2's --cluster view shows what broker N shows for its own
same_counts() { local own; own=$(counts "$2" "$1"); [ -n "$own" ] && [ "$own" = "$(counts 2 "$1" --cluster)" ]; }
t_ok "broker 2's --cluster view counts task's tokens and requests as broker 1 does" wait_for 50 same_counts task 1
t_ok "... and other's as broker 3 does" wait_for 50 same_counts other 3
C0=$(counts 2 task --cluster)
t_match "... task holds tokens and sent requests (not a 0 made up for another broker's sandbox)" \
	"$C0" '^[1-9][0-9]* [1-9][0-9]*$'
t_match "... shown in the table too" "$(ctl 2 sandboxes --cluster | grep '^task ')" " ${C0% *} +${C0#* } +$B1"
TOKS=$(ctl 2 list --cluster --json)
t_is "capctl list --cluster on broker 2 shows the elevated token minted on broker 1" \
	"$(printf '%s' "$TOKS" | jget '[(t["sandbox"], t["broker"]) for t in d if t["elevated"] and t["caps"] == ["fs.read:/etc/hostname"]][0]')" \
	"('task', '$B1')"
t_exit "--cluster on a command without a view is a usage error (64)" 64 ctl 2 --cluster issue

# -- a revoke that a live broker does not confirm --------------------------------
TID=$(ctl 1 --json issue --sandbox task --cap "fs.read:$W/**" | jget 'd["id"]')
kill -STOP "${BPID[3]}"
t0=$(date +%s%N)
ctl 2 revoke "$TID" >"$T_TMP/rv.out" 2>"$T_TMP/rv.err"
rc=$?
echo "# revoke took $((($(date +%s%N) - t0) / 1000000)) ms"
kill -CONT "${BPID[3]}"
t_is "revoke while broker 3 is stopped: acknowledged (0)" "$rc" 0
t_match "... saying broker 3 did not confirm within the bound" "$(cat "$T_TMP/rv.err")" \
	"broker $B3 did not confirm within the staleness bound"
t_ok "... and audited so on broker 2" grep -q "not confirmed within the staleness bound by broker $B3" "$T_TMP/s2/audit.jsonl"
t_ok "broker 3 catches up" wait_for 100 b_fresh 3

# -- the holding broker dies ------------------------------------------------------
agent_send a1 "capcall request fs.read:/etc/hosts --ttl 30 --reason orphan"
rid_on 3 fs.read:/etc/hosts
RO=$RID
t_match "a request pending on broker 1" "$RO" '^[0-9]+$'
t_ok "broker 2's --cluster view follows task's counts" wait_for 50 same_counts task 1
C1=$(counts 2 task --cluster)
t_ok "... which grew meanwhile (${C0#* } requests, now ${C1#* })" test "${C1#* }" -gt "${C0#* }"
kill -9 "${BPID[1]}"
wait "${BPID[1]}" 2>/dev/null
sleep 2.5
t_is "broker 1 killed: after the bound its request is no longer listed" \
	"$(ctl 3 --json pending | jget '[r["rid"] for r in d]')" "[]"
t_exit "... and approving it is refused (1)" 1 ctl 3 approve "$RO"
t_match "... saying its broker has not been heard from" "$(cat "$T_TMP/err")" "has not been heard from"

agent_stop a3
for n in 2 3; do
	kill "${BPID[$n]}" 2>/dev/null
	wait "${BPID[$n]}" 2>/dev/null
	t_ok "broker $n's log verifies after the run" ctl "$n" audit verify
done
t_done
