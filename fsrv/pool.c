/*
 * pool.c - a small pool of threads serving many servers' FUSE connections,
 * so that a sandbox at rest costs the broker no thread of its own.
 *
 * Trust domain: broker.  What a pool must never do, and how it does not:
 *  - serve one server on two threads at once (a server keeps state per
 *    request and between them: its node tables, each tree's look-ahead
 *    counts, the caller's state for a rename's two checks).  Each server
 *    has an epoll set of its own (its trees' connections, its control
 *    descriptor), and the pool's set watches those sets one-shot: the
 *    thread woken for a server is the only one that may serve it until it
 *    arms it again, and the server is freed (its control function) only by
 *    that thread, with nothing of it left where another could find it;
 *  - let one server hold up another: a thread that takes a server and
 *    leaves no other waiting starts one more (up to cfg.max), so that
 *    while a thread is held (a slow disk, a sandbox's spent audit budget,
 *    a full audit queue, the log's room) another waits for the rest.  Each
 *    busy thread holds a different server, so the threads a pool has are
 *    never more than its busy servers and one;
 *  - answer a request with another's identity: fsuid, fsgid and groups are
 *    per thread, and server.c takes for each request what its tree asks
 *    for from what this thread holds (fsrv_identity); a new thread is
 *    started only by one that has taken its own identity back, since it
 *    inherits its starter's credentials.
 * Threads beyond cfg.min end when they have not been needed for a while:
 * when more than one over the most ever busy at once in the last idle_ms
 * (a thread the kernel wakes now and then for a server would otherwise
 * never time out); all of them once the pool is freed (fsrv_pool_free,
 * which waits for them or leaves the pool to the last).
 */
#include "fsrv/srv_int.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define FSRV_POOL_CTL UINT32_MAX	/* a server's set: its control descriptor */

_Thread_local struct fsrv_work *fsrv_tw;

struct fsrv_pool_srv {
	struct fsrv_pool *p;
	struct fsrv *s;
	int epfd;			/* its trees' connections and ctl_fd */
	fsrv_ctl_fn ctl;
	void (*done)(void *arg);
	void *arg;
};

struct fsrv_pool {
	struct fsrv_pool_cfg cfg;
	int epfd;			/* every server's set, one-shot */
	pthread_mutex_t mu;
	pthread_cond_t cond;		/* a thread ended */
	unsigned nthreads, nidle, nservers;
	/* The most threads busy at once in this window of idle_ms, and in
	 * the one before (fsrv_pool_surplus). */
	unsigned peak, prev_peak;
	uint64_t win_at;
	bool stop;
	bool detached;			/* freed by its last thread (fsrv_pool_free) */
	int stop_fd;			/* made by fsrv_pool_free */
};

/* Free p, whose threads have all ended. */
static void
fsrv_pool_destroy(struct fsrv_pool *p)
{
	close(p->stop_fd);
	close(p->epfd);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* The calling thread ends: uncounted, with p->mu held (released here).
 * The last of a detached pool's frees it. */
static void
fsrv_pool_leave(struct fsrv_pool *p)
{
	bool last;

	p->nthreads--;
	p->nidle--;
	last = p->nthreads == 0 && p->detached;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mu);
	if (last)
		fsrv_pool_destroy(p);
}

/* Called with p->mu held by an idle thread: is it one too many? */
static bool
fsrv_pool_surplus(struct fsrv_pool *p)
{
	uint64_t now = cb_mono_ns();
	unsigned want;

	if (now - p->win_at >= (uint64_t)p->cfg.idle_ms * 1000000u) {
		p->prev_peak = p->peak;
		p->peak = p->nthreads - p->nidle;
		p->win_at = now;
	}
	want = (p->peak > p->prev_peak ? p->peak : p->prev_peak) + 1;
	if (want < p->cfg.min)
		want = p->cfg.min;
	return p->stop || p->nthreads > want;
}

/* Looks at a server's set a thread takes at most this often before it
 * arms it again, while a tree's requests keep coming (fsrv_pool_run). */
#define FSRV_POOL_ROUNDS 4

/* Forget server e, freed by its control function: nothing of its server
 * may be looked at again.  Disarmed, e is in no thread's hands but this
 * one's. */
static void
fsrv_pool_forget(struct fsrv_pool_srv *e)
{
	void (*done)(void *) = e->done;
	void *arg = e->arg;

	cb_ignore(epoll_ctl(e->p->epfd, EPOLL_CTL_DEL, e->epfd, NULL));
	close(e->epfd);
	pthread_mutex_lock(&e->p->mu);
	e->p->nservers--;
	pthread_mutex_unlock(&e->p->mu);
	free(e);
	if (done)
		done(arg);
}

