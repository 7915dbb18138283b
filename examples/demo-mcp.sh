#!/usr/bin/env bash
# examples/demo-mcp.sh - `make demo-mcp`: an MCP session with `capcall mcp`.
# A small agent host (examples/mcp_host.py) starts `capbroker run --connect
# ... -- capcall mcp` under a `capbroker serve` daemon, lists the tools (whose
# descriptions say what the tokens allow), calls some allowed and some
# denied, gets a request_capability approved with capctl, and sees
# notifications/tools/list_changed after the approval and after a revoke.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${CB_BIN:-$top/bin}
py=${PYTHON:-/usr/bin/python3}

# Under build/: the sandbox reserves /tmp for its own private tmpfs.
mkdir -p "$top/build"
demo=$(mktemp -d "$top/build/demo-mcp.XXXXXX")
chmod 0755 "$demo"
state="$demo/state"
ws="$demo/workspace"
cleanup() {
	[ -n "${srv:-}" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
	[ -n "${CB_DEMO_KEEP:-}" ] || rm -rf "$demo"
}
trap cleanup EXIT

mkdir -p "$ws/docs" "$ws/private" "$ws/out"
printf 'capbroker demo workspace\n' >"$ws/docs/readme.txt"
printf 'alice 100\n' >"$ws/private/salary.txt"
ln -s /etc/passwd "$ws/docs/passwd"
cat >"$demo/policy.conf" <<EOP
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**", "proc.exec:/usr/bin/wc" ]; }; };
EOP

"$bin/capbroker" serve --state "$state" --policy "$demo/policy.conf" >"$demo/serve.log" 2>&1 &
srv=$!
for _ in $(seq 100); do "$bin/capctl" --state "$state" status >/dev/null 2>&1 && break; sleep 0.1; done

cat <<EOT
== capbroker MCP demo ==
An agent host starts this MCP server (what a .mcp.json would say, docs/mcp.md):
  capbroker run --connect STATE/admin.sock --tier medium --workspace WS \\
    --grant 'fs.read:WS/docs/**' --grant 'fs.list:WS/**' --grant 'fs.write:WS/out/**' \\
    --grant proc.exec:/usr/bin/wc -- capcall mcp
(WS is $ws)

EOT
"$py" "$top/examples/mcp_host.py" "$ws" "$bin/capctl" "$state" -- \
	"$bin/capbroker" run --connect "$state/admin.sock" --id mcp-demo --tier medium --workspace "$ws" \
	--grant "fs.read:$ws/docs/**" --grant "fs.list:$ws/**" --grant "fs.write:$ws/out/**" \
	--grant proc.exec:/usr/bin/wc -- capcall mcp --poll-ms 250
echo "== what the broker audited for sandbox mcp-demo ($state/audit.jsonl) =="
"$py" - "$state/audit.jsonl" "$ws" <<'PYEOF'
import json, sys
ws = sys.argv[2]
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("ev") not in ("op", "admin") or r.get("op") in ("checkpoint",):
        continue
    if r.get("sandbox") not in ("mcp-demo", None) and r.get("op") != "revoke":
        continue
    print("%s %-6s %-10s %-34.34s %s" % (
        r["ts"][11:23], r.get("decision", "-"), r.get("op", ""),
        r.get("resource", "").replace(ws, "WS"),
        r.get("reason", r.get("detail", "")).replace(ws, "WS")))
PYEOF
