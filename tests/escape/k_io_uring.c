/*
 * k_io_uring.c - escape attempt: io_uring is refused.
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
	unsigned char params[120];

	memset(params, 0, sizeof(params));
	esc_errno(syscall(SYS_io_uring_setup, 8, params), "io_uring_setup", EPERM, 0);
	esc_errno(syscall(SYS_io_uring_enter, 0, 1, 0, 0, NULL, 0), "io_uring_enter", EPERM, 0);
	esc_errno(syscall(SYS_io_uring_register, 0, 0, NULL, 0), "io_uring_register", EPERM, 0);
	return esc_done("io_uring_setup/enter/register: EPERM");
}
