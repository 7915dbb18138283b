/*
 * persist_tmp.c - escape attempt: a marker written in one sandbox is gone in the next.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * ARGS: check
 * PRE: write
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "tests/escape/escape.h"

int
main(int argc, char **argv)
{
	struct stat st;

	if (argc > 1 && strcmp(argv[1], "write") == 0) {
		int fd = open("/tmp/capbroker-marker", O_WRONLY | O_CREAT, 0644);

		esc_true(fd != -1, "cannot write the marker");
		return esc_done("marker written");
	}
	esc_errno(stat("/tmp/capbroker-marker", &st), "the marker of the previous run", ENOENT, 0);
	return esc_done("the previous sandbox's /tmp marker is gone");
}
