# tests/integration/cluster_lib.sh - a private PostgreSQL for the cluster
# tests and bench (sourced after tests/lib.sh).  Debian's postgresql is
# used from /usr/lib/postgresql/N/bin directly: initdb and pg_ctl as an
# unprivileged user, in a fresh mktemp -d directory, listening on a unix
# socket in that directory only (no TCP port: parallel runs never
# collide).  The system-wide service is never touched.
#
# pg_have                  0 if initdb and pg_ctl are installed
# pg_start                 initdb + start; PGD (its directory), PG_CONN (conninfo)
# pg_restart               start again (after pg_kill9)
# pg_kill9                 SIGKILL the postmaster and every backend (by pid)
# pg_pause / pg_resume     SIGSTOP / SIGCONT them: the database stops
#                          answering, as a cut network would leave it
# pg_sql SQL               psql -tA on the cluster's database
# PG_OPTS="-c NAME=VALUE ..." (set before pg_start): more server settings
#                          (86 logs every statement: log_statement=all)
# PG_NETNS=PID PG_LISTEN=ADDRS (set before pg_start): run the database in
#                          the network namespace of PID, listening on TCP
#                          there too (trust for 10.77.0.0/16, the test's
#                          private links), for brokers of other namespaces
# Everything is stopped and removed at exit (pg_cleanup, called by the
# caller's EXIT trap).

PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
PG_USER=
PGD=
PG_NETNS=${PG_NETNS:-}
PG_LISTEN=${PG_LISTEN:-}
PG_OPTS=${PG_OPTS:-}

pg_have() { [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ]; }

# Run a PostgreSQL program as the database's owner: initdb refuses root.
_pg_as() {
	local ns=()
	[ -n "$PG_NETNS" ] && ns=(nsenter -t "$PG_NETNS" -n)
	if [ "$(id -u)" -eq 0 ]; then
		"${ns[@]}" runuser -u "$PG_USER" -- "$@"
	else
		"${ns[@]}" "$@"
	fi
}

pg_start() {
	PGD=$(mktemp -d "${CB_TEST_TMPDIR:-/var/tmp}/cbpg.XXXXXX")
	if [ "$(id -u)" -eq 0 ]; then
		PG_USER=nobody
		chown nobody "$PGD"
	fi
	chmod 0755 "$PGD"
	_pg_as "$PG_BIN/initdb" -D "$PGD/data" -A trust -U cb --no-sync -E UTF8 \
		>"$PGD/initdb.log" 2>&1 || return 1
	PG_CONN="host=$PGD dbname=postgres user=cb"
	[ -z "$PG_LISTEN" ] || echo "host all cb 10.77.0.0/16 trust" >>"$PGD/data/pg_hba.conf"
	pg_restart
}

pg_restart() {
	# listen_addresses='': no TCP at all; the socket lives in $PGD (with
	# PG_LISTEN: TCP too, inside the namespace PG_NETNS only).
	_pg_as "$PG_BIN/pg_ctl" -D "$PGD/data" -l "$PGD/log" -w -t 30 \
		-o "-k $PGD -c listen_addresses=$PG_LISTEN -c max_connections=40 -c shared_buffers=16MB $PG_OPTS" \
		start >/dev/null 2>&1
}

# The postmaster and its children, by pid.
_pg_pids() {
	local pm
	pm=$(head -n 1 "$PGD/data/postmaster.pid" 2>/dev/null) || return 0
	[ -n "$pm" ] || return 0
	echo "$pm"
	ps -o pid= --ppid "$pm" 2>/dev/null
}

pg_kill9() {
	local p pids
	pids=$(_pg_pids)
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	for p in $pids; do
		while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
	done
}

pg_pause() { local p; for p in $(_pg_pids); do kill -STOP "$p" 2>/dev/null; done; }
pg_resume() { local p; for p in $(_pg_pids); do kill -CONT "$p" 2>/dev/null; done; }

pg_sql() { psql -X -q -tA -h "$PGD" -U cb -d postgres -c "$1" 2>&1; }

pg_cleanup() {
	[ -n "$PGD" ] || return 0
	pg_resume
	_pg_as "$PG_BIN/pg_ctl" -D "$PGD/data" -m immediate -w stop >/dev/null 2>&1 || pg_kill9
	rm -rf "$PGD"
	PGD=
}

# What every cluster test does with its brokers.  Broker N keeps its state
# in $T_TMP/sN and its log in $T_TMP/bN.log; BPID[N] is its pid.
declare -A BPID
cl_cleanup() { adm_cleanup; pg_cleanup; }

# cl_need_pg WHAT: where PostgreSQL is not installed, the whole test is one
# skip line.
cl_need_pg() {
	pg_have && return 0
	t_skip "$1" "PostgreSQL is not installed (apt-get install postgresql libpq-dev)"
	t_done
	exit
}

# cl_netns: NETNS is what puts a broker in a network namespace of its own,
# to stand for a host of its own; empty (with a skip line) where that is
# not permitted.
cl_netns() {
	NETNS=(unshare -n)
	if ! unshare -n true 2>/dev/null; then
		NETNS=()
		t_skip "brokers in network namespaces" "unshare -n is not permitted here; one namespace"
	fi
}

# The agents' FIFOs stay out of every broker and agent started later.
close_agent_fds() { local fd; for fd in "${AFD[@]}"; do [ -n "$fd" ] && eval "exec $fd>&-"; done; }

# b_start N: broker N with policy $P in the cluster at $PG_CONN, waited for
# until it says it is fresh.
b_start() {
	local n=$1
	(close_agent_fds; exec "${NETNS[@]}" "$CB" serve --state "$T_TMP/s$n" --policy "$P" \
		--cluster "$PG_CONN" >>"$T_TMP/b$n.log" 2>&1) &
	BPID[$n]=$!
	_adm_pids+=("$!")
	wait_for 100 b_fresh "$n"
}
b_fresh() { "$CTL" --state "$T_TMP/s$1" status | grep -q '^cluster .*, fresh,'; }
ctl() { local n=$1; shift; "$CTL" --state "$T_TMP/s$n" "$@"; }
