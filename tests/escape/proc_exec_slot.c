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

int
main(void)
{
	char *const av[] = { "sh", NULL };
	char *const ldav[] = { "ld.so", "/bin/sh", NULL };
	struct rlimit rl;
	int sh = open("/bin/sh", O_PATH);
	int slot;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur != rl.rlim_max)
		esc_escaped("RLIMIT_NOFILE soft != hard");
	slot = (int)rl.rlim_max;
	esc_errno(dup2(sh, slot), "dup2 to the exec slot", EBADF, 0);
	esc_errno(fcntl(sh, F_DUPFD, slot), "F_DUPFD to the exec slot", EINVAL, 0);
	rl.rlim_cur = rl.rlim_max = (rlim_t)slot + 1;
	esc_errno(setrlimit(RLIMIT_NOFILE, &rl), "raising RLIMIT_NOFILE", EPERM, 0);
	/* The shape the filter hands to pid 1: its listener is closed after the
	 * agent's own exec, so the kernel answers ENOSYS.  An absolute path
	 * (which execveat resolves without looking at the descriptor) through
	 * the ELF loader must not give a second exec either. */
	esc_errno(syscall(SYS_execveat, slot, "", av, NULL, AT_EMPTY_PATH), "execveat(slot)", ENOSYS, 0);
	esc_errno(syscall(SYS_execveat, slot, "/bin/sh", av, NULL, AT_EMPTY_PATH),
	    "execveat(slot, /bin/sh)", ENOSYS, 0);
	esc_errno(syscall(SYS_execveat, slot, "/lib64/ld-linux-x86-64.so.2", ldav, NULL, AT_EMPTY_PATH),
	    "execveat(slot, ld.so /bin/sh)", ENOSYS, 0);
	esc_errno(syscall(SYS_execveat, slot, "/proc/self/exe", av, NULL, AT_EMPTY_PATH),
	    "execveat(slot, /proc/self/exe)", ENOSYS, 0);
	return esc_done("descriptor %d unreachable; execveat in its shape: ENOSYS (one exec spent)", slot);
}
