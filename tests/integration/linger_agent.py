# linger_agent.py - the hostile agent of 911: a TCP socket whose last close
# waits (SO_LINGER of its choosing, its send buffer full towards a peer that
# reads nothing) handed to the broker, on its channel (VIA=chan) or on the
# sandbox resolver's socket (VIA=dns), the agent's own copy closed, so
# that the broker's close of it is the last.  Prints "queued N", then
# "refused ERRNO" if the kernel refused the descriptor or "sent".
# Usage: linger_agent.py PORT LINGER_S chan|dns
import os, socket, struct, sys, time

port, linger, via = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.socket()
s.connect(("127.0.0.1", port))
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, linger))
s.setblocking(False)
n = 0
try:
    while True:
        n += s.send(b"x" * 65536)
except BlockingIOError:
    pass
print("queued", n, flush=True)
if via == "chan":
    to = socket.socket(fileno=int(os.environ["CAPBROKER_FD"]))
else:
    to = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    to.connect(("127.0.0.53", 53))		# the sandbox's resolver (the broker)
try:
    socket.send_fds(to, [b"\x00"], [s.fileno()])
    print("sent", flush=True)
except OSError as e:
    print("refused", e.errno, flush=True)
    # ours is the last close then: not worth the wait
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 0, 0))
s.close()
time.sleep(2)
