/*
 * files_write_outside.c - escape attempt: nothing outside /tmp is writable.
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
	static const char *const p[] = { "/x", "/etc/x", "/usr/x", "/usr/bin/x", "/dev/x",
	    "/capbroker/x", "/bin/x", "/etc/passwd", "/usr/bin/python3" };

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++) {
		long r = open(p[i], O_WRONLY | O_CREAT, 0644);

		esc_errno(r, p[i], EROFS, EACCES);
	}
	esc_errno(mkdir("/newdir", 0755), "mkdir /newdir", EROFS, EACCES);
	esc_errno(unlink("/etc/passwd"), "unlink /etc/passwd", EROFS, EACCES);
	esc_errno(rename("/etc/hosts", "/etc/hosts2"), "rename /etc/hosts", EROFS, EACCES);
	esc_errno(open("/proc/self/oom_score_adj", O_WRONLY), "/proc/self/oom_score_adj", EACCES, 0);
	esc_errno(open("/proc/self/attr/current", O_WRONLY), "/proc/self/attr/current", EACCES, ENOENT);
	return esc_done("writes outside /tmp: EROFS (read-only mounts) or EACCES (Landlock)");
}
