/*
 * pos_env.c - escape attempt: positive: the environment is exactly the scrubbed set.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */

#include "tests/escape/escape.h"

int
main(void)
{
	static const char *const want[] = { "PATH=/capbroker/bin:/usr/local/bin:/usr/bin:/bin",
	    "HOME=/tmp", "LANG=C.UTF-8", "TMPDIR=/tmp", "CAPBROKER_FD=3",
	    "CAPBROKER_SANDBOX=escape" };
	extern char **environ;
	size_t n = 0;

	for (char **e = environ; *e != NULL; e++, n++) {
		bool ok = false;

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			ok |= strcmp(*e, want[i]) == 0;
		if (!ok)
			esc_escaped("unexpected variable %.60s", *e);
	}
	esc_true(n == sizeof(want) / sizeof(want[0]), "variables missing");
	return esc_done("%zu variables, all expected", n);
}
