/*
 * net_tcp_medium.c - escape attempt: no TCP sockets in the medium tier either.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 */
#include <sys/socket.h>

#include "tests/escape/escape.h"

int
main(void)
{
	esc_errno(socket(AF_INET, SOCK_STREAM, 0), "socket(AF_INET)", EPERM, 0);
	esc_errno(socket(AF_INET6, SOCK_DGRAM, 0), "socket(AF_INET6)", EPERM, 0);
	return esc_done("medium tier: AF_INET/AF_INET6 EPERM");
}
