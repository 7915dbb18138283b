/*
 * files_hardlink.c - escape attempt: hard links cannot pull files into /tmp.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>

#include "tests/escape/escape.h"

int
main(void)
{
	esc_errno(link("/etc/passwd", "/tmp/p"), "link /etc/passwd", EXDEV, 0);
	esc_errno(link("/usr/bin/python3", "/tmp/py"), "link /usr/bin/python3", EXDEV, 0);
	esc_errno(linkat(AT_FDCWD, "/proc/self/exe", AT_FDCWD, "/tmp/me", AT_SYMLINK_FOLLOW),
	    "linkat /proc/self/exe", EXDEV, 0);
	return esc_done("hard links across mounts: EXDEV");
}
