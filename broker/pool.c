/*
 * pool.c - the warm pool: proc.exec sandboxes built before anyone asks for
 * one, so that a request only hands one its task (docs/sandbox.md, "The
 * warm pool").
 *
 * Trust domain: broker.  Why it is safe:
 *  - A pooled sandbox is an ordinary low-tier sandbox that stops before its
 *    agent exists: the stub has joined its cgroups, dropped the broker's
 *    credentials, made every namespace, built and pivoted into its root;
 *    no agent code has run in it and it holds no broker channel and no
 *    token.  It gets one task (sbx_pool_handover) and is never pooled
 *    again: the sandbox ends with that task like a fresh one.
 *  - The request is checked exactly as for a fresh sandbox before it comes
 *    here (ops_proc.c: the token, the budget, the commit gate); the pool
 *    only replaces the building.  What differs per request is applied at
 *    hand-over by the stub (id, argv, environment, working directory,
 *    rlimits, wall clock, and the agent's Landlock and seccomp layers,
 *    which are made for its binary); a request that needs anything a
 *    pooled sandbox was not built with (other binds, other memory, process
 *    or /tmp limits) is not served from the pool, nor is one whose bind
 *    paths no longer name the objects the sandbox was built with.
 *  - Building runs on a thread of its own, never on the loop: spawning the
 *    stub blocks until its exec.  That thread lives as long as the pool,
 *    since a stub dies with the thread that spawned it (PR_SET_PDEATHSIG).
 *    It touches only the entry it was given; everything else happens on
 *    the loop.
 */
#include "broker/core.h"
#include "broker/budget.h"
#include "broker/pool.h"
#include "broker/reap.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define BRK_POOL_ID	"pooled"	/* the id until the hand-over gives its own */
#define BRK_POOL_BINDS	8		/* binds of a pooled sandbox (proc.exec's most) */
#define BRK_POOL_SHAPES	4		/* shapes kept at once, pool_size each */
#define BRK_POOL_BACKOFF_NS (1000ULL * 1000 * 1000)	/* no build for 1 s after one failed */
/* A take asks for its replacement this much later, so that building it does
 * not compete for the CPU with the task just handed over (a short tool is
 * done by then; on a 2-core machine the two slowed each other down). */
#define BRK_POOL_REFILL_MS 25

struct brk_pooled {
	struct brk_pooled *next;
	struct brk_pool *pl;
	struct sbx_limits lim;		/* what it is built with (its shape): limits */
	size_t nb;			/* ... and read-only binds, each at its own path */
	char *src[BRK_POOL_BINDS];
	struct sbx_bind binds[BRK_POOL_BINDS];
	struct sbx_src_id ids[BRK_POOL_BINDS];	/* the objects the build opened */
	struct sbx_proc p;
	struct event *ev_status, *ev_exit;
	int rc;				/* sbx_spawn_start (the thread) */
	int err;			/* ... and errno with it */
	bool ready;			/* built: waits for its hand-over */
	bool dying;			/* killed: ev_exit reaps it */
};

struct brk_pool {
	struct brk *b;
	pthread_t th;
	bool th_up;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct brk_pooled *todo;	/* mu: to build */
	struct brk_pooled *done;	/* mu: spawned, not yet seen by the loop */
	bool stop;			/* mu: the loop asks the thread to park */
	bool parked;			/* mu: ... it has (spawns nothing more) */
	bool release;			/* mu: ... and may exit (its stubs are gone) */
	int wake[2];			/* thread -> loop */
	struct event *ev_wake;
	struct brk_pooled *live;	/* loop: building, ready or dying */
	size_t nqueued;			/* loop: handed to the thread, not yet back */
	/* loop: the shapes whose build failed last, each built no more until
	 * its time (mono ns).  Per shape: a pause for all let one agent that
	 * makes its own builds fail (a bind root renamed at once) stop every
	 * other sandbox's refills (red team, fourth pass). */
	struct brk_pooled *quiet[BRK_POOL_SHAPES];
	uint64_t quiet_until[BRK_POOL_SHAPES];
	size_t quiet_next;
	struct event *ev_refill;	/* loop: BRK_POOL_REFILL_MS after a take */
	struct brk_pooled *refill;	/* ... the shape it refills (never live) */
};

