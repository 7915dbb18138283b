/*
 * proc_vfork.c - escape attempt: vfork is refused.
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
	pid_t p = vfork();

	if (p == 0)
		_exit(99);
	esc_errno(p, "vfork", EPERM, 0);
	return esc_done("vfork: EPERM");
}
