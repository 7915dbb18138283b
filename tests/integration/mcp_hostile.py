#!/usr/bin/env python3
"""mcp_hostile.py CMD... - feed `capcall mcp` (started as CMD) hostile
JSON-RPC and check every answer.  Prints "T 0 title" / "T 1 title" lines
(and "# detail") for tests/integration/44-client-mcp.sh to turn into TAP.
Environment: W (the workspace the sandbox was granted fs.read/fs.list on).
"""
import json
import os
import select
import subprocess
import sys
import time

W = os.environ["W"]
failed = 0
proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=open(os.environ.get("ERRLOG", "/dev/null"), "wb"), bufsize=0)
buf = b""
nonprotocol = []


def check(title, cond, detail=None):
    global failed
    print("T %d %s" % (0 if cond else 1, title), flush=True)
    if not cond:
        failed += 1
        if detail is not None:
            for l in str(detail)[:2000].splitlines()[:12]:
                print("# " + l)


def send(raw):
    if isinstance(raw, str):
        raw = raw.encode()
    proc.stdin.write(raw + b"\n")


def recv(timeout=20):
    """The next line from the server, parsed (None on timeout or EOF)."""
    global buf
    end = time.time() + timeout
    while b"\n" not in buf:
        left = end - time.time()
        if left <= 0:
            return None
        r, _, _ = select.select([proc.stdout], [], [], left)
        if not r:
            return None
        chunk = os.read(proc.stdout.fileno(), 1 << 20)
        if not chunk:
            return None
        buf += chunk
    line, buf = buf.split(b"\n", 1)
    try:
        msg = json.loads(line)
    except ValueError:
        nonprotocol.append(line[:200])
        return {"unparsable": line[:200].decode(errors="replace")}
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        nonprotocol.append(line[:200])
    return msg


def rpc(obj_or_raw, timeout=20):
    send(obj_or_raw if isinstance(obj_or_raw, (str, bytes)) else json.dumps(obj_or_raw))
    return recv(timeout)


def silent(what, timeout=0.5):
    """Nothing comes back within timeout."""
    m = recv(timeout)
    check(what, m is None, m)


def err_is(title, m, code, id_=None):
    check(title, isinstance(m, dict) and m.get("error", {}).get("code") == code and
          m.get("id", "absent") == id_, m)


def call(name, args, id_=100):
    return rpc({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                "params": {"name": name, "arguments": args}})


