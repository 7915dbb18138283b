#!/usr/bin/env bash
# F4: the host-address set is the interface addresses only (getifaddrs); a
# locally-routed prefix (an address with a prefix on lo, or "ip route add local
# N/len", AnyIP) makes other addresses the host's own: they reach a host service.
# Runs in a private netns (unshare -n).  Expect every line refused (77).
cd "$(dirname "$0")/../.." 
exec unshare -n bash -c '
ip link set lo up; ip addr add 93.184.216.34/24 dev lo; ip -6 addr add 2606:2800:220:1::5/64 dev lo nodad
python3 -c "
import socket,threading
for fam,a in ((socket.AF_INET,\"0.0.0.0\"),(socket.AF_INET6,\"::\")):
  s=socket.socket(fam); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
  if fam==socket.AF_INET6: s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_V6ONLY,1)
  s.bind((a,8765)); s.listen(); threading.Thread(target=lambda s=s: [c.sendall(b\"HOST-SERVICE\\n\") or c.close() for c,_ in iter(s.accept,None)],daemon=True).start()
import time; time.sleep(60)" & sleep 0.5
mkdir -p /var/tmp/f4ws; chmod 755 /var/tmp/f4ws
for h in 93.184.216.34 "[::ffff:93.184.216.34]" "[64:ff9b::5db8:d822]" "[::5db8:d822]" "[2002:5db8:d822::1]" "[2606:2800:220:1::5]" "[2606:2800:220:1:0:0:0:5]" 93.184.216.35 "[::ffff:0:5db8:d822]" 93.184.216.0 93.184.216.255; do
  out=$(timeout 10 ./bin/capbroker run --tier high --workspace /var/tmp/f4ws --grant "net.connect:*:8765" -- capcall net.connect "$h:8765" </dev/null 2>&1)
  echo "$h -> rc=$? $(echo $out | cut -c1-150)"
done
kill %1'
