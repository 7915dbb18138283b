/*
 * proc_namespaces.c - escape attempt: no new namespaces (user, mount, net, pid...) and no setns.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <sched.h>

#include "tests/escape/escape.h"

int
main(void)
{
	static const int f[] = { CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID,
	    CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME };
	int fd = open("/proc/self/ns/net", O_RDONLY);

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		char what[32];

		snprintf(what, sizeof(what), "unshare(%#x)", f[i]);
		esc_errno(unshare(f[i]), what, EPERM, 0);
	}
	esc_errno(setns(fd, 0), "setns", EPERM, 0);
	return esc_done("unshare of every namespace and setns: EPERM");
}
