#!/usr/bin/env bash
# examples/demo.sh - the main job (`make demo`): run examples/agent.py under
# `capbroker run` in the medium tier against an example workspace, two
# local web servers (one granted, one not), then show the audit log.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${CB_BIN:-$top/bin}
py=${PYTHON:-/usr/bin/python3}

# The demo's directory: not under /tmp (the sandbox reserves /tmp for its own
# private tmpfs, so a workspace there could not be shown to proc.exec), and not
# inside the source tree, which may sit in a private (0700) directory that the
# unprivileged sandbox user cannot walk into: proc.exec sandboxes see the
# granted directory through a bind made as that user.
demo=$(mktemp -d "${CB_DEMO_DIR:-/var/tmp}/capbroker-demo.XXXXXX")
chmod 0755 "$demo"
mkdir "$demo/agent"
cp "$top/examples/agent.py" "$demo/agent/"
# The broker refuses a policy file that group or others may write; a clone
# made under umask 002 has exactly that, so the demo runs a 0644 copy.
install -m 0644 "$top/examples/demo/policy.conf" "$demo/policy.conf"
state="$demo/state"
ws="$demo/workspace"
cleanup() {
	[ -n "${srv1:-}" ] && kill "$srv1" 2>/dev/null
	[ -n "${srv2:-}" ] && kill "$srv2" 2>/dev/null
	[ -n "${CB_DEMO_KEEP:-}" ] || rm -rf "$demo"
}
trap cleanup EXIT

mkdir -p "$ws/docs" "$ws/private" "$ws/out" "$demo/www"
printf 'capbroker demo workspace\nline two\nline three\n' >"$ws/docs/readme.txt"
printf 'alice 100\nbob 200\n' >"$ws/private/salary.txt"
ln -s /etc/passwd "$ws/docs/passwd"
echo "hello from a local server" >"$demo/www/hello.txt"

# Two local HTTP servers on free ports.
read -r p1 p2 < <("$py" -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
"$py" -m http.server "$p1" --bind 127.0.0.1 --directory "$demo/www" >/dev/null 2>&1 & srv1=$!
"$py" -m http.server "$p2" --bind 127.0.0.1 --directory "$demo/www" >/dev/null 2>&1 & srv2=$!
for p in "$p1" "$p2"; do
	for _ in $(seq 50); do
		"$py" -c "import socket,sys; socket.create_connection(('127.0.0.1',$p),1)" 2>/dev/null && break
		sleep 0.1
	done
done

cat <<EOT
== capbroker demo ==
An agent (examples/agent.py) runs in a medium-tier sandbox. Its only channel is
a socketpair to the broker; it was granted:
  fs.read  $ws/docs/**
  fs.write $ws/out/**
  fs.list  $ws/**
  net.connect 127.0.0.1:$p1
  proc.exec /usr/bin/wc
Requests for a human's approval are refused in this run (--approve deny).

EOT
set +e
"$bin/capbroker" run --state "$state" --policy "$demo/policy.conf" \
	--tier medium --workspace "$ws" --id demo-agent --approve deny --timeout 120 \
	--grant "fs.read:$ws/docs/**" --grant "fs.write:$ws/out/**" --grant "fs.list:$ws/**" \
	--grant "net.connect:127.0.0.1:$p1" --grant "proc.exec:/usr/bin/wc" \
	--ro-bind "$demo/agent:/capbroker-demo" \
	-- /usr/bin/python3 /capbroker-demo/agent.py "$ws" "$p1" "$p2"
rc=$?
set -e
echo
echo "agent exited with status $rc"
echo
echo "== what the agent wrote =="
cat "$ws/out/summary.txt" 2>/dev/null || echo "(nothing)"
echo
echo "== the audit log ($state/audit.jsonl): decisions =="
"$py" - "$state/audit.jsonl" "$ws" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("ev") not in ("op", "admin"):
        continue
    ws = sys.argv[2]
    print("%s %-6s %-22s %-34.34s %s" % (
        r["ts"][11:23], r.get("decision", "-"), r.get("op", ""),
        r.get("resource", "").replace(ws, "WS"),
        r.get("reason", r.get("detail", "")).replace(ws, "WS")))
PYEOF
echo
lines=$(wc -l <"$state/audit.jsonl")
echo "$lines lines, each chained to the one before by a BLAKE2b hash and sealed by signed checkpoints."
if [ -x "$bin/capctl" ]; then
	echo
	echo "== capctl audit verify =="
	"$bin/capctl" --state "$state" audit verify || true
fi
exit "$rc"
