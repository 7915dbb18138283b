/*
 * server.c - fsrv's connections (one /dev/fuse a served tree, read by
 * the caller's loop), and the invalidation of the kernel's caches after a
 * revocation.
 *
 * Trust domain: broker.  A request is read here and decoded and answered
 * by proto.c (which trusts none of it), so the caller's loop decides when
 * the server runs and one tree's requests never block another's.
 *
 * Invalidations are written by a helper thread.  A FUSE_NOTIFY_INVAL_ENTRY
 * takes the parent directory's lock in the kernel; if an agent's mkdir in
 * that directory is waiting for our answer, it holds that lock, and a
 * serving thread that wrote the notification itself would wait for itself
 * for ever.  The helper waits instead, while the serving thread goes on
 * answering.
 */
#include "fsrv/srv_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void *
fsrv_notifier(void *arg)
{
	struct fsrv *s = arg;
	struct fsrv_inval *q;
	size_t n;
	bool pages;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (s->nq == 0 && !s->stop)
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->nq == 0)
			break;
		q = s->q;
		n = s->nq;
		s->q = NULL;
		s->nq = s->capq = 0;
		s->busy = true;
		pages = false;
		pthread_mutex_unlock(&s->lock);
		for (size_t i = 0; i < n; i++) {
			struct fsrv_tree *t = s->trees[q[i].tree];

			/* ENOENT: the kernel no longer holds it; nothing to do. */
			if (!t->closed) {
				if (q[i].name != NULL)
					cb_ignore(fsrv_notify_inval_entry(t, q[i].id,
						q[i].name));
				else
					/* Attributes and every page (offset 0, length
					 * 0: all), so a revoked file's cached data
					 * cannot be read without a check: with
					 * cache_data the file's pages, and in either
					 * mode those a MAP_PRIVATE mapping faulted in
					 * (direct I/O still maps through the page
					 * cache); mapped pages are unmapped, and the
					 * next access faults into the check. */
					cb_ignore(fsrv_notify_inval_inode(t, q[i].id,
						0, 0));
			}
			free(q[i].name);
			if (q[i].data) {
				/* The pages are gone: a revocation waiting in
				 * fsrv_invalidate_settle may be acknowledged. */
				pthread_mutex_lock(&s->lock);
				s->data_done++;
				pthread_cond_broadcast(&s->cond);
				pthread_mutex_unlock(&s->lock);
				pages = true;
			}
		}
		free(q);
		/* Once a batch, not once a page: a revocation of 5,000 cached
		 * files is one wake-up of whoever waits without blocking. */
		if (pages && s->cfg.on_pages != NULL)
			s->cfg.on_pages(s->cfg.authz_arg);
		pthread_mutex_lock(&s->lock);
		s->busy = false;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int
fsrv_new(const struct fsrv_cfg *cfg, struct fsrv **out)
{
	struct fsrv *s = NULL;
	int e = CB_EINVAL;

	*out = NULL;
	if (cfg == NULL || cfg->authz == NULL || cfg->entry_timeout < 0 || cfg->attr_timeout < 0)
		goto out;
	e = CB_ENOMEM;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		goto out;
	s->cfg = *cfg;
	s->pipe[0] = s->pipe[1] = -1;
	s->max_nodes = cfg->max_nodes ? cfg->max_nodes : FSRV_MAX_NODES_DEFAULT;
	if (s->cfg.max_handles == 0)
		s->cfg.max_handles = FSRV_MAX_HANDLES_DEFAULT;
	if (s->cfg.max_handles_all == 0)
		s->cfg.max_handles_all = s->cfg.max_handles;
	e = CB_EINTERNAL;
	if (pthread_mutex_init(&s->lock, NULL) != 0)
		goto out;
	if (pthread_cond_init(&s->cond, NULL) != 0) {
		pthread_mutex_destroy(&s->lock);
		goto out;
	}
	/* The notifier is started by the first invalidation (fsrv_queue): an
	 * idle sandbox's server costs no thread of its own for it. */
	s->started = true;
	fsrv_handles_server(1);
	*out = s;
	s = NULL;
	e = 0;
out:
	free(s);
	return e;
}

