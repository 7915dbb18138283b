/*
 * net_dns.c - escape attempt: name resolution fails (no resolver, no network).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <netdb.h>
#include <sys/stat.h>

#include "tests/escape/escape.h"

int
main(void)
{
	struct addrinfo *res = NULL;
	struct stat st;
	int r = getaddrinfo("example.com", "80", NULL, &res);

	if (r == 0) {
		esc_escaped("example.com resolved");
		freeaddrinfo(res);
	}
	esc_errno(stat("/etc/resolv.conf", &st), "/etc/resolv.conf", ENOENT, 0);
	esc_errno(stat("/run/systemd/resolve/io.systemd.Resolve", &st), "resolved socket", ENOENT, 0);
	return esc_done("getaddrinfo(example.com): %s", gai_strerror(r));
}
