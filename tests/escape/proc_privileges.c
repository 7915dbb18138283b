/*
 * proc_privileges.c - escape attempt: no capabilities, no_new_privs, seccomp filter, cannot become root.
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
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	static const char *const want[] = { "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000",
	    "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
	    "NoNewPrivs:\t1", "Seccomp:\t2" };

	buf[n > 0 ? n : 0] = '\0';
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (strstr(buf, want[i]) == NULL)
			esc_escaped("/proc/self/status lacks \"%s\"", want[i]);
	}
	/* EINVAL: uid 0 is not even mapped in the sandbox's user namespace. */
	esc_errno(setuid(0), "setuid(0)", EINVAL, EPERM);
	esc_errno(setgid(0), "setgid(0)", EINVAL, EPERM);
	esc_true(getuid() != 0 && geteuid() != 0, "running as uid 0");
	return esc_done("uid %u, all capability sets empty, no_new_privs, seccomp", (unsigned)getuid());
}
