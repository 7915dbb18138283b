/*
 * k_misc.c - escape attempt: other kernel attack surface is refused.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(void)
{
	esc_errno(syscall(SYS_modify_ldt, 1, NULL, 0), "modify_ldt", EPERM, 0);
	esc_errno(syscall(SYS_process_madvise, 0, NULL, 0, 0, 0), "process_madvise", EPERM, 0);
	esc_errno(syscall(SYS_fanotify_init, 0, 0), "fanotify_init", EPERM, 0);
	esc_errno(syscall(SYS_clock_settime, 0, NULL), "clock_settime", EPERM, 0);
	esc_errno(syscall(SYS_settimeofday, NULL, NULL), "settimeofday", EPERM, 0);
	esc_errno(syscall(SYS_move_pages, 1, 0, NULL, NULL, NULL, 0), "move_pages", EPERM, 0);
	esc_errno(syscall(SYS_vhangup), "vhangup", EPERM, 0);
	/* Not on the allow list: the default answer. */
	esc_errno(syscall(SYS_lookup_dcookie, 0, NULL, 0), "lookup_dcookie", EPERM, ENOSYS);
	esc_errno(syscall(1000), "an unknown system call", ENOSYS, 0);
	return esc_done("modify_ldt, process_madvise, fanotify, clock_settime...: EPERM; unknown: ENOSYS");
}
