/*
 * k_x32.c - escape attempt: an x32 system call kills the process (SIGSYS, exit 159).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 159
 */
#include <sys/syscall.h>
#include <signal.h>

#include "tests/escape/escape.h"

int
main(void)
{
#if defined(__x86_64__)
	syscall(0x40000000L | SYS_getpid);
	esc_escaped("the x32 call returned");
	return 1;
#else
	raise(SIGSYS);
	return 1;
#endif
}
