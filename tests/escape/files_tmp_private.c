/*
 * files_tmp_private.c - escape attempt: /tmp is a fresh, size-limited tmpfs.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <dirent.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "tests/escape/escape.h"

int
main(void)
{
	struct statfs sf;
	DIR *d = opendir("/tmp");
	struct dirent *e;
	int n = 0;

	while (d != NULL && (e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	if (d != NULL)
		closedir(d);
	esc_true(n == 0, "/tmp is not empty at start");
	esc_true(statfs("/tmp", &sf) == 0 && sf.f_type == TMPFS_MAGIC, "/tmp is not a tmpfs");
	esc_true((unsigned long long)sf.f_blocks * sf.f_bsize == 64ULL << 20,
	    "/tmp is not 64 MiB (the default limit)");
	return esc_done("/tmp: empty tmpfs of %llu MiB",
	    (unsigned long long)sf.f_blocks * sf.f_bsize >> 20);
}
