/*
 * net_connect_race.c - escape attempt: re-aim a mediated connect() after the check.
 *
 * Change connect()'s address after the broker was notified, so that the
 * connection goes somewhere the token does not cover.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 0
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * The token covers 127.0.0.1:PORT only.  Another thread flips the very
 * sockaddr being connected between 127.0.0.1 and 127.0.0.2 (the same host
 * service, bound to 0.0.0.0, but not covered) as fast as it can.  Every
 * connect() must either be refused (EACCES) or end up connected to
 * 127.0.0.1: the broker copies the address once and connects to its copy
 * (broker/notify.c), and never lets the call resume with the agent's
 * arguments (SECCOMP_USER_NOTIF_FLAG_CONTINUE would lose this race).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "tests/escape/escape.h"

static struct sockaddr_in target;
static atomic_int stop;

static void *
flipper(void *arg)
{
	volatile uint32_t *a = (volatile uint32_t *)&target.sin_addr.s_addr;
	uint32_t good = htonl(0x7f000001), bad = htonl(0x7f000002);

	(void)arg;
	while (!atomic_load(&stop)) {
		*a = bad;
		*a = good;
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t;
	int ok = 0, refused = 0;
	time_t end = time(NULL) + 3;

	if (argc < 2)
		return 2;
	target.sin_family = AF_INET;
	target.sin_port = htons((uint16_t)atoi(argv[1]));
	target.sin_addr.s_addr = htonl(0x7f000001);
	if (pthread_create(&t, NULL, flipper, NULL) != 0)
		return 2;
	for (int i = 0; i < 400 && time(NULL) < end; i++) {
		struct sockaddr_in peer;
		socklen_t l = sizeof(peer);
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (s < 0)
			return 2;
		if (connect(s, (struct sockaddr *)&target, sizeof(target)) == 0) {
			ok++;
			if (getpeername(s, (struct sockaddr *)&peer, &l) != 0)
				esc_escaped("connected, but getpeername failed");
			else if (peer.sin_addr.s_addr != htonl(0x7f000001))
				esc_escaped("connected to %s, which the token does not cover",
				    inet_ntoa(peer.sin_addr));
		} else if (errno == EACCES) {
			refused++;
		} else {
			esc_escaped("connect failed with %s (want success or EACCES)", strerror(errno));
		}
		close(s);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	esc_true(ok > 0, "no connect to the covered address succeeded: the race was not run");
	return esc_done("%d connects reached 127.0.0.1, %d refused, none redirected", ok, refused);
}
