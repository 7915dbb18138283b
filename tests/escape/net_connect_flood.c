/*
 * net_connect_flood.c - escape attempt: flood the broker with connect() calls.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 0
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * 16 threads call connect() to uncovered addresses (each a different port,
 * so no two denials coalesce) as fast as they can for two seconds, with
 * hostile arguments mixed in.  Meanwhile the main thread's connects to the
 * covered address must each be served within two seconds: the broker reads
 * the notifications fairly and never blocks on one; the audit budget may
 * throttle the flood (the calls then wait), never crash the broker.  The
 * broker serving other sandboxes meanwhile: 22-net-mediated.sh.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "tests/escape/escape.h"

#define FLOODERS 16

static atomic_int stop;
static atomic_long nflood, nwrong;
static uint16_t port;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *
flood(void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	unsigned n = (unsigned)(uintptr_t)arg * 7919;

	a.sin_addr.s_addr = htonl(0x7f000002);
	while (!atomic_load(&stop)) {
		int s = socket(AF_INET, SOCK_STREAM, 0);

		a.sin_port = htons((uint16_t)(1024 + n++ % 60000));
		if (s < 0)
			continue;
		if (n % 5 == 0)
			(void)!connect(s, (struct sockaddr *)16, sizeof(a));	/* EFAULT */
		else if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0)
			atomic_fetch_add(&nwrong, 1);
		atomic_fetch_add(&nflood, 1);
		close(s);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t[FLOODERS];
	struct sockaddr_in good = { .sin_family = AF_INET };
	double end, worst = 0;
	int ok = 0;

	if (argc < 2)
		return 2;
	port = (uint16_t)atoi(argv[1]);
	good.sin_port = htons(port);
	good.sin_addr.s_addr = htonl(0x7f000001);
	for (uintptr_t i = 0; i < FLOODERS; i++)
		if (pthread_create(&t[i], NULL, flood, (void *)i) != 0)
			return 2;
	end = now() + 2;
	while (now() < end) {
		double t0 = now(), dt;
		int s = socket(AF_INET, SOCK_STREAM, 0);

		if (connect(s, (struct sockaddr *)&good, sizeof(good)) != 0)
			esc_escaped("the covered connect failed during the flood: %s", strerror(errno));
		else
			ok++;
		close(s);
		if ((dt = now() - t0) > worst)
			worst = dt;
		if (dt > 2)
			esc_escaped("a covered connect waited %.1f s behind the flood", dt);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < FLOODERS; i++)
		pthread_join(t[i], NULL);
	esc_true(atomic_load(&nwrong) == 0, "a flooding connect to an uncovered address succeeded");
	esc_true(ok > 0, "no covered connect was served");
	return esc_done("%ld flooding connects refused; %d covered ones served, the slowest in %.0f ms",
	    (long)atomic_load(&nflood), ok, worst * 1000);
}
