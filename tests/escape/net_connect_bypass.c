/*
 * net_connect_bypass.c - escape attempt: ways around the connect() notifier.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 0
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * The token covers 127.0.0.1:PORT; 127.0.0.2:PORT (the same host service)
 * is not covered.  Tried: io_uring's IORING_OP_CONNECT (io_uring is
 * refused outright); TCP Fast Open (sendto with MSG_FASTOPEN connects
 * without connect()) from a fresh socket; disconnecting the broker's socket
 * (connect AF_UNSPEC, shutdown of a socket still connecting) so that it can
 * listen() on the host or be re-aimed by sendto(MSG_FASTOPEN); hostile
 * arguments (bad pointer, huge length, a non-socket, a closed descriptor,
 * a wrong family); a host unix socket by path.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/escape/escape.h"

#ifndef MSG_FASTOPEN
#define MSG_FASTOPEN 0x20000000
#endif

static struct sockaddr_in good, bad;

/* s must not be connected to the uncovered address */
static void
not_bad(int s, const char *what)
{
	struct sockaddr_in peer;
	socklen_t l = sizeof(peer);

	if (getpeername(s, (struct sockaddr *)&peer, &l) == 0 &&
	    peer.sin_addr.s_addr == bad.sin_addr.s_addr)
		esc_escaped("%s: connected to the uncovered 127.0.0.2", what);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in unspec = { .sin_family = AF_UNSPEC };
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int s, p[2];

	if (argc < 2)
		return 2;
	good.sin_family = bad.sin_family = AF_INET;
	good.sin_port = bad.sin_port = htons((uint16_t)atoi(argv[1]));
	good.sin_addr.s_addr = htonl(0x7f000001);
	bad.sin_addr.s_addr = htonl(0x7f000002);

	/* io_uring: no ring, so no IORING_OP_CONNECT */
	esc_errno(syscall(SYS_io_uring_setup, 8, calloc(1, 120)), "io_uring_setup", EPERM, 0);

	/* the uncovered address is refused by the broker */
	s = socket(AF_INET, SOCK_STREAM, 0);
	esc_errno(connect(s, (struct sockaddr *)&bad, sizeof(bad)), "connect to 127.0.0.2", EACCES, 0);
	/* TCP Fast Open from the agent's own socket: it lives in the
	 * sandbox's empty network namespace, with no route anywhere */
	if (sendto(s, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&bad, sizeof(bad)) >= 0)
		not_bad(s, "sendto(MSG_FASTOPEN) from a fresh socket");
	if (sendto(s, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&good, sizeof(good)) >= 0)
		esc_escaped("sendto(MSG_FASTOPEN) reached the covered address past the broker");
	close(s);

	/* the broker's socket, made non-blocking: connected when installed */
	s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (connect(s, (struct sockaddr *)&good, sizeof(good)) != 0) {
		esc_escaped("non-blocking connect to the covered address: %s (want 0)", strerror(errno));
	} else {
		esc_errno(connect(s, (struct sockaddr *)&unspec, sizeof(unspec)),
		    "connect(AF_UNSPEC) disconnecting the broker's socket", EISCONN, EOPNOTSUPP);
		shutdown(s, SHUT_RDWR);
		esc_errno(listen(s, 1), "listen() on the broker's socket after shutdown", EINVAL, 0);
		esc_errno(sendto(s, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&bad, sizeof(bad)),
		    "sendto(MSG_FASTOPEN) re-aiming the broker's socket", EISCONN, EPIPE);
		esc_errno(connect(s, (struct sockaddr *)&bad, sizeof(bad)),
		    "connect() re-aiming the broker's socket", EISCONN, EACCES);
		not_bad(s, "the broker's socket");
	}
	close(s);

	/* hostile arguments */
	s = socket(AF_INET, SOCK_STREAM, 0);
	esc_errno(connect(s, (struct sockaddr *)8, sizeof(good)), "connect with a bad pointer", EFAULT, 0);
	esc_errno(connect(s, (struct sockaddr *)&good, 100000), "connect with a huge length", EINVAL, 0);
	esc_errno(connect(s, (struct sockaddr *)&good, -1), "connect with a negative length", EINVAL, 0);
	esc_errno(connect(s, (struct sockaddr *)&good, 4), "connect with a short sockaddr", EINVAL, 0);
	un.sun_path[0] = '/';
	esc_errno(connect(s, (struct sockaddr *)&un, sizeof(un)), "AF_UNIX address on a TCP socket",
	    EAFNOSUPPORT, 0);
	close(s);
	esc_errno(connect(s, (struct sockaddr *)&good, sizeof(good)), "connect on a closed descriptor",
	    EBADF, 0);
	if (pipe(p) == 0)
		esc_errno(connect(p[0], (struct sockaddr *)&good, sizeof(good)), "connect on a pipe",
		    ENOTSOCK, 0);

	/* a path-named unix socket of the host: looked up in the agent's
	 * view, where it does not exist (net_unix_path.c tries harder) */
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(un.sun_path, sizeof(un.sun_path), "/run/systemd/private");
	esc_errno(connect(s, (struct sockaddr *)&un, sizeof(un)), "connect to a host unix socket",
	    ENOENT, EACCES);
	close(s);
	return esc_done("io_uring, Fast Open, disconnects and hostile arguments: none got past the broker");
}
