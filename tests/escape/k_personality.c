/*
 * k_personality.c - escape attempt: personality cannot be changed (only queried).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/personality.h>

#include "tests/escape/escape.h"

int
main(void)
{
	int cur = personality(0xffffffff);

	esc_true(cur != -1, "personality query failed");
	esc_errno(personality(PER_LINUX32), "personality(PER_LINUX32)", EPERM, 0);
	esc_errno(personality(ADDR_NO_RANDOMIZE), "personality(ADDR_NO_RANDOMIZE)", EPERM, 0);
	esc_errno(personality(READ_IMPLIES_EXEC), "personality(READ_IMPLIES_EXEC)", EPERM, 0);
	return esc_done("personality changes: EPERM; query allowed (%#x)", cur);
}
