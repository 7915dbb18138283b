/*
 * k_tiocsti.c - escape attempt: TIOCSTI and TIOCLINUX are refused on every descriptor.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(void)
{
	char c = 'x';

	for (int fd = 0; fd < 64; fd++) {
		char what[32];

		snprintf(what, sizeof(what), "TIOCSTI on fd %d", fd);
		esc_errno(ioctl(fd, TIOCSTI, &c), what, EPERM, 0);
	}
	/* The kernel reads 32 bits of the request: so must the filter. */
	esc_errno(syscall(SYS_ioctl, 0, 0xffffffff00000000UL | TIOCSTI, &c), "TIOCSTI | high bits", EPERM, 0);
	esc_errno(ioctl(0, TIOCLINUX, &c), "TIOCLINUX", EPERM, 0);
	return esc_done("TIOCSTI (fds 0-63, high bits set) and TIOCLINUX: EPERM");
}