/* Serve server e, which its set says has something: every tree with a
 * request (fsrv_serve: it reads on while requests are queued, at most
 * FSRV_LOOK_MAX), or, first, its control descriptor (a stop is seen
 * before more requests are served).  A tree that was still busy at its last
 * request (its look-ahead counts say requests were queued) has the set
 * looked at again at once, by this thread, rather than armed for another
 * to be woken for what this one would find (up to FSRV_POOL_ROUNDS).
 * Then the set is armed again, unless the server is gone. */
static void
fsrv_pool_run(struct fsrv_pool_srv *e)
{
	struct epoll_event ev[FSRV_MAX_TREES + 1];
	struct fsrv *s = e->s;

	for (int round = 0; round < FSRV_POOL_ROUNDS; round++) {
		int n = epoll_wait(e->epfd, ev, FSRV_MAX_TREES + 1, 0);
		bool ctl = false, busy = false;

		for (int i = 0; i < n; i++)
			ctl |= ev[i].data.u32 == FSRV_POOL_CTL;
		if (ctl) {
			if (e->ctl(e->arg)) {
				fsrv_pool_forget(e);
				return;
			}
			break;
		}
		for (int i = 0; i < n; i++) {
			uint32_t k = ev[i].data.u32;

			if (k >= s->ntrees || s->trees[k]->closed)
				continue;
			/* CB_ENOMEM (no request buffer) is tried again: the
			 * device stays readable. */
			busy |= fsrv_serve(s, k) == 0 && s->trees[k]->early >= 0;
			if (s->trees[k]->closed)
				fsrv_pool_unwatch(s, k);
		}
		if (!busy)
			break;
	}
	/* Armed again; what is pending already makes it ready at once.  A
	 * modification of a present entry allocates nothing. */
	cb_ignore(epoll_ctl(e->p->epfd, EPOLL_CTL_MOD, e->epfd,
	    &(struct epoll_event){ .events = EPOLLIN | EPOLLONESHOT, .data.ptr = e }));
}

static void *fsrv_pool_main(void *arg);

/* One more thread (counted already, idle); every signal blocked in it from
 * its first instruction (it must never be the thread a process signal of
 * the caller's is delivered to), and the starter's own identity, which it
 * inherits.  A failure uncounts it. */
static void
fsrv_pool_spawn(struct fsrv_pool *p)
{
	pthread_attr_t a;
	pthread_t th;
	sigset_t all, old;
	int e;

	fsrv_identity_own();
	if ((e = pthread_attr_init(&a)) == 0) {
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		e = pthread_create(&th, &a, fsrv_pool_main, p);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&a);
	}
	if (e != 0) {
		pthread_mutex_lock(&p->mu);
		p->nthreads--;
		p->nidle--;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->mu);
	}
}

static void *
fsrv_pool_main(void *arg)
{
	struct fsrv_pool *p = arg;
	struct fsrv_work w = { 0 };

	/* The modes of what it creates are the agent's (fsrv_thread_umask).
	 * Should the unshare fail, the process's umask stays, which can only
	 * narrow them. */
	cb_ignore(fsrv_thread_umask());
	fsrv_tw = &w;
	for (;;) {
		struct epoll_event ev;
		int n = epoll_wait(p->epfd, &ev, 1, (int)p->cfg.idle_ms);
		bool more = false;

		pthread_mutex_lock(&p->mu);
		if ((n <= 0 || ev.data.ptr == NULL) && fsrv_pool_surplus(p))
			break;
		if (n <= 0 || ev.data.ptr == NULL) {
			pthread_mutex_unlock(&p->mu);
			continue;
		}
		/* None left waiting: one more, so no server waits for this one. */
		if (--p->nidle == 0 && p->nthreads < p->cfg.max) {
			p->nthreads++;
			p->nidle++;
			more = true;
		}
		if (p->nthreads - p->nidle > p->peak)
			p->peak = p->nthreads - p->nidle;
		pthread_mutex_unlock(&p->mu);
		if (more)
			fsrv_pool_spawn(p);
		fsrv_pool_run(ev.data.ptr);
		pthread_mutex_lock(&p->mu);
		p->nidle++;
		/* Woken in turn, a thread too many would never time out. */
		if (fsrv_pool_surplus(p))
			break;
		pthread_mutex_unlock(&p->mu);
	}
	fsrv_work_fini(&w);
	fsrv_tw = NULL;
	fsrv_pool_leave(p);	/* p->mu held; p may be gone after it */
	return NULL;
}

