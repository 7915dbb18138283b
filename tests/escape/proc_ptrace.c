/*
 * proc_ptrace.c - escape attempt: ptrace and cross-process memory access are refused.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(void)
{
	char buf[8];
	struct iovec l = { buf, sizeof(buf) }, r = { (void *)0x400000, sizeof(buf) };

	esc_errno(ptrace(PTRACE_TRACEME, 0, 0, 0), "PTRACE_TRACEME", EPERM, 0);
	esc_errno(ptrace(PTRACE_ATTACH, 1, 0, 0), "PTRACE_ATTACH 1", EPERM, 0);
	esc_errno(ptrace(PTRACE_SEIZE, 1, 0, 0), "PTRACE_SEIZE 1", EPERM, 0);
	esc_errno(process_vm_readv(1, &l, 1, &r, 1, 0), "process_vm_readv", EPERM, 0);
	esc_errno(process_vm_writev(1, &l, 1, &r, 1, 0), "process_vm_writev", EPERM, 0);
	esc_errno(syscall(SYS_pidfd_getfd, 0, 0, 0), "pidfd_getfd", EPERM, 0);
	esc_errno(syscall(SYS_kcmp, 1, 2, 0, 0, 0), "kcmp", EPERM, 0);
	return esc_done("ptrace, process_vm_*, pidfd_getfd, kcmp: EPERM");
}
