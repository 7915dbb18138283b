/*
 * net_sendto_unconnected.c - escape attempt: reach an address by sendto()/sendmsg() instead of connect().
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 0
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * sendto(), sendmsg() and sendmmsg() are not mediated (they carry the
 * broker channel's own messages).  With an address they must reach
 * nothing:
 *  - a TCP socket of the sandbox, unconnected: the address is ignored
 *    (EPIPE) or, with MSG_FASTOPEN, the sandbox's empty network answers
 *    (ENETUNREACH), for a covered and an uncovered address alike;
 *  - UDP sockets do not exist (socket() is EPERM), so neither does a
 *    datagram to 127.0.0.1:53 or anywhere;
 *  - the socket a connect() to the sandbox's resolver got (a socketpair to
 *    the broker): an address is refused (EISCONN/EOPNOTSUPP), and a
 *    connect() on it, re-aimed at the covered address, is refused (EACCES:
 *    it was made by the broker, outside the sandbox's network namespace).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include "tests/escape/escape.h"

#ifndef MSG_FASTOPEN
#define MSG_FASTOPEN 0x20000000
#endif

int
main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, other, dns = { .sin_family = AF_INET };
	struct iovec io = { .iov_base = "GET / HTTP/1.0\r\n\r\n", .iov_len = 18 };
	struct msghdr m = { .msg_name = &a, .msg_namelen = sizeof(a), .msg_iov = &io, .msg_iovlen = 1 };
	struct mmsghdr mm = { .msg_hdr = m };
	int s;

	if (argc < 2)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(0x7f000001);
	other = a;
	other.sin_addr.s_addr = htonl(0x7f000002);
	for (int k = 0; k < 2; k++) {
		struct sockaddr_in *to = k ? &other : &a;

		m.msg_name = to;
		mm.msg_hdr = m;
		if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			return 2;
		esc_errno(sendto(s, "x", 1, 0, (struct sockaddr *)to, sizeof(*to)),
		    "sendto(address) on an unconnected TCP socket", EPIPE, ENOTCONN);
		esc_errno(sendmsg(s, &m, 0), "sendmsg(address) on an unconnected TCP socket", EPIPE,
		    ENOTCONN);
		esc_errno(sendmmsg(s, &mm, 1, 0), "sendmmsg(address) on an unconnected TCP socket",
		    EPIPE, ENOTCONN);
		esc_errno(sendto(s, "x", 1, MSG_FASTOPEN, (struct sockaddr *)to, sizeof(*to)),
		    "sendto(MSG_FASTOPEN) from the sandbox's own TCP socket", ENETUNREACH, EACCES);
		close(s);
	}
	esc_errno(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), "a UDP socket", EPERM, 0);
	esc_errno(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0), "a UDP socket (IPv6)", EPERM, 0);
	esc_errno(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP), "a UDP socket (udp)",
	    EPERM, 0);

	/* the resolver's socket */
	dns.sin_port = htons(53);
	dns.sin_addr.s_addr = htonl(0x7f000035);
	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return 2;
	if (connect(s, (struct sockaddr *)&dns, sizeof(dns)) != 0) {
		esc_escaped("control: connect() to the sandbox's resolver failed (%s)", strerror(errno));
	} else {
		m.msg_name = &a;
		esc_errno(sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof(a)),
		    "sendto(address) on the resolver's socket", EISCONN, EOPNOTSUPP);
		esc_errno(sendmsg(s, &m, 0), "sendmsg(address) on the resolver's socket", EISCONN,
		    EOPNOTSUPP);
		esc_errno(sendto(s, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&a, sizeof(a)),
		    "sendto(MSG_FASTOPEN) on the resolver's socket", EISCONN, EOPNOTSUPP);
		esc_errno(connect(s, (struct sockaddr *)&a, sizeof(a)),
		    "connect() re-aiming the resolver's socket", EACCES, 0);
		esc_errno(listen(s, 1), "listen() on the resolver's socket", EINVAL, EOPNOTSUPP);
	}
	close(s);
	return esc_done("sendto/sendmsg/sendmmsg with an address reach nothing (EPIPE, "
	    "ENETUNREACH), no UDP socket, the resolver's socket cannot be re-aimed");
}
