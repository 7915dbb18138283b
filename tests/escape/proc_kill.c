/*
 * proc_kill.c - escape attempt: no signal reaches pid 1 or any host process.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * ARGS: @HOSTPIDS@
 */
#include <signal.h>

#include "tests/escape/escape.h"

int
main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		long pid = strtol(argv[i], NULL, 10);

		if (pid > 2)
			esc_errno(kill((pid_t)pid, 0), argv[i], ESRCH, 0);
	}
	/* pid 1 is outside the agent's Landlock domain (signal scope, ABI 6). */
	esc_errno(kill(1, SIGKILL), "kill(1, SIGKILL)", EPERM, 0);
	esc_errno(kill(1, SIGTERM), "kill(1, SIGTERM)", EPERM, 0);
	esc_true(getppid() == 1 || getppid() == 0, "parent is not the stub");
	return esc_done("host pids: ESRCH; pid 1: EPERM and still alive");
}
