#!/usr/bin/env python3
"""mcp_host.py WS CAPCTL STATE -- CMD... : a minimal MCP agent host for
`make demo-mcp`.  It starts CMD (`capbroker run ... -- capcall mcp`), speaks
newline-delimited JSON-RPC to it and prints the session, playing the part of
a model's tool calls; when the model asks for a capability it also plays the
human, approving with `capctl approve`, and later revokes with `capctl
revoke`, to show notifications/tools/list_changed."""
import json
import subprocess
import sys
import time

ws, capctl, state = sys.argv[1:4]
cmd = sys.argv[sys.argv.index("--") + 1:]
srv = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
next_id = 0
notes = []


def short(s, n=300):
    s = s.replace(ws, "WS")
    return s if len(s) <= n else s[:n] + "..."


def read_msg():
    line = srv.stdout.readline()
    if not line:
        sys.exit("the server went away")
    return json.loads(line)


def rpc(method, params=None, show=True):
    global next_id
    next_id += 1
    msg = {"jsonrpc": "2.0", "id": next_id, "method": method}
    if params is not None:
        msg["params"] = params
    if show:
        print("host  -> %s %s" % (method, short(json.dumps(params.get("arguments", params)) if params else "")))
    srv.stdin.write(json.dumps(msg) + "\n")
    while True:
        m = read_msg()
        if m.get("id") == next_id:
            return m
        notes.append(m)
        print("server ~> %s" % m.get("method"))


def tool(name, **args):
    r = rpc("tools/call", {"name": name, "arguments": args})["result"]
    print("server <- %s %s" % ("ERROR" if r.get("isError") else "ok", short(r["content"][0]["text"])))
    print()
    return r


def allowed_now(desc):
    return desc[desc.find("Allowed now"):].split(". Anything")[0] if "Allowed now" in desc else ""


def ctl(*a):
    return subprocess.run([capctl, "--state", state] + list(a), capture_output=True, text=True).stdout


def wait_note(secs=5):
    end = time.time() + secs
    while time.time() < end:
        if notes:
            return notes.pop(0)
        srv.stdin.write('{"jsonrpc":"2.0","id":"poll","method":"ping"}\n')
        m = read_msg()
        while m.get("id") != "poll":
            notes.append(m)
            m = read_msg()
        time.sleep(0.2)
    return None


r = rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "demo-host", "version": "1"}})["result"]
print("server <- %s, protocol %s, tools.listChanged=%s\n" % (
    r["serverInfo"]["name"], r["protocolVersion"], r["capabilities"]["tools"]["listChanged"]))
srv.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
tools = rpc("tools/list", {})["result"]["tools"]
print("server <- %d tools:" % len(tools))
for t in tools:
    print("   %-18s %s" % (t["name"], short(allowed_now(t["description"]), 90)))
print()

tool("read_file", path=ws + "/docs/readme.txt")
tool("list_directory", path=ws)
tool("write_file", path=ws + "/out/notes.txt", content="written over MCP\n")
tool("exec", argv=["/usr/bin/wc", "-w"], stdin="three little words")
tool("read_file", path=ws + "/private/salary.txt")
tool("read_file", path=ws + "/docs/passwd")
tool("read_file", path="/etc/hostname")

print("(the model asks a human for /etc/hostname; the demo approves it with capctl)")
global_id = next_id + 1
srv.stdin.write(json.dumps({"jsonrpc": "2.0", "id": global_id, "method": "tools/call", "params": {
    "name": "request_capability", "arguments": {"capability": "fs.read:/etc/hostname", "ttl": 60,
                                                "reason": "to say which machine this is"}}}) + "\n")
next_id = global_id
print('host  -> tools/call {"capability": "fs.read:/etc/hostname", "ttl": 60, "reason": ...}')
rid = None
for _ in range(100):
    p = json.loads(ctl("--json", "pending") or "[]")
    if p:
        rid = str(p[0]["rid"])
        break
    time.sleep(0.1)
print("$ capctl pending   -> request %s; $ capctl approve %s" % (rid, rid))
ctl("approve", rid)
m = read_msg()
while m.get("id") != global_id:
    print("server ~> %s" % m.get("method"))
    m = read_msg()
res = m["result"]
print("server <- %s %s\n" % ("ERROR" if res.get("isError") else "ok", short(res["content"][0]["text"])))
n = wait_note()
print("server ~> %s\n" % (n.get("method") if n else "(no notification)"))
tool("read_file", path="/etc/hostname")
tid = res.get("structuredContent", {}).get("token_id", "")
print("$ capctl revoke %s" % tid)
ctl("revoke", tid)
n = wait_note()
print("server ~> %s (nobody called anything: the server noticed)\n" % (n.get("method") if n else "(none)"))
tool("read_file", path="/etc/hostname")
srv.stdin.close()
sys.exit(srv.wait())
