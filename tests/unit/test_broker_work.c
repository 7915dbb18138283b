/*
 * test_broker_work.c - a worker's blocking call cut short (work.c,
 * brk_work_cut_start/stop): the waits the broker cuts are ones an agent
 * can make last (a socket's linger, a full listener), so the test makes
 * real ones and checks that they end, that only the cutting thread is
 * signalled, and that the thread has its signals blocked again after.
 * Test code (trusted).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "broker/core.h"
#include "broker/work.h"
#include "tests/tap.h"

static uint64_t
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

struct res {
	int rc, err;
	uint64_t ms;
	bool on, blocked_after;
	int fd;
};

/* As a worker: every signal blocked, then a read of an empty pipe that
 * nothing will ever write, cut every 20 ms. */
static void *
cut_read(void *p)
{
	struct res *r = p;
	sigset_t all, after;
	struct brk_cut k;
	uint64_t t0;
	char c;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	t0 = now_ms();
	r->on = brk_work_cut_start(&k, 20 * 1000000L);
	r->rc = (int)read(r->fd, &c, 1);
	r->err = errno;
	brk_work_cut_stop(&k);
	r->ms = now_ms() - t0;
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	r->blocked_after = sigismember(&after, SIGRTMIN + 2) == 1;
	return NULL;
}

/* A blocking AF_UNIX connect to a full listener, the broker's case: the
 * retry after EINTR is the same call and succeeds once there is room. */
static void *
cut_connect(void *p)
{
	struct res *r = p;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	socklen_t al = (socklen_t)(sizeof(sa_family_t) + 1 + snprintf(a.sun_path + 1,
	    sizeof(a.sun_path) - 1, "cb-test-work-%d", (int)getpid()));
	sigset_t all;
	struct brk_cut k;
	int eintr = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	r->on = brk_work_cut_start(&k, 20 * 1000000L);
	while ((r->rc = connect(r->fd, (struct sockaddr *)&a, al)) != 0 && errno == EINTR)
		eintr++;
	r->err = r->rc == 0 ? 0 : errno;
	brk_work_cut_stop(&k);
	r->ms = (uint64_t)eintr;
	return NULL;
}

static void
test_read(void)
{
	struct res r = { 0 };
	int pp[2];
	pthread_t t;

	T_OK(pipe(pp) == 0, "a pipe");
	r.fd = pp[0];
	pthread_create(&t, NULL, cut_read, &r);
	pthread_join(t, NULL);
	T_OK(r.on, "the cut is set up");
	T_OK(r.rc == -1 && r.err == EINTR, "a read that would wait for ever ends with EINTR (%d, %s)",
	    r.rc, strerror(r.err));
	T_OK(r.ms < 2000, "... soon (%llu ms for a 20 ms cut)", (unsigned long long)r.ms);
	T_OK(r.blocked_after, "the thread has the signal blocked again after the cut");
	close(pp[0]);
	close(pp[1]);
}

static void
test_connect(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	socklen_t al = (socklen_t)(sizeof(sa_family_t) + 1 + snprintf(a.sun_path + 1,
	    sizeof(a.sun_path) - 1, "cb-test-work-%d", (int)getpid()));
	int l = socket(AF_UNIX, SOCK_STREAM, 0), fill = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct res r = { .fd = socket(AF_UNIX, SOCK_STREAM, 0) };
	pthread_t t;
	int acc;

	T_OK(l >= 0 && bind(l, (struct sockaddr *)&a, al) == 0 && listen(l, 0) == 0, "a listener");
	(void)connect(fill, (struct sockaddr *)&a, al);	/* the backlog, full */
	pthread_create(&t, NULL, cut_connect, &r);
	usleep(200 * 1000);
	acc = accept(l, NULL, NULL);		/* room, at last */
	pthread_join(t, NULL);
	T_OK(r.rc == 0, "a connect to a full listener, cut and retried, connects once there is room (%s)",
	    strerror(r.err));
	T_OK(r.ms >= 2, "... having been cut while it waited (%llu times in 200 ms)",
	    (unsigned long long)r.ms);
	close(acc);
	close(fill);
	close(r.fd);
	close(l);
}

/* The main thread never asked for the cut: it must not see the signal,
 * nor have a handler's effect on its own waits. */
static void
test_other_thread(void)
{
	struct res r = { 0 };
	int pp[2];
	pthread_t t;
	struct timespec ts = { 0, 150 * 1000000L }, left;
	int rc;

	T_OK(pipe(pp) == 0, "a pipe");
	r.fd = pp[0];
	pthread_create(&t, NULL, cut_read, &r);
	rc = nanosleep(&ts, &left);
	T_OK(rc == 0, "another thread's sleep is not interrupted by the cut (%d)", rc);
	pthread_join(t, NULL);
	close(pp[0]);
	close(pp[1]);
}

int
main(void)
{
	test_read();
	test_connect();
	test_other_thread();
	return t_done();
}