static void *
brk_pool_main(void *arg)
{
	struct brk_pool *pl = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&pl->mu);
	for (;;) {
		struct brk_pooled *e;
		struct sbx_config cfg;

		while (!pl->stop && !pl->todo)
			pthread_cond_wait(&pl->cv, &pl->mu);
		if (pl->stop) {
			/* Its exit would kill every stub it spawned at once
			 * (PR_SET_PDEATHSIG), racing the removal of their
			 * cgroups: it waits until they have ended in order. */
			pl->parked = true;
			pthread_cond_broadcast(&pl->cv);
			while (!pl->release)
				pthread_cond_wait(&pl->cv, &pl->mu);
			break;
		}
		e = pl->todo;
		pl->todo = e->next;
		pthread_mutex_unlock(&pl->mu);
		cfg = (struct sbx_config){ .tier = SBX_TIER_LOW, .id = BRK_POOL_ID,
			.broker_fd = -1, .limits = e->lim, .binds = e->binds, .nbinds = e->nb,
			.bind_ids = e->ids, .report_exit = true, .pool = true };
		e->rc = sbx_spawn_start(&cfg, &e->p);
		e->err = errno;
		pthread_mutex_lock(&pl->mu);
		e->next = pl->done;
		pl->done = e;
		/* One byte per entry at most: the pipe never fills (the loop
		 * drains it), and a missed byte only delays the next look. */
		(void)!write(pl->wake[1], "", 1);
	}
	pthread_mutex_unlock(&pl->mu);
	return NULL;
}

/* An entry that never reached the loop, or was reaped: its descriptors
 * and events go. */
static void
brk_pooled_free(struct brk_pooled *e)
{
	if (!e)
		return;
	if (e->ev_status)
		event_free(e->ev_status);
	if (e->ev_exit)
		event_free(e->ev_exit);
	sbx_proc_close(&e->p);
	for (size_t i = 0; i < e->nb; i++)
		free(e->src[i]);
	free(e);
}

/* A new entry of the shape (lim, the nb binds b), not yet built; NULL:
 * out of memory. */
static struct brk_pooled *
brk_pooled_new(struct brk_pool *pl, const struct sbx_limits *lim, const struct sbx_bind *b,
    size_t nb)
{
	struct brk_pooled *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->pl = pl;
	e->lim = *lim;
	e->p.pid = -1;
	e->p.pidfd = e->p.stdin_fd = e->p.stdout_fd = e->p.stderr_fd = -1;
	e->p.status_fd = e->p.notify_fd = -1;
	for (; e->nb < nb; e->nb++) {
		if (!(e->src[e->nb] = strdup(b[e->nb].src))) {
			brk_pooled_free(e);
			return NULL;
		}
		e->binds[e->nb] = (struct sbx_bind){ .src = e->src[e->nb], .dst = e->src[e->nb] };
	}
	return e;
}

/* Is e of the shape (lim, the nb binds b)? */
static bool
brk_pool_same(const struct brk_pooled *e, const struct sbx_limits *lim, const struct sbx_bind *b,
    size_t nb)
{
	if (e->lim.mem_bytes != lim->mem_bytes || e->lim.nproc != lim->nproc ||
	    e->lim.tmp_bytes != lim->tmp_bytes || e->nb != nb)
		return false;
	for (size_t i = 0; i < nb; i++)
		if (strcmp(e->src[i], b[i].src) != 0)
			return false;
	return true;
}

static void
brk_pool_unlink(struct brk_pool *pl, struct brk_pooled *e)
{
	for (struct brk_pooled **pp = &pl->live; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			return;
		}
}

/* End a sandbox of the pool; its exit event reaps and frees it.  Not by
 * SIGKILL: closing its status socket makes pid 1 end the sandbox and the
 * outer stub wait for it, so that its cgroups are empty when the outer
 * stub is reaped and removed (a killed outer stub leaves pid 1 to die
 * later, and its cgroup then cannot be removed). */
static void
brk_pool_kill(struct brk_pooled *e)
{
	e->dying = true;
	e->ready = false;
	if (e->ev_status)
		event_del(e->ev_status);
	if (e->p.status_fd < 0 || shutdown(e->p.status_fd, SHUT_RDWR) != 0)
		cb_ignore(sbx_kill(&e->p));
}

/* Wait (blocking, at most 2 s, then SIGKILL) for an ended entry's stub and
 * free the entry: the broker is going away (brk_pool_free, from brk_free
 * alone, once the loop no longer runs: there is nothing left to serve
 * while it waits). */
static void
brk_pool_reap(struct brk_pooled *e)
{
	struct pollfd pfd = { .fd = e->p.pidfd, .events = POLLIN };
	int ws;

	if (e->p.pid > 0) {
		/* No pidfd: a failed start, whose stub was killed already. */
		if (e->p.pidfd >= 0 && poll(&pfd, 1, 2000) != 1)
			cb_ignore(sbx_kill(&e->p));
		waitpid(e->p.pid, &ws, 0);
	}
	brk_pooled_free(e);
}