/* t's node table, in the server's one bound of names. */
static int
fsrv_tree_nodes(struct fsrv *s, struct fsrv_tree *t)
{
	if (fsrv_nodes_init(&t->nodes, s->max_nodes) != 0)
		return CB_ENOMEM;
	/* One bound for the server: a sandbox's trees share it. */
	t->nodes.pool = &s->nnodes;
	t->nodes.pool_max = t->nodes.max;
	return 0;
}

/* A tree on dev_fd rooted at root_fd, or a slot (root_fd -1). */
static int
fsrv_tree_new(struct fsrv *s, int root_fd, int dev_fd, unsigned *tree)
{
	struct fsrv_tree *t = NULL;
	struct stat st;
	int e = CB_EINVAL, dfd = -1, fl;

	/* Never a kernel file system (fsrv_open_at trusts the root's). */
	if (root_fd >= 0 && (fstat(root_fd, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    cb_fd_kernfs(root_fd)))
		goto out;
	e = CB_EBUSY;
	if (s->ntrees >= FSRV_MAX_TREES)
		goto out;
	e = CB_ENOMEM;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		goto out;
	t->root_fd = t->slot_root = t->dev_fd = -1;
	t->slot = root_fd < 0;
	/* A slot's table is made with its root (fsrv_slot_take): most slots
	 * are never filled, and an empty table serves no request. */
	if (!t->slot && fsrv_tree_nodes(s, t) != 0)
		goto out;
	e = CB_EIO;
	if ((root_fd >= 0 && (t->root_fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3)) < 0) ||
	    (dfd = fcntl(dev_fd, F_DUPFD_CLOEXEC, 3)) < 0)
		goto out;
	/* Non-blocking: fsrv_serve reads on without poll() while requests
	 * are queued, and a read that finds none must return (EAGAIN).  The
	 * flag is the open file's, shared with the caller's fd; nothing else
	 * reads this device. */
	if ((fl = fcntl(dfd, F_GETFL)) < 0 ||
	    (!(fl & O_NONBLOCK) && fcntl(dfd, F_SETFL, fl | O_NONBLOCK) != 0))
		goto out;
	t->root_uid = root_fd >= 0 ? st.st_uid : 0;
	t->root_gid = root_fd >= 0 ? st.st_gid : 0;
	t->root_dev = root_fd >= 0 ? st.st_dev : 0;
	t->srv = s;
	t->idx = s->ntrees;
	/* In a pool, the tree is watched before it can be seen (the thread
	 * adding it is the one serving s). */
	if (s->pent != NULL && fsrv_pool_watch(s, t->idx, dfd) != 0)
		goto out;
	t->dev_fd = dfd;
	dfd = -1;
	/* Under the lock: fsrv_invalidate_*() may run on another thread
	 * while a tree is added to a running server. */
	pthread_mutex_lock(&s->lock);
	s->trees[s->ntrees++] = t;
	pthread_mutex_unlock(&s->lock);
	*tree = t->idx;
	t = NULL;
	e = 0;
out:
	if (dfd >= 0)
		close(dfd);
	if (t != NULL) {
		if (t->dev_fd >= 0)
			close(t->dev_fd);
		if (t->root_fd >= 0)
			close(t->root_fd);
		fsrv_nodes_fini(&t->nodes);
		free(t);
	}
	return e;
}

int
fsrv_add_tree(struct fsrv *s, int root_fd, int dev_fd, unsigned *tree)
{
	if (root_fd < 0)
		return CB_EINVAL;
	return fsrv_tree_new(s, root_fd, dev_fd, tree);
}

int
fsrv_add_slot(struct fsrv *s, int dev_fd, unsigned *tree)
{
	return fsrv_tree_new(s, -1, dev_fd, tree);
}

/* t acts as uid, gid from now on (fsrv_tree_owner).  Any thread: the
 * identity is taken per request by the thread that answers it. */
