/*
 * pos_socketpair.c - escape attempt: positive: the socketpair to the broker works.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <sys/socket.h>

#include "tests/escape/escape.h"

int
main(void)
{
	const char *fds = getenv("CAPBROKER_FD");
	char buf[64];
	int fd = fds != NULL ? atoi(fds) : -1;
	ssize_t n;

	esc_true(send(fd, "ping", 4, 0) == 4, "send on CAPBROKER_FD");
	n = recv(fd, buf, sizeof(buf), 0);
	esc_true(n == 9 && memcmp(buf, "echo:ping", 9) == 0, "no echo from the launcher");
	return esc_done("sent a packet on fd %d, the launcher echoed it", fd);
}
