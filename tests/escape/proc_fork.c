/*
 * proc_fork.c - escape attempt: fork is refused.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */

#include "tests/escape/escape.h"

int
main(void)
{
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	esc_errno(p, "fork", EPERM, 0);
	return esc_done("fork: EPERM");
}
