#!/usr/bin/env bash
# 29-net-dns-search.sh - red-team F7: the broker looks up a name with a dot
# (as every name an agent chooses under a `*.domain` token has) without the
# host's resolv.conf search list, which would turn it into NAME.<search
# domain>, a name no token covers (through the sandbox's resolver and the
# explicit net.connect alike).  Before the fix the host's resolver was asked
# "x.test.invalid.corp.invalid" for both.
#
# Runs in a mount and network namespace of its own (as root, as
# 27-net-dns.sh): /etc/resolv.conf is a private file naming a search domain;
# the host's resolver is a probe on 127.0.0.1:53 that records every name it
# is asked for (and answers nothing).
if [ -z "${CB_NETNS_INNER:-}" ] && [ "$(id -u)" = 0 ] && unshare -m -n true 2>/dev/null; then
	CB_NETNS_INNER=1 exec unshare -m -n -- bash "$0" "$@"
fi
. "$(dirname "$0")/../lib.sh"
if [ -z "${CB_NETNS_INNER:-}" ]; then
	t_skip "names looked up as absolute names" "needs root for a mount and network namespace"
	t_done
	exit
fi
CB="$CB_BIN/capbroker"

ip link set lo up
printf '127.0.0.1 localhost\n10.1.2.3 a.test.invalid\n' >"$T_TMP/hosts"
printf 'nameserver 127.0.0.1\nsearch corp.invalid\noptions timeout:1 attempts:1 ndots:1\n' >"$T_TMP/resolv.conf"
mount --bind "$T_TMP/hosts" /etc/hosts && mount --bind "$T_TMP/resolv.conf" /etc/resolv.conf
: >"$T_TMP/asked"
$PYTHON -c '
import socket, sys
log = open(sys.argv[1], "a", buffering=1)
def name(m):
    i, out = 12, []
    while i < len(m) and m[i]:
        out.append(m[i + 1:i + 1 + m[i]].decode("ascii", "replace")); i += 1 + m[i]
    return ".".join(out)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 53))
while True: log.write(name(u.recvfrom(4096)[0]) + "\n")' "$T_TMP/asked" &
probe=$!
trap 'kill $probe 2>/dev/null; wait $probe 2>/dev/null; t_cleanup' EXIT
for _ in $(seq 50); do ss -lun 2>/dev/null | grep -q "127.0.0.1:53 " && break; sleep 0.05; done
getent hosts probe.nowhere.invalid >/dev/null
t_ok "control: the host's resolver applies the search list here" \
	grep -qx "probe.nowhere.invalid.corp.invalid" "$T_TMP/asked"

W='net.connect:*.test.invalid:443'
out=$("$CB" run --tier high --grant "$W" -- getent hosts a.test.invalid 2>&1)
t_match "a covered name in the host's /etc/hosts still resolves" "$out" "^10\.1\.2\.3 +a\.test\.invalid\$"
t_exit "a covered name that does not exist does not resolve inside (getent: 2)" 2 \
	"$CB" run --tier high --grant "$W" -- getent hosts leak-one.test.invalid
"$CB" run --tier high --grant "$W" -- capcall net.connect leak-two.test.invalid:443 </dev/null >/dev/null 2>&1
sleep 0.2
t_ok "... the broker asked the host's resolver for the names themselves" \
	grep -qx "leak-one.test.invalid" "$T_TMP/asked"
t_is "... and never for a search-list expansion (resolver, explicit net.connect)" \
	"$(grep -cE '^leak-(one|two)\.test\.invalid\.corp\.invalid$' "$T_TMP/asked")" 0
t_done
