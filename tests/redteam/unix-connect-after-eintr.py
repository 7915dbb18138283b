# Red team, fifth pass (2026-12-02 evening), R5-1: run inside a medium
# sandbox by unix-connect-after-eintr.sh.  An agent's blocking AF_UNIX connect to a full listener, interrupted by a
# signal: the kernel leaves the socket unconnected.  Does the broker's
# worker, still in its own connect, connect it after the caller gave up?
import errno, os, signal, socket, sys, threading, time
name = b"\0rv5-intr-%d" % os.getpid()
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(name)
srv.listen(0)
fill = []
for _ in range(8):
    f = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    f.setblocking(False)
    try:
        f.connect(name)
    except OSError as e:
        if e.errno != errno.EAGAIN:
            raise
        break
    fill.append(f)
class Stop(Exception):
    pass
def h(sig, frm):
    raise Stop()
signal.signal(signal.SIGUSR1, h)
me = threading.get_ident()
threading.Thread(target=lambda: (time.sleep(0.5), signal.pthread_kill(me, signal.SIGUSR1))).start()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
got = "returned"
try:
    s.connect(name)
except Stop:
    got = "interrupted"
except OSError as e:
    got = "error %s" % e
# the caller gave up; now the listener makes room
c, _ = srv.accept()
time.sleep(0.4)
try:
    s.send(b"x")
    state = "CONNECTED"
except OSError as e:
    state = "unconnected (%s)" % errno.errorcode.get(e.errno)
print("connect %s; after the caller gave up, the socket is %s" % (got, state))
sys.exit(1 if got == "interrupted" and state == "CONNECTED" else 0)
