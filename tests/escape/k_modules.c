/*
 * k_modules.c - escape attempt: kernel modules, kexec, reboot, swap, syslog and acct are refused.
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
	esc_errno(syscall(SYS_init_module, NULL, 0, ""), "init_module", EPERM, 0);
	esc_errno(syscall(SYS_finit_module, 0, "", 0), "finit_module", EPERM, 0);
	esc_errno(syscall(SYS_delete_module, "ext4", 0), "delete_module", EPERM, 0);
	esc_errno(syscall(SYS_kexec_load, 0, 0, NULL, 0), "kexec_load", EPERM, 0);
	esc_errno(syscall(SYS_reboot, 0xfee1dead, 672274793, 0x4321fedc, NULL), "reboot", EPERM, 0);
	esc_errno(syscall(SYS_swapon, "/tmp/x", 0), "swapon", EPERM, 0);
	esc_errno(syscall(SYS_syslog, 3, NULL, 0), "syslog", EPERM, 0);
	esc_errno(syscall(SYS_acct, "/tmp/acct"), "acct", EPERM, 0);
	esc_errno(syscall(SYS_iopl, 3), "iopl", EPERM, 0);
	esc_errno(syscall(SYS_ioperm, 0, 1024, 1), "ioperm", EPERM, 0);
	return esc_done("modules, kexec, reboot, swapon, syslog, acct, iopl: EPERM");
}
