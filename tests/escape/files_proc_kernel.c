/*
 * files_proc_kernel.c - escape attempt: kernel knobs in /proc are not there.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>

#include "tests/escape/escape.h"

int
main(void)
{
	static const char *const p[] = { "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger",
	    "/proc/kcore", "/proc/kallsyms", "/proc/kmsg", "/proc/modules", "/proc/keys",
	    "/proc/sys/user/max_user_namespaces", "/proc/timer_list" };

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		esc_errno(open(p[i], O_RDONLY), p[i], ENOENT, 0);
	return esc_done("/proc is subset=pid: sysrq, kcore, kallsyms, /proc/sys: ENOENT");
}
