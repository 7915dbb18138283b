#!/usr/bin/env bash
# 68-never-host.sh - red-team F1 (issue 10, hole 3 by the network): a never
# rule meets its host in every spelling.
#  - A never rule naming a host (net.connect:db.corp.example:*) stops an
#    approved token for that host's address, and for the address's NAT64
#    form: the broker resolves the never name when it judges the connect.
#  - A never name that cannot be resolved refuses the connects its port
#    could match (fail closed), and only those.
#  - A request for an IPv6 form of a never IPv4 range is refused at once,
#    without reaching a human.
#
# Runs in a mount and network namespace of its own (as root: `unshare -m
# -n`): /etc/hosts and /etc/resolv.conf are private files bind-mounted over
# the machine's for this namespace only, and every address is on this
# namespace's loopback; it has no route out.
if [ -z "${CB_NETNS_INNER:-}" ] && [ "$(id -u)" = 0 ] && unshare -m -n true 2>/dev/null; then
	CB_NETNS_INNER=1 exec unshare -m -n -- bash "$0" "$@"
fi
. "$(dirname "$0")/../lib.sh"
if [ -z "${CB_NETNS_INNER:-}" ]; then
	t_skip "never rules naming hosts" "needs root for a mount and network namespace"
	t_done
	exit
fi
. "$(dirname "$0")/admin_lib.sh"

ip link set lo up
ip addr add 10.1.2.3/32 dev lo
ip addr add 10.1.2.4/32 dev lo
printf '127.0.0.1 localhost\n10.1.2.3 db.corp.example\n' >"$T_TMP/hosts"
# nothing answers on 127.0.0.1:53 here: an unknown name fails at once
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$T_TMP/resolv.conf"
mount --bind "$T_TMP/hosts" /etc/hosts && mount --bind "$T_TMP/resolv.conf" /etc/resolv.conf
t_match "db.corp.example is 10.1.2.3 in this namespace only" "$(getent hosts db.corp.example)" "^10\.1\.2\.3 "

P=$($PYTHON -c 'import socket
s=socket.socket(); s.bind(("0.0.0.0",0)); print(s.getsockname()[1])')
Q=$((P + 1))
# A service bound to 0.0.0.0 on both ports (the target the never rule protects).
$PYTHON -c "
import socket, threading
def serve(port):
    s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0',port)); s.listen(8)
    while True:
        c,_=s.accept(); c.sendall(b'pong\n'); c.close()
threading.Thread(target=serve, args=($Q,), daemon=True).start()
serve($P)
" & _adm_pids+=("$!")
for _ in $(seq 50); do ss -ltn 2>/dev/null | grep -q ":$Q " && break; sleep 0.05; done

S="$T_TMP/st"
mkdir -p "$T_TMP/ws"
cat >"$T_TMP/p.conf" <<EOT
defaults = { request_expiry = 20; };
tiers = { high = { requestable = (
  { caps = [ "net.connect:db.corp.example:*", "net.connect:nowhere.invalid:$Q",
             "net.connect:93.184.216.0/24:*" ]; approval = "never"; },
  { caps = [ "net.connect:*:*" ]; approval = "human"; max_ttl = 60; }
); }; };
EOT
t_ok "the policy is valid" "$CB" check-policy "$T_TMP/p.conf"
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start a1 --tier high --workspace "$T_TMP/ws"

# approved CAP HOST:PORT: request CAP, have a human approve it, then connect
approved() {
	local rid
	agent_send a1 "capcall request '$1' --ttl 30 --reason test && capcall net.connect '$2' </dev/null"
	local n=$ASEQ
	rid=$(pending_rid "$1")
	"$CTL" --state "$S" approve "$rid" >/dev/null
	agent_wait a1 "$n"
}

approved "net.connect:10.1.2.4:$P" "10.1.2.4:$P"
t_is "control: an approved token for 10.1.2.4 (no never rule) reaches it" "$ARC" 0
t_match "... and the service answers" "$AOUT" "pong"

approved "net.connect:10.1.2.3:$P" "10.1.2.3:$P"
t_is "an approved token for db.corp.example's address is refused (77)" "$ARC" 77
t_match "... by the never rule naming the host (exceeds policy)" "$AOUT" "exceeds policy"
t_ok "... and audited so" wait_for 200 grep -q "\"op\":\"net.connect\",\"resource\":\"10.1.2.3:$P\".*\"decision\":\"deny\",\"reason\":\"exceeds-policy\"" "$S/audit.jsonl"

approved "net.connect:[64:ff9b::a01:203]:$P" "[64:ff9b::a01:203]:$P"
t_is "... so is one for its NAT64 form (77, not tried)" "$ARC" 77
t_match "... also as beyond the policy" "$AOUT" "exceeds policy"

approved "net.connect:10.1.2.4:$Q" "10.1.2.4:$Q"
t_is "a never name that cannot be resolved refuses the connects its port could match (77)" "$ARC" 77
t_match "... saying which name" "$AOUT" "nowhere.invalid cannot be resolved"
agent_do a1 "capcall net.connect '10.1.2.4:$P' </dev/null"
t_is "... and not the others" "$ARC" 0

# Request time: an IPv6 form of a never IPv4 range never reaches a human.
for spelled in "[64:ff9b::5db8:d822]:443" "[::5db8:d822]:443" "[::ffff:0:5db8:d822]:443" \
	"[2002:5db8:d822::/48]:*"; do
	agent_do a1 "capcall request 'net.connect:$spelled' --ttl 30 --reason nat64"
	t_is "a request for the never range as $spelled is refused at once (77)" "$ARC" 77
done
t_is "... none of them reached a human" "$("$CTL" --state "$S" --json pending | jget 'len(d)')" 0
t_done
