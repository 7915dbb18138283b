/*
 * proc_posix_spawn.c - escape attempt: posix_spawn of /bin/true fails.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <spawn.h>

#include "tests/escape/escape.h"

int
main(void)
{
	char *const av[] = { "true", NULL };
	pid_t p;
	int r = posix_spawn(&p, "/bin/true", NULL, NULL, av, NULL);

	esc_true(r == EPERM, "posix_spawn did not fail with EPERM");
	return esc_done("posix_spawn: %s", strerror(r));
}
