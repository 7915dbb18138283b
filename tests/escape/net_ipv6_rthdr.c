/*
 * net_ipv6_rthdr.c - escape attempt: an IPv6 routing header cannot send a broker socket's packets elsewhere.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * setsockopt(IPPROTO_IPV6, IPV6_RTHDR) with a segment routing header
 * (type 4) needs no privilege: the kernel resets the socket's route and
 * sends its packets to the header's first segment instead of the peer.
 * On a socket the broker connected in the host's network namespace (the
 * mediated connect() here, net.connect's alike) the agent's TCP segments
 * went to any address it named (the host's own, the LAN's, fd00:ec2::254),
 * never judged: seen leaving the host's eth0 for fd00::99 on a connection
 * to ::1 (red team).  The filter refuses it (EPERM), and the RFC 2292
 * names and the hop-by-hop and destination options with it, however the
 * upper halves of level and optname are filled; ordinary options still
 * work.  IPv4 source routes (IP_OPTIONS with LSRR) the kernel itself
 * refuses without CAP_NET_RAW.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

#ifndef IPV6_RTHDR
#define IPV6_RTHDR 57
#endif

/* A segment routing header: segments_left 1, segments[1] the first hop. */
static size_t
srh(uint8_t *b, const char *final, const char *hop)
{
	memset(b, 0, 40);
	b[1] = 4;		/* hdrlen: two segments, 8-octet units */
	b[2] = 4;		/* type 4, SRH */
	b[3] = 1;		/* segments_left */
	b[4] = 1;		/* last_entry */
	inet_pton(AF_INET6, final, b + 8);
	inet_pton(AF_INET6, hop, b + 24);
	return 40;
}

static void
refused(int fd, const char *what)
{
	uint8_t h[40];
	size_t n = srh(h, "::1", "fd00::99");
	char msg[160];
	static const int names[] = { IPV6_RTHDR, 5 /* IPV6_2292RTHDR */, 54 /* IPV6_HOPOPTS */,
	    59 /* IPV6_DSTOPTS */, 55 /* IPV6_RTHDRDSTOPTS */, 6 /* IPV6_2292PKTOPTIONS */ };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(msg, sizeof(msg), "setsockopt(%s, IPPROTO_IPV6, %d)", what, names[i]);
		esc_errno(setsockopt(fd, IPPROTO_IPV6, names[i], h, (socklen_t)n), msg, EPERM, 0);
	}
	/* the kernel reads ints: garbage above them changes nothing */
	snprintf(msg, sizeof(msg), "setsockopt(%s, IPPROTO_IPV6 | 1 << 32, IPV6_RTHDR | 1 << 32)", what);
	esc_errno(syscall(SYS_setsockopt, fd, (1ULL << 32) | IPPROTO_IPV6, (1ULL << 32) | IPV6_RTHDR, h,
	    n), msg, EPERM, 0);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in6 peer = { .sin6_family = AF_INET6 };
	int one = 1, tc = 0x10, hops = 9, s6, s4, c;
	uint8_t lsrr[8] = { 1, 131, 7, 4 };

	if (argc < 2)
		return 2;
	/* ordinary options keep working */
	s6 = socket(AF_INET6, SOCK_STREAM, 0);
	s4 = socket(AF_INET, SOCK_STREAM, 0);
	if (s6 < 0 || s4 < 0)
		return 2;
	esc_true(setsockopt(s6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == 0 &&
	    setsockopt(s6, IPPROTO_IPV6, IPV6_TCLASS, &tc, sizeof(tc)) == 0 &&
	    setsockopt(s6, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &hops, sizeof(hops)) == 0 &&
	    setsockopt(s6, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) == 0 &&
	    setsockopt(s6, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0 &&
	    setsockopt(s4, IPPROTO_IP, IP_TOS, &tc, sizeof(tc)) == 0,
	    "control: ordinary socket options (V6ONLY, TCLASS, UNICAST_HOPS, KEEPALIVE, NODELAY, TOS) work");
	refused(s6, "the agent's socket");
	close(s6);
	/* the broker's socket: a mediated connect() to the granted service,
	 * through its IPv4-mapped form, so that it is an IPv6 socket */
	c = socket(AF_INET6, SOCK_STREAM, 0);
	peer.sin6_port = htons((uint16_t)atoi(argv[1]));
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &peer.sin6_addr);
	if (c < 0 || connect(c, (struct sockaddr *)&peer, sizeof(peer)) != 0)
		esc_escaped("control: the mediated connect() to the granted service: %s", strerror(errno));
	else
		refused(c, "the broker's socket");
	/* IPv4 source routing: the kernel's own refusal */
	inet_pton(AF_INET, "10.0.0.99", lsrr + 4);
	esc_errno(setsockopt(s4, IPPROTO_IP, IP_OPTIONS, lsrr, sizeof(lsrr)),
	    "setsockopt(IP_OPTIONS, LSRR)", EPERM, 0);
	return esc_done("IPv6 routing headers and options refused (EPERM); ordinary options work");
}
