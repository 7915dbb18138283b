/*
 * net_tcp.c - escape attempt: no TCP sockets (IPv4, IPv6).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/socket.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(void)
{
	esc_errno(socket(AF_INET, SOCK_STREAM, 0), "socket(AF_INET, SOCK_STREAM)", EPERM, 0);
	esc_errno(socket(AF_INET6, SOCK_STREAM, 0), "socket(AF_INET6, SOCK_STREAM)", EPERM, 0);
	/* The upper half of the register must not sneak a family past the filter. */
	esc_errno(syscall(SYS_socket, 0x100000000UL | AF_INET, SOCK_STREAM, 0),
	    "socket(AF_INET | 1<<32)", EPERM, 0);
	return esc_done("socket(AF_INET/AF_INET6, SOCK_STREAM): EPERM");
}
