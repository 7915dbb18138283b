#!/usr/bin/env bash
# 81-audit-budget.sh - issue 10, hole 8: one agent cannot fill the disk with
# audit lines.  On one broker, two hostile agents send denied requests at
# full speed (one a new path each time, one the same request) while a
# well-behaved agent reads a file: identical denials are coalesced into
# counted lines, each hostile sandbox is throttled and then stopped (one
# line each saying so), its lines stay within the budget, the well-behaved
# sandbox is served throughout, and the log still verifies.
. "$(dirname "$0")/../lib.sh"
S="$T_TMP/state"; W="$T_TMP/ws"; mkdir -p "$W"; echo payload >"$W/f"
# A small budget so the test is quick: 50 denials a second, a burst of 200,
# stopped after 2 s throttled.  Bound on one sandbox's denial lines:
# 200 + 50 x 2, plus a few counted lines.
cat >"$T_TMP/p.conf" <<EOT
defaults = { audit_budget = 50; audit_burst = 200; audit_throttle_max = 2; };
EOT
t_ok "the policy with an audit budget is valid" "$CB_BIN/capbroker" check-policy "$T_TMP/p.conf"
t_match "show-policy prints the budget" "$("$CB_BIN/capbroker" show-policy "$T_TMP/p.conf")" \
	"audit_budget = 50;"
"$CB_BIN/capbroker" serve --state "$S" --policy "$T_TMP/p.conf" 2>"$T_TMP/serve.err" & SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; t_cleanup' EXIT
for _ in $(seq 100); do [ -S "$S/admin.sock" ] && break; sleep 0.05; done
t_ok "capbroker serve is listening" test -S "$S/admin.sock"

run() { "$CB_BIN/capbroker" run --connect "$S/admin.sock" --tier medium --workspace "$W" \
	--ro-bind "$CB_TOP/tests/integration:/t" --timeout 60 "$@"; }
run --id good --grant "fs.read:$W/**" -- /usr/bin/python3 /t/good_agent.py "$W/f" 600 \
	>"$T_TMP/good.out" 2>"$T_TMP/good.err" & GOOD=$!
run --id vary -- /usr/bin/python3 /t/audit_flood_agent.py vary 30 >"$T_TMP/vary.out" 2>&1 & VARY=$!
run --id same -- /usr/bin/python3 /t/audit_flood_agent.py same 30 >"$T_TMP/same.out" 2>&1 & SAME=$!
wait $VARY; vrc=$?
wait $SAME; src=$?
wait $GOOD; grc=$?
t_is "the agent denied a new path each time is stopped (137)" "$vrc" 137
t_is "the agent repeating one denied request is stopped (137)" "$src" 137
t_is "the well-behaved sandbox finished" "$grc" 0
t_match "... and every one of its 600 reads succeeded meanwhile" "$(cat "$T_TMP/good.out")" "^ok 600 "

# Lines per sandbox, and how many denials they stand for.
count() { # SANDBOX -> "LINES DENIALS DENYLINES THROTTLED STOPPED"
	$PYTHON -c 'import json,sys
ls=[l for l in map(json.loads, open(sys.argv[1])) if l.get("sandbox") == sys.argv[2]]
d=[l for l in ls if l.get("decision") == "deny"]
print(len(ls), sum(1 + l.get("count", 0) for l in d), len(d),
      sum(l.get("op") == "sandbox.throttled" for l in ls),
      sum(l.get("op") == "sandbox.channel-closed" and "audit budget spent" in l.get("detail", "") for l in ls))' \
	"$S/audit.jsonl" "$1"
}
# The writer writes a moment after the broker queues a line: once a
# sandbox's stop line is in the log, every line before it is too (its
# "stopped" line is queued before it is stopped, broker/loop.c).
stopped() { # SANDBOX
	for _ in $(seq 100); do
		grep -q '"sandbox":"'"$1"'","op":"sandbox.stop"' "$S/audit.jsonl" && return 0
		sleep 0.1
	done
	return 1
}
t_ok "vary: its end is in the log" stopped vary
t_ok "same: its end is in the log" stopped same
read -r vl vd vdl vt vs < <(count vary)
read -r sl sd sdl st ss < <(count same)
echo "# vary: $vl lines, $vdl denial lines for $vd denials; same: $sl lines, $sdl denial lines for $sd denials"
t_ok "vary: its denial lines stay within the budget (<= 200 + 50 x 2 + slack: $vdl)" test "$vdl" -le 360
t_ok "vary: ... and it was denied at least the burst ($vd)" test "$vd" -ge 200
t_is "vary: one line says it is throttled" "$vt" 1
t_is "vary: one line says it was stopped, and why" "$vs" 1
t_ok "same: a handful of lines ($sdl) ..." test "$sdl" -le 20
t_ok "same: ... stand for thousands of denials ($sd)" test "$sd" -ge 3000
t_is "same: one line says it is throttled" "$st" 1
t_is "same: one line says it was stopped, and why" "$ss" 1
t_match "a counted line says how many, first and last" "$(grep '"sandbox":"same"' "$S/audit.jsonl" | grep '"count"' | head -1)" \
	'"decision":"deny","reason":"(no-token|not-covered)","actor":"agent","count":[0-9]+,"first":"[-0-9T:.]+Z","last":"[-0-9T:.]+Z"\}$'
t_match "capctl audit shows how many more a counted line stands for" \
	"$("$CB_BIN/capctl" --socket "$S/admin.sock" audit --sandbox same --decision deny)" \
	"not-covered|no-token \([0-9]+ more, [-0-9T:.]+Z to [-0-9T:.]+Z\)"
t_ok "the broker is still alive" kill -0 $SRV
out=$(run --id after --grant "fs.read:$W/**" -- capcall fs.read "$W/f")
t_is "and still starts and serves a new sandbox" "$out" "payload"
t_ok "capctl audit verify: intact" "$CB_BIN/capctl" --socket "$S/admin.sock" audit verify
t_match "... says so" "$(cat "$T_TMP/out")" "^intact"

# A burst of 1 is full again after every wait (and sooner or later the
# loop's timer fires late): the episode must still last, or such a sandbox
# would never be stopped.
echo 'defaults = { audit_budget = 50; audit_burst = 1; audit_throttle_max = 2; };' >"$T_TMP/p1.conf"
t_exit "a burst of 1: the flooding agent is still stopped (137)" 137 \
	"$CB_BIN/capbroker" run --state "$T_TMP/s1" --policy "$T_TMP/p1.conf" --timeout 30 \
	--ro-bind "$CB_TOP/tests/integration:/t" -- /usr/bin/python3 /t/audit_flood_agent.py vary 20
t_is "... with one line saying it is throttled" \
	"$(grep -c '"op":"sandbox.throttled"' "$T_TMP/s1/audit.jsonl")" 1
t_done
