/*
 * proc_identity.c - escape attempt: the agent runs as the expected unprivileged host uid, with its own hostname.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * ARGS: @AGENTUID@
 */

#include "tests/escape/escape.h"

int
main(int argc, char **argv)
{
	char host[128];
	unsigned want = (unsigned)strtoul(argc > 1 ? argv[1] : "", NULL, 10);

	esc_true(getuid() == want && geteuid() == want, "unexpected uid");
	esc_true(want != 0, "agent uid is 0");
	esc_true(gethostname(host, sizeof(host)) == 0 && strcmp(host, "escape") == 0,
	    "hostname is not the sandbox id");
	esc_true(getenv("CAPBROKER_SANDBOX") != NULL && strcmp(getenv("CAPBROKER_SANDBOX"), "escape") == 0,
	    "CAPBROKER_SANDBOX is not the id");
	return esc_done("uid %u, hostname %s", want, host);
}
