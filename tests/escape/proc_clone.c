/*
 * proc_clone.c - escape attempt: clone of a process (not a thread) is refused.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(void)
{
	long p;

	p = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (p == 0)
		_exit(0);
	esc_errno(p, "clone(SIGCHLD)", EPERM, 0);
	p = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
	if (p == 0)
		_exit(0);
	esc_errno(p, "clone(CLONE_NEWUSER)", EPERM, 0);
	/* Namespace flags on a thread-shaped clone are refused too. */
	p = syscall(SYS_clone, CLONE_THREAD | CLONE_SIGHAND | CLONE_VM | CLONE_NEWNET, 0, 0, 0, 0);
	esc_errno(p, "clone(CLONE_THREAD|CLONE_NEWNET)", EPERM, 0);
	p = syscall(SYS_clone, 0x100000000UL | SIGCHLD, 0, 0, 0, 0);
	if (p == 0)
		_exit(0);
	esc_errno(p, "clone(1<<32 | SIGCHLD)", EPERM, 0);
	return esc_done("clone without CLONE_THREAD or with namespace flags: EPERM");
}
