/*
 * net_udp.c - escape attempt: no UDP sockets.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/socket.h>
#include <netinet/in.h>

#include "tests/escape/escape.h"

int
main(void)
{
	esc_errno(socket(AF_INET, SOCK_DGRAM, 0), "socket(AF_INET, SOCK_DGRAM)", EPERM, 0);
	esc_errno(socket(AF_INET6, SOCK_DGRAM, 0), "socket(AF_INET6, SOCK_DGRAM)", EPERM, 0);
	esc_errno(socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP), "ping socket", EPERM, 0);
	return esc_done("UDP and ICMP sockets: EPERM");
}
