/*
 * res_mmap.c - escape attempt: a huge address-space reservation fails.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/mman.h>

#include "tests/escape/escape.h"

int
main(void)
{
	void *p = mmap(NULL, 64UL << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_NORESERVE, -1, 0);

	esc_true(p == MAP_FAILED && errno == ENOMEM, "a 64 GiB mapping succeeded");
	return esc_done("mmap(64 GiB): ENOMEM (RLIMIT_AS)");
}
