/*
 * res_fds.c - escape attempt: descriptor exhaustion stops at RLIMIT_NOFILE.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * OPTS: --nofile 64
 */
#include <fcntl.h>

#include "tests/escape/escape.h"

int
main(void)
{
	int n = 0;

	while (open("/dev/null", O_RDONLY) != -1)
		n++;
	esc_true(errno == EMFILE, "open did not fail with EMFILE");
	esc_true(n < 64, "more than --nofile 64 descriptors");
	return esc_done("EMFILE after %d descriptors (nofile 64)", n);
}
