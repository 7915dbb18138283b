/*
 * files_host_dirs.c - escape attempt: /root, /home, /var, /run, /work, /sys and friends are absent.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/stat.h>

#include "tests/escape/escape.h"

int
main(void)
{
	static const char *const p[] = { "/root", "/home", "/var", "/run", "/work", "/sys",
	    "/mnt", "/media", "/srv", "/opt", "/boot", "/lost+found", "/snap", "/var/run/docker.sock" };
	struct stat st;

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		esc_errno(stat(p[i], &st), p[i], ENOENT, 0);
	return esc_done("%zu host directories: ENOENT", sizeof(p) / sizeof(p[0]));
}
