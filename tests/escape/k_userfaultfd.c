/*
 * k_userfaultfd.c - escape attempt: userfaultfd is refused.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(void)
{
	esc_errno(syscall(SYS_userfaultfd, 0), "userfaultfd", EPERM, 0);
	esc_errno(open("/dev/userfaultfd", O_RDWR), "/dev/userfaultfd", ENOENT, 0);
	return esc_done("userfaultfd: EPERM");
}
