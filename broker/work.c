/*
 * work.c - worker threads: a blocking call (DNS) runs off the loop, its
 * completion on the loop, signalled through the wake pipe.
 *
 * Trust domain: broker.  A worker touches only the job it was given; it
 * never reads or writes files for an agent (ops_fs.c switches the loop
 * thread's fs identity and relies on that; the one file a worker opens is
 * a system library, dns.c's dlopen of libldns, as the broker's own user),
 * and it blocks every signal (but brk_work_cut_start's, while a call of
 * its is cut short).
 */
#include "broker/core.h"
#include "broker/work.h"

#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

struct brk_job {
	void (*fn)(void *);
	void (*done)(void *);
	void *arg;
	int wfd;
};

static void *
brk_job_main(void *p)
{
	struct brk_job *j = p;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	j->fn(j->arg);
	/* A pointer-sized write to a pipe is atomic; the loop frees j.  It
	 * fails only when the broker is shutting down (the pipe is closed):
	 * then the completion has no one to go to. */
	if (write(j->wfd, &j, sizeof(j)) != sizeof(j))
		return NULL;
	return NULL;
}

int
brk_work(struct brk *b, void (*fn)(void *), void (*done)(void *), void *arg)
{
	struct brk_job *j = malloc(sizeof(*j));
	pthread_attr_t at;
	pthread_t t;
	int r;

	if (!j)
		return CB_ENOMEM;
	*j = (struct brk_job){ .fn = fn, .done = done, .arg = arg, .wfd = b->wake_pipe[1] };
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 * 1024);
	r = pthread_create(&t, &at, brk_job_main, j);
	pthread_attr_destroy(&at);
	if (r != 0) {
		free(j);
		return CB_EBUSY;
	}
	b->jobs++;
	return 0;
}

#define BRK_CUT_SIG (SIGRTMIN + 2)

static void
brk_cut_sig(int sig)
{
	(void)sig;
}

static pthread_once_t brk_cut_once = PTHREAD_ONCE_INIT;

static void
brk_cut_handler(void)
{
	/* No SA_RESTART: an interrupted call returns EINTR to its caller. */
	struct sigaction sa = { .sa_handler = brk_cut_sig };

	sigemptyset(&sa.sa_mask);
	(void)sigaction(BRK_CUT_SIG, &sa, NULL);
}

bool
brk_work_cut_start(struct brk_cut *k, long ns)
{
	const struct itimerspec every = { .it_value = { 0, ns }, .it_interval = { 0, ns } };
	struct sigevent ev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = BRK_CUT_SIG };
	sigset_t cut;

	pthread_once(&brk_cut_once, brk_cut_handler);
	ev._sigev_un._tid = gettid();	/* glibc 2.36 names no sigev_notify_thread_id */
	k->on = timer_create(CLOCK_MONOTONIC, &ev, &k->tm) == 0;
	if (!k->on)
		return false;
	if (timer_settime(k->tm, 0, &every, NULL) != 0) {
		timer_delete(k->tm);
		return k->on = false;
	}
	sigemptyset(&cut);
	sigaddset(&cut, BRK_CUT_SIG);
	pthread_sigmask(SIG_UNBLOCK, &cut, NULL);
	return true;
}

void
brk_work_cut_stop(struct brk_cut *k)
{
	sigset_t cut;

	if (!k->on)
		return;
	/* Blocked first: a signal still to come stays pending, and a worker
	 * ends with its job. */
	sigemptyset(&cut);
	sigaddset(&cut, BRK_CUT_SIG);
	pthread_sigmask(SIG_BLOCK, &cut, NULL);
	timer_delete(k->tm);
	k->on = false;
}

static void
brk_wake(evutil_socket_t fd, short ev, void *arg)
{
	struct brk *b = arg;
	struct brk_job *j;

	(void)ev;
	while (read(fd, &j, sizeof(j)) == sizeof(j)) {
		b->jobs--;
		j->done(j->arg);
		free(j);
	}
}

void
brk_work_drain(struct brk *b, int ms)
{
	uint64_t end = cb_mono_ns() + (uint64_t)ms * 1000000u;

	while (b->jobs > 0 && b->wake_pipe[0] >= 0) {
		struct pollfd p = { .fd = b->wake_pipe[0], .events = POLLIN };
		uint64_t now = cb_mono_ns();

		if (now >= end || poll(&p, 1, (int)((end - now + 999999u) / 1000000u)) <= 0)
			return;
		brk_wake(b->wake_pipe[0], EV_READ, b);
	}
}

int
brk_work_open(struct brk *b)
{
	if (pipe2(b->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		return CB_EIO;
	/* Workers must not lose a completion: their end blocks. */
	fcntl(b->wake_pipe[1], F_SETFL, 0);
	b->ev_wake = event_new(b->base, b->wake_pipe[0], EV_READ | EV_PERSIST, brk_wake, b);
	if (!b->ev_wake)
		return CB_ENOMEM;
	event_add(b->ev_wake, NULL);
	return 0;
}

void
brk_work_close(struct brk *b)
{
	if (b->ev_wake)
		event_free(b->ev_wake);
	b->ev_wake = NULL;
	if (b->wake_pipe[0] >= 0)
		close(b->wake_pipe[0]);
	if (b->wake_pipe[1] >= 0)
		close(b->wake_pipe[1]);
	b->wake_pipe[0] = b->wake_pipe[1] = -1;
}
