/*
 * proc_exec_slot.c - escape attempt: the one exec slot cannot be reused.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

#define EXEC_SLOT 4095	/* STUB_EXEC_FD: where the stub opened the agent binary */

int
main(void)
{
	/* Should an exec work, the shell says so and exits non-zero. */
	char *const av[] = { "sh", "-c", "echo ESCAPE: exec worked; exit 99", NULL };
	char *const ldav[] = { "ld.so", "/bin/sh", "-c", "echo ESCAPE: exec worked; exit 99", NULL };
	struct rlimit rl;
	int sh = open("/bin/sh", O_PATH);

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur != rl.rlim_max ||
	    rl.rlim_max > EXEC_SLOT)
		esc_escaped("RLIMIT_NOFILE is not a hard limit below the exec slot");
	/* No way to put a file at the slot (or at the limit). */
	esc_errno(dup2(sh, EXEC_SLOT), "dup2 to the exec slot", EBADF, 0);
	esc_errno(fcntl(sh, F_DUPFD, EXEC_SLOT), "F_DUPFD to the exec slot", EINVAL, 0);
	esc_errno(dup2(sh, (int)rl.rlim_max), "dup2 to RLIMIT_NOFILE", EBADF, 0);
	rl.rlim_cur = rl.rlim_max = EXEC_SLOT + 1;
	esc_errno(setrlimit(RLIMIT_NOFILE, &rl), "raising RLIMIT_NOFILE", EPERM, 0);
	/* The shape the filter hands to pid 1: its listener closed after the
	 * agent's own exec, so the kernel answers ENOSYS.  An absolute path
	 * (which execveat resolves without looking at the descriptor) through
	 * the ELF loader must not give a second exec either. */
	esc_errno(syscall(SYS_execveat, EXEC_SLOT, "", av, NULL, AT_EMPTY_PATH),
	    "execveat(slot)", ENOSYS, 0);
	esc_errno(syscall(SYS_execveat, EXEC_SLOT, "/bin/sh", av, NULL, AT_EMPTY_PATH),
	    "execveat(slot, /bin/sh)", ENOSYS, 0);
	esc_errno(syscall(SYS_execveat, EXEC_SLOT, "/lib64/ld-linux-x86-64.so.2", ldav, NULL,
	    AT_EMPTY_PATH), "execveat(slot, ld.so /bin/sh)", ENOSYS, 0);
	esc_errno(syscall(SYS_execveat, EXEC_SLOT, "/proc/self/exe", av, NULL, AT_EMPTY_PATH),
	    "execveat(slot, /proc/self/exe)", ENOSYS, 0);
	/* Any other shape is refused outright. */
	esc_errno(syscall(SYS_execveat, sh, "", av, NULL, AT_EMPTY_PATH), "execveat(fd)", EPERM, 0);
	esc_errno(syscall(SYS_execveat, EXEC_SLOT, "/bin/sh", av, NULL, 0),
	    "execveat(slot, /bin/sh, 0)", EPERM, 0);
	return esc_done("slot %d unreachable; execveat in its shape: ENOSYS (one exec spent)",
	    EXEC_SLOT);
}
