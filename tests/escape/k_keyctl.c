/*
 * k_keyctl.c - escape attempt: the kernel keyring is refused.
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
	esc_errno(syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3, 0), "keyctl", EPERM, 0);
	esc_errno(syscall(SYS_add_key, "user", "x", "y", 1, -3), "add_key", EPERM, 0);
	esc_errno(syscall(SYS_request_key, "user", "x", NULL, 0), "request_key", EPERM, 0);
	return esc_done("keyctl, add_key, request_key: EPERM");
}
