#!/usr/bin/python3
"""examples/agent.py - a small agent that shows what capbroker lets it do.

It runs inside a capbroker sandbox (see examples/demo.sh) and uses the
Python client: every file, network and process operation goes through the
broker, which checks a token for each one.  Each step prints what it tried
and what the broker said.

Usage (inside the sandbox): agent.py WORKSPACE GRANTED_PORT OTHER_PORT
"""

import sys

import capbroker

ws, port, other = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cb = capbroker.Client()
step = 0


def show(what, fn):
    global step
    step += 1
    try:
        result = fn()
        print("%2d. %-50s ALLOWED  %s" % (step, what, str(result).replace(ws, "WS")))
    except capbroker.Denied as e:
        print("%2d. %-50s DENIED   %s" % (step, what, e.reason.replace(ws, "WS")))
    except capbroker.Error as e:
        print("%2d. %-50s FAILED   %s" % (step, what, e.reason.replace(ws, "WS")))
    sys.stdout.flush()


def http_get(p):
    s = cb.connect("127.0.0.1", p)
    s.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: localhost\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    return data.split(b"\r\n", 1)[0].decode()


print("agent: my tokens (WS is %s):" % ws)
for t in cb.tokens():
    print("   ", " ".join(c.replace(ws, "WS") for c in t.caps))
print()
show("read WS/docs/readme.txt",
     lambda: repr(cb.read_file(ws + "/docs/readme.txt").decode().splitlines()[0]))
show("read WS/private/salary.txt (no grant)",
     lambda: cb.read_file(ws + "/private/salary.txt"))
show("read /etc/shadow (outside the workspace)",
     lambda: cb.read_file("/etc/shadow"))
show("read WS/docs/passwd (a symlink to /etc/passwd)",
     lambda: cb.read_file(ws + "/docs/passwd"))
show("write WS/out/summary.txt",
     lambda: "%d bytes" % cb.write_file(ws + "/out/summary.txt", b"the agent was here\n"))
show("write WS/docs/readme.txt (only read is granted)",
     lambda: cb.write_file(ws + "/docs/readme.txt", b"overwritten"))
show("list WS/docs",
     lambda: ", ".join(sorted(e.name for e in cb.list_dir(ws + "/docs"))))
show("connect 127.0.0.1:%d (granted)" % port, lambda: http_get(port))
show("connect 127.0.0.1:%d (not granted)" % other, lambda: http_get(other))
show("connect 169.254.169.254:80 (cloud metadata)",
     lambda: cb.connect("169.254.169.254", 80))
show("exec /usr/bin/wc -l WS/docs/readme.txt",
     lambda: (lambda r: "exit %d, output %r" % (r.status, r.out.decode().strip()))(
         cb.exec(["/usr/bin/wc", "-l", ws + "/docs/readme.txt"])))
show("exec /bin/sh -c id (no grant)", lambda: cb.exec(["/bin/sh", "-c", "id"]))
show("ask a human for fs.read:/etc/hostname for 60 s",
     lambda: cb.request("fs.read:/etc/hostname", ttl=60, reason="demo: show elevation"))
