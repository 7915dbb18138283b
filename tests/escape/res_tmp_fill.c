/*
 * res_tmp_fill.c - escape attempt: filling /tmp stops at its size.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * OPTS: --tmp-size 4194304
 */
#include <fcntl.h>

#include "tests/escape/escape.h"

int
main(void)
{
	static char buf[65536];
	int fd = open("/tmp/fill", O_WRONLY | O_CREAT, 0600);
	size_t total = 0;
	ssize_t w;

	memset(buf, 'x', sizeof(buf));
	while ((w = write(fd, buf, sizeof(buf))) > 0)
		total += (size_t)w;
	esc_true(w == -1 && errno == ENOSPC, "writing /tmp did not end with ENOSPC");
	esc_true(total <= (4UL << 20), "wrote more than --tmp-size 4 MiB");
	unlink("/tmp/fill");
	for (int i = 0;; i++) {
		char name[32];

		snprintf(name, sizeof(name), "/tmp/f%d", i);
		fd = open(name, O_WRONLY | O_CREAT, 0600);
		if (fd == -1) {
			esc_true(errno == ENOSPC && i < 100000, "file creation did not stop at the inode limit");
			break;
		}
		close(fd);
	}
	return esc_done("/tmp full after %zu KiB: ENOSPC; inodes limited too", total >> 10);
}
