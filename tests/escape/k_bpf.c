/*
 * k_bpf.c - escape attempt: bpf is refused.
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
	unsigned char attr[128];

	memset(attr, 0, sizeof(attr));
	esc_errno(syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, sizeof(attr)), "bpf(MAP_CREATE)", EPERM, 0);
	esc_errno(syscall(SYS_bpf, 5 /* BPF_PROG_LOAD */, attr, sizeof(attr)), "bpf(PROG_LOAD)", EPERM, 0);
	return esc_done("bpf: EPERM");
}
