/*
 * files_proc_pids.c - escape attempt: no host pid is visible in /proc.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <dirent.h>

#include "tests/escape/escape.h"

int
main(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (d == NULL) {
		esc_escaped("cannot list /proc: %s", strerror(errno));
		return 1;
	}
	while ((e = readdir(d)) != NULL) {
		long pid = strtol(e->d_name, NULL, 10);

		if (pid <= 0)
			continue;
		n++;
		if (pid != 1 && pid != getpid())
			esc_escaped("/proc shows pid %ld", pid);
	}
	closedir(d);
	esc_true(getpid() == 2, "the agent is not pid 2");
	return esc_done("/proc holds %d pids: the stub (1) and me (2)", n);
}
