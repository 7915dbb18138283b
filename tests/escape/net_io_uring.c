/*
 * net_io_uring.c - escape attempt: io_uring around the notifier (IORING_OP_CONNECT, IORING_OP_OPENAT).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: high
 * EXIT: 0
 * OPTS: --grant net.connect:127.0.0.1:@HOSTPORT@
 * ARGS: @HOSTPORT@
 *
 * A connect or an open submitted on an io_uring is made by the kernel's
 * worker, never passing the seccomp filter: IORING_OP_CONNECT would reach
 * any address past the broker, IORING_OP_OPENAT any file the agent's
 * credentials open, past the file server's per-operation checks.  So the
 * ring itself must never exist: io_uring_setup fails with EPERM in the
 * tier with mediated connect and a served tree too (every flag set:
 * SQPOLL, a kernel thread, included), through libc's number and the raw
 * one, and io_uring_enter / io_uring_register on any descriptor fail the
 * same way (no ring can be brought in from outside either: nothing hands
 * the agent one).  A positive control shows the mediated connect() works
 * in this very sandbox, so the refusal is the filter's, not a dead network.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup	425
#define SYS_io_uring_enter	426
#define SYS_io_uring_register	427
#endif
#define IORING_SETUP_SQPOLL	(1U << 1)

int
main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	unsigned char params[120];
	int s;

	if (argc < 2)
		return 2;
	memset(params, 0, sizeof(params));
	esc_errno(syscall(SYS_io_uring_setup, 8, params), "io_uring_setup", EPERM, 0);
	memset(params, 0, sizeof(params));
	memcpy(params + 8, &(unsigned){ IORING_SETUP_SQPOLL }, sizeof(unsigned));	/* flags */
	esc_errno(syscall(SYS_io_uring_setup, 8, params), "io_uring_setup(SQPOLL)", EPERM, 0);
	esc_errno(syscall(425, 1, params), "io_uring_setup by raw number", EPERM, 0);
	for (int fd = 0; fd < 8; fd++) {
		esc_errno(syscall(SYS_io_uring_enter, fd, 1, 1, 0, NULL, 0), "io_uring_enter", EPERM, 0);
		esc_errno(syscall(SYS_io_uring_register, fd, 0, NULL, 0), "io_uring_register", EPERM, 0);
	}
	/* control: the covered address connects through the broker */
	a.sin_port = htons((uint16_t)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(0x7f000001);
	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(s, (struct sockaddr *)&a, sizeof(a)) != 0)
		esc_escaped("control: the mediated connect() failed (%s): the test proves nothing",
		    strerror(errno));
	return esc_done("io_uring_setup (plain, SQPOLL, raw number), enter and register: EPERM "
	    "beside a working mediated connect()");
}
