/*
 * pos_threads.c - escape attempt: positive: threads work in the low tier.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <pthread.h>

#include "tests/escape/escape.h"

static void *
work(void *arg)
{
	return (void *)((long)arg * (long)arg);
}

int
main(void)
{
	pthread_t th[4];
	long sum = 0;

	for (long i = 0; i < 4; i++)
		esc_true(pthread_create(&th[i], NULL, work, (void *)i) == 0, "pthread_create");
	for (int i = 0; i < 4; i++) {
		void *r;

		pthread_join(th[i], &r);
		sum += (long)r;
	}
	esc_true(sum == 0 + 1 + 4 + 9, "threads computed the wrong sum");
	return esc_done("4 threads ran and joined");
}
