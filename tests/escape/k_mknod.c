/*
 * k_mknod.c - escape attempt: device nodes cannot be made; fifos can.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "tests/escape/escape.h"

int
main(void)
{
	esc_errno(mknod("/tmp/mem", S_IFCHR | 0666, makedev(1, 1)), "mknod char /dev/mem", EPERM, 0);
	esc_errno(mknod("/tmp/sda", S_IFBLK | 0666, makedev(8, 0)), "mknod block sda", EPERM, 0);
	esc_errno(mknodat(AT_FDCWD, "/tmp/kmsg", S_IFCHR | 0666, makedev(1, 11)), "mknodat char", EPERM, 0);
	esc_true(mknod("/tmp/fifo", S_IFIFO | 0600, 0) == 0, "cannot make a fifo in /tmp");
	return esc_done("mknod of char/block devices: EPERM; fifo in /tmp: allowed");
}
