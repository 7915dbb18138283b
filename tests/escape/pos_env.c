/*
 * pos_env.c - escape attempt: positive: the environment is exactly the scrubbed set.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 *
 * PYTHONPATH=/capbroker/python is part of the set exactly when the broker
 * bound its Python client there (docs/sandbox.md: only with pylib_dir).
 */
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/escape/escape.h"

int
main(void)
{
	static char user[64], logname[64];
	const char *const want[] = { "PATH=/capbroker/bin:/usr/local/bin:/usr/bin:/bin",
	    "HOME=/tmp", "LANG=C.UTF-8", "TMPDIR=/tmp", "CAPBROKER_FD=3",
	    "CAPBROKER_SANDBOX=escape", user, logname };
	extern char **environ;
	const struct passwd *pw = getpwuid(getuid());
	struct stat st;
	bool pylib = stat("/capbroker/python", &st) == 0 && S_ISDIR(st.st_mode);
	size_t n = 0, nwant = sizeof(want) / sizeof(want[0]) + (pylib ? 1 : 0);

	/* USER and LOGNAME name the uid as the sandbox's /etc/passwd does. */
	esc_true(pw != NULL, "the uid has no name in /etc/passwd");
	snprintf(user, sizeof(user), "USER=%s", pw ? pw->pw_name : "?");
	snprintf(logname, sizeof(logname), "LOGNAME=%s", pw ? pw->pw_name : "?");

	for (char **e = environ; *e != NULL; e++, n++) {
		bool ok = false;

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			ok |= strcmp(*e, want[i]) == 0;
		ok |= pylib && strcmp(*e, "PYTHONPATH=/capbroker/python") == 0;
		if (!ok)
			esc_escaped("unexpected variable %.60s", *e);
	}
	esc_true(n == nwant, "variables missing");
	return esc_done("%zu variables, all expected%s", n, pylib ? " (with the Python client)" : "");
}
