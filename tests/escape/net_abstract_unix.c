/*
 * net_abstract_unix.c - escape attempt: the host's abstract unix sockets are unreachable (low: no connect at all).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
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
	esc_errno(connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(argv[1]))), "connect to host abstract socket", EPERM, 0);
	esc_errno(bind(s, (struct sockaddr *)&a, sizeof(a)), "bind", EPERM, 0);
	return esc_done("connect/bind in the low tier: EPERM");
}
