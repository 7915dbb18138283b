/*
 * net_tcp_medium.c - escape attempt: TCP out of the medium tier without a
 * net.connect token, and every socket kind but TCP and AF_UNIX.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 *
 * Issue 14: an unmodified program may make a TCP socket (it lives in the
 * sandbox's empty network namespace) so that its connect() can reach the
 * broker; without a token covering the address the broker refuses it with
 * EACCES.  UDP, raw, packet and other protocols stay EPERM.
 */
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/escape/escape.h"

int
main(void)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(80) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(80) };
	int s4 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int s6 = socket(AF_INET6, SOCK_STREAM, IPPROTO_TCP);

	esc_true(s4 >= 0 && s6 >= 0, "a TCP socket for connect() (issue 14) was refused");
	inet_pton(AF_INET, "93.184.215.14", &a4.sin_addr);
	inet_pton(AF_INET6, "2606:2800:21f:cb07:6820:80da:af6b:8b2c", &a6.sin6_addr);
	esc_errno(connect(s4, (struct sockaddr *)&a4, sizeof(a4)), "connect(AF_INET) without a token",
	    EACCES, 0);
	esc_errno(connect(s6, (struct sockaddr *)&a6, sizeof(a6)), "connect(AF_INET6) without a token",
	    EACCES, 0);
	inet_pton(AF_INET, "127.0.0.1", &a4.sin_addr);
	esc_errno(connect(s4, (struct sockaddr *)&a4, sizeof(a4)), "connect(127.0.0.1) without a token",
	    EACCES, 0);
	esc_errno(socket(AF_INET6, SOCK_DGRAM, 0), "socket(AF_INET6, SOCK_DGRAM)", EPERM, 0);
	esc_errno(socket(AF_INET, SOCK_DGRAM, 0), "socket(AF_INET, SOCK_DGRAM)", EPERM, 0);
	esc_errno(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), "socket(AF_INET, SOCK_RAW)", EPERM, 0);
	esc_errno(socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP), "socket(IPPROTO_SCTP)", EPERM, 0);
	esc_errno(socket(AF_INET, SOCK_STREAM, 262 /* IPPROTO_MPTCP */), "socket(IPPROTO_MPTCP)",
	    EPERM, 0);
	esc_errno(socket(AF_PACKET, SOCK_RAW, 0), "socket(AF_PACKET)", EPERM, 0);
	esc_errno(socket(AF_NETLINK, SOCK_RAW, 0), "socket(AF_NETLINK)", EPERM, 0);
	/* The kernel reads an int: high bits must not make AF_INET look
	 * like something else to the filter. */
	esc_errno(syscall(SYS_socket, AF_INET | (1L << 32), SOCK_DGRAM, 0),
	    "socket(AF_INET with high bits, SOCK_DGRAM)", EPERM, 0);
	return esc_done("medium tier: TCP connect refused without a token, other sockets EPERM");
}
