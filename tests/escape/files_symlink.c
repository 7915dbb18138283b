/*
 * files_symlink.c - escape attempt: symlinks in /tmp lead nowhere new.
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
	esc_true(symlink("/proc/1/root", "/tmp/l1") == 0, "cannot make a symlink in /tmp");
	esc_errno(open("/tmp/l1/etc/passwd", O_RDONLY), "/tmp/l1 -> /proc/1/root", EACCES, 0);
	esc_true(symlink("../../../../../../etc/shadow", "/tmp/l2") == 0, "symlink l2");
	esc_errno(open("/tmp/l2", O_RDONLY), "/tmp/l2 -> ../../etc/shadow", ENOENT, 0);
	esc_true(symlink("/etc/passwd", "/tmp/l3") == 0, "symlink l3");
	esc_errno(open("/tmp/l3", O_WRONLY | O_TRUNC), "write through /tmp/l3 -> /etc/passwd", EROFS, EACCES);
	return esc_done("symlinks to /proc/1/root, ../.. and /etc: EACCES, ENOENT, EROFS");
}