static int
fsrv_owner_set(struct fsrv_tree *t, uid_t uid, gid_t gid)
{
	gid_t groups[FSRV_GROUPS_MAX];

	if (uid == (uid_t)-1 || gid == (gid_t)-1)
		return CB_EINVAL;
	if (geteuid() != 0 && (uid != geteuid() || gid != getegid()))
		return CB_EPERM;
	/* The process's groups are what a serving thread gets back
	 * (fsrv_identity records its own at its first change). */
	if (getgroups(FSRV_GROUPS_MAX, groups) < 0)
		return CB_EINVAL;	/* more groups than we restore */
	t->uid = uid;
	t->gid = gid;
	t->as_owner = true;
	return 0;
}

int
fsrv_tree_owner(struct fsrv *s, unsigned tree, uid_t uid, gid_t gid)
{
	if (tree >= s->ntrees)
		return CB_EINVAL;
	return fsrv_owner_set(s->trees[tree], uid, gid);
}

int
fsrv_slot_fill(struct fsrv *s, unsigned tree, int root_fd, bool owner, uid_t uid, gid_t gid)
{
	struct fsrv_tree *t;
	struct stat st;
	int e = CB_EINVAL, fd;

	if (fstat(root_fd, &st) != 0 || !S_ISDIR(st.st_mode) || cb_fd_kernfs(root_fd))
		return CB_EINVAL;
	if ((fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return CB_EIO;
	pthread_mutex_lock(&s->lock);
	t = tree < s->ntrees ? s->trees[tree] : NULL;
	if (t != NULL && t->slot && t->slot_root < 0 && t->root_fd < 0) {
		t->slot_root = fd;
		t->slot_owner = owner;
		t->slot_uid = uid;
		t->slot_gid = gid;
		fd = -1;
		e = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (fd >= 0)
		close(fd);
	return e;
}

/* Serving thread, before a request of slot t: take the root that
 * fsrv_slot_fill gave, if any.  An owner that cannot be taken leaves the
 * slot without a root (every request refused) rather than served with
 * the thread's own identity. */
static void
fsrv_slot_take(struct fsrv *s, struct fsrv_tree *t)
{
	struct stat st;
	int fd, e;
	bool owner;
	uid_t uid;
	gid_t gid;

	pthread_mutex_lock(&s->lock);
	fd = t->slot_root;
	t->slot_root = -1;
	owner = t->slot_owner;
	uid = t->slot_uid;
	gid = t->slot_gid;
	pthread_mutex_unlock(&s->lock);
	if (fd < 0)
		return;
	if ((owner && fsrv_owner_set(t, uid, gid) != 0) || fstat(fd, &st) != 0) {
		close(fd);
		return;
	}
	pthread_mutex_lock(&s->lock);
	e = fsrv_tree_nodes(s, t);
	pthread_mutex_unlock(&s->lock);
	if (e != 0) {
		close(fd);
		return;
	}
	t->root_uid = st.st_uid;
	t->root_gid = st.st_gid;
	t->root_dev = st.st_dev;
	t->root_fd = fd;
}

/*
 * The file-system identity of the thread answering a request.  fsuid,
 * fsgid and the supplementary groups are a thread's own in Linux, so this
 * is what the thread has now, not what a server has: a pool thread
 * answers one server's request as its tree's owner, then another's as
 * that one's (or as itself), and each is decided here from what this
 * thread holds, never from what the last server it served believed.
 */
static _Thread_local struct {
	bool as;			/* acting as uid, gid (not as itself) */
	uid_t uid;
	gid_t gid;
	uid_t own_uid;			/* its own, to take back */
	gid_t own_gid;
	gid_t groups[FSRV_GROUPS_MAX];
	int ngroups;
} fsrv_me;

/* Take back the thread's own identity, if it acts as an owner. */
void
fsrv_identity_own(void)
{
	if (!fsrv_me.as)
		return;
	setfsuid(fsrv_me.own_uid);
	setfsgid(fsrv_me.own_gid);
	if (fsrv_me.ngroups > 0)
		cb_ignore((int)syscall(SYS_setgroups, (size_t)fsrv_me.ngroups, fsrv_me.groups));
	fsrv_me.as = false;
}

/*
 * Make tree t's owner (or, with t NULL, the thread itself) this thread's
 * file-system identity, on this thread only (the raw system call for the
 * groups: glibc's setgroups would change every thread of the broker).
 * Changing the fsuid from 0 also drops the file-system capabilities
 * (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID...) from the thread's
 * effective set; setting it back restores them.  Its own groups are
 * recorded at its first change (fsrv_owner_set refused more than it can
 * hold).
 */
static void
fsrv_identity(const struct fsrv_tree *t)
{
	int n;

	if (t == NULL) {
		fsrv_identity_own();
		return;
	}
	if (fsrv_me.as && fsrv_me.uid == t->uid && fsrv_me.gid == t->gid)
		return;
	/* Each change costs several microseconds here (a new set of
	 * credentials each time): hence keep_identity. */
	fsrv_identity_own();
	n = getgroups(FSRV_GROUPS_MAX, fsrv_me.groups);
	fsrv_me.ngroups = n > 0 ? n : 0;
	if (fsrv_me.ngroups > 0)
		cb_ignore((int)syscall(SYS_setgroups, 0, NULL));
	fsrv_me.own_gid = (gid_t)setfsgid(t->gid);
	fsrv_me.own_uid = (uid_t)setfsuid(t->uid);
	fsrv_me.uid = t->uid;
	fsrv_me.gid = t->gid;
	fsrv_me.as = true;
}

/*
 * Near the bound (7/8) with names asked for and not yet forgotten, give the
 * notifier up to FSRV_RELEASE_WAIT_MS to write what is queued before the
 * next request is read.  An invalidation takes its directory's lock, which
 * every lookup in that directory holds while we answer it: an agent
 * walking a directory as fast as it can would otherwise keep the notifier
 * out, and fill the table with names the kernel has not been asked to
 * forget yet.  Between requests the lock is free (unless another of the
 * sandbox's threads has a lookup queued: then the wait ends at its limit),
 * and the wait slows only this server's walk.
 */
#define FSRV_RELEASE_WAIT_MS 10

static void
fsrv_release_wait(struct fsrv *s)
{
	uint32_t max = s->max_nodes;
	struct timespec until;

	pthread_mutex_lock(&s->lock);
	if (s->nnodes >= max - max / 8 && (s->nq > 0 || s->busy)) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += FSRV_RELEASE_WAIT_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while ((s->nq > 0 || s->busy) &&
		       pthread_cond_timedwait(&s->cond, &s->lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&s->lock);
}

int
fsrv_fd(const struct fsrv *s, unsigned tree)
{
	if (tree >= s->ntrees || s->trees[tree]->closed)
		return -1;
	return s->trees[tree]->dev_fd;
}

int
fsrv_process(struct fsrv *s, unsigned tree)
{
	struct fsrv_work *w = fsrv_w(s);
	struct fsrv_tree *t;
	ssize_t n;

	if (tree >= s->ntrees)
		return CB_EINVAL;
	t = s->trees[tree];
	if (t->closed)
		return CB_ECLOSED;
	/* One buffer for every tree (one thread serves them all), or for
	 * every server a pool thread serves. */
	if (w->rbuf == NULL && (w->rbuf = malloc(FSRV_RBUF_LEN)) == NULL)
		return CB_ENOMEM;
	n = read(t->dev_fd, w->rbuf, FSRV_RBUF_LEN);
	if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOENT))
		return CB_ETIMEDOUT;	/* nothing (or a request interrupted before it was read) */
	if (n == 0 || (n < 0 && errno == ENODEV)) {
		t->closed = true;	/* unmounted or aborted */
		return CB_ECLOSED;
	}
	if (n < 0) {
		/* Any other failure of the device (ECONNABORTED: aborted
		 * through fusectl) ends this connection only: the server's
		 * other trees are served on. */
		t->closed = true;
		return CB_ECLOSED;
	}
	if (t->root_fd < 0 && t->slot)
		fsrv_slot_take(s, t);
	fsrv_identity(t->as_owner ? t : NULL);
	/* The checks of this request may lower it (struct fsrv_check.ttl). */
	t->ttl = s->cfg.attr_timeout > s->cfg.entry_timeout ? s->cfg.attr_timeout :
		s->cfg.entry_timeout;
	fsrv_dispatch(t, w->rbuf, (size_t)n);
	if (!s->cfg.keep_identity)
		fsrv_identity(NULL);
	if (s->cfg.release_names)
		fsrv_release_wait(s);
	return 0;
}

/*
 * Serve tree i, which poll() said has a request, and then read on while
 * requests are already queued.  On one CPU the serving thread is rarely
 * put to sleep by its poll(): the reply to an open wakes the agent, which
 * takes the CPU, closes the file (an asynchronous release) and opens the
 * next one before the thread runs again; by then both requests are
 * queued, and poll() only says so, twice an open.  The device is
 * non-blocking (fsrv_tree_new), so a read that finds nothing costs one
 * EAGAIN; looking on is done only while it has lately paid (+1 for a
 * request found, -1 for none, within +-FSRV_LOOK_EARLY; one found brings
 * a negative count back to 0), and otherwise every FSRV_LOOK_PROBE-th
 * time, as the client looks for its replies (client/conn.c).  At most
 * FSRV_LOOK_MAX requests are served so before poll() again, so that the
 * stop pipe and the other trees are seen while one agent keeps this one
 * busy.  Nothing is skipped: each request read is served as poll() would
 * have had it served (fsrv_process).
 */
#define FSRV_LOOK_EARLY 4
#define FSRV_LOOK_PROBE 16
#define FSRV_LOOK_MAX 32

int
fsrv_serve(struct fsrv *s, unsigned i)
{
	struct fsrv_tree *t = s->trees[i];
	int r = fsrv_process(s, i);

	for (unsigned k = 1; r == 0 && k < FSRV_LOOK_MAX; k++) {
		if (t->early < 0 && ++t->probe % FSRV_LOOK_PROBE != 0)
			break;
		r = fsrv_process(s, i);
		if (r == 0)
			t->early = t->early < 0 ? 0 : t->early < FSRV_LOOK_EARLY ? t->early + 1 :
				FSRV_LOOK_EARLY;
		else if (r == CB_ETIMEDOUT && t->early > -FSRV_LOOK_EARLY)
			t->early--;
	}
	return r;
}

int
fsrv_thread_umask(void)
{
	if (unshare(CLONE_FS) != 0)
		return CB_EINTERNAL;
	umask(0);
	return 0;
}

/* Start the notifier if it is not running; called with s->lock held
 * (it waits for the lock before it looks at the queue).  Every signal is
 * blocked in it from its first instruction: it must never be the thread a
 * process signal of the broker's is delivered to.  Started by the serving
 * thread, it may inherit a tree owner's file-system identity: it only
 * writes to the trees' open /dev/fuse descriptors, where none is asked.
 * False if it could not be started. */
static bool
fsrv_notifier_start(struct fsrv *s)
{
	sigset_t all, old;
	int e;

	if (s->notifying)
		return true;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&s->notifier, NULL, fsrv_notifier, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	s->notifying = e == 0;
	return s->notifying;
}

/* Queue one invalidation; called with s->lock held.  A failed allocation
 * (or a notifier that cannot be started) drops it: a name then lives at
 * most its timeout; dropped pages are counted (data_lost), so
 * fsrv_invalidate_settle can say so. */
static void
fsrv_queue(struct fsrv *s, unsigned tree, uint64_t id, const char *name, bool data)
{
	struct fsrv_inval *q = s->q;

	if (!fsrv_notifier_start(s))
		goto lost;

	if (s->nq == s->capq) {
		size_t nc = s->capq ? s->capq * 2 : 64;

		if ((q = realloc(s->q, nc * sizeof(*q))) == NULL)
			goto lost;
		s->q = q;
		s->capq = nc;
	}
	q[s->nq].tree = tree;
	q[s->nq].id = id;
	q[s->nq].name = NULL;
	q[s->nq].data = data;
	if (name != NULL && (q[s->nq].name = strdup(name)) == NULL)
		goto lost;
	s->nq++;
	if (data)
		s->data_queued++;
	return;
lost:
	if (data)
		s->data_lost = true;
}

/* Queue the invalidation of every node of tree t whose path is within
 * prefix (NULL: all).  Called with s->lock held.  Paged nodes' inodes go
 * first, so a revocation waits for their pages only (fsrv_invalidate_
 * settle), not for every name the kernel holds. */
static void
fsrv_queue_tree(struct fsrv *s, struct fsrv_tree *t, const char *prefix)
{
	char path[FSRV_PATH_MAX];

	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < t->nodes.nids; i++) {
			const struct fsrv_node *n = t->nodes.byid[i];

			if (n == NULL || (pass == 0 && !n->paged))
				continue;
			if (prefix != NULL && (fsrv_node_path(n, path, sizeof(path)) != 0 ||
					       !fsrv_path_within(path, prefix)))
				continue;
			if (pass == 0) {
				fsrv_queue(s, t->idx, n->id, NULL, true);
				continue;
			}
			if (n->parent != NULL && n->linked)
				fsrv_queue(s, t->idx, n->parent->id, n->name, false);
			if (!n->paged)
				fsrv_queue(s, t->idx, n->id, NULL, false);
		}
}

/* Queue the forgetting of up to want of tree t's least recently looked-up
 * names (an entry invalidation each: the kernel drops the name if nothing
 * uses it, then sends FORGET, and the table frees the node).  Called with
 * s->lock held.  Out of memory: nothing now (the names live their timeout
 * in the kernel's cache, and the next release tries again). */
static void
fsrv_release_tree(struct fsrv *s, struct fsrv_tree *t, size_t want)
{
	struct fsrv_node **v = calloc(want, sizeof(*v));
	size_t n;

	if (v == NULL)
		return;
	n = fsrv_nodes_lru(&t->nodes, want, v);
	for (size_t i = 0; i < n; i++)
		fsrv_queue(s, t->idx, v[i]->parent->id, v[i]->name, false);
	free(v);
}

bool
fsrv_names_note(struct fsrv *s, bool refused)
{
	uint32_t max = s->max_nodes;
	uint32_t held = s->nnodes;
	bool report = false;

	if (refused && !s->full)
		report = s->full = true;
	else if (!refused && s->full && s->nnodes < max - max / 8)
		s->full = false;
	if (!s->cfg.release_names || s->nnodes < max / 2)
		return report;
	/* The names not asked for already (their FORGET may be on the way)
	 * reach half the bound: ask for the oldest, down to a quarter,
	 * shared among the trees by size. */
	for (unsigned i = 0; i < s->ntrees; i++)
		held -= s->trees[i]->nodes.nreleased;
	if (held < max / 2)
		return report;
	for (unsigned i = 0; i < s->ntrees; i++) {
		struct fsrv_tree *t = s->trees[i];

		if (!t->closed && t->nodes.count > 1)
			fsrv_release_tree(s, t, (size_t)(held - max / 4) * (t->nodes.count - 1) /
					  s->nnodes + 1);
	}
	pthread_cond_broadcast(&s->cond);
	return report;
}

int
fsrv_invalidate_all(struct fsrv *s)
{
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->ntrees; i++)
		if (!s->trees[i]->closed)
			fsrv_queue_tree(s, s->trees[i], NULL);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int
fsrv_invalidate_path(struct fsrv *s, unsigned tree, const char *path)
{
	if (tree >= s->ntrees || path == NULL)
		return CB_EINVAL;
	pthread_mutex_lock(&s->lock);
	if (!s->trees[tree]->closed)
		fsrv_queue_tree(s, s->trees[tree], path);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int
fsrv_invalidate_settle(struct fsrv *s, unsigned ms)
{
	struct timespec until;
	int e = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->lock);
	while (s->data_done < s->data_queued && !s->stop && e == 0)
		e = pthread_cond_timedwait(&s->cond, &s->lock, &until);
	if (s->data_done < s->data_queued && !s->stop)
		e = CB_ETIMEDOUT;
	else if (s->data_lost)
		e = CB_ENOMEM;
	else
		e = 0;
	s->data_lost = false;
	pthread_mutex_unlock(&s->lock);
	return e;
}

uint64_t
fsrv_invalidate_mark(struct fsrv *s)
{
	uint64_t m;

	pthread_mutex_lock(&s->lock);
	m = s->data_queued;
	pthread_mutex_unlock(&s->lock);
	return m;
}

int
fsrv_invalidate_reached(struct fsrv *s, uint64_t mark)
{
	int e = 0;

	pthread_mutex_lock(&s->lock);
	if (s->data_lost)
		e = CB_ENOMEM;
	else if (s->data_done < mark && !s->stop)
		e = CB_ETIMEDOUT;
	s->data_lost = false;
	pthread_mutex_unlock(&s->lock);
	return e;
}

/* Let the notifier finish what is queued, answering requests meanwhile
 * (a notification may wait for one of them), for at most about 2 s. */
static int
fsrv_drain(struct fsrv *s)
{
	for (int round = 0; round < 200; round++) {
		bool idle;

		pthread_mutex_lock(&s->lock);
		idle = s->nq == 0 && !s->busy;
		pthread_mutex_unlock(&s->lock);
		if (idle)
			return 0;
		for (unsigned i = 0; i < s->ntrees; i++) {
			struct pollfd p = { .fd = fsrv_fd(s, i), .events = POLLIN };

			if (p.fd >= 0 && poll(&p, 1, 10) > 0)
				cb_ignore(fsrv_process(s, i));
		}
		if (s->ntrees == 0)
			usleep(10000);
	}
	return CB_ETIMEDOUT;
}

int
fsrv_invalidate_wait(struct fsrv *s)
{
	return fsrv_drain(s);
}

void
fsrv_free(struct fsrv *s)
{
	if (s == NULL)
		return;
	if (s->started) {
		cb_ignore(fsrv_drain(s));
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		if (s->notifying)
			pthread_join(s->notifier, NULL);
	}
	fsrv_identity(NULL);
	for (unsigned i = 0; i < s->ntrees; i++) {
		struct fsrv_tree *t = s->trees[i];

		/* Closing the tree's /dev/fuse ends the connection: the agent
		 * gets ENOTCONN from then on, never a hang. */
		close(t->dev_fd);
		/* Its /dev/fuse is closed: the backing ids died with it, and
		 * the number may name another tree's device by now. */
		t->dev_fd = -1;
		/* A killed sandbox never releases its files: close them here. */
		fsrv_handles_close(t);
		if (t->root_fd >= 0)
			close(t->root_fd);
		if (t->slot_root >= 0)
			close(t->slot_root);
		fsrv_nodes_fini(&t->nodes);
		free(t);
	}
	for (size_t i = 0; i < s->nq; i++)
		free(s->q[i].name);
	free(s->q);
	fsrv_work_fini(&s->w);
	fsrv_pipe_close(s);
	if (s->started) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->lock);
	}
	fsrv_handles_server(-1);
	free(s);
}

