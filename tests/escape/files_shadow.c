/*
 * files_shadow.c - escape attempt: host secrets in /etc are not there.
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
	static const char *const p[] = { "/etc/shadow", "/etc/gshadow", "/etc/sudoers",
	    "/etc/ssh", "/etc/ssl/private", "/etc/machine-id", "/etc/resolv.conf" };

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		esc_errno(open(p[i], O_RDONLY), p[i], ENOENT, 0);
	return esc_done("/etc/shadow, sudoers, ssh keys, ssl/private: ENOENT");
}
