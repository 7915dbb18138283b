# tests/integration/dns_lib.sh - the setup the DNS tests share (27, 29, 91),
# sourced INSTEAD of tests/lib.sh (it sources lib.sh itself, after moving
# the test into a mount and network namespace of its own: as root, `unshare
# -m -n`, as 68-never-host.sh).  There /etc/hosts and /etc/resolv.conf are
# private files bind-mounted over the machine's for this namespace only, and
# the host's resolver is a probe (dns_probe.py) on 127.0.0.1:53.
#
# dns_need TITLE           skip the test (TITLE) unless it runs in the
#                          namespace (not root, no user namespaces)
# dns_files HOSTS RESOLV   loopback up; the namespace's /etc/hosts and
#                          /etc/resolv.conf get the contents HOSTS and RESOLV
#                          (printf %b: \n for a new line)
# dns_probe [NAME ADDR CMD]...
#                          start the probe (DNS_PROBE its pid, killed at
#                          exit), logging every name asked to $T_TMP/asked;
#                          the triples: names it answers (dns_probe.py).
#                          Source admin_lib.sh, if at all, before this.
if [ -z "${CB_NETNS_INNER:-}" ] && [ "$(id -u)" = 0 ] && unshare -m -n true 2>/dev/null; then
	CB_NETNS_INNER=1 exec unshare -m -n -- bash "$0" "$@"
fi
. "$(dirname "$0")/../lib.sh"

dns_need() {
	[ -n "${CB_NETNS_INNER:-}" ] && return 0
	t_skip "$1" "needs root for a mount and network namespace"
	t_done
	exit
}

dns_files() {
	ip link set lo up
	printf '%b' "$1" >"$T_TMP/hosts"
	printf '%b' "$2" >"$T_TMP/resolv.conf"
	mount --bind "$T_TMP/hosts" /etc/hosts && mount --bind "$T_TMP/resolv.conf" /etc/resolv.conf
}

dns_probe() {
	local i
	: >"$T_TMP/asked"
	"$PYTHON" "$CB_TOP/tests/integration/dns_probe.py" "$T_TMP/asked" "$@" &
	DNS_PROBE=$!
	# admin_lib.sh's exit trap kills what it lists; else one of our own.
	if declare -p _adm_pids >/dev/null 2>&1; then
		_adm_pids+=("$DNS_PROBE")
	else
		trap 'kill $DNS_PROBE 2>/dev/null; wait $DNS_PROBE 2>/dev/null; t_cleanup' EXIT
	fi
	for i in $(seq 50); do
		ss -lun 2>/dev/null | grep -q "127.0.0.1:53 " && ss -ltn 2>/dev/null | grep -q "127.0.0.1:53 " &&
			return 0
		sleep 0.05
	done
}