void
fsrv_work_fini(struct fsrv_work *w)
{
	free(w->rbuf);
	free(w->io);
	w->rbuf = w->io = NULL;
	w->iolen = 0;
}

const char *
fsrv_cap_name(unsigned need)
{
	if (need & FSRV_CAP_READ)
		return "fs.read";
	if (need & FSRV_CAP_LIST)
		return "fs.list";
	if (need & FSRV_CAP_WRITE)
		return "fs.write";
	if (need & FSRV_CAP_DELETE)
		return "fs.delete";
	return "fs.*";
}

const char *
fsrv_op_name(enum fsrv_op op)
{
	static const char *const names[FSRV_OP_COUNT_] = {
		[FSRV_OP_LOOKUP] = "lookup", [FSRV_OP_GETATTR] = "getattr",
		[FSRV_OP_SETATTR] = "setattr", [FSRV_OP_READLINK] = "readlink",
		[FSRV_OP_MKDIR] = "mkdir", [FSRV_OP_UNLINK] = "unlink",
		[FSRV_OP_RMDIR] = "rmdir", [FSRV_OP_SYMLINK] = "symlink",
		[FSRV_OP_RENAME] = "rename", [FSRV_OP_LINK] = "link",
		[FSRV_OP_OPEN] = "open", [FSRV_OP_CREATE] = "create",
		[FSRV_OP_READ] = "read", [FSRV_OP_WRITE] = "write",
		[FSRV_OP_OPENDIR] = "opendir", [FSRV_OP_READDIR] = "readdir",
		[FSRV_OP_STATFS] = "statfs",
	};

	if ((unsigned)op >= FSRV_OP_COUNT_ || names[op] == NULL)
		return "?";
	return names[op];
}
