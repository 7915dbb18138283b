#!/usr/bin/env bash
# 80-audit-allowed-flood.sh - red-team finding F5 (issue 10, hole 8 by the
# allowed path): every audit byte a sandbox causes is charged to its audit
# budget, allowed operations too.  Before, one agent doing fs.stat of an
# 800-byte path in its own workspace in a loop wrote 109 MiB of audit log in
# 10 s and was never throttled.  Now, on a broker with a small byte budget,
# the same agent is throttled and then stopped (one line each, the stop
# line written before the stop), its lines stay within the budget, every
# stat it was answered has its line; one long path makes one bounded line,
# cut with a marker; and with the default budget a busy agent with short
# paths is not throttled at all.
. "$(dirname "$0")/../lib.sh"
S="$T_TMP/state"; W="$T_TMP/ws"
# a path of about 800 bytes inside the workspace
P="$W"; while [ ${#P} -lt 800 ]; do P="$P/$(printf 'd%.0s' $(seq 200))"; done
mkdir -p "$P"; chmod -R a+rx "$W"
# 64 KiB a second, a burst of 1 MiB, stopped after 3 s throttled: bound on
# one sandbox's log, however fast it asks, about 1 MiB + 64 KiB x (3 s and
# the wait for a second's refill) plus one line.
cat >"$T_TMP/p.conf" <<EOT
defaults = { audit_bytes = "64K"; audit_bytes_burst = "1M"; audit_throttle_max = 3; };
EOT
t_ok "the policy with a byte budget is valid" "$CB_BIN/capbroker" check-policy "$T_TMP/p.conf"
t_match "show-policy prints it" "$("$CB_BIN/capbroker" show-policy "$T_TMP/p.conf")" \
	'audit_bytes = "64K";'
"$CB_BIN/capbroker" serve --state "$S" --policy "$T_TMP/p.conf" 2>"$T_TMP/serve.err" & SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; t_cleanup' EXIT
for _ in $(seq 100); do [ -S "$S/admin.sock" ] && break; sleep 0.05; done
t_ok "capbroker serve is listening" test -S "$S/admin.sock"

run() { "$CB_BIN/capbroker" run --connect "$S/admin.sock" --tier medium --workspace "$W" \
	--ro-bind "$CB_TOP/tests/integration:/t" --timeout 60 "$@"; }
t0=$(date +%s)
run --id flood --grant "fs.read:$W/**" -- /usr/bin/python3 /t/audit_allowed_agent.py "$P" 20 \
	>"$T_TMP/flood.out" 2>&1
rc=$?
t1=$(date +%s)
t_is "the agent flooding allowed stats is stopped (137)" "$rc" 137
echo "# stopped after $((t1 - t0)) s; agent: $(tail -n 1 "$T_TMP/flood.out")"

# The writer writes a moment after the reply: once a sandbox's stop line
# is in the log, every line before it is too.
stopped() { # SANDBOX
	for _ in $(seq 100); do
		grep -q '"sandbox":"'"$1"'","op":"sandbox.stop"' "$S/audit.jsonl" && return 0
		sleep 0.1
	done
	return 1
}
t_ok "its stop is in the log" stopped flood
count() { # SANDBOX -> "BYTES ALLOWLINES THROTTLED STOPPED LONGEST"
	$PYTHON -c 'import json,sys
raw=[l for l in open(sys.argv[1], "rb")]
ls=[(len(r), json.loads(r)) for r in raw]
ls=[(n, l) for n, l in ls if l.get("sandbox") == sys.argv[2]]
print(sum(n for n, _ in ls), sum(l.get("decision") == "allow" and l.get("op") == "fs.stat" for _, l in ls),
      sum(l.get("op") == "sandbox.throttled" for _, l in ls),
      sum(l.get("op") == "sandbox.channel-closed" and "audit budget spent" in l.get("detail", "") for _, l in ls),
      max([n for n, _ in ls] + [0]))' "$S/audit.jsonl" "$1"
}
read -r fb fa ft fs fmax < <(count flood)
answered=$(grep -o '^ok [0-9]*' "$T_TMP/flood.out" | tail -n 1 | cut -d' ' -f2)
echo "# flood: $fb bytes of log in $fa allowed stats (agent counted ${answered:-?}); longest line $fmax"
t_ok "its log stays within the byte budget ($fb <= 1 MiB + 64 KiB x 8)" test "$fb" -le $((1048576 + 65536 * 8))
t_ok "... and it spent the burst ($fb >= 1 MiB)" test "$fb" -ge 1048576
t_ok "every stat the agent was answered has its line ($fa >= ${answered:-0})" test "$fa" -ge "${answered:-0}"
t_is "one line says it is throttled" "$ft" 1
t_is "one line says it was stopped, and why" "$fs" 1
t_match "... naming the budget it spent" "$(grep '"sandbox":"flood"' "$S/audit.jsonl" | grep '"sandbox.throttled"')" \
	'audit budget spent \(bytes of log; '

# One line is bounded, whatever the path: a 4000-byte path is cut, marked.
L="$W/$(printf 'x%.0s' $(seq 3990))"
run --id long --grant "fs.read:$W/**" -- capcall fs.stat "$L" >/dev/null 2>&1
stopped long
line=$(grep '"sandbox":"long"' "$S/audit.jsonl" | grep '"op":"fs.stat"' | head -n 1)
t_match "a 4000-byte path is cut in its line, with a marker saying how long it was" "$line" \
	'xxx\.\.\.\[cut: 40[0-9][0-9] bytes\]",'
t_match "... and the line says cut" "$line" '"cut":true\}$'
t_ok "... and stays short (${#line} <= 2600 bytes)" test "${#line}" -le 2600

t_ok "the broker is still alive" kill -0 $SRV
t_ok "capctl audit verify: intact" "$CB_BIN/capctl" --socket "$S/admin.sock" audit verify
kill $SRV; wait $SRV 2>/dev/null

# The default budget lets heavy honest work through: 4000 stats a second of
# a short path (a build's pace) for 5 s, 20 000 lines.
"$CB_BIN/capbroker" serve --state "$T_TMP/s2" 2>"$T_TMP/serve2.err" & SRV=$!
for _ in $(seq 100); do [ -S "$T_TMP/s2/admin.sock" ] && break; sleep 0.05; done
mkdir -p "$W/src"
"$CB_BIN/capbroker" run --connect "$T_TMP/s2/admin.sock" --tier medium --workspace "$W" \
	--ro-bind "$CB_TOP/tests/integration:/t" --timeout 60 --id busy --grant "fs.read:$W/**" -- \
	/usr/bin/python3 /t/audit_allowed_agent.py "$W/src" 5 4000 >"$T_TMP/busy.out" 2>&1
t_is "with the default budget a busy agent with short paths finishes" "$?" 0
echo "# busy: $(tail -n 2 "$T_TMP/busy.out" | tr '\n' ' ')"
done=$(grep -o '^ok [0-9]*' "$T_TMP/busy.out" | tail -n 1 | cut -d' ' -f2)
t_ok "... at thousands a second (${done:-0} stats in 5 s)" test "${done:-0}" -ge 5000
t_is "... and is never throttled" "$(grep -c '"op":"sandbox.throttled"' "$T_TMP/s2/audit.jsonl")" 0
t_done
