# unix_queue_agent.py - the hostile agent of 951: a TCP socket whose last
# close waits (SO_LINGER of its choosing, its send buffer full towards a
# peer that reads nothing) is queued, as SCM_RIGHTS, on an AF_UNIX
# datagram socket of the agent's own; the agent then connect()s that
# socket to a path in its workspace (mediated: the broker takes a copy of
# the socket and connects it on a worker, the path looked up through the
# served tree) and closes its own copy while the broker still holds its
# copy, so that the broker's close is the last and the queued socket's
# release (and its linger) is the broker's.  Several threads stat the
# workspace meanwhile so that the lookup waits behind them.
# Prints a line per try, then "won N": how many times the agent's close
# was not the last (the broker's was, or is to be).
# Usage: unix_queue_agent.py PORT LINGER_S TRIES DELAY_MS [WINS]
# WINS: stop once that many were won (a race: the tries are an upper bound).
import os, socket, struct, sys, threading, time

port, linger, tries, delay = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
wins = int(sys.argv[5]) if len(sys.argv) > 5 else tries
stop = False
def flood():
    while not stop:
        try:
            os.stat("d/nothing-%d" % threading.get_ident())
        except OSError:
            pass
ths = [threading.Thread(target=flood, daemon=True) for _ in range(8)]
for t in ths: t.start()
os.makedirs("d", exist_ok=True)
won = 0
for i in range(tries):
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, linger))
    s.setblocking(False)
    try:
        while True:
            s.send(b"x" * 65536)
    except BlockingIOError:
        pass
    b = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = b"\0uqa-%d-%d" % (os.getpid(), i)
    b.bind(name)
    a = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendmsg([b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", s.fileno()))], 0, name)
    a.close()
    # ours is no longer the last reference to s: the queued one is
    s.close()
    res = []
    def conn():
        try:
            b.connect("d/" + "x/" * 40 + "sock%d" % i)
            res.append(0)
        except OSError as e:
            res.append(e.errno)
    fd = b.detach()
    bb = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM, fileno=fd)
    b = bb
    t = threading.Thread(target=conn)
    t.start()
    time.sleep(delay / 1000.0)
    # The agent's copy: where it is the last, its close waits the linger
    # (in this sandbox only), so it is left to a thread of its own; a close
    # done at once was not the last (the broker still held its copy).
    c = threading.Thread(target=os.close, args=(fd,), daemon=True)
    c.start()
    c.join(1.0)
    t.join()
    won += not c.is_alive()
    print("try %d: errno %s, %s" % (i, res, "not the last close" if not c.is_alive() else
          "the last close"), flush=True)
    b.detach()
    if won >= wins:
        break
stop = True
print("won", won, flush=True)
