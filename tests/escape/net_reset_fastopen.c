/*
 * net_reset_fastopen.c - escape attempt: turn the broker's connected socket, once reset, into a free socket of the host's network.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 0
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * The mediated connect() installs the broker's socket, made in the host's
 * network namespace.  Once the host service closes the connection and a
 * write draws a reset (TCP_CLOSE), sendto(MSG_FASTOPEN) on a socket the
 * kernel still counted as connecting disconnected it; the next
 * sendto(MSG_FASTOPEN) then connected it to any address (here
 * 127.0.0.2:PORT, which no token covers) and listen() served on the host,
 * never passing the broker.  The broker's socket must stay connected for
 * good: both fail with EISCONN / EINVAL.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include "tests/escape/escape.h"

int
main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET }, other;
	struct timespec t = { 0, 100 * 1000 * 1000 };
	char buf[16];
	int s;

	if (argc < 2)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(0x7f000001);
	other = a;
	other.sin_addr.s_addr = htonl(0x7f000002);
	if ((s = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
		perror("connect to the granted address");
		return 2;
	}
	/* the service closes at once: read its FIN, then draw its reset */
	(void)!recv(s, buf, sizeof(buf), 0);
	for (int i = 0; i < 3; i++) {
		(void)!send(s, "x", 1, MSG_NOSIGNAL);
		nanosleep(&t, NULL);
	}
	esc_errno(sendto(s, "x", 1, MSG_FASTOPEN | MSG_NOSIGNAL, (struct sockaddr *)&other,
	    sizeof(other)), "sendto(MSG_FASTOPEN) on the reset broker socket", EISCONN, 0);
	esc_errno(sendto(s, "x", 1, MSG_FASTOPEN | MSG_NOSIGNAL, (struct sockaddr *)&other,
	    sizeof(other)), "sendto(MSG_FASTOPEN) to an address no token covers", EISCONN, 0);
	esc_errno(listen(s, 1), "listen() on the broker's socket", EINVAL, 0);
	return esc_done("a reset broker socket stays connected: no listen, no new connection");
}
