# admin_flood.py SOCKET N SECONDS OUT - open up to N admin connections to
# SOCKET (stopping at the first refusal), write how many were accepted to OUT,
# then hold them all for SECONDS.  Used by 56-admin-limits and 57-admin-run-caps.
import socket, sys, time
socks = []
for i in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(2)
    try:
        s.connect(sys.argv[1]); socks.append(s)
    except OSError:
        break
open(sys.argv[4], "w").write("%d\n" % len(socks))
time.sleep(float(sys.argv[3]))
