/*
 * k_perf.c - escape attempt: perf_event_open is refused.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(void)
{
	unsigned char attr[128];

	memset(attr, 0, sizeof(attr));
	esc_errno(syscall(SYS_perf_event_open, attr, 0, -1, -1, 0), "perf_event_open", EPERM, 0);
	return esc_done("perf_event_open: EPERM");
}
