/*
 * proc_clone3.c - escape attempt: clone3 reports ENOSYS (its flags are not visible to seccomp).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <signal.h>
#include <sys/syscall.h>
#include <linux/sched.h>

#include "tests/escape/escape.h"

int
main(void)
{
	struct clone_args a;
	long p;

	memset(&a, 0, sizeof(a));
	a.exit_signal = SIGCHLD;
	p = syscall(SYS_clone3, &a, sizeof(a));
	if (p == 0)
		_exit(0);
	esc_errno(p, "clone3", ENOSYS, 0);
	return esc_done("clone3: ENOSYS");
}
