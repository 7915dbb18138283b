/*
 * k_int80.c - escape attempt: an i386 int 0x80 system call kills the process (SIGSYS, exit 159).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 159
 */
#include <signal.h>

#include "tests/escape/escape.h"

int
main(void)
{
#if defined(__x86_64__)
	long ret;

	/* getpid (20) through the 32-bit entry point. */
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
	esc_escaped("int 0x80 returned %ld", ret);
	return 1;
#else
	raise(SIGSYS);
	return 1;
#endif
}
