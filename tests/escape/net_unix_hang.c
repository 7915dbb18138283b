/*
 * net_unix_hang.c - escape attempt: pile up broker threads with connect()s to a full AF_UNIX listener.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 *
 * An AF_UNIX connect() runs in a broker worker thread, which blocks on a
 * full listener.  Killing the calling process does not free that thread
 * (the broker holds the socket), so a kill-and-retry loop once made one
 * broker thread per try, without bound.  The broker bounds them per
 * sandbox: past the bound a connect() fails with EAGAIN at once.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/escape/escape.h"

#define TRIES 48		/* more than the broker's bound (32) */

static const char name[] = "\0cb-unix-hang";
#define NAMELEN ((socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof(name) - 1))

static struct sockaddr_un addr = { .sun_family = AF_UNIX };

static int
try_connect(int flags)
{
	int s = socket(AF_UNIX, SOCK_STREAM | flags, 0);

	if (s < 0)
		return -1;
	return connect(s, (struct sockaddr *)&addr, NAMELEN);
}

int
main(void)
{
	struct timespec t = { 0, 20 * 1000 * 1000 };
	int l = socket(AF_UNIX, SOCK_STREAM, 0), st;
	pid_t p;

	memcpy(addr.sun_path, name, sizeof(name) - 1);
	if (l < 0 || bind(l, (struct sockaddr *)&addr, NAMELEN) != 0 || listen(l, 0) != 0)
		return 2;
	for (int i = 0; i < 8; i++)	/* fill the backlog */
		(void)try_connect(SOCK_NONBLOCK);
	for (int i = 0; i < TRIES; i++) {
		if ((p = fork()) < 0)
			return 2;
		if (p == 0)
			_exit(try_connect(0) == 0 ? 0 : 1);
		nanosleep(&t, NULL);
		kill(p, SIGKILL);
		waitpid(p, &st, 0);
	}
	/* The bound is reached: this one must fail at once, not hang. */
	if ((p = fork()) < 0)
		return 2;
	if (p == 0) {
		alarm(5);
		_exit(try_connect(0) == -1 && errno == EAGAIN ? 0 : 1);
	}
	waitpid(p, &st, 0);
	esc_true(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "a connect() past the bound of waiting AF_UNIX connects was served (or hung)");
	return esc_done("waiting AF_UNIX connects are bounded per sandbox");
}
