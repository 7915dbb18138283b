/*
 * files_proc_self_root.c - escape attempt: /proc/self/root is the sandbox root, not the host.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "tests/escape/escape.h"

int
main(void)
{
	struct stat a, b;

	esc_true(stat("/proc/self/root", &a) == 0 && stat("/", &b) == 0 &&
	    a.st_ino == b.st_ino && a.st_dev == b.st_dev, "/proc/self/root is not /");
	esc_errno(open("/proc/self/root/etc/shadow", O_RDONLY), "/proc/self/root/etc/shadow", ENOENT, 0);
	esc_errno(open("/proc/self/root/../../etc/shadow", O_RDONLY), "/proc/self/root/../..", ENOENT, 0);
	esc_errno(open("/proc/self/cwd/../../../etc/shadow", O_RDONLY), "cwd/../../..", ENOENT, 0);
	return esc_done("/proc/self/root is /; .. stops at the sandbox root");
}
