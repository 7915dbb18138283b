/*
 * k_io_uring_served.c - escape attempt: io_uring is refused in the medium tier.
 *
 * There the workspace is the broker's file server (docs/fsrv.md): a ring's
 * reads of a served file would be the kernel's, after the one open the
 * broker checked, so io_uring must stay refused above the low tier too
 * (docs/fsrv.md listed this attempt as missing).  It holds its served
 * working directory open while it tries.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/escape/escape.h"

int
main(void)
{
	unsigned char params[120];
	int fd = open(".", O_RDONLY | O_DIRECTORY);

	memset(params, 0, sizeof(params));
	esc_errno(syscall(SYS_io_uring_setup, 8, params), "io_uring_setup (medium)", EPERM, 0);
	esc_errno(syscall(SYS_io_uring_enter, fd, 1, 0, 0, NULL, 0), "io_uring_enter", EPERM, 0);
	esc_errno(syscall(SYS_io_uring_register, fd, 0, NULL, 0), "io_uring_register", EPERM, 0);
	if (fd >= 0)
		close(fd);
	return esc_done("io_uring in the medium tier, beside a served workspace: EPERM");
}
