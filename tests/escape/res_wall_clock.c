/*
 * res_wall_clock.c - escape attempt: an endless sleeper is killed at the wall-clock timeout (exit 124).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 124
 * OPTS: --timeout 1
 */

#include "tests/escape/escape.h"

int
main(void)
{
	for (;;)
		pause();
}
