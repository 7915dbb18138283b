#!/usr/bin/env bash
# 86-cluster-request-swap.sh - a decision made in the cluster reaches only
# the request it was made on (docs/cluster.md, "Elevation across the
# cluster").  An administrator approves a row of cb_requests by its id,
# after reading its capability; the holding broker applies the decision to
# its own request of that id.  When the ids were used before (the state
# behind the broker's name is not the one that wrote the row: --new-state,
# `state rebuild`, a restored copy, all numbering from 1 again), the row is
# an earlier request's: the agent's new request, whose INSERT finds the id
# taken, must not be approved by a decision on what the row showed.
# The earlier life's rows are written here with psql, as it left them.
# Requests that expired more than a day ago are pruned.
# Every statement the brokers send is logged by the server
# (log_statement=all; each line starts with its client's name): the values (an agent's reason and capability, the
# brokers' names) travel as parameters, never inside a statement's text.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
. "$(dirname "$0")/cluster_lib.sh"

trap cl_cleanup EXIT

cl_need_pg "cluster request ids"
cl_netns

PG_OPTS="-c log_statement=all -c log_line_prefix=%a:"
t_ok "a private PostgreSQL starts (unix socket only)" pg_start
W="$T_TMP/ws"
mkdir -p "$W"
P="$T_TMP/policy.conf"
printf 'version = 1;\ndefaults = { cluster_stale = 2; };\n' >"$P"
chmod 0600 "$P"

b_agent() { # NAME N ID
	local name=$1 n=$2 id=$3 fd
	mkfifo "$T_TMP/$name.in"
	(close_agent_fds; exec "$CB" run --connect "$T_TMP/s$n/admin.sock" --id "$id" --tier medium \
		--workspace "$W" -- /bin/sh -c "$_AGENT_LOOP" <"$T_TMP/$name.in" >"$T_TMP/$name.out" \
		2>"$T_TMP/$name.err") &
	_adm_pids+=("$!")
	exec {fd}>"$T_TMP/$name.in"
	AFD[$name]=$fd
	ASEQS[$name]=0
	agent_do "$name" true
}
# asked CAP: the cluster-wide id broker 1's audit gives the request for CAP
asked() { sed -n "s|.*\"op\":\"request\",\"resource\":\"$1\".*\"detail\":\"request \([0-9]*\),.*|\1|p" \
	"$T_TMP/s1/audit.jsonl" | head -n 1; }
has_asked() { [ -n "$(asked "$1")" ]; }
listed() { # N CAP: broker N lists a pending request for CAP
	ctl "$1" --json pending 2>/dev/null | jget 'any(r["cap"] == sys.argv[2] for r in d)' "$2" |
		grep -q True
}

for n in 1 2; do
	t_ok "broker $n starts in the cluster" b_start "$n"
done
B1=$(pg_sql "SELECT name FROM cb_brokers WHERE name LIKE '%/s1'")
N1=$(pg_sql "SELECT num FROM cb_broker_ids WHERE name = '$B1'")
t_match "broker 1 has its number" "$N1" '^[0-9]+$'
b_agent a1 1 task

# Broker 1's state is new: its requests number from 1.  Row 1 is an
# earlier life's, pending and harmless-looking.
for i in 1; do
	st=pending
	pg_sql "INSERT INTO cb_requests(broker, id, sandbox, command, capability, reason, ttl, asked_at,
		expires_at, state, decided_by, decided_on) VALUES('$B1', $((N1 * 1000000000 + i)), 'task',
		'/bin/sh', 'fs.read:$W/readme', 'harmless $i', 30, 1, $(( $(date +%s) + 300 )), '$st',
		'uid:0', '$B1')" >/dev/null
done
t_ok "broker 2 lists the earlier life's pending rows" wait_for 100 listed 2 "fs.read:$W/readme"

agent_send a1 "capcall request fs.read:/etc/hostname --ttl 30 --reason mine && capcall fs.read /etc/hostname"
N=$ASEQ
t_ok "broker 1 holds the agent's request for /etc/hostname" wait_for 100 has_asked fs.read:/etc/hostname
R=$(asked fs.read:/etc/hostname)
t_is "... under an id whose row in the database is an earlier request's" \
	"$(pg_sql "SELECT capability FROM cb_requests WHERE id = $R")" "fs.read:$W/readme"
ctl 2 approve "$R" >"$T_TMP/approve.out" 2>&1
echo "# capctl approve $R on broker 2: $(tr '\n' ' ' <"$T_TMP/approve.out")"
sleep 1
t_ok "approving what broker 2 showed (readme) does not approve the agent's request" \
	sh -c "! grep -q '^@@$N ' '$T_TMP/a1.out'"
