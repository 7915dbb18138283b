/*
 * pos_tmp.c - escape attempt: positive: /tmp is writable within its limit.
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
	static char buf[1 << 20], back[1 << 20];
	int fd = open("/tmp/data", O_RDWR | O_CREAT | O_TRUNC, 0600);

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7);
	esc_true(fd != -1 && write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf), "write 1 MiB");
	esc_true(pread(fd, back, sizeof(back), 0) == (ssize_t)sizeof(back) &&
	    memcmp(buf, back, sizeof(buf)) == 0, "read back");
	esc_true(rename("/tmp/data", "/tmp/data2") == 0 && mkdir("/tmp/d", 0700) == 0 &&
	    rename("/tmp/data2", "/tmp/d/data") == 0 && unlink("/tmp/d/data") == 0 &&
	    rmdir("/tmp/d") == 0, "rename, mkdir, unlink in /tmp");
	return esc_done("1 MiB written and read back; rename/mkdir/unlink work in /tmp");
}