/* Is shape t paused after a failed build? */
static bool
brk_pool_quiet(const struct brk_pool *pl, const struct brk_pooled *t)
{
	uint64_t now = cb_mono_ns();

	for (size_t i = 0; i < BRK_POOL_SHAPES; i++)
		if (pl->quiet[i] && now < pl->quiet_until[i] &&
		    brk_pool_same(pl->quiet[i], &t->lim, t->binds, t->nb))
			return true;
	return false;
}

/* e's build failed (or it died waiting): its shape is built no more for
 * BRK_POOL_BACKOFF_NS (the oldest pause makes room), and it is audited. */
static void
brk_pool_failed(struct brk_pool *pl, const struct brk_pooled *e, int reason, const char *why)
{
	size_t i = pl->quiet_next;

	brk_pooled_free(pl->quiet[i]);
	/* out of memory: no pause, the next failure is audited again */
	if ((pl->quiet[i] = brk_pooled_new(pl, &e->lim, e->binds, e->nb))) {
		pl->quiet_until[i] = cb_mono_ns() + BRK_POOL_BACKOFF_NS;
		pl->quiet_next = (i + 1) % BRK_POOL_SHAPES;
	}
	brk_audit(pl->b, &(struct aud_rec){ .kind = AUD_ADMIN, .reason = reason,
	    .op = "sandbox.pool.failed", .actor = "broker", .detail = why });
}

/* Died (or was killed) before any hand-over. */
static void
brk_pool_exit(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_pooled *e = arg;
	int ws;

	(void)fd;
	(void)ev;
	if (waitpid(e->p.pid, &ws, WNOHANG) <= 0)
		return;
	if (!e->dying)
		brk_pool_failed(e->pl, e, CB_EINTERNAL, "a pooled sandbox exited before its hand-over");
	brk_pool_unlink(e->pl, e);
	brk_pooled_free(e);
}

/* Its "pooled" report: built, or why not. */
static void
brk_pool_status(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_pooled *e = arg;
	char why[512] = "";
	int r;

	(void)fd;
	(void)ev;
	r = sbx_pool_finish(&e->p, why, sizeof(why));
	if (r == CB_EBUSY)
		return;
	event_del(e->ev_status);
	if (r == 0) {
		e->ready = true;
		return;
	}
	brk_pool_failed(e->pl, e, r, why);
	brk_pool_kill(e);
}

/* A spawn came back from the thread: watch it until it is built. */
static void
brk_pool_spawned(struct brk_pool *pl, struct brk_pooled *e)
{
	struct event_base *base = pl->b->base;
	char why[300];

	if (e->rc != 0) {
		errno = e->err;
		sbx_start_refusal(e->rc, why, sizeof(why));
		brk_pool_failed(pl, e, e->rc, why);
		/* Its stub may have been spawned and killed: reaped off the
		 * loop's path (sbx_spawn_start never waits for it). */
		brk_reap_later(pl->b, &e->p);
		brk_pooled_free(e);
		return;
	}
	e->ev_status = event_new(base, e->p.status_fd, EV_READ | EV_PERSIST, brk_pool_status, e);
	e->ev_exit = event_new(base, e->p.pidfd, EV_READ | EV_PERSIST, brk_pool_exit, e);
	if (!e->ev_status || !e->ev_exit) {
		cb_ignore(sbx_kill(&e->p));
		brk_reap_later(pl->b, &e->p);
		brk_pooled_free(e);
		return;
	}
	event_add(e->ev_status, NULL);
	event_add(e->ev_exit, NULL);
	e->next = pl->live;
	pl->live = e;
}

static void
brk_pool_wake(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_pool *pl = arg;
	struct brk_pooled *e, *list;
	char buf[64];

	(void)ev;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&pl->mu);
	list = pl->done;
	pl->done = NULL;
	pthread_mutex_unlock(&pl->mu);
	while ((e = list)) {
		list = e->next;
		pl->nqueued--;
		brk_pool_spawned(pl, e);
	}
}

static void brk_pool_fill(struct brk_pool *pl, const struct brk_pooled *t, size_t want);

static void
brk_pool_refill(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_pool *pl = arg;

	(void)fd;
	(void)ev;
	if (pl->refill)
		brk_pool_fill(pl, pl->refill, (size_t)pol_pool_size(pl->b->pol));
	brk_pooled_free(pl->refill);
	pl->refill = NULL;
}

