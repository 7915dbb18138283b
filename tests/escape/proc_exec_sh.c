/*
 * proc_exec_sh.c - escape attempt: exec of /bin/sh is refused every way.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(void)
{
	/* Should an exec work, the shell says so and exits non-zero. */
	char *const av[] = { "sh", "-c", "echo ESCAPE: exec worked; exit 99", NULL };
	int fd = open("/bin/sh", O_PATH | O_CLOEXEC);

	esc_errno(execve("/bin/sh", av, NULL), "execve /bin/sh", EPERM, 0);
	esc_errno(syscall(SYS_execveat, AT_FDCWD, "/bin/sh", av, NULL, 0), "execveat path", EPERM, 0);
	esc_errno(syscall(SYS_execveat, fd, "", av, NULL, AT_EMPTY_PATH), "execveat fd", EPERM, 0);
	esc_errno(execve("/proc/self/exe", av, NULL), "execve /proc/self/exe", EPERM, 0);
	return esc_done("execve and execveat of /bin/sh and of myself: EPERM");
}
