/*
 * res_fsize.c - escape attempt: a file cannot outgrow RLIMIT_FSIZE.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * OPTS: --fsize 1048576
 */
#include <fcntl.h>
#include <signal.h>

#include "tests/escape/escape.h"

int
main(void)
{
	static char buf[65536];
	int fd = open("/tmp/big", O_WRONLY | O_CREAT, 0600);
	size_t total = 0;
	ssize_t w;

	signal(SIGXFSZ, SIG_IGN);
	while ((w = write(fd, buf, sizeof(buf))) > 0)
		total += (size_t)w;
	esc_true(w == -1 && errno == EFBIG, "writing did not end with EFBIG");
	esc_true(total == (1UL << 20), "file is not exactly the 1 MiB limit");
	return esc_done("EFBIG at %zu KiB (fsize 1 MiB)", total >> 10);
}
