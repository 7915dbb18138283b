/*
 * net_dns_resolver.c - escape attempt: make the broker's resolver look up, or answer for, a name no token covers.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 0
 * OPTS: --grant net.connect:localhost:1
 *
 * The sandbox's resolver (127.0.0.53:53, DNS over TCP, served by the broker:
 * broker/dns.c) answers only names a live token covers; here "localhost"
 * (positive control: NOERROR with 127.0.0.1).  Hostile queries: a name no
 * token covers, the covered name spelled with a trailing label, with an
 * escaped byte or a NUL inside a label, as a compression pointer loop, two
 * questions, a response instead of a query, a length beyond the limit; and
 * more connections than the broker serves at once.  Every one must get
 * NXDOMAIN (an uncovered or malformed name, never looked up), a closed
 * connection (a message that is not one standard query), or EAGAIN (too
 * many connections: the one past the sandbox's 8 waits up to 5 s for one
 * of them to close, then fails); the control must still work afterwards.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "tests/escape/escape.h"

static int
resolver(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct timeval tv = { 5, 0 };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(0x7f000035);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
		if (s >= 0)
			close(s);
		return -1;
	}
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return s;
}

/* A query: header with flags and qdcount, then body (the question). */
static size_t
msg(uint8_t *m, uint16_t flags, uint16_t qd, const void *body, size_t n)
{
	uint8_t h[12] = { 0x12, 0x34, (uint8_t)(flags >> 8), (uint8_t)flags, 0, (uint8_t)qd };

	m[0] = (uint8_t)((12 + n) >> 8);
	m[1] = (uint8_t)(12 + n);
	memcpy(m + 2, h, 12);
	memcpy(m + 14, body, n);
	return 14 + n;
}

/* Send m; the answer's rcode, -2 if the broker closed the connection, -1
 * on another error. */
static int
ask(int s, const uint8_t *m, size_t n)
{
	uint8_t r[2048];
	ssize_t k;

	if (send(s, m, n, MSG_NOSIGNAL) != (ssize_t)n)
		return -2;
	k = recv(s, r, sizeof(r), 0);
	if (k == 0 || (k < 0 && errno == ECONNRESET))	/* closed (with bytes unread) */
		return -2;
	if (k < 6)
		return -1;
	return r[5] & 0x0f;
}

#define Q(name) name "\x00" "\x00\x01\x00\x01"		/* type A, class IN */

static void
expect(const char *what, uint16_t flags, uint16_t qd, const void *body, size_t n, int want)
{
	uint8_t m[4096];
	int s = resolver(), r;

	if (s < 0) {
		esc_escaped("%s: no resolver connection (%s)", what, strerror(errno));
		return;
	}
	r = ask(s, m, msg(m, flags, qd, body, n));
	if (r != want)
		esc_escaped("%s: got %d, want %d", what, r, want);
	close(s);
}

int
main(void)
{
	static const char ctl[] = Q("\x09localhost");
	int held[16], nheld = 0, s;
	uint8_t big[2 + 2000] = { 0x07, 0xd0 };

	expect("control: localhost (covered)", 0x0100, 1, ctl, sizeof(ctl) - 1, 0);
	expect("an uncovered name", 0x0100, 1, Q("\x07""example\x03""com"),
	    sizeof(Q("\x07""example\x03""com")) - 1, 3);
	expect("the covered name under another label", 0x0100, 1,
	    Q("\x09localhost\x04" "evil"), sizeof(Q("\x09localhost\x04" "evil")) - 1, 3);
	expect("a label with a NUL", 0x0100, 1, Q("\x0alocal\x00host"),
	    sizeof(Q("\x0alocal\x00host")) - 1, 3);
	expect("a label with a dot inside", 0x0100, 1, Q("\x0blocalhost.x"),
	    sizeof(Q("\x0blocalhost.x")) - 1, 3);
	expect("a compression loop", 0x0100, 1, "\xc0\x0c\x00\x01\x00\x01", 6, -2);
	expect("two questions", 0x0100, 2, Q("\x09localhost") Q("\x07""example\x03""com"),
	    sizeof(Q("\x09localhost") Q("\x07""example\x03""com")) - 1, -2);
	expect("a response", 0x8100, 1, ctl, sizeof(ctl) - 1, -2);
	if ((s = resolver()) >= 0) {
		memset(big + 2, 'x', sizeof(big) - 2);
		if (ask(s, big, sizeof(big)) != -2)
			esc_escaped("a 2000-byte message was not refused (connection kept)");
		close(s);
	}
	/* more connections than the broker serves at once */
	for (nheld = 0; nheld < 16; nheld++) {
		if ((held[nheld] = resolver()) < 0)
			break;
	}
	if (nheld == 16)
		esc_escaped("16 resolver connections at once were all accepted");
	else if (errno != EAGAIN)
		esc_escaped("connection %d failed with %s, want EAGAIN", nheld, strerror(errno));
	while (nheld > 0)
		close(held[--nheld]);
	usleep(200 * 1000);	/* the broker sees them closed */
	expect("control again, after all that", 0x0100, 1, ctl, sizeof(ctl) - 1, 0);
	return esc_done("uncovered or malformed names: NXDOMAIN; malformed messages: closed; "
	    "too many connections: EAGAIN; the covered name still resolves");
}