t_ok "... broker 1 audits no approval of /etc/hostname" \
	sh -c "! grep -q '\"op\":\"approve\",\"resource\":\"fs.read:/etc/hostname\"' '$T_TMP/s1/audit.jsonl'"
t_ok "... and says why it refused the decision" \
	wait_for 200 grep -q "\"op\":\"cluster.refused\",\"resource\":\"fs.read:$W/readme\".*request $R: the cluster's row" \
	"$T_TMP/s1/audit.jsonl"
t_match "... capctl approve says the holder refused it" "$(cat "$T_TMP/approve.out")" "not the one shown here"
t_ok "the agent's request is still pending on broker 1" \
	test "$(sqlite3 "file:$T_TMP/s1/state.db?mode=ro" "SELECT state FROM requests WHERE id = $((R % 1000000000))")" = 0

# A reason that is not UTF-8 (the database takes only UTF-8): the request
# still reaches the cluster, each stray byte shown as U+FFFD.
b_agent a2 1 task2
agent_do a2 "capcall request fs.read:/etc/passwd --ttl 30 --reason \"\$(printf 'bad \\377 byte')\" >/dev/null 2>&1 & true"
t_ok "a request whose reason is not UTF-8 is listed on broker 2" wait_for 100 listed 2 fs.read:/etc/passwd
t_is "... its reason with U+FFFD for the stray byte" \
	"$(ctl 2 --json pending | jget '[r["reason"] for r in d if r["cap"] == "fs.read:/etc/passwd"][0] == "bad \ufffd byte"')" \
	True

# An agent's reason made to break out of a quoted literal: stored as
# written, and sent as a parameter (the server's log shows it only among
# a statement's parameters, never in a statement's text).
MARK=zq9mark$$
b_agent a3 1 task3
agent_do a3 "capcall request fs.read:/etc/group --ttl 30 --reason \"o'k\\'); DROP TABLE cb_requests; -- $MARK\" >/dev/null 2>&1 & true"
t_ok "a request whose reason tries SQL is listed on broker 2" wait_for 100 listed 2 fs.read:/etc/group
t_is "... its reason stored as the agent wrote it" \
	"$(pg_sql "SELECT reason FROM cb_requests WHERE capability = 'fs.read:/etc/group'")" \
	"o'k\\'); DROP TABLE cb_requests; -- $MARK"
t_ok "... and it reached the database as a parameter" grep -q "DETAIL:  parameters: .*$MARK" "$PGD/log"
t_is "... never inside a statement's text" "$(grep -F "$MARK" "$PGD/log" | grep -v 'DETAIL:  parameters: ')" ""
t_is "no statement the brokers sent carries a broker's name in its text" \
	"$(grep -E '^capbroker:LOG:  (statement|execute [^:]*): ' "$PGD/log" | grep -F "$B1")" ""
t_ok "the brokers' statements were logged (the check above saw them)" \
	grep -q '^capbroker:LOG:  execute <unnamed>: INSERT INTO cb_requests' "$PGD/log"

# Finished requests leave cb_requests a day (CL_REQ_KEEP_S) after their
# expiry, whatever their state and whoever held them; younger ones stay.
# Every broker prunes once a minute and at its start: broker 2 restarts.
now=$(date +%s)
old_row() { # ID BROKER STATE EXPIRES [APPLIED]
	pg_sql "INSERT INTO cb_requests(broker, id, sandbox, command, capability, reason, ttl, asked_at,
		expires_at, state, applied_at) VALUES('$2', $1, 'gone', '/bin/sh', 'fs.read:/etc/motd',
		'old', 30, $(($4 - 30)), $4, '$3', ${5:-NULL})" >/dev/null
}
old_row 7000000001 "$B1" approved $((now - 86400 - 60)) $((now - 86400 - 80))
old_row 7000000002 "$B1" denied $((now - 86400 - 60))
old_row 7000000003 "gone:/var/lib/capbroker" pending $((now - 86400 - 60))
old_row 7000000004 "$B1" expired $((now - 3600)) $((now - 3600))
kill -TERM "${BPID[2]}"
wait "${BPID[2]}"
t_ok "broker 2 restarts" b_start 2
pruned() { test "$(pg_sql "SELECT count(*) FROM cb_requests WHERE id BETWEEN 7000000001 AND 7000000003")" = 0; }
t_ok "requests that expired more than a day ago are pruned (approved, denied, a dead broker's pending)" \
	wait_for 100 pruned
t_is "... one that expired an hour ago stays" \
	"$(pg_sql "SELECT count(*) FROM cb_requests WHERE id = 7000000004")" 1
t_is "... and so do the pending ones" "$(pg_sql "SELECT count(*) FROM cb_requests WHERE state = 'pending'
	AND capability IN ('fs.read:/etc/passwd', 'fs.read:/etc/group')")" 2
t_done
