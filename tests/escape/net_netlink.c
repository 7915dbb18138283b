/*
 * net_netlink.c - escape attempt: no netlink or other exotic socket families.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/socket.h>

#include "tests/escape/escape.h"

int
main(void)
{
	static const int fam[] = { AF_NETLINK, AF_VSOCK, AF_ALG, AF_BLUETOOTH, AF_XDP,
	    AF_KEY, AF_TIPC, AF_RDS };

	for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++) {
		char what[32];

		snprintf(what, sizeof(what), "socket(family %d)", fam[i]);
		esc_errno(socket(fam[i], SOCK_RAW, 0), what, EPERM, 0);
	}
	esc_errno(socketpair(AF_INET, SOCK_STREAM, 0, (int[2]){ 0, 0 }), "socketpair(AF_INET)", EPERM, 0);
	return esc_done("netlink, vsock, alg, bluetooth, xdp...: EPERM");
}
