/*
 * net_abstract_unix_medium.c - escape attempt: the host's abstract unix sockets are unreachable (medium: connect allowed).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 * ARGS: @ABSTRACT@
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <stddef.h>

#include "tests/escape/escape.h"

int
main(int argc, char **argv)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	if (argc < 2 || s == -1)
		return 2;
	snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "%s", argv[1]);
	/* ECONNREFUSED: the name does not exist in this network namespace;
	 * EPERM: Landlock's abstract-socket scope refused it. */
	esc_errno(connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(argv[1]))), "connect to host abstract socket", ECONNREFUSED, EPERM);
	return esc_done("host abstract socket: not reachable from the sandbox's network namespace");
}