# -- negotiation ---------------------------------------------------------------
m = rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "hostile", "version": "0"}}})
check("initialize 2025-06-18: agreed", m and m.get("result", {}).get("protocolVersion") == "2025-06-18", m)
send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
m = rpc({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}})
check("initialize 2025-11-25: agreed", m and m["result"]["protocolVersion"] == "2025-11-25", m)
m = rpc({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": "1999-01-01"}})
check("initialize with an unknown version: answered with our latest",
      m and m["result"]["protocolVersion"] == "2025-11-25", m)
err_is("initialize without a version: -32602", rpc({"jsonrpc": "2.0", "id": 4, "method": "initialize"}),
       -32602, 4)
err_is("initialize with a numeric version: -32602",
       rpc({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": 2025}}), -32602, 5)

# -- malformed JSON and wrong shapes -----------------------------------------------
err_is("not JSON: -32700 with id null", rpc("{this is not json"), -32700)
err_is("truncated JSON: -32700", rpc('{"jsonrpc":"2.0","id":1,"method":"ping"'), -32700)
err_is("trailing garbage: -32700", rpc('{"jsonrpc":"2.0","id":1,"method":"ping"} x'), -32700)
err_is("invalid UTF-8: -32700", rpc(b'{"jsonrpc":"2.0","id":1,"method":"pi\xffng"}'), -32700)
err_is("a NUL escaped in a string: -32700",
       rpc('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file",'
           '"arguments":{"path":"/w\\u0000/x"}}}'), -32700)
err_is("duplicate keys: -32700", rpc('{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}'), -32700)
err_is("a bare number: -32600", rpc("42"), -32600)
err_is("a batch (array): -32600", rpc('[{"jsonrpc":"2.0","id":1,"method":"ping"}]'), -32600)
err_is("an empty object: -32600", rpc("{}"), -32600)
err_is("jsonrpc 1.0: -32600 (id kept)", rpc({"jsonrpc": "1.0", "id": 9, "method": "ping"}), -32600, 9)
err_is("no jsonrpc member: -32600", rpc({"id": 9, "method": "ping"}), -32600, 9)
err_is("method a number: -32600", rpc({"jsonrpc": "2.0", "id": 9, "method": 5}), -32600, 9)
err_is("params a string: -32602", rpc({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": "x"}), -32602, 9)
err_is("params an array: -32602",
       rpc({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": [1]}), -32602, 9)
err_is("unknown method: -32601", rpc({"jsonrpc": "2.0", "id": 9, "method": "resources/list"}), -32601, 9)
err_is("tools/call without a name: -32602", rpc({"jsonrpc": "2.0", "id": 9, "method": "tools/call"}), -32602, 9)
err_is("tools/call with a numeric name: -32602",
       rpc({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": 1}}), -32602, 9)
err_is("tools/call with arguments an array: -32602",
       rpc({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "stat", "arguments": ["/"]}}), -32602, 9)
err_is("tools/call of an unknown tool: -32602",
       rpc({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "rm_rf"}}), -32602, 9)
err_is("tools/list with a made-up cursor: -32602",
       rpc({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"cursor": "x"}}), -32602, 9)

# -- ids of every JSON type ------------------------------------------------------------
for v, name in (("\"abc\"", "a string"), ("7", "an integer"), ("-3", "a negative integer"),
                ("1.5", "a real"), ("\"\"", "an empty string")):
    m = rpc('{"jsonrpc":"2.0","id":%s,"method":"ping"}' % v)
    check("id %s is echoed" % name, m and "result" in m and m.get("id") == json.loads(v), m)
for v, name in (("null", "null"), ("{}", "an object"), ("[1]", "an array"), ("true", "true"),
                ("false", "false")):
    err_is("id %s: -32600 with id null" % name, rpc('{"jsonrpc":"2.0","id":%s,"method":"ping"}' % v), -32600)
send('{"jsonrpc":"2.0","method":"ping"}')
send('{"jsonrpc":"2.0","method":"notifications/whatever","params":{"x":1}}')
send('{"jsonrpc":"2.0","id":77,"result":{}}')
send('{"jsonrpc":"2.0","id":78,"error":{"code":1,"message":"m"}}')
send("")
send("   ")
silent("notifications, responses and blank lines get no answer")

# -- sizes ------------------------------------------------------------------------------------
big = "A" * (5 * 1024 * 1024)
err_is("a 5 MiB line: -32600 (too long)", rpc('{"jsonrpc":"2.0","id":1,"method":"ping","x":"%s"}' % big), -32600)
m = rpc({"jsonrpc": "2.0", "id": "after-big", "method": "ping"})
check("... and the next message is answered", m and m.get("id") == "after-big" and "result" in m, m)
m = call("read_file", {"path": "/" + "a" * 100000})
check("a 100 KB path: a tool error, not sent", m and m["result"]["isError"] is True and
      "path" in m["result"]["content"][0]["text"], m)
m = call("write_file", {"path": W + "/x", "content": "x" * (2 * 1024 * 1024)})
check("2 MiB of content: refused before the broker", m and m["result"]["isError"] is True and
      "content" in m["result"]["content"][0]["text"], m)
m = call("exec", {"argv": ["/usr/bin/cat"] + ["x"] * 100})
check("101 arguments: refused", m and m["result"]["isError"] is True, m)
m = call("request_capability", {"capability": "fs.read:/x", "reason": "r" * 5000})
check("a 5000-byte reason: refused", m and m["result"]["isError"] is True, m)
err_is("10000 nested arrays: -32700 (the parser's own limit)",
       rpc('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":%s%s}}' % ("[" * 10000, "]" * 10000)), -32700)
err_is("100 nested arrays in params: -32600 (ours)",
       rpc('{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":%s%s}}' % ("[" * 100, "]" * 100)), -32600, 2)

# -- wrong argument types: tool errors that say what is wrong ------------------------------
for args, what in (({"path": 5}, "a numeric path"), ({}, "no path"), ({"path": None}, "a null path"),
                   ({"path": ["/"]}, "an array path"), ({"path": "/", "extra": 1}, "an unknown argument")):
    m = call("stat", args)
    check("stat with %s: isError" % what, m and m["result"]["isError"] is True and
          m["result"]["structuredContent"]["error"] == "invalid-arguments", m)
for args, what in (({"argv": []}, "an empty argv"), ({"argv": "/bin/ls"}, "argv a string"),
                   ({"argv": [1]}, "argv of numbers"), ({"argv": ["ls"]}, "a relative program"),
                   ({"argv": ["/usr/bin/cat"], "timeout": 0}, "timeout 0"),
                   ({"argv": ["/usr/bin/cat"], "timeout": "5"}, "a string timeout"),
                   ({"argv": ["/usr/bin/cat"], "timeout": 1.5}, "a fractional timeout")):
    m = call("exec", args)
    check("exec with %s: isError" % what, m and m["result"]["isError"] is True, m)
for args, what in (({"host": "h", "port": 0}, "port 0"), ({"host": "h", "port": 70000}, "port 70000"),
                   ({"host": "", "port": 80}, "an empty host"),
                   ({"host": "h", "port": 80, "max_bytes": -1}, "negative max_bytes")):
    m = call("connect", args)
    check("connect with %s: isError" % what, m and m["result"]["isError"] is True, m)
m = call("capabilities", {"x": 1})
check("capabilities with an argument: isError", m and m["result"]["isError"] is True, m)

# -- a read that works, a refusal, and invalid UTF-8 from the broker -----------------------
m = call("read_file", {"path": W + "/a.txt"})
check("read_file of a granted file works", m and m["result"]["isError"] is False and
      m["result"]["content"][0]["text"] == "hello\n", m)
m = call("list_directory", {"path": W})
names = [e["name"] for e in m["result"]["structuredContent"]["entries"]] if m else []
check("a file name that is not UTF-8 is listed with U+FFFD", "bad\ufffdname" in names, m)
m = call("read_file", {"path": "/etc/shadow"})
check("a refusal is a tool result naming the capability", m and m["result"]["isError"] is True and
      "fs.read:/etc/shadow" in m["result"]["content"][0]["text"], m)

# -- request_capability does not hold the server ----------------------------------------------
def req(id_, cap):
    send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {
        "name": "request_capability", "arguments": {"capability": cap, "reason": "hostile test"}}}))


req("rq1", "fs.read:/etc/hostname")
m = rpc({"jsonrpc": "2.0", "id": "while-waiting", "method": "ping"})
check("while a request waits for a human, other calls are answered", m and m.get("id") == "while-waiting", m)
m = call("stat", {"path": W + "/a.txt"}, id_="stat-while-waiting")
check("... tool calls too", m and m.get("id") == "stat-while-waiting" and m["result"]["isError"] is False, m)
for i in range(2, 6):
    req("rq%d" % i, "fs.read:/etc/issue%d" % i)
m = recv(10)
check("a fifth waiting request: the broker refuses it at once (busy), as a tool error",
      m and m.get("id") == "rq5" and m["result"]["isError"] is True and
      m["result"]["structuredContent"]["error"] == "busy", m)
send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                 "params": {"requestId": "rq1", "reason": "changed my mind"}}))
silent("a cancelled request gets no answer")

# -- a flood ---------------------------------------------------------------------------------
N = 3000
send(b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(N))[:-1])
ids = []
for _ in range(N):
    m = recv(30)
    if m is None:
        break
    ids.append(m.get("id"))
check("a flood of %d pings in one write: all answered, in order" % N, ids == list(range(N)),
      "got %d answers" % len(ids))
for i in range(200):
    send(json.dumps({"jsonrpc": "2.0", "id": "s%d" % i, "method": "tools/call",
                     "params": {"name": "stat", "arguments": {"path": W + "/a.txt"}}}))
ok = 0
for i in range(200):
    m = recv(30)
    ok += bool(m and m.get("id") == "s%d" % i and m["result"]["isError"] is False)
check("200 tool calls in a burst: all answered", ok == 200, "%d ok" % ok)

check("stdout carried nothing but JSON-RPC", not nonprotocol, nonprotocol[:3])
m = rpc({"jsonrpc": "2.0", "id": "last", "method": "ping"})
check("the server still answers at the end", m and m.get("id") == "last", m)
proc.stdin.close()
try:
    rc = proc.wait(20)
except subprocess.TimeoutExpired:
    proc.kill()
    rc = "hung"
check("EOF on stdin: the server and its sandbox exit 0", rc == 0, rc)
sys.exit(1 if failed else 0)
