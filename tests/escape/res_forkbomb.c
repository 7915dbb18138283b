/*
 * res_forkbomb.c - escape attempt: a fork bomb stops at the process limit (medium tier).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 * OPTS: --nproc 16
 */

#include "tests/escape/escape.h"

int
main(void)
{
	int n = 0;

	for (;;) {
		pid_t p = fork();

		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p == -1)
			break;
		if (++n > 1000)
			break;
	}
	esc_true(errno == EAGAIN, "fork did not fail with EAGAIN");
	esc_true(n < 16, "more processes than --nproc 16");
	return esc_done("fork failed with EAGAIN after %d children (nproc 16)", n);
}