static int
brk_pool_new(struct brk *b)
{
	struct brk_pool *pl = calloc(1, sizeof(*pl));
	pthread_attr_t at;
	int r = CB_ENOMEM;

	if (!pl)
		return CB_ENOMEM;
	pl->b = b;
	pl->wake[0] = pl->wake[1] = -1;
	pthread_mutex_init(&pl->mu, NULL);
	pthread_cond_init(&pl->cv, NULL);
	b->pool = pl;
	if (pipe2(pl->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		r = CB_EIO;
		goto out;
	}
	if (!(pl->ev_wake = event_new(b->base, pl->wake[0], EV_READ | EV_PERSIST, brk_pool_wake, pl)) ||
	    !(pl->ev_refill = evtimer_new(b->base, brk_pool_refill, pl)))
		goto out;
	event_add(pl->ev_wake, NULL);
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	r = pthread_create(&pl->th, &at, brk_pool_main, pl) == 0 ? 0 : CB_EBUSY;
	pthread_attr_destroy(&at);
	pl->th_up = (r == 0);
out:
	if (r != 0)
		brk_pool_free(b);
	return r;
}

/* Can a pooled sandbox run cfg?  Only what the hand-over carries may
 * differ from how it was built. */
static bool
brk_pool_fits(const struct sbx_config *cfg)
{
	if (cfg->tier != SBX_TIER_LOW || cfg->nbinds > BRK_POOL_BINDS || cfg->nmounts != 0 ||
	    cfg->nexec_allow != 0 || cfg->broker_fd >= 0 || cfg->want_pty ||
	    cfg->mediate_connect || cfg->capcall_path || cfg->pylib_dir || cfg->hosts_dir ||
	    cfg->pool || cfg->argv == NULL || !cfg->report_exit)
		return false;
	/* proc.exec's binds: read-only, each at its own path, opened as us. */
	for (size_t i = 0; i < cfg->nbinds; i++)
		if (cfg->binds[i].writable || cfg->binds[i].as_caller ||
		    strcmp(cfg->binds[i].src, cfg->binds[i].dst) != 0)
			return false;
	return true;
}

/* Ask the thread for sandboxes of shape t until want of them are built or
 * being built.  The pool keeps BRK_POOL_SHAPES shapes' worth at most: past
 * that, the oldest ready sandbox of another shape makes room. */
static void
brk_pool_fill(struct brk_pool *pl, const struct brk_pooled *t, size_t want)
{
	size_t have = 0, total = pl->nqueued;

	if (!pl->th_up || brk_pool_quiet(pl, t))
		return;
	for (struct brk_pooled *e = pl->live; e; e = e->next) {
		if (e->dying)
			continue;
		total++;
		if (brk_pool_same(e, &t->lim, t->binds, t->nb))
			have++;
	}
	/* Those queued to the thread count as of this shape: at worst one
	 * take too many waits for the next refill. */
	have += pl->nqueued;
	while (have < want) {
		struct brk_pooled *e;

		if (total >= want * BRK_POOL_SHAPES) {
			struct brk_pooled *old = NULL;

			for (struct brk_pooled *o = pl->live; o; o = o->next)
				if (o->ready && !brk_pool_same(o, &t->lim, t->binds, t->nb))
					old = o;	/* the last: the oldest */
			if (!old)
				return;
			brk_pool_kill(old);
			total--;
		}
		if (!(e = brk_pooled_new(pl, &t->lim, t->binds, t->nb)))
			return;
		pthread_mutex_lock(&pl->mu);
		e->next = pl->todo;
		pl->todo = e;
		pthread_cond_signal(&pl->cv);
		pthread_mutex_unlock(&pl->mu);
		pl->nqueued++;
		have++;
		total++;
	}
}

/* Refill shape t (a template) now, or BRK_POOL_REFILL_MS after a take
 * (later: the timer keeps one shape; an earlier one pending is filled at
 * once). */
static void
brk_pool_want(struct brk_pool *pl, const struct sbx_config *cfg, bool later, size_t want)
{
	struct timeval tv = { 0, BRK_POOL_REFILL_MS * 1000 };
	struct brk_pooled *t = brk_pooled_new(pl, &cfg->limits, cfg->binds, cfg->nbinds);

	if (!t)
		return;
	if (!later) {
		brk_pool_fill(pl, t, want);
		brk_pooled_free(t);
		return;
	}
	if (pl->refill && !brk_pool_same(pl->refill, &t->lim, t->binds, t->nb))
		brk_pool_fill(pl, pl->refill, want);
	brk_pooled_free(pl->refill);
	pl->refill = t;
	if (!evtimer_pending(pl->ev_refill, NULL))
		evtimer_add(pl->ev_refill, &tv);
}

int
brk_pool_take(struct brk *b, const struct sbx_config *cfg, const struct sbx_src_id *ids,
    struct sbx_proc *out)
{
	size_t want = (size_t)pol_pool_size(b->pol);
	const struct pol_limits *low;
	struct brk_pool *pl;
	int r;

	if (want == 0) {
		/* Turned off by a policy reload: what is left goes. */
		for (struct brk_pooled *e = b->pool ? b->pool->live : NULL; e; e = e->next)
			if (!e->dying)
				brk_pool_kill(e);
		return CB_ENOENT;
	}
	/* Only the low tier's own limits are pooled: a child whose parent's
	 * budget is partly used gets less, rarely, and is built fresh. */
	low = pol_tier_limits(pol_tier_get(b->pol, POL_TIER_LOW));
	if (!brk_pool_fits(cfg) || cfg->limits.mem_bytes != low->memory ||
	    cfg->limits.nproc != low->processes || cfg->limits.tmp_bytes != low->tmp_size)
		return CB_ENOENT;
	if (!b->pool && brk_pool_new(b) != 0)
		return CB_ENOENT;
	pl = b->pool;
	for (struct brk_pooled **pp = &pl->live; *pp; pp = &(*pp)->next) {
		struct brk_pooled *e = *pp;

		if (!e->ready || !brk_pool_same(e, &cfg->limits, cfg->binds, cfg->nbinds))
			continue;
		/* A bind path that names another object than when the sandbox
		 * was built (renamed, replaced): the sandbox is stale. */
		if (cfg->nbinds && memcmp(e->ids, ids, cfg->nbinds * sizeof(*ids)) != 0) {
			brk_pool_kill(e);
			continue;
		}
		*pp = e->next;
		event_free(e->ev_status);
		event_free(e->ev_exit);
		e->ev_status = e->ev_exit = NULL;
		if ((r = sbx_pool_handover(&e->p, cfg)) != 0) {
			cb_ignore(sbx_kill(&e->p));
			brk_reap_later(b, &e->p);
			brk_pooled_free(e);
			brk_pool_want(pl, cfg, false, want);
			return r;
		}
		*out = e->p;
		e->p = (struct sbx_proc){ .pid = -1, .pidfd = -1, .stdin_fd = -1, .stdout_fd = -1,
			.stderr_fd = -1, .status_fd = -1, .notify_fd = -1 };
		brk_pooled_free(e);
		brk_pool_want(pl, cfg, true, want);
		return 0;
	}
	brk_pool_want(pl, cfg, false, want);
	return CB_ENOENT;
}

void
brk_pool_free(struct brk *b)
{
	struct brk_pool *pl = b ? b->pool : NULL;
	struct brk_pooled *todo, *done, *e;

	if (!pl)
		return;
	if (pl->th_up) {
		pthread_mutex_lock(&pl->mu);
		pl->stop = true;
		pthread_cond_broadcast(&pl->cv);
		while (!pl->parked)
			pthread_cond_wait(&pl->cv, &pl->mu);
		pthread_mutex_unlock(&pl->mu);
	}
	/* The thread spawns nothing more: end every stub in order, then let
	 * it go. */
	todo = pl->todo;
	done = pl->done;
	pl->todo = pl->done = NULL;
	for (e = done; e; e = e->next)
		brk_pool_kill(e);
	for (e = pl->live; e; e = e->next)
		if (!e->dying)
			brk_pool_kill(e);
	while ((e = done)) {
		done = e->next;
		brk_pool_reap(e);
	}
	while ((e = pl->live)) {
		pl->live = e->next;
		brk_pool_reap(e);
	}
	while ((e = todo)) {
		todo = e->next;
		brk_pooled_free(e);
	}
	if (pl->th_up) {
		pthread_mutex_lock(&pl->mu);
		pl->release = true;
		pthread_cond_broadcast(&pl->cv);
		pthread_mutex_unlock(&pl->mu);
		pthread_join(pl->th, NULL);
	}
	if (pl->ev_wake)
		event_free(pl->ev_wake);
	if (pl->ev_refill)
		event_free(pl->ev_refill);
	brk_pooled_free(pl->refill);
	for (size_t i = 0; i < BRK_POOL_SHAPES; i++)
		brk_pooled_free(pl->quiet[i]);
	if (pl->wake[0] >= 0)
		close(pl->wake[0]);
	if (pl->wake[1] >= 0)
		close(pl->wake[1]);
	pthread_cond_destroy(&pl->cv);
	pthread_mutex_destroy(&pl->mu);
	free(pl);
	b->pool = NULL;
}
