/*
 * net_raw.c - escape attempt: no raw or packet sockets.
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
	esc_errno(socket(AF_INET, SOCK_RAW, IPPROTO_RAW), "socket(SOCK_RAW)", EPERM, 0);
	esc_errno(socket(AF_PACKET, SOCK_RAW, 0), "socket(AF_PACKET)", EPERM, 0);
	return esc_done("raw and packet sockets: EPERM");
}