int
fsrv_pool_new(const struct fsrv_pool_cfg *cfg, struct fsrv_pool **out)
{
	struct fsrv_pool *p = NULL;
	int e = CB_EINVAL;

	*out = NULL;
	if (cfg == NULL || cfg->min == 0 || cfg->max < cfg->min || cfg->idle_ms == 0)
		return e;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return CB_ENOMEM;
	p->cfg = *cfg;
	p->stop_fd = -1;
	e = CB_EIO;
	if ((p->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		goto fail;
	e = CB_EINTERNAL;
	if (pthread_mutex_init(&p->mu, NULL) != 0)
		goto fail;
	if (pthread_cond_init(&p->cond, NULL) != 0) {
		pthread_mutex_destroy(&p->mu);
		goto fail;
	}
	p->win_at = cb_mono_ns();
	p->nthreads = p->nidle = 1;
	fsrv_pool_spawn(p);
	if (p->nthreads == 0) {
		pthread_cond_destroy(&p->cond);
		pthread_mutex_destroy(&p->mu);
		goto fail;
	}
	*out = p;
	return 0;
fail:
	if (p->epfd >= 0)
		close(p->epfd);
	free(p);
	return e;
}

int
fsrv_pool_watch(struct fsrv *s, unsigned tree, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tree };

	return epoll_ctl(s->pent->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : CB_EIO;
}

void
fsrv_pool_unwatch(struct fsrv *s, unsigned tree)
{
	cb_ignore(epoll_ctl(s->pent->epfd, EPOLL_CTL_DEL, s->trees[tree]->dev_fd, NULL));
}

int
fsrv_pool_add(struct fsrv_pool *p, struct fsrv *s, int ctl_fd, fsrv_ctl_fn ctl,
	      void (*done)(void *arg), void *arg)
{
	struct fsrv_pool_srv *e;
	int r = CB_EIO;

	if ((e = calloc(1, sizeof(*e))) == NULL)
		return CB_ENOMEM;
	*e = (struct fsrv_pool_srv){ .p = p, .s = s, .ctl = ctl, .done = done, .arg = arg };
	if ((e->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		goto fail;
	s->pent = e;
	for (unsigned i = 0; i < s->ntrees; i++)
		if (!s->trees[i]->closed && fsrv_pool_watch(s, i, s->trees[i]->dev_fd) != 0)
			goto fail;
	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, ctl_fd,
	    &(struct epoll_event){ .events = EPOLLIN, .data.u32 = FSRV_POOL_CTL }) != 0)
		goto fail;
	pthread_mutex_lock(&p->mu);
	p->nservers++;
	pthread_mutex_unlock(&p->mu);
	/* From here a pool thread may serve s. */
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, e->epfd,
	    &(struct epoll_event){ .events = EPOLLIN | EPOLLONESHOT, .data.ptr = e }) != 0) {
		pthread_mutex_lock(&p->mu);
		p->nservers--;
		pthread_mutex_unlock(&p->mu);
		goto fail;
	}
	return 0;
fail:
	s->pent = NULL;
	if (e->epfd >= 0)
		close(e->epfd);
	free(e);
	return r;
}

unsigned
fsrv_pool_threads(struct fsrv_pool *p)
{
	unsigned n;

	pthread_mutex_lock(&p->mu);
	n = p->nthreads;
	pthread_mutex_unlock(&p->mu);
	return n;
}

int
fsrv_pool_free(struct fsrv_pool *p, unsigned ms)
{
	struct timespec until;
	bool ended;
	int e = 0;

	if (p == NULL)
		return 0;
	pthread_mutex_lock(&p->mu);
	if (p->nservers > 0) {
		pthread_mutex_unlock(&p->mu);
		return CB_EBUSY;
	}
	/* Readable, and left so: every thread waiting sees it (made only now,
	 * so that a pool holds one descriptor, its set, while it serves). */
	if (p->stop_fd < 0 && ((p->stop_fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->stop_fd,
	    &(struct epoll_event){ .events = EPOLLIN, .data.ptr = NULL }) != 0)) {
		if (p->stop_fd >= 0)
			close(p->stop_fd);
		p->stop_fd = -1;
		pthread_mutex_unlock(&p->mu);
		return CB_EIO;
	}
	p->stop = true;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (ms > 0 && p->nthreads > 0 && e == 0)
		e = pthread_cond_timedwait(&p->cond, &p->mu, &until);
	/* Not ended yet: the last thread to end frees it. */
	ended = p->nthreads == 0;
	p->detached = !ended;
	pthread_mutex_unlock(&p->mu);
	if (!ended)
		return CB_ETIMEDOUT;
	fsrv_pool_destroy(p);
	return 0;
}
