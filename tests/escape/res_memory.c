/*
 * res_memory.c - escape attempt: a memory balloon fails at the limit instead of eating the host.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * OPTS: --mem 134217728
 */

#include "tests/escape/escape.h"

int
main(void)
{
	size_t total = 0, chunk = 16 << 20;
	char *p;

	while ((p = malloc(chunk)) != NULL) {
		memset(p, 1, chunk);
		total += chunk;
		if (total > (1UL << 30))
			break;
	}
	esc_true(p == NULL, "allocated more than 1 GiB");
	esc_true(total <= (128UL << 20), "allocated more than --mem 128 MiB");
	return esc_done("malloc failed after %zu MiB (mem 128 MiB)", total >> 20);
}
