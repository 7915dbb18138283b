/*
 * net_unix_hang.c - escape attempt: pile up broker threads with connect()s to a full AF_UNIX listener.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 *
 * An AF_UNIX connect() runs in a broker worker thread, which blocks on a
 * full listener.  Killing the calling process did not free that thread
 * (the broker holds the socket), so a kill-and-retry loop once made one
 * broker thread per try, without bound.  The broker bounds them per
 * sandbox (32 in flight; past them a sandbox's connects wait in the
 * kernel), and a worker whose caller is gone gives up within 0.1 s: after
 * more tries than the bound, a connect() with SO_SNDTIMEO to the full
 * listener times out as the kernel's would (EAGAIN after its time), and
 * one to a listener with room connects.  Were the workers of the killed
 * callers still holding their places, both would hang.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/time.h>
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

/* SO_SNDTIMEO 1 s to the full listener: 0 if it failed with EAGAIN after
 * 0.9 s or more, as the kernel's own connect does. */
static int
timed_connect(void)
{
	struct timeval tv = { 1, 0 };
	struct timespec a, b;
	int s = socket(AF_UNIX, SOCK_STREAM, 0), r;

	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &a);
	r = connect(s, (struct sockaddr *)&addr, NAMELEN);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (r == 0 || errno != EAGAIN)
		return 1;
	return (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 >= 900 ? 0 : 1;
}

/* A listener of its own with room: 0 if a blocking connect to it succeeds. */
static int
room_connect(void)
{
	static const char other[] = "\0cb-unix-room";
	struct sockaddr_un o = { .sun_family = AF_UNIX };
	socklen_t ol = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + sizeof(other) - 1);
	int l = socket(AF_UNIX, SOCK_STREAM, 0), s = socket(AF_UNIX, SOCK_STREAM, 0);

	memcpy(o.sun_path, other, sizeof(other) - 1);
	if (l < 0 || s < 0 || bind(l, (struct sockaddr *)&o, ol) != 0 || listen(l, 8) != 0)
		return 2;
	return connect(s, (struct sockaddr *)&o, ol) == 0 ? 0 : 1;
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
	if ((p = fork()) < 0)
		return 2;
	if (p == 0) {
		alarm(10);
		_exit(timed_connect());
	}
	waitpid(p, &st, 0);
	esc_true(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "a connect() to the full listener, past more killed tries than the bound, did not time out "
	    "as the kernel's would (or hung)");
	if ((p = fork()) < 0)
		return 2;
	if (p == 0) {
		alarm(5);
		_exit(room_connect());
	}
	waitpid(p, &st, 0);
	esc_true(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	    "a connect() to a listener with room, past the killed tries, hung or failed");
	return esc_done("waiting AF_UNIX connects are bounded per sandbox and freed with their callers");
}
