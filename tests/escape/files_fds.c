/*
 * files_fds.c - escape attempt: only stdio and the broker socket are inherited.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/socket.h>

#include "tests/escape/escape.h"

int
main(void)
{
	int type = 0;
	socklen_t len = sizeof(type);

	for (int fd = 0; fd < 4096; fd++) {
		bool open_ = fcntl(fd, F_GETFD) != -1;

		if (open_ != (fd <= 3))
			esc_escaped("fd %d is %s", fd, open_ ? "open" : "closed");
	}
	esc_true(getsockopt(3, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET,
	    "fd 3 is not the SOCK_SEQPACKET socket");
	esc_true(getenv("CAPBROKER_FD") != NULL && strcmp(getenv("CAPBROKER_FD"), "3") == 0,
	    "CAPBROKER_FD is not 3");
	return esc_done("fds 0-3 only; 3 is the seqpacket socket (CAPBROKER_FD)");
}
