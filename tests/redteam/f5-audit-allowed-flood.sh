#!/usr/bin/env bash
# F5: audit growth by *allowed* operations is unbounded (not budgeted).
cd "$(dirname "$0")/../.." && . tests/lib.sh && . tests/integration/admin_lib.sh
S="$T_TMP/st"; WS="$T_TMP/ws"; mkdir -p "$WS"
# a ~0.8 KB path inside the workspace (the agent could fs.mkdir it itself)
P="$WS"; while [ ${#P} -lt 800 ]; do P="$P/$(printf 'd%.0s' $(seq 200))"; done
mkdir -p "$P"; chmod -R a+rx "$WS"; mkdir -p "$T_TMP/agent"; cp tests/redteam/f5_allowed_flood.py "$T_TMP/agent/"; chmod -R a+rx "$T_TMP/agent"
srv_start "$S"
before=$(stat -c %s "$S/audit.jsonl")
timeout 60 "$CB" run --connect "$S/admin.sock" --id flood --tier medium --workspace "$WS" --grant "fs.read:$WS/**" --ro-bind "$T_TMP/agent" -- /usr/bin/python3 "$T_TMP/agent/f5_allowed_flood.py" "$P" 10
after=$(stat -c %s "$S/audit.jsonl")
echo "audit.jsonl grew by $(( (after - before) / 1024 / 1024 )) MiB in 10 s from one sandbox ($(wc -l <"$S/audit.jsonl") lines)"
grep -c '"decision":"allow"' "$S/audit.jsonl"
grep -E 'throttl|stopped|budget' "$S/audit.jsonl" | head -3 | cut -c1-200
grep "fs.stat" "$S/audit.jsonl" | head -2 | cut -c1-200; grep "fs.stat" "$S/audit.jsonl" | head -1 | grep -o "\"reason\":\"[^\"]*\"\|\"detail\":\"[^\"]*\""
