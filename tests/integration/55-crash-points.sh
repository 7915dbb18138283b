#!/usr/bin/env bash
# 55-crash-points.sh - kill -9 of `capbroker serve` right after each kind of
# acknowledgement (issue, revoke, approve, deny, rotate-key, retire-key,
# kill), several times each: the broker restarts on the same state (it does
# not refuse it), the acknowledged decision is in the state and in the log,
# and `capctl audit verify` (which also checks that the state holds every
# decision the log records) says intact.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
echo data >"$W/f.txt"
N=${CB_CRASH_TRIALS:-6}
declare -A bad
kinds="issue revoke approve deny rotate-key retire-key kill"
for k in $kinds; do bad[$k]=0; done
restarts_refused=0 unverified=0
log_has() { grep -q "$1" "$S/audit.jsonl"; }
fail() { bad[$1]=$((bad[$1] + 1)); echo "# $1 trial $2: $3"; }

request() { # send a request from a1 and print its id once pending
	agent_send a1 "capcall request fs.read:/etc/hostname --ttl 60 --reason crash-point"
	wait_for 50 sh -c "'$CTL' --state '$S' --json pending | grep -q rid" || return 1
	"$CTL" --state "$S" --json pending | jget 'd[0]["rid"]'
}

srv_start "$S"
for i in $(seq "$N"); do
	for k in $kinds; do
		case $k in issue | revoke | approve | deny | kill) agent_start a1 --tier medium --workspace "$W" ;; esac
		case $k in
		issue)
			ID=$("$CTL" --state "$S" --json issue --sandbox a1 --cap "fs.read:$W/**" | jget 'd["id"]')
			srv_kill9 ;;
		revoke)
			ID=$("$CTL" --state "$S" --json issue --sandbox a1 --cap "fs.read:$W/**" | jget 'd["id"]')
			"$CTL" --state "$S" revoke "$ID" >/dev/null || fail $k "$i" "revoke failed"
			srv_kill9 ;;
		approve | deny)
			RID=$(request) || fail $k "$i" "no pending request"
			"$CTL" --state "$S" "$k" "$RID" >/dev/null || fail $k "$i" "$k failed"
			srv_kill9 ;;
		rotate-key)
			KID=$("$CTL" --state "$S" --json rotate-key | jget 'd["kid"]')
			srv_kill9 ;;
		retire-key)
			KID=$("$CTL" --state "$S" --json rotate-key | jget 'd["kid"]')
			OLD=$(ls "$S/keys" | sed -n 's/\.key$//p' | grep -v "^$KID$" | head -n 1)
			"$CTL" --state "$S" retire-key "$OLD" >/dev/null || fail $k "$i" "retire failed"
			srv_kill9 ;;
		kill)
			"$CTL" --state "$S" kill a1 >/dev/null || fail $k "$i" "kill failed"
			srv_kill9 ;;
		esac
		case $k in issue | revoke | approve | deny | kill) agent_stop a1 ;; esac
		if ! srv_start "$S"; then
			restarts_refused=$((restarts_refused + 1))
			tail -n 2 "$T_TMP/serve.log" | sed 's/^/# /'
			break 2
		fi
		LIST=$("$CTL" --state "$S" --json list)
		st() { printf '%s' "$LIST" | jget '[t["state"] for t in d if t["id"] == "'"$1"'"]'; }
		case $k in
		issue)
			log_has "\"op\":\"issue\",.*\"token\":\"$ID\"" || fail $k "$i" "no issue line"
			[ "$(st "$ID")" = "['active']" ] || fail $k "$i" "state: $(st "$ID")" ;;
		revoke)
			log_has "\"op\":\"revoke\",\"resource\":\"$ID\"" || fail $k "$i" "no revoke line"
			[ "$(st "$ID")" = "['revoked']" ] || fail $k "$i" "state: $(st "$ID")" ;;
		approve)
			log_has "\"op\":\"approve\",\"resource\":\"fs.read:/etc/hostname\",.*\"dseq\"" ||
				fail $k "$i" "no approve line"
			n=$(printf '%s' "$LIST" | jget 'len([t for t in d if t["elevated"]])')
			[ "$n" -ge "$i" ] || fail $k "$i" "elevated tokens in the state: $n" ;;
		deny)
			log_has "\"op\":\"deny\",\"resource\":\"fs.read:/etc/hostname\",.*\"actor\":\"uid:0\"" ||
				fail $k "$i" "no deny line" ;;
		rotate-key)
			log_has "\"op\":\"rotate-key\",\"resource\":\"$KID\"" || fail $k "$i" "no rotate-key line" ;;
		retire-key)
			log_has "\"op\":\"retire-key\",\"resource\":\"$OLD\"" || fail $k "$i" "no retire-key line" ;;
		kill)
			log_has '"sandbox":"a1","op":"kill","actor":"uid:0"' || fail $k "$i" "no kill line" ;;
		esac
		OLD=
		"$CTL" --state "$S" audit verify >"$T_TMP/v" 2>&1 || { unverified=$((unverified + 1)); sed 's/^/# /' "$T_TMP/v"; }
	done
done
t_is "the broker restarted after every kill -9 ($N x 7 crash points)" "$restarts_refused" 0
for k in $kinds; do
	t_is "kill -9 right after '$k' was acknowledged: state and log agree ($N trials)" "${bad[$k]}" 0
done
t_is "capctl audit verify: intact after every restart" "$unverified" 0
srv_stop
t_done
