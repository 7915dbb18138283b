/*
 * fs_served.c - the broker's side of the file server: the workspace token,
 * which trees a sandbox is served, the decision of every FUSE operation
 * against the sandbox's live tokens, the mounts, the audit, and the cache
 * invalidation on revocation or expiry.  fsrv/ performs the operations.
 *
 * Trust domain: broker, deciding for a hostile agent.  Why this is safe:
 *  - Every lookup, getattr, open, create, read, write, readdir, mkdir,
 *    unlink, rmdir, rename, link, symlink, readlink and setattr reaches
 *    fss_authz (fsrv asks before it acts; reads and writes of open files
 *    ask again on every call).  The answer comes from a snapshot of the
 *    sandbox's fs.* grants that the loop rebuilds with the full token check
 *    (brk_tok_check: time, audience, revocation, signature, ceiling) on
 *    every change of the sandbox's tokens, synchronously in a revocation
 *    before anyone is told it is done, and once a second; the time window
 *    of each grant is checked again on every operation, so an expiry bites
 *    at once.  A token with a use limit is never served (every FUSE
 *    request would spend a use): it works through capcall only.
 *  - The path judged is the tree's host root joined with the path fsrv
 *    rebuilt from its node table (no "." or "..", no empty component); fsrv
 *    then acts on that very path beneath the root's fd with the one
 *    resolver (no symlink, no magic link, no ".." on the way).
 *  - The broker's state directory is refused whatever a token says, as
 *    for the explicit operations (brk_path_is_state).  Never rules judge
 *    every operation of an elevated token, as in tokens.c.
 *  - A tree's root is opened through the one resolver from "/" (no
 *    symlink on the way): the workspace an administrator named, resolved
 *    with realpath once, as the binds are.
 *  - "The server thread" below is the thread of the broker's pool
 *    (fsrv/pool.c, b->fss_pool) serving the sandbox at the time: one
 *    thread at a time serves a sandbox, and any of the pool's may.  It
 *    touches nothing of the broker but this file's snapshot (under its
 *    lock) and copies it owns: once the sandbox stops, every operation
 *    is refused before anything else is read.  Each request is answered
 *    with its tree owner's file-system identity, whichever sandbox the
 *    thread served before (fsrv_identity is per thread).
 *  - A grant's root stays the owner's: a mode change that would give
 *    anyone a permission it did not have is refused (fss_authz), and a
 *    tree whose root is moved or replaced on the host is no longer served
 *    (brk_fss_roots): the tokens name a path, not a directory once held.
 *  - The names the server holds for the sandbox are bounded
 *    (defaults.served_names, all its trees together; docs/fsrv.md).
 *  - Every audit line the server writes for the sandbox is charged to its
 *    audit budget (budget.c), and while that is spent the server thread
 *    answers none of its requests (brk_fss_gate): an open() loop is
 *    throttled, then stopped, as a flooding channel is, and delays no
 *    other sandbox: while a thread of the pool is held (there, by a slow
 *    disk, by a full audit queue or by the log's room), the pool has
 *    another waiting for every other sandbox's requests.
 */
#include "broker/fs_served.h"
#include "broker/budget.h"
#include "broker/commit.h"
#include "broker/ops.h"
#include "broker/tokens.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsrv/fsrv.h"

#define BRK_FSS_AUDQ_MAX 4096	/* audit records waiting for the loop */
#define BRK_FSS_AUDQ_MIN 16	/* ... room for them made first (doubled up to the most) */
/* The threads serving every sandbox's trees (fsrv_pool): kept when idle,
 * at most (each busy one holds a different sandbox, so one over the busy
 * sandboxes is the most it starts, short of this bound), and how long one
 * beyond those kept may be idle before it ends. */
#define BRK_FSS_POOL_MIN 2
#define BRK_FSS_POOL_MAX 4096
#define BRK_FSS_POOL_IDLE_MS 5000
#define BRK_FSS_AUD_DELAY_US 2000	/* the loop writes queued audit lines this late at most,
					 * in batches (a wake-up per open cost more than the open) */
#define BRK_FSS_TIMEOUT	10.0	/* seconds the kernel may cache names and attributes
				 * (revocation invalidates them at once) */
#define BRK_FSS_NEG_TIMEOUT 1.0	/* ... and that a name does not exist (docs/fsrv.md) */
/* Open files and directories of one sandbox's served trees together: each
 * is a descriptor of the broker's.  All sandboxes' together get at most
 * half the broker's open-files limit (brk_fss_handles_limit), the other
 * half is kept for its own descriptors (red-team F8). */
#define BRK_FSS_HANDLES	4096
#define BRK_FSS_NOTREE	((unsigned)-1)	/* a tree that could not be served */
/* Trees of one sandbox: those it starts with (SBX_MOUNTS_MAX) and those
 * granted while it runs. */
#define BRK_FSS_TREES_MAX (SBX_MOUNTS_MAX + 32)
/* A revocation's acknowledgement waits this long at most for the kernel
 * to drop a sandbox's cached file pages (brk_fss_settle_begin); the loop
 * serves on meanwhile. */
#define BRK_FSS_SETTLE_MS 2000
#define BRK_FSS_END_STEP_MS 10	/* brk_fss_end_all looks this often */
/* What the kernel caches from an answer ends this long before the grants
 * that allowed it expire (brk_fss_ttl): the kernel rounds a cache time up
 * to its tick (4 ms at 250 Hz, 10 ms at 100 Hz), and the reply takes a
 * moment to reach it. */
#define BRK_FSS_EXP_MARGIN_MS 20
/* At shutdown, the stopped servers' threads get this long to end and
 * report the files still open (their last invalidations: fsrv_free waits
 * up to about 2 s for them). */
#define BRK_FSS_END_MS 3000
#define BRK_FSS_RENAME_LEN (2 * CAP_STR_MAX + 2)	/* a rename's old name, joined */
#define BRK_FSS_ROOM_WAIT_MS 5000	/* a server thread waits this long for the log's room
					 * (the loop: full_wait_ms), as aud_flush does */

/* One fs.* capability of a live token, as the server thread judges it. */
struct brk_fss_grant {
	unsigned cap;			/* FSRV_CAP_READ, _LIST, _WRITE or _DELETE */
	enum cap_op op;
	char *glob;			/* and root after it, one allocation */
	const char *root;		/* its fixed prefix (cap_path_root) */
	uint64_t nbf, exp;
	bool elevated;			/* judged against the never rules per operation */
	uint8_t tid[CAP_ID_LEN];
	unsigned capi;
	/* fs.write, fs.delete: the owner of the root, and of its parent (a
	 * change of the root itself acts as that one, as in ops_fs.c) */
	bool owner_ok, powner_ok;
	uid_t owner, powner;
};

/* path and dst point into the tree's own allocation (brk_fss_tree_new),
 * sized to them: two CAP_STR_MAX arrays were 2 KiB of each idle medium
 * sandbox (docs/performance.md, "Fourth pass"). */
struct brk_fss_tree {
	const char *path;		/* host path */
	const char *dst;		/* path inside the sandbox: "" for path, or a bind's */
	unsigned idx;			/* fsrv's tree index */
	uid_t uid;
	gid_t gid;
	mode_t mode;			/* its root's permission bits when serving began */
	dev_t dev;			/* its root, as opened: the directory served */
	ino_t ino;
	bool moved;			/* under mu: no longer at path (brk_fss_roots) */
	int mnt;			/* detached mount, until the spawn */
	bool slot;			/* served in a slot (writable by unmodified programs) */
	char str[];			/* path's and dst's bytes */
};

/* A slot: a FUSE connection and its mount, made before the sandbox starts
 * and given a tree granted while it runs (fsrv_slot_fill, sbx_slot_send). */
struct brk_fss_slot {
	unsigned idx;			/* fsrv's tree index; BRK_FSS_NOTREE until
					 * served (a broker that is not root: the
					 * thread sets it, under mu) */
	bool used;			/* given a tree (or lost trying) */
};

/* A tree granted while the sandbox runs, or (ti BRK_FSS_NOTREE) slot
 * number slot's connection, for the server thread to add. */
struct brk_fss_late {
	unsigned ti;			/* its index in trees[] */
	int root, dev;			/* its root and its FUSE connection */
	unsigned slot;
};

/* An acknowledgement (a revocation's answer) waiting for n servers to have
 * their pages dropped (brk_fss_when_settled), and its link in each. */
struct brk_fss_wait {
	void (*done)(void *arg);
	void *arg;
	unsigned n;
};

struct brk_fss_link {
	struct brk_fss_wait *w;
	struct brk_fss_link *next;
};

/* A bind of the sandbox, as brk_fss_servable needs it after the spawn. */
struct brk_fss_bind {
	char *src, *dst;
	bool writable;
};

/* One audit line the server thread asks the loop to write. */
struct brk_fss_aud {
	const char *op;
	enum aud_decision d;
	int reason;
	bool has_tid;
	uint8_t tid[CAP_ID_LEN];
	char *resource;
	char detail[96];
};

struct brk_fss {
	struct brk_sbx *s;		/* loop thread only; NULL once stopped */
	struct brk *b;			/* loop thread only */
	struct brk_fss *next_ending;	/* in b->fss_ending once stopped */
	struct fsrv *srv;		/* the pool thread serving it only, once given
					 * to the pool (brk_fss_launch) */
	int stop_pipe[2];
	int aud_efd;			/* server -> loop: audit records queued */
	struct event *ev_aud;
	struct event *ev_aud_tm;	/* the batch's drain */
	struct brk_fss_aud *aq_spare;	/* loop thread: swapped with aq at each drain */
	size_t aq_spare_cap;
	struct event *ev_budget;	/* re-checks the audit budget while throttled */
	struct event *ev_exp;		/* the next expiry of a grant (brk_fss_expiry) */
	/* A loss's page drop (brk_fss_settle_begin), loop thread only: */
	struct event *ev_settle;	/* its bound, BRK_FSS_SETTLE_MS */
	uint64_t settle_mark;		/* the page invalidations it waits for */
	bool settle_pending;		/* ... not all written yet */
	bool settle_again;		/* one could not be queued: queued again, once */
	struct brk_fss_link *waiters;	/* acknowledgements waiting for it */
	bool budget_stopped;		/* loop only: stopped for its budget, never served again */
	struct event *ev_chan;		/* pid 1's answers to later mounts */
	bool chan_ok;			/* the sandbox runs: later mounts may be sent */
	bool full_said;			/* BRK_FSS_TREES_MAX reached, audited once */
	/* Written by the loop only (ntrees, and each tree but its idx: under
	 * mu once the thread runs); idx by the thread, under mu. */
	/* Each its own allocation: a tree never moves once its thread may
	 * read it, and a sandbox pays for the trees it has (about 2 KiB each,
	 * two paths), not for BRK_FSS_TREES_MAX of them (100 KiB: most of an
	 * idle sandbox's heap; docs/performance.md). */
	struct brk_fss_tree *trees[BRK_FSS_TREES_MAX];
	unsigned ntrees;
	struct sbx_mount mounts[SBX_MOUNTS_MAX];
	size_t nmounts;
	struct sbx_bind *binds;		/* cfg's binds without the served ones */
	struct brk_fss_bind *bd;	/* cfg's binds, kept for later grants */
	size_t nbd;
	/* A broker that is not root: pid 1 mounts the trees of the start on
	 * its own /dev/fuse (cfg's fuse_dsts) and sends the connections. */
	bool stub_mounts;
	struct brk_fss_slot slots[SBX_SLOTS_MAX];
	size_t nslots;
	int slot_mnt[SBX_SLOTS_MAX];	/* a root broker's slot mounts, until the spawn */
	bool slots_new;			/* under mu: the thread served slots (grow again) */
	const char *fuse_dsts[SBX_MOUNTS_MAX];
	int uroot[SBX_MOUNTS_MAX];	/* their roots, until the connections come */
	unsigned uti[SBX_MOUNTS_MAX];	/* and their trees */
	size_t nfuse;
	bool fuse_taken;

	/* Shared: under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stopping;
	bool settling;			/* a loss waits for pages to be dropped: the
					 * audit budget does not hold requests (brk_fss_gate) */
	struct brk_fss_grant *g;
	size_t ng;
	uint64_t floor;			/* st_now() at the last refresh: time never goes back */
	const struct pol_inst *inst;	/* valid until stopping */
	struct aud_log *aud;		/* the broker's log (aud_room is thread-safe);
					 * valid until stopping */
	struct aud_log *room_log;	/* the same, set once before the threads start
					 * and never cleared: read without f->mu */
	/* The queue the server fills, made when the first line comes and
	 * doubled as needed (an idle sandbox writes none): room for cap. */
	struct brk_fss_aud *aq;
	size_t naq, aq_cap;
	bool ended;			/* the server is freed: its thread is done with f
					 * but for a last wake-up */
	/* The sandbox's audit budget, as the server sees it (budget.c keeps
	 * the bucket on the loop): throttled while the loop says it is spent;
	 * queued, the bytes of the lines waiting in aq; avail, what the
	 * bucket held at the loop's last check less what it has taken from
	 * aq since.  The server waits while queued > avail, so the lines it
	 * queues overdraw the bucket by one line at most. */
	bool throttled;
	double queued, avail;
	char sid[CAP_AUD_MAX + 1];	/* the sandbox's id, for the cost of a line */
	struct brk_fss_late late[BRK_FSS_TREES_MAX];
	size_t nlate;

	/* Server thread only. */
	const char *state_real;		/* the broker's state: never served (b's,
					 * fixed while it runs, which outlives f) */
	char *rename_from;		/* made at the first rename or link (2 KiB) */
	bool rename_pending;
};

/* ---- the workspace token ------------------------------------------- */

/* Mint a token for the whole tree dir (fs.read, fs.list, fs.write and
 * fs.delete on dir/ **, each only inside the ceiling) and hold it; none
 * when no capability is inside the ceiling.  what names the tree in why. */
static int
brk_fss_tree_token(struct brk_sbx *s, const char *dir, const char *what,
    const struct brk_fss_mint *m, char *why, size_t whylen)
{
	static const char *const ops[] = { "fs.read", "fs.list", "fs.write", "fs.delete" };
	struct cap *caps[4] = { NULL };
	size_t n = 0;
	char *text = NULL;
	uint8_t id[CAP_ID_LEN];
	uint32_t th;
	int r = 0;

	for (size_t i = 0; i < 4; i++) {
		char spec[CAP_STR_MAX + 32];

		if (snprintf(spec, sizeof(spec), "%s:%s/**", ops[i], dir) >= (int)sizeof(spec)) {
			snprintf(why, whylen, "%s '%s': path too long", what, dir);
			r = CB_ETOOBIG;
			goto out;
		}
		if ((r = cap_parse(spec, &caps[n])) != 0) {
			snprintf(why, whylen, "%s '%s' cannot be granted: %s", what, dir, cb_strerror(r));
			goto out;
		}
		/* The policy narrows the workspace through the ceiling. */
		if (!pol_inst_within_ceiling(s->inst, caps[n])) {
			cap_free(caps[n]);
			caps[n] = NULL;
			continue;
		}
		n++;
	}
	if (n == 0)
		goto out;
	if ((r = brk_tok_mint(s->b, &(struct brk_mint){ .aud = s->id, .caps = caps, .ncaps = n,
	    .nbf = m->now, .exp = m->now + m->ttl, .by = m->actor ? m->actor : "broker" }, &text,
	    id)) != 0) {
		snprintf(why, whylen, "%s token: %s", what, brk_decide_why(s->b, r));
		goto out;
	}
	if ((r = brk_held_add(s, text, strlen(text), true, &th)) != 0)
		snprintf(why, whylen, "%s token: %s", what, cb_strerror(r));
out:
	free(text);
	for (size_t i = 0; i < 4; i++)
		cap_free(caps[i]);
	return r;
}

int
brk_fss_workspace(struct brk_sbx *s, bool serve_workspace, const struct brk_fss_mint *m,
    char *why, size_t whylen)
{
	const struct pol_tier *tier = pol_tier_get(s->pol->pol, s->tier_name);

	if (s->stier == SBX_TIER_LOW || !(serve_workspace || (tier && pol_tier_workspace(tier))) ||
	    strcmp(s->workspace, "/") == 0)
		return 0;
	/* Explicit fs.* grants say exactly which files: they replace the
	 * workspace token (the caller's way to narrow it). */
	for (size_t i = 0; i < s->nheld; i++)
		for (size_t k = 0; k < s->held[i].tok->c.ncaps; k++)
			if (cap_op_is_fs(s->held[i].tok->c.caps[k]->op))
				return 0;
	return brk_fss_tree_token(s, s->workspace, "workspace", m, why, whylen);
}

/* ---- the grant snapshot (loop thread) ------------------------------- */

static void brk_fss_grow(struct brk_fss *f);

static unsigned
brk_fss_capbit(enum cap_op op)
{
	switch (op) {
	case CAP_FS_READ: return FSRV_CAP_READ;
	case CAP_FS_LIST: return FSRV_CAP_LIST;
	case CAP_FS_WRITE: return FSRV_CAP_WRITE;
	case CAP_FS_DELETE: return FSRV_CAP_DELETE;
	default: return 0;
	}
}

static void
brk_fss_grants_free(struct brk_fss_grant *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(g[i].glob);
	free(g);
}

/* The owner of directory path, if it can be opened through the one
 * resolver. */
static bool
brk_fss_owner_of(const char *path, uid_t *uid)
{
	struct stat st;
	bool ok;
	int fd;

	if ((fd = cb_open_abs(path, O_PATH | O_DIRECTORY)) < 0)
		return false;
	ok = fstat(fd, &st) == 0;
	close(fd);
	*uid = st.st_uid;
	return ok;
}

static void
brk_fss_owner_copy(struct brk_fss_grant *x, const struct brk_fss_grant *from)
{
	x->owner_ok = from->owner_ok;
	x->owner = from->owner;
	x->powner_ok = from->powner_ok;
	x->powner = from->powner;
}

/* The owners of a grant's root (x->root) and of its parent, as the
 * broker's explicit fs.* read them to take the identity of a change
 * (ops_fs.c, brk_fs_at).  Read when the grant first enters the snapshot
 * (old: the one it replaces) and kept while it stays: each read walks two
 * paths from "/" (about 20 us each here), and a sandbox holding 64 tokens
 * of 32 capabilities with as many roots would otherwise cost the loop
 * 80 ms at every tick.  The grant before it in g usually has the same root
 * (a token's capabilities share one). */
static void
brk_fss_grant_owner(struct brk_fss_grant *g, size_t n, const struct brk_fss_grant *old,
    size_t nold)
{
	struct brk_fss_grant *x = &g[n];
	char parent[CAP_STR_MAX + 1], *slash;

	if (n > 0 && strcmp(g[n - 1].root, x->root) == 0 &&
	    (g[n - 1].cap & (FSRV_CAP_WRITE | FSRV_CAP_DELETE))) {
		brk_fss_owner_copy(x, &g[n - 1]);
		return;
	}
	for (size_t i = 0; i < nold; i++)
		if (old[i].capi == x->capi && memcmp(old[i].tid, x->tid, CAP_ID_LEN) == 0) {
			brk_fss_owner_copy(x, &old[i]);
			return;
		}
	x->owner_ok = brk_fss_owner_of(x->root, &x->owner);
	snprintf(parent, sizeof(parent), "%s", x->root);
	if ((slash = strrchr(parent, '/')) != NULL) {
		slash[slash == parent ? 1 : 0] = '\0';
		x->powner_ok = brk_fss_owner_of(parent, &x->powner);
	}
}

/* The fs.* capabilities of every token of s that passes the full check
 * now.  CB_ENOMEM leaves *out NULL. */
static int
brk_fss_collect(struct brk_sbx *s, struct brk_fss_grant **out, size_t *nout)
{
	struct brk_fss_grant *g;
	size_t n = 0, max = 1;
	const struct brk_fss_grant *old = s->fss ? s->fss->g : NULL;	/* the loop's own */
	size_t nold = s->fss ? s->fss->ng : 0;

	*out = NULL;
	*nout = 0;
	/* Sized to what is held: this runs on every token change and tick. */
	for (size_t i = 0; i < s->nheld; i++)
		max += s->held[i].tok->c.ncaps;
	if (!(g = calloc(max, sizeof(*g))))
		return CB_ENOMEM;
	for (size_t i = 0; i < s->nheld; i++) {
		struct brk_held *h = &s->held[i];
		const struct cap_claims *c = &h->tok->c;

		if (c->has_uses || brk_tok_check(s, h, NULL, NULL) != 0)
			continue;
		for (size_t k = 0; k < c->ncaps; k++) {
			struct brk_fss_grant *x = &g[n];
			char root[CAP_STR_MAX + 1];
			size_t nr, ng;

			if (!brk_fss_capbit(c->caps[k]->op) || !(h->in_ceiling & (1u << k)))
				continue;
			/* The glob and its root in one allocation: a root
			 * array of CAP_STR_MAX in each grant was a KiB of every
			 * capability of every sandbox. */
			if (cap_path_root(c->caps[k]->res, root, sizeof(root)) != 0 ||
			    !(x->glob = malloc((ng = strlen(c->caps[k]->res) + 1) +
			    (nr = strlen(root) + 1)))) {
				brk_fss_grants_free(g, n);
				return CB_ENOMEM;
			}
			memcpy(x->glob, c->caps[k]->res, ng);
			memcpy(x->glob + ng, root, nr);
			x->root = x->glob + ng;
			x->op = c->caps[k]->op;
			x->cap = brk_fss_capbit(x->op);
			x->nbf = c->nbf;
			x->exp = c->exp;
			x->elevated = c->elevated;
			memcpy(x->tid, c->id, CAP_ID_LEN);
			x->capi = (unsigned)k;
			if (x->cap & (FSRV_CAP_WRITE | FSRV_CAP_DELETE))
				brk_fss_grant_owner(g, n, old, nold);
			n++;
		}
	}
	*out = g;
	*nout = n;
	return 0;
}

/* Does a grant of nw still allow every path grant o allowed: one with the
 * same operation whose glob contains o's (cap_path_contains: sound), and
 * not an elevated one for a grant that was not (never rules narrow those
 * per operation)? */
static bool
brk_fss_still(const struct brk_fss_grant *nw, size_t nn, const struct brk_fss_grant *o)
{
	for (size_t k = 0; k < nn; k++)
		if (nw[k].op == o->op && (!nw[k].elevated || o->elevated) &&
		    cap_path_contains(nw[k].glob, o->glob))
			return true;
	return false;
}

/*
 * Is every grant of old still in new, or what it allowed still allowed?
 * A lost grant makes the caller drop every name, attribute and page the
 * kernel caches for the sandbox (brk_fss_settle_begin: hundreds of
 * milliseconds with a GiB mapped, up to 2 s), and every capctl revoke
 * answered meanwhile waits for it.  An agent can make its own grants
 * expire (derive a child with a 1 s ttl, over and over): without the
 * second test each such expiry dropped its pages (and, when the loop
 * itself waited, stalled the whole broker 0.3-0.5 s; red team,
 * tests/integration/136-fs-served-expiry-stall.sh); a child's paths are
 * its live parent's, and nothing need be dropped.  The containment test
 * is made for at most BRK_FSS_LOST_MAX grants gone at once; more are a
 * loss without it.
 */
#define BRK_FSS_LOST_MAX 64
static bool
brk_fss_superset(const struct brk_fss_grant *nw, size_t nn, const struct brk_fss_grant *old,
    size_t no)
{
	size_t gone = 0;

	for (size_t i = 0; i < no; i++) {
		bool found = false;

		for (size_t k = 0; k < nn && !found; k++)
			found = nw[k].capi == old[i].capi && memcmp(nw[k].tid, old[i].tid,
			    CAP_ID_LEN) == 0;
		if (!found && (++gone > BRK_FSS_LOST_MAX || !brk_fss_still(nw, nn, &old[i])))
			return false;
	}
	return true;
}

/*
 * Is every served tree's root still the directory at its path?  A root
 * moved (or removed, or replaced) on the host is no longer served: the
 * tokens name a path, and the directory the broker holds open is not at
 * that path any more, so serving it on would act on files no token names
 * (a workspace renamed to ~/old-project, another user's directory moved
 * in place of it).  From then on every operation on that tree is refused
 * (ENOENT to the broker, EACCES to the agent), one line says so, and the
 * kernel's cached names are dropped.  Looked at when the sandbox's tokens
 * change and once a second (the loop's refresh), so a move takes effect
 * within a second; a root moved back is not served again.  Only an answer
 * that says the path names something else counts: a failure for another
 * reason (out of descriptors) leaves the tree served until the next look.
 */
static void
brk_fss_roots(struct brk_fss *f)
{
	bool any = false;

	for (unsigned i = 0; i < f->ntrees; i++) {
		struct brk_fss_tree *t = f->trees[i];
		struct stat st;
		bool moved;
		int fd;
		unsigned idx;

		/* idx is the server thread's to set (a tree added while the
		 * sandbox runs): read it under the lock. */
		pthread_mutex_lock(&f->mu);
		idx = t->idx;
		pthread_mutex_unlock(&f->mu);
		if (idx == BRK_FSS_NOTREE || t->moved)
			continue;
		if ((fd = cb_open_abs(t->path, O_PATH | O_DIRECTORY)) < 0) {
			moved = errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV;
		} else {
			moved = fstat(fd, &st) == 0 && (st.st_dev != t->dev || st.st_ino != t->ino);
			close(fd);
		}
		if (!moved)
			continue;
		pthread_mutex_lock(&f->mu);
		t->moved = true;
		pthread_mutex_unlock(&f->mu);
		brk_audit_done(f->s, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .reason = CB_ENOENT, .op = "fs.serve", .resource = t->path, .actor = "broker",
		    .detail = "the tree's root was moved or removed on the host: no longer "
		    "served" });
		any = true;
	}
	if (any && f->srv)
		cb_ignore(fsrv_invalidate_all(f->srv));
}

/* A waiter's server is done (pages dropped, bound reached, or stopped):
 * the last one acknowledges. */
static void
brk_fss_wait_one(struct brk_fss_wait *w)
{
	if (--w->n > 0)
		return;
	w->done(w->arg);
	free(w);
}

/* The page drop of f's last loss is over: e 0 (dropped; also a stopping
 * sandbox, whose agent is gone), or why not (the bound passed, an
 * invalidation lost twice: one line says the pages may outlive the loss).
 * Every acknowledgement waiting for f goes on. */
static void
brk_fss_settle_end(struct brk_fss *f, int e)
{
	struct brk_fss_link *l = f->waiters;

	f->settle_pending = false;
	f->waiters = NULL;
	if (f->ev_settle)
		evtimer_del(f->ev_settle);
	pthread_mutex_lock(&f->mu);
	f->settling = false;
	pthread_mutex_unlock(&f->mu);
	if (e != 0 && f->s)
		brk_audit_done(f->s, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .reason = e, .op = "fs.serve", .actor = "broker",
		    .detail = "a grant was lost, but the kernel did not drop the cached file "
		    "pages in time: they may be read until it does" });
	while (l) {
		struct brk_fss_link *next = l->next;

		brk_fss_wait_one(l->w);
		free(l);
		l = next;
	}
}

/* Has the kernel dropped the pages f's last loss waits for?  Asked at
 * each wake-up of f (fsrv's on_pages, fss_pages), without waiting. */
static void
brk_fss_settle_check(struct brk_fss *f)
{
	int e;

	if (!f->settle_pending)
		return;
	e = fsrv_invalidate_reached(f->srv, f->settle_mark);
	if (e == CB_ENOMEM && !f->settle_again) {
		/* An invalidation was dropped (no memory): queue them all
		 * again, once. */
		f->settle_again = true;
		cb_ignore(fsrv_invalidate_all(f->srv));
		f->settle_mark = fsrv_invalidate_mark(f->srv);
		e = fsrv_invalidate_reached(f->srv, f->settle_mark);
	}
	if (e != CB_ETIMEDOUT)
		brk_fss_settle_end(f, e);
}

static void
brk_fss_settle_over(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	brk_fss_settle_end(arg, CB_ETIMEDOUT);
}

/*
 * After a grant was lost, with the kernel caching file data (the
 * invalidations queued): from now on f's loss is "settling" until the
 * kernel has dropped the pages of every file the sandbox opened, and an
 * acknowledgement of the loss (capctl revoke's answer: brk_fss_when_
 * settled) waits for that, so that it is given only when no read of a
 * served file can be answered from the page cache any more: the next read
 * of a file already open misses, reaches the server and is refused by
 * fss_authz, as with direct I/O.  The loop does not wait: the notifier
 * wakes it when it has written them (fss_pages), and it serves every
 * other sandbox meanwhile (before, it waited here: 15-17 ms for a sandbox
 * holding 5,000 cached files, up to the bound, stalling all the others).
 * The kernel drops a page being read only once that read's request is
 * answered, and the server may be holding a request for the audit budget:
 * while settling, the budget holds nothing (brk_fss_gate).  Bounded
 * (BRK_FSS_SETTLE_MS from the last loss): past it, one line says the pages
 * may outlive the loss, and the acknowledgements go.
 */
static void
brk_fss_settle_begin(struct brk_fss *f)
{
	static const struct timeval bound = { BRK_FSS_SETTLE_MS / 1000,
		(BRK_FSS_SETTLE_MS % 1000) * 1000 };

	f->settle_mark = fsrv_invalidate_mark(f->srv);
	f->settle_again = false;
	if (!f->settle_pending) {
		pthread_mutex_lock(&f->mu);
		f->settling = true;
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&f->mu);
		f->settle_pending = true;
	}
	if (f->ev_settle)
		evtimer_add(f->ev_settle, &bound);
	brk_fss_settle_check(f);
}

int
brk_fss_when_settled(struct brk *b, void (*done)(void *arg), void *arg)
{
	struct brk_fss_wait *w;

	if (!(w = calloc(1, sizeof(*w))))
		return CB_ENOMEM;
	w->done = done;
	w->arg = arg;
	w->n = 1;	/* ours, until every server is linked */
	for (struct brk_sbx *s = b->sbx; s; s = s->next) {
		struct brk_fss *f = s->fss;
		struct brk_fss_link *l;

		if (!f || !f->settle_pending)
			continue;
		if (!(l = calloc(1, sizeof(*l)))) {
			/* Out of memory: this one is not waited for (its
			 * bound still writes a line if it passes). */
			continue;
		}
		l->w = w;
		l->next = f->waiters;
		f->waiters = l;
		w->n++;
	}
	brk_fss_wait_one(w);
	return 0;
}

/* Refresh the snapshot again when the first of its grants expires: with
 * cached file data, an expiry must drop the pages as a revocation does,
 * not a tick later. */
static void
brk_fss_expiry_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_fss *f = arg;

	(void)fd;
	(void)ev;
	brk_fss_refresh(f->s);
}

static void
brk_fss_expiry(struct brk_fss *f, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	struct timespec ts;
	struct timeval tv;
	int64_t us;

	if (!f->ev_exp)
		return;
	evtimer_del(f->ev_exp);
	if (now < f->floor)
		now = f->floor;
	for (size_t i = 0; i < f->ng; i++)
		if (f->g[i].exp >= now && f->g[i].exp < next)
			next = f->g[i].exp;
	if (next == UINT64_MAX || next - now > 86400)
		return;
	/* A grant is valid through its expiry second (fss_authz: now > exp);
	 * wake a little after the next second begins. */
	clock_gettime(CLOCK_REALTIME, &ts);
	us = ((int64_t)(next + 1 - now) * 1000000 - ts.tv_nsec / 1000) + 5000;
	if (us < 5000)
		us = 5000;
	tv.tv_sec = us / 1000000;
	tv.tv_usec = us % 1000000;
	evtimer_add(f->ev_exp, &tv);
}

void
brk_fss_refresh(struct brk_sbx *s)
{
	struct brk_fss *f = s->fss;
	struct brk_fss_grant *g, *old;
	size_t n, nold;
	bool lost;

	if (!f)
		return;
	brk_fss_roots(f);
	if (brk_fss_collect(s, &g, &n) != 0) {
		/* Out of memory: serve nothing rather than something stale. */
		g = NULL;
		n = 0;
	}
	pthread_mutex_lock(&f->mu);
	old = f->g;
	nold = f->ng;
	lost = !brk_fss_superset(g, n, old, nold);
	f->g = g;
	f->ng = n;
	f->floor = st_now(s->b->st);
	pthread_mutex_unlock(&f->mu);
	brk_fss_grants_free(old, nold);
	/* What the kernel caches for a path no grant covers any more must
	 * not answer for it: names, attributes and (with cached data) pages.
	 * Opens, reads, writes and directory reads reach fss_authz anyway.
	 * A revoked tree stays mounted (docs/sandbox.md): every operation
	 * on it is refused until a grant covers it again. */
	if (lost && f->srv) {
		cb_ignore(fsrv_invalidate_all(f->srv));
		/* Also without cache_data: a private mapping's pages are in
		 * the page cache under direct I/O too. */
		brk_fss_settle_begin(f);
	}
	brk_fss_expiry(f, cb_now());
	/* A new grant's tree appears at its host path. */
	brk_fss_grow(f);
}

void
brk_fss_refresh_all(struct brk *b)
{
	for (struct brk_sbx *s = b->sbx; s; s = s->next)
		if (!s->dead) {
			brk_fss_refresh(s);
			/* The same grants lost end what its proc.exec
			 * children were shown of them (plain binds). */
			brk_proc_recheck(s);
		}
}

/* ---- the decision (server thread) ----------------------------------- */

/* Is anc an ancestor of p, or p itself (whole components)? */
static bool
brk_fss_within(const char *anc, const char *p)
{
	size_t al = strlen(anc);

	if (strcmp(anc, "/") == 0)
		return true;
	return strncmp(anc, p, al) == 0 && (p[al] == '/' || p[al] == '\0');
}

static bool
brk_fss_is_state(const struct brk_fss *f, const char *path, bool or_ancestor)
{
	size_t sl = strlen(f->state_real), pl = strlen(path);

	if (!sl)
		return false;
	if (pl >= sl && strncmp(path, f->state_real, sl) == 0 && (path[sl] == '/' || path[sl] == '\0'))
		return true;
	return or_ancestor && pl < sl && strncmp(f->state_real, path, pl) == 0 &&
	    (f->state_real[pl] == '/' || pl == 1);
}

/* Which operations write an audit line when allowed: one per open,
 * create, delete, rename (and the other changes of names); none per
 * lookup, read or write.  Every denial is audited (through the sandbox's
 * audit budget, which counts repeats instead of writing them). */
static const char *
brk_fss_audited(enum fsrv_op op, bool denied)
{
	switch (op) {
	case FSRV_OP_OPEN: return "fs.open";
	case FSRV_OP_CREATE: return "fs.create";
	case FSRV_OP_MKDIR: return "fs.mkdir";
	case FSRV_OP_UNLINK:
	case FSRV_OP_RMDIR: return "fs.delete";
	case FSRV_OP_RENAME: return "fs.rename";
	case FSRV_OP_SYMLINK: return "fs.symlink";
	case FSRV_OP_LINK: return "fs.link";
	case FSRV_OP_LOOKUP: return denied ? "fs.lookup" : NULL;
	case FSRV_OP_GETATTR: return denied ? "fs.getattr" : NULL;
	case FSRV_OP_SETATTR: return denied ? "fs.setattr" : NULL;
	case FSRV_OP_READLINK: return denied ? "fs.readlink" : NULL;
	case FSRV_OP_READ: return denied ? "fs.read" : NULL;
	case FSRV_OP_WRITE: return denied ? "fs.write" : NULL;
	case FSRV_OP_OPENDIR:
	case FSRV_OP_READDIR: return denied ? "fs.list" : NULL;
	case FSRV_OP_STATFS: return denied ? "fs.statfs" : NULL;
	default: return NULL;
	}
}

/* Called with f->mu held, before the server acts or queues a line: while
 * the sandbox's audit budget is spent (the loop says throttled), or the
 * lines already queued would overdraw it, the server waits, and with it
 * every request of this sandbox (the kernel holds them, as the channel's
 * requests wait in its socket); the pool serves other sandboxes on other
 * threads meanwhile (it starts one when none is left waiting).  The loop is woken once to look (brk_fss_budget); it answers by
 * taking the queue, or when the bucket refills, or by stopping the
 * sandbox (then stopping ends the wait). */
static void
brk_fss_gate(struct brk_fss *f)
{
	uint64_t one = 1;
	bool asked = false;

	while (!f->stopping && !f->settling && (f->throttled || f->queued > f->avail)) {
		if (!asked)
			cb_ignore((int)write(f->aud_efd, &one, sizeof(one)));
		asked = true;
		pthread_cond_wait(&f->cond, &f->mu);
	}
}

/* Queue an audit line for the loop; called with f->mu held.  Of r only
 * op (a string that outlives the queue), decision, reason, token_id,
 * resource and detail are taken (copied); the line is always an agent's
 * operation (AUD_OP) in f's sandbox.  A full queue makes the agent's
 * operation wait for the loop (never the loop for the agent).  A stopping
 * sandbox writes only late lines: the close of a file opened before (what
 * an allowed open did, owed to the log; the loop drains until the thread
 * ends, brk_fss_ending).  Its bytes count as queued until the loop writes
 * it and charges them to the sandbox (brk_audit_sbx). */
/* Room for one more record in f->aq, made if need be (up to
 * BRK_FSS_AUDQ_MAX); called with f->mu held.  The loop swaps the queue it
 * takes with its spare, so each grows on its own. */
static bool
brk_fss_aq_room(struct brk_fss *f)
{
	struct brk_fss_aud *q;
	size_t nc;

	if (f->naq < f->aq_cap)
		return true;
	if (f->aq_cap == BRK_FSS_AUDQ_MAX)
		return false;
	nc = f->aq_cap ? f->aq_cap * 2 : BRK_FSS_AUDQ_MIN;
	if (!(q = realloc(f->aq, nc * sizeof(*q))))
		return false;
	f->aq = q;
	f->aq_cap = nc;
	return true;
}

static void
brk_fss_audit(struct brk_fss *f, const struct aud_rec *r, bool late)
{
	struct brk_fss_aud *a;
	uint64_t one = 1;

	while (!brk_fss_aq_room(f) && (late || !f->stopping)) {
		if (f->naq == 0)
			return;	/* out of memory, and nothing for the loop to free */
		pthread_cond_wait(&f->cond, &f->mu);
	}
	if ((f->stopping && !late) || f->naq >= f->aq_cap)
		return;
	a = &f->aq[f->naq];
	memset(a, 0, sizeof(*a));
	if (!(a->resource = strdup(r->resource)))
		return;
	a->op = r->op;
	a->d = r->decision;
	a->reason = r->reason;
	snprintf(a->detail, sizeof(a->detail), "%s", r->detail);
	if (r->token_id) {
		a->has_tid = true;
		memcpy(a->tid, r->token_id, CAP_ID_LEN);
	}
	/* What it will cost (a coalesced denial costs less: counted in full
	 * here, the loop's check corrects it). */
	f->queued += (double)aud_rec_cost(&(struct aud_rec){ .kind = AUD_OP, .decision = a->d,
	    .reason = a->reason, .sandbox = f->sid, .op = a->op, .resource = a->resource,
	    .token_id = r->token_id, .actor = "agent", .detail = a->detail });
	f->naq++;
	/* Wake the loop for the first record of a batch (it then drains after
	 * BRK_FSS_AUD_DELAY_US) and again at half a queue (it drains at once);
	 * the records between cost no system call and no switch. */
	if (f->naq == 1 || f->naq == BRK_FSS_AUDQ_MAX / 2)
		cb_ignore((int)write(f->aud_efd, &one, sizeof(one)));
}

/*
 * A mode change of a grant's root (a served tree's root, or the fixed
 * root of any grant, as "DIR/ **" covers DIR itself): refused when it
 * would give anyone a permission the root did not have (a tree's root:
 * when serving began; another grant's root: now), set-id and sticky bits
 * included.  fs.write covers what is beneath a root, not who else may
 * reach the directory the owner chose: an agent making the workspace 0777
 * would open it to every user of the host.  Keeping or removing bits is
 * allowed (tar restoring "." works), as are times.  Called with f->mu held.
 */
static bool
brk_fss_root_mode_refused(const struct brk_fss *f, const struct brk_fss_tree *t,
    const char *path, const struct fsrv_check *c)
{
	bool root = strcmp(path, t->path) == 0;

	for (size_t i = 0; i < f->ng && !root; i++)
		root = strcmp(path, f->g[i].root) == 0;
	if (!root)
		return false;
	return (c->mode & ~(strcmp(path, t->path) == 0 ? t->mode : c->cur_mode) & 07777) != 0;
}

/* The line of a served request fss_authz judged, if its kind has one
 * (brk_fss_audited); r carries the decision, reason, token and a why.  A
 * rename or link is asked twice, old name first: one line for the pair.
 * Called with f->mu held. */
static void
fss_authz_audit(struct brk_fss *f, const struct fsrv_check *c, const char *path,
    struct aud_rec *r)
{
	char both[4 * CAP_STR_MAX + 16];

	if ((r->op = brk_fss_audited(c->op, r->decision == AUD_DENY)) == NULL)
		return;
	r->resource = path;
	if (c->op == FSRV_OP_RENAME || c->op == FSRV_OP_LINK) {
		/* Out of memory for the old name: each name its own line. */
		if (!f->rename_pending && r->decision == AUD_ALLOW &&
		    (f->rename_from || (f->rename_from = malloc(BRK_FSS_RENAME_LEN)))) {
			snprintf(f->rename_from, BRK_FSS_RENAME_LEN, "%s", path);
			f->rename_pending = true;
			return;
		}
		if (f->rename_pending)
			snprintf(both, sizeof(both), "%s -> %s", f->rename_from, path);
		else
			snprintf(both, sizeof(both), "%s", path);
		r->resource = both;
		f->rename_pending = false;
	} else if (c->op == FSRV_OP_OPEN) {
		r->detail = (c->need & FSRV_CAP_READ) && (c->need & FSRV_CAP_WRITE) ?
		    "served, read-write" : c->need & FSRV_CAP_WRITE ? "served, write" :
		    "served, read";
	}
	if (r->detail == NULL)
		r->detail = "served";
	/* Once stopping, only refusals come here: each is owed its line (the
	 * loop writes it in the sandbox's name, as a last close line). */
	brk_fss_audit(f, r, f->stopping);
}

/*
 * Lower *ttl to the life left to a grant that expires at exp, less
 * BRK_FSS_EXP_MARGIN_MS.  A grant is honoured through its expiry second
 * (fss_authz refuses once now > exp), so until exp + 1 on the wall clock
 * (or the time floor, if the clock went back).  Why: with cached file data,
 * a read of a cached page asks for the file's attributes again once they
 * are stale (the kernel's auto_inval_data), and that request is checked;
 * attributes that outlive the grant would let cached pages be read after
 * its expiry, until the expiry's page drop lands (about 8 ms late, before:
 * docs/fsrv.md).  Called with f->mu held.
 */
static void
brk_fss_ttl(const struct brk_fss *f, double *ttl, uint64_t exp)
{
	struct timespec ts;
	double now, left;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if ((double)f->floor > now)
		now = (double)f->floor;
	left = (double)exp + 1.0 - now - BRK_FSS_EXP_MARGIN_MS / 1000.0;
	if (left < *ttl)
		*ttl = left > 0 ? left : 0;
}

/* Would the broker's explicit operation act as uid for a change of path
 * under grant g?  It acts as the owner of the grant's root, and for the
 * root itself as the owner of its parent (ops_fs.c, brk_fs_at).  A root
 * that did not exist at the snapshot (it is being made: mkdir -p) is
 * judged by its parent's owner until the next snapshot reads its own. */
static bool
brk_fss_owns(const struct brk_fss_grant *g, uid_t uid, const char *path)
{
	if (g->owner_ok && g->owner == uid)
		return true;
	return g->powner_ok && g->powner == uid && (!g->owner_ok || strcmp(path, g->root) == 0);
}

/*
 * Would a change be made as another than the explicit operation's
 * identity?  A root broker's explicit fs.write and fs.delete act as the
 * owner of the grant's root (ops_fs.c); the tree's thread acts as the
 * owner of the tree's root.  A grant nested in a tree owned by someone
 * else (fs.write:/srv/home/alice/ ** inside a root-owned /srv tree) would
 * have its changes made as that someone (as root: root-owned files in
 * alice's directory, her root-owned files rewritten): refused unless a
 * grant whose root the tree's owner owns covers it (own: those grants'
 * capabilities; red team, tests/integration/133-fs-served-nested-owner.sh).
 * A broker that is not root acts as itself either way.  The reason, or
 * NULL.
 */
static const char *
brk_fss_not_owner(const struct brk_fss *f, const struct fsrv_check *c, unsigned own)
{
	if (f->stub_mounts || (c->need & (FSRV_CAP_WRITE | FSRV_CAP_DELETE) & ~own) == 0)
		return NULL;
	return "the file server acts as the tree's owner here, and the grant's root "
	    "belongs to another user: capcall acts as that user";
}

/* A burst of served operations can use up the log's reserve faster than
 * a busy disk lets the writer extend it (5,000 opens at load 10 had 3
 * refused after aud_room's 200 ms).  This thread is not the loop: short of
 * room, it waits up to BRK_FSS_ROOM_WAIT_MS with f->mu dropped (the loop
 * takes it), after brk_fss_gate (a room seen before the gate's wait was
 * stale by the check: test 38).  The check under the lock in fss_authz
 * still refuses on a full or failed log.  Called with f->mu held. */
static void
brk_fss_room(struct brk_fss *f, const struct fsrv_check *c)
{
	if (!f->room_log || brk_fss_audited(c->op, false) == NULL || aud_room_wait(f->room_log, 0))
		return;
	pthread_mutex_unlock(&f->mu);
	(void)aud_room_wait(f->room_log, BRK_FSS_ROOM_WAIT_MS);
	pthread_mutex_lock(&f->mu);
}

/*
 * Can a capability name this host path at all (docs/tokens.md: at most
 * CAP_MAX_COMPONENTS components, no control or bidirectional character;
 * the bytes, CAP_STR_MAX, are checked before)?  No grant covers any other,
 * so it is refused before one is asked, and the agent is told why
 * (fsrv_authz_fn): CB_ETOOBIG, ENAMETOOLONG to it ("File name too long",
 * where "Permission denied" sent agents looking for a token that cannot
 * exist), or CB_EINVAL for a name the grammar refuses, with the reason
 * in *why; or 0.
 */
static int
brk_fss_nameable(const char *path, const char **why)
{
	int r = cap_path_check(path);

	if (r == 0)
		return 0;
	*why = r == CB_ECAP_TOOLONG ? "deeper than a capability can name" :
	    "a name no capability can name (a control or bidirectional character)";
	return r == CB_ECAP_TOOLONG ? CB_ETOOBIG : CB_EINVAL;
}

static int
fss_authz(void *arg, const struct fsrv_check *c)
{
	struct brk_fss *f = arg;
	const struct brk_fss_tree *t = NULL;
	char path[2 * CAP_STR_MAX + 2];
	const uint8_t *tid = NULL;
	const char *why = NULL, *mglob = NULL;
	bool matched = false;
	unsigned have = 0, own = 0;
	uint64_t now, first_exp = UINT64_MAX;
	int e = 0;

	pthread_mutex_lock(&f->mu);
	brk_fss_gate(f);
	brk_fss_room(f, c);
	/* Under the lock: the loop adds trees granted while the sandbox runs. */
	for (unsigned i = 0; i < f->ntrees; i++)
		if (f->trees[i]->idx == c->tree)
			t = f->trees[i];
	if (!t) {
		pthread_mutex_unlock(&f->mu);
		return CB_EPERM;
	}
	if (snprintf(path, sizeof(path), "%s%s%s", t->path, c->path[0] ? "/" : "", c->path) >
	    CAP_STR_MAX) {
		pthread_mutex_unlock(&f->mu);
		return CB_ETOOBIG;
	}
	/* One that raced the stop (an agent process killed after its launcher,
	 * or one that waited in the gate) is refused for that, with its line
	 * (a late one); nothing of the broker is read past this (docs/fsrv.md). */
	if (f->stopping) {
		e = CB_ESTOPPING;
		why = "the sandbox is stopping: not served";
	} else if ((e = brk_fss_nameable(path, &why)) == 0 &&
	    brk_fss_is_state(f, path, (c->need & (FSRV_CAP_WRITE | FSRV_CAP_DELETE)) != 0)) {
		e = CB_EPERM;
	}
	now = cb_now();
	if (now < f->floor)
		now = f->floor;
	for (size_t i = 0; i < f->ng && !e; i++) {
		const struct brk_fss_grant *g = &f->g[i];

		if (now < g->nbf || now > g->exp)
			continue;
		/* A token's capabilities usually share one glob (the
		 * workspace's four are "DIR/ **"): match it once, not once per
		 * capability, on every request. */
		if (!mglob || strcmp(mglob, g->glob) != 0) {
			mglob = g->glob;
			matched = cap_path_match(g->glob, path);
		}
		if (matched) {
			struct cap_req r = { .op = g->op, .path = path };

			if (g->elevated && pol_inst_never_match(f->inst, &r))
				continue;
			if ((c->need & g->cap) && !(have & g->cap) && !tid)
				tid = g->tid;
			have |= g->cap | FSRV_CAP_SEE;
			own |= brk_fss_owns(g, t->uid, path) ? g->cap : 0;
		} else if (brk_fss_within(path, g->root)) {
			/* A directory on the way to a grant may be looked up. */
			have |= FSRV_CAP_SEE;
		} else {
			continue;
		}
		if (g->exp < first_exp)
			first_exp = g->exp;
	}
	/* What the kernel keeps of this answer lives no longer than the
	 * first of the grants that allowed it. */
	if (c->ttl && first_exp != UINT64_MAX)
		brk_fss_ttl(f, c->ttl, first_exp);
	if (!e && (c->need & ~have) != 0)
		e = CB_ENOTCOVERED;
	if (!e && (why = brk_fss_not_owner(f, c, own)) != NULL)
		e = CB_EPERM;
	if (!e && t->moved) {
		e = CB_ENOENT;
		why = "the tree's root was moved or removed on the host: no longer served";
	}
	if (!e && c->set_mode && brk_fss_root_mode_refused(f, t, path, c)) {
		e = CB_EPERM;
		why = "a grant's root keeps its mode: no permission it did not have";
	}
	/* As the explicit operations (brk_decide): nothing is done once the
	 * log has failed, and an operation that writes a line only while the
	 * log has room reserved for it, so no served change goes unaudited. */
	if (!e && f->aud && (!aud_healthy(f->aud) ||
	    (brk_fss_audited(c->op, false) != NULL && !aud_room(f->aud)))) {
		e = CB_EAUDIT;
		why = "the audit log cannot take this operation's line: not done";
	}
	fss_authz_audit(f, c, path, &(struct aud_rec){ .decision = e ? AUD_DENY : AUD_ALLOW,
	    .reason = e, .token_id = tid, .detail = why });
	pthread_mutex_unlock(&f->mu);
	return e;
}

/* The agent closed a file it read or wrote: one line with the byte counts
 * (none for an open that moved no data).  Also once the sandbox is
 * stopping: a release that reaches the server after the stop, and every
 * file still open when the server ends (fsrv_free: at_stop; the kernel
 * drops the releases still queued when the last mount goes), each get
 * their line, so that every open that moved data has exactly one close
 * line (docs/fsrv.md). */
static void
fss_closed(void *arg, const struct fsrv_close *c)
{
	struct brk_fss *f = arg;
	const struct brk_fss_tree *t = NULL;
	char path[2 * CAP_STR_MAX + 2], detail[96];

	if (c->nread == 0 && c->nwritten == 0)
		return;
	pthread_mutex_lock(&f->mu);
	brk_fss_gate(f);
	for (unsigned i = 0; i < f->ntrees; i++)
		if (f->trees[i]->idx == c->tree)
			t = f->trees[i];
	if (t) {
		snprintf(path, sizeof(path), "%s%s%s", t->path, c->path[0] ? "/" : "",
		    c->path[0] ? c->path : "(unlinked)");
		snprintf(detail, sizeof(detail), "served, %llu bytes read, %llu written%s",
		    (unsigned long long)c->nread, (unsigned long long)c->nwritten,
		    c->at_stop ? "; still open when the sandbox stopped" : "");
		brk_fss_audit(f, &(struct aud_rec){ .op = "fs.close", .decision = AUD_NONE,
		    .resource = path, .detail = detail }, true);
	}
	pthread_mutex_unlock(&f->mu);
}

/* The notifier wrote page invalidations (fsrv_cfg.on_pages): wake the
 * loop, which looks whether a loss's pages are all gone (brk_fss_aud_ready,
 * brk_fss_settle_check).  The eventfd lives until the thread has ended. */
static void
fss_pages(void *arg)
{
	struct brk_fss *f = arg;

	cb_ignore((int)write(f->aud_efd, &(uint64_t){ 1 }, sizeof(uint64_t)));
}

/* The server holds as many names for this sandbox as it may
 * (defaults.served_names): a new one was refused (ENFILE).  One line an
 * episode (fsrv says it once until there is room again). */
static void
fss_full(void *arg, unsigned tree, uint32_t names)
{
	struct brk_fss *f = arg;
	const struct brk_fss_tree *t = NULL;
	char detail[96];

	for (unsigned i = 0; i < f->ntrees; i++)
		if (f->trees[i]->idx == tree)
			t = f->trees[i];
	if (!t)
		return;
	snprintf(detail, sizeof(detail), "%lu names held, the most it may (served_names): new "
	    "names refused", (unsigned long)names);
	pthread_mutex_lock(&f->mu);
	brk_fss_gate(f);
	if (!f->stopping)
		brk_fss_audit(f, &(struct aud_rec){ .op = "fs.names", .decision = AUD_NONE,
		    .reason = CB_EBUSY, .resource = t->path, .detail = detail }, false);
	pthread_mutex_unlock(&f->mu);
}

/* ---- the loop's side of the audit queue ----------------------------- */

/* One allowed (or informative) record, as the explicit operations write:
 * charged to the sandbox's audit budget (red-team F6: uncharged, an
 * open() loop grew the log by 5 MiB a second). */
static void
brk_fss_write(struct brk_fss *f, const struct brk_fss_aud *a)
{
	struct aud_rec r = { .kind = AUD_OP, .decision = a->d, .reason = a->reason, .op = a->op,
		.resource = a->resource, .token_id = a->has_tid ? a->tid : NULL, .actor = "agent",
		.detail = a->detail };

	/* Once the sandbox is gone (its last close lines), in its name, with
	 * no budget left to charge: at most one line per file it had open. */
	if (!f->s) {
		r.sandbox = f->sid;
		brk_audit(f->b, &r);
		return;
	}
	brk_audit_done(f->s, &r);
}

static void
brk_fss_drain(struct brk_fss *f)
{
	struct brk_fss_aud *q;
	size_t n;

	if (f->ev_aud_tm)
		evtimer_del(f->ev_aud_tm);
	/* The spare queue for the server while the loop writes this one: two
	 * queues made at start, swapped, never allocated here. */
	pthread_mutex_lock(&f->mu);
	q = f->aq;
	n = f->naq;
	/* Taken: from here the bucket itself is charged, line by line. */
	f->avail -= f->queued;
	f->queued = 0.0;
	if (n) {
		size_t cap = f->aq_cap;

		f->aq = f->aq_spare;
		f->aq_cap = f->aq_spare_cap;
		f->aq_spare = q;
		f->aq_spare_cap = cap;
		f->naq = 0;
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&f->mu);
	for (size_t i = 0; i < n; i++) {
		struct brk_fss_aud *a = &q[i];

		if (a->d == AUD_DENY && f->s)
			brk_budget_deny(f->s, a->reason, a->op, a->resource, a->has_tid ? a->tid : NULL,
			    a->detail);
		else
			brk_fss_write(f, a);
		free(a->resource);
		a->resource = NULL;
	}
}

/* The sandbox's audit budget (budget.c), after the server's lines are
 * charged: the server is served on, throttled (its requests wait, the
 * bucket is looked at again when it should have refilled) or, throttled
 * too long, the sandbox is stopped as a flooding channel is (chan.c): its
 * line first, then the channel closes (b->chan_closed) and the agent is
 * killed.  f may be
 * gone when this returns after a stop. */
static void
brk_fss_budget(struct brk_fss *f)
{
	struct brk_sbx *s = f->s;
	struct timeval wait;
	char why[256];

	if (s->dead || f->budget_stopped)
		return;
	switch (brk_budget_check(s, &wait, why, sizeof(why))) {
	case BRK_BUDGET_OK:
		pthread_mutex_lock(&f->mu);
		f->throttled = false;
		f->avail = s->aud_bytes;
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&f->mu);
		return;
	case BRK_BUDGET_WAIT:
		pthread_mutex_lock(&f->mu);
		f->throttled = true;
		pthread_mutex_unlock(&f->mu);
		evtimer_add(f->ev_budget, &wait);
		return;
	case BRK_BUDGET_STOP:
		pthread_mutex_lock(&f->mu);
		f->throttled = true;
		pthread_mutex_unlock(&f->mu);
		/* Its line before the stop: refused for now (the writer behind
		 * a burst), the server keeps waiting and the check is tried
		 * again.  A log that failed for good takes no line at all. */
		if (brk_audit_sbx(s, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .op = "sandbox.channel-closed", .actor = "broker", .detail = why }) != 0 &&
		    aud_healthy(s->b->aud)) {
			wait = (struct timeval){ 0, 100000 };
			evtimer_add(f->ev_budget, &wait);
			return;
		}
		s->close_noted = true;
		f->budget_stopped = true;
		s->b->chan_closed(s, why);
		return;
	}
}

static void
brk_fss_budget_again(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	brk_fss_budget(arg);
}

static void
brk_fss_aud_tick(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd, (void)ev;
	brk_fss_drain(arg);
	brk_fss_budget(arg);	/* last: f may be gone after it */
}

static void brk_fss_ending(struct brk_fss *f);

/* The server queued the first record of a batch (drain it a little later,
 * with whatever follows) or filled half the queue (drain now); once
 * stopped, its last lines, or its end. */
static void
brk_fss_aud_ready(evutil_socket_t fd, short ev, void *arg)
{
	static const struct timeval delay = { 0, BRK_FSS_AUD_DELAY_US };
	struct brk_fss *f = arg;
	uint64_t v;
	size_t n;
	bool grow;

	(void)ev;
	cb_ignore((int)read(fd, &v, sizeof(v)));
	if (!f->s) {
		brk_fss_ending(f);	/* f may be gone after it */
		return;
	}
	brk_fss_settle_check(f);	/* the notifier may have written pages */
	pthread_mutex_lock(&f->mu);
	n = f->naq;
	grow = f->slots_new;
	f->slots_new = false;
	pthread_mutex_unlock(&f->mu);
	/* pid 1's slots are served now: a grant that waited for one. */
	if (grow)
		brk_fss_grow(f);
	if (n >= BRK_FSS_AUDQ_MAX / 2 ||
	    (!evtimer_pending(f->ev_aud_tm, NULL) && evtimer_add(f->ev_aud_tm, &delay) != 0)) {
		brk_fss_drain(f);
		brk_fss_budget(f);	/* last: f may be gone after it */
	}
}

void
brk_fss_flush(struct brk_sbx *s)
{
	static const struct timeval now = { 0, 0 };
	struct brk_fss *f = s->fss;

	if (!f)
		return;
	brk_fss_drain(f);
	/* The drain dropped the batch's timer: the budget check that follows
	 * every batch (and any the server asked for) as soon as the loop is
	 * back, never here, where f's sandbox may be stopped for it. */
	if (f->ev_aud_tm)
		cb_ignore(evtimer_add(f->ev_aud_tm, &now));
}

void
brk_fss_flush_ending(struct brk *b)
{
	for (struct brk_fss *f = b->fss_ending; f; f = f->next_ending)
		brk_fss_drain(f);	/* freed by its own wake-up, as always */
}

/* ---- the server thread (the pool's, serving this sandbox) ------------ */

/* Serve the trees the loop queued (granted while the sandbox runs), each
 * as its owner like the trees of the start.  A tree that cannot be served
 * keeps no index: every request of its mount is refused. */
static void
brk_fss_add_late(struct brk_fss *f)
{
	struct brk_fss_late q[BRK_FSS_TREES_MAX];
	size_t n;

	pthread_mutex_lock(&f->mu);
	n = f->nlate;
	memcpy(q, f->late, n * sizeof(q[0]));
	f->nlate = 0;
	pthread_mutex_unlock(&f->mu);
	for (size_t i = 0; i < n; i++) {
		struct brk_fss_tree *t;
		unsigned idx;
		int e;

		if (q[i].ti == BRK_FSS_NOTREE) {
			/* A slot of pid 1's: served now, given a tree later. */
			e = fsrv_add_slot(f->srv, q[i].dev, &idx);
			close(q[i].dev);
			pthread_mutex_lock(&f->mu);
			if (e == 0) {
				f->slots[q[i].slot].idx = idx;
				f->slots_new = true;
			} else {
				f->slots[q[i].slot].used = true;
			}
			pthread_mutex_unlock(&f->mu);
			/* The loop may have a grant waiting for it (brk_fss_aud_ready). */
			cb_ignore((int)write(f->aud_efd, &(uint64_t){ 1 }, sizeof(uint64_t)));
			continue;
		}
		t = f->trees[q[i].ti];		/* the loop wrote it before the 'a' */
		e = fsrv_add_tree(f->srv, q[i].root, q[i].dev, &idx);

		if (e == 0 && t->uid != 0 && !f->stub_mounts)
			e = fsrv_tree_owner(f->srv, idx, t->uid, t->gid);
		close(q[i].root);
		close(q[i].dev);
		pthread_mutex_lock(&f->mu);
		if (e == 0)
			t->idx = idx;
		else
			brk_fss_audit(f, &(struct aud_rec){ .op = "fs.serve", .decision = AUD_DENY,
			    .reason = e, .resource = t->path,
			    .detail = "not served: the file server refused the tree" }, false);
		pthread_mutex_unlock(&f->mu);
	}
}

/* The loop said stop (brk_fss_stop): the connections end here, and the
 * agent sees ENOTCONN.  Files still open are reported (fss_closed,
 * at_stop) and their lines queued; the loop writes them and frees f once
 * the pool has forgotten the server (brk_fss_gone). */
static void
brk_fss_end(struct brk_fss *f)
{
	fsrv_free(f->srv);
	f->srv = NULL;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nlate; i++) {
		if (f->late[i].root >= 0)
			close(f->late[i].root);
		close(f->late[i].dev);
	}
	f->nlate = 0;
	for (size_t i = 0; i < f->nfuse; i++)
		if (f->uroot[i] >= 0)
			close(f->uroot[i]);	/* no connection came for it */
	f->nfuse = 0;
	pthread_mutex_unlock(&f->mu);
}

/* The pool has forgotten f's server (after brk_fss_end): the loop may
 * free f (brk_fss_ending), and the pool with it if f's was its last
 * server.  The wake-up is written under f->mu, which the loop takes to
 * read ended before it frees f: after this the thread touches nothing of
 * f. */
static void
brk_fss_gone(void *arg)
{
	struct brk_fss *f = arg;

	pthread_mutex_lock(&f->mu);
	f->ended = true;
	pthread_cond_broadcast(&f->cond);
	cb_ignore((int)write(f->aud_efd, &(uint64_t){ 1 }, sizeof(uint64_t)));
	pthread_mutex_unlock(&f->mu);
}

/*
 * The stop pipe, on the pool thread serving f (fsrv_pool: no other serves
 * f meanwhile): an 'a' brings trees granted while the sandbox runs; an
 * 'x', or the pipe closed, ends the server.  The server is freed only
 * once the loop has let go of f (it may still queue invalidations until
 * then).  True once freed: the pool forgets it.
 */
static bool
brk_fss_ctl(void *arg)
{
	struct brk_fss *f = arg;
	char c;
	ssize_t n = read(f->stop_pipe[0], &c, 1);

	if (n == 1 && c == 'a') {
		brk_fss_add_late(f);
		return false;
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return false;
	brk_fss_end(f);
	return true;
}

/* ---- start and stop (loop thread) ----------------------------------- */

/* A writable bind the broker serves instead: the high tier's, a directory,
 * as root (an unprivileged broker cannot mount FUSE in the sandbox). */
static bool
brk_fss_rw_candidate(const struct brk_sbx *s, const struct sbx_bind *bd)
{
	struct stat st;
	int fd;
	bool dir;

	if (s->stier != SBX_TIER_HIGH || !bd->writable || geteuid() != 0)
		return false;
	if ((fd = cb_open_abs(bd->src, O_PATH | O_DIRECTORY)) < 0)
		return false;	/* the launcher reports it as a bind source */
	dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
	close(fd);
	return dir;
}

static int
brk_fss_rw_tokens(struct brk_sbx *s, struct sbx_config *cfg, char *why, size_t whylen)
{
	/* It lives as long as the sandbox may. */
	struct brk_fss_mint m = { .now = st_now(s->b->st),
		.ttl = s->wall ? s->wall : SBX_DEFAULT_WALL_SECS, .actor = "broker" };
	int r;

	for (size_t i = 0; i < cfg->nbinds; i++) {
		if (!brk_fss_rw_candidate(s, &cfg->binds[i]))
			continue;
		if ((r = brk_fss_tree_token(s, cfg->binds[i].src, "writable bind", &m, why,
		    whylen)) != 0)
			return r;
	}
	return 0;
}

/* A tree for host path path, served at dst ("": at path), not served yet. */
static struct brk_fss_tree *
brk_fss_tree_new(const char *path, const char *dst)
{
	size_t np = strnlen(path, CAP_STR_MAX), nd = strnlen(dst, CAP_STR_MAX);
	struct brk_fss_tree *t = calloc(1, sizeof(*t) + np + nd + 2);
	char *p;

	if (t == NULL)
		return NULL;
	p = t->str;
	memcpy(p, path, np);
	t->path = p;
	p += np + 1;
	memcpy(p, dst, nd);
	t->dst = p;
	t->mnt = -1;
	t->idx = BRK_FSS_NOTREE;
	return t;
}

/* Was bd made a served tree? */
static bool
brk_fss_rw_served(const struct brk_fss *f, const struct sbx_bind *bd)
{
	for (unsigned i = 0; i < f->ntrees; i++)
		if (f->trees[i]->dst[0] && f->trees[i]->idx != BRK_FSS_NOTREE &&
		    strcmp(f->trees[i]->dst, bd->dst) == 0 && strcmp(f->trees[i]->path, bd->src) == 0)
			return true;
	return false;
}

/* A served tree for every writable bind whose source a live grant covers
 * (its own token, unless revoked already), at the bind's destination. */
static int
brk_fss_rw_trees(struct brk_fss *f, const struct sbx_config *cfg)
{
	struct brk_fss_tree *t;

	for (size_t i = 0; i < cfg->nbinds; i++) {
		const struct sbx_bind *bd = &cfg->binds[i];
		bool covered = false;

		if (!brk_fss_rw_candidate(f->s, bd) || strlen(bd->src) > CAP_STR_MAX ||
		    strlen(bd->dst) > CAP_STR_MAX)
			continue;
		for (size_t k = 0; k < f->ng && !covered; k++)
			covered = f->g[k].op == CAP_FS_WRITE && cap_path_match(f->g[k].glob, bd->src);
		if (!covered || f->ntrees == SBX_MOUNTS_MAX)
			continue;
		if (!f->binds && !(f->binds = calloc(cfg->nbinds, sizeof(*f->binds))))
			return CB_ENOMEM;
		if ((t = brk_fss_tree_new(bd->src, bd->dst)) == NULL)
			return CB_ENOMEM;
		f->trees[f->ntrees++] = t;
	}
	return 0;
}

/* Add the tree rooted at path unless it is already served (or inside a
 * served tree); a served tree inside path is replaced by it.  Before the
 * sandbox starts (no thread reads the trees yet).  CB_ENOMEM. */
static int
brk_fss_want(struct brk_fss *f, const char *path)
{
	unsigned k = 0;

	for (unsigned i = 0; i < f->ntrees; i++)
		if (brk_fss_within(f->trees[i]->path, path))
			return 0;	/* path is inside (or is) a served tree */
	for (unsigned i = 0; i < f->ntrees; i++) {
		if (!brk_fss_within(path, f->trees[i]->path))
			f->trees[k++] = f->trees[i];
		else
			free(f->trees[i]);	/* trees inside path go */
	}
	f->ntrees = k;
	if (f->ntrees == SBX_MOUNTS_MAX)
		return 0;
	if ((f->trees[f->ntrees] = brk_fss_tree_new(path, "")) == NULL)
		return CB_ENOMEM;
	f->ntrees++;
	return 0;
}

/* May a grant's root be served at its own path inside the sandbox?  Not
 * "/", not where the sandbox builds its own tree (/proc, /dev, /etc, /tmp
 * itself, /capbroker), not inside the system runtime it binds (/usr and
 * the top-level links), not a bind's destination, not the broker's state. */
static bool
brk_fss_servable(const struct brk_fss *f, const char *root)
{
	static const char *const sys[] = { "/usr", "/bin", "/lib", "/lib64", "/sbin", NULL };

	if (sbx_bind_dst_refusal(root) != NULL || brk_fss_is_state(f, root, true))
		return false;
	for (size_t i = 0; sys[i]; i++)
		if (brk_fss_within(root, sys[i]) || brk_fss_within(sys[i], root))
			return false;
	for (size_t i = 0; i < f->nbd; i++)
		if (brk_fss_within(root, f->bd[i].dst) || brk_fss_within(f->bd[i].dst, root) ||
		    (f->bd[i].writable && (brk_fss_within(root, f->bd[i].src) ||
		    brk_fss_within(f->bd[i].src, root))))
			return false;
	return true;
}

/* Keep the binds of cfg for brk_fss_servable after the spawn. */
static int
brk_fss_keep_binds(struct brk_fss *f, const struct sbx_config *cfg)
{
	if (cfg->nbinds == 0)
		return 0;
	if (!(f->bd = calloc(cfg->nbinds, sizeof(*f->bd))))
		return CB_ENOMEM;
	for (size_t i = 0; i < cfg->nbinds; i++, f->nbd++) {
		f->bd[i].writable = cfg->binds[i].writable;
		if (!(f->bd[i].src = strdup(cfg->binds[i].src)) ||
		    !(f->bd[i].dst = strdup(cfg->binds[i].dst))) {
			f->nbd++;
			return CB_ENOMEM;
		}
	}
	return 0;
}

static void
brk_fss_binds_free(struct brk_fss *f)
{
	for (size_t i = 0; i < f->nbd; i++) {
		free(f->bd[i].src);
		free(f->bd[i].dst);
	}
	free(f->bd);
	f->bd = NULL;
	f->nbd = 0;
}

static void
brk_fss_discard(struct brk_fss *f)
{
	for (unsigned i = 0; i < f->ntrees; i++) {
		if (f->trees[i]->mnt >= 0)
			close(f->trees[i]->mnt);
		free(f->trees[i]);
	}
	for (size_t i = 0; i < SBX_SLOTS_MAX; i++)
		if (f->slot_mnt[i] >= 0)
			close(f->slot_mnt[i]);
	fsrv_free(f->srv);
	brk_fss_grants_free(f->g, f->ng);
	free(f->rename_from);
	free(f->aq);
	free(f->aq_spare);
	free(f->binds);
	brk_fss_binds_free(f);
	for (size_t i = 0; i < f->nfuse; i++)
		if (f->uroot[i] >= 0)
			close(f->uroot[i]);
	if (f->stop_pipe[0] >= 0)
		close(f->stop_pipe[0]);
	if (f->stop_pipe[1] >= 0)
		close(f->stop_pipe[1]);
	if (f->aud_efd >= 0)
		close(f->aud_efd);
	if (f->ev_aud)
		event_free(f->ev_aud);
	if (f->ev_aud_tm)
		event_free(f->ev_aud_tm);
	if (f->ev_budget)
		event_free(f->ev_budget);
	if (f->ev_exp)
		event_free(f->ev_exp);
	if (f->ev_settle)
		event_free(f->ev_settle);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* Open tree t's root through the one resolver, and note its owner, mode
 * and identity in t.  CB_ENOENT with the reason in why. */
static int
brk_fss_root_open(struct brk_fss_tree *t, int *root, char *why, size_t whylen)
{
	struct stat st;

	if ((*root = cb_open_abs(t->path, O_PATH | O_DIRECTORY)) < 0 || fstat(*root, &st) != 0) {
		snprintf(why, whylen, "served tree %s: %s", t->path, strerror(errno));
		return CB_ENOENT;
	}
	t->uid = st.st_uid;
	t->gid = st.st_gid;
	t->mode = st.st_mode & 07777;
	t->dev = st.st_dev;
	t->ino = st.st_ino;
	return 0;
}

/* Open tree t's root (its owner into t) and a fresh FUSE connection, and
 * make a detached mount of it usable by the agent's uid only (t->mnt).  The
 * caller closes *root and *dev. */
static int
brk_fss_tree_mount(struct brk_fss_tree *t, uid_t agent, int *root, int *dev, char *why,
    size_t whylen)
{
	struct fsrv_mount_opts mo = { .user_id = agent, .group_id = agent, .readahead = true };
	int r;

	*dev = -1;
	if ((r = brk_fss_root_open(t, root, why, whylen)) != 0)
		return r;
	if ((*dev = open("/dev/fuse", O_RDWR | O_CLOEXEC)) < 0) {
		snprintf(why, whylen, "the file server cannot open /dev/fuse: %s", strerror(errno));
		return CB_EUNSUPPORTED;
	}
	if ((r = fsrv_mount_detached(*dev, &mo, &t->mnt)) != 0)
		snprintf(why, whylen, "the file server cannot mount %s: %s", t->path,
		    r == CB_EIO ? strerror(errno) : cb_strerror(r));
	return r;
}

/* Open tree t's root, make it an fsrv tree on a fresh FUSE connection and
 * a detached mount usable by the agent's uid only. */
static int
brk_fss_tree_open(struct brk_fss *f, struct brk_fss_tree *t, uid_t agent, char *why,
    size_t whylen)
{
	int root = -1, dev = -1, r;

	/* The pool reads the connection only once the server is given to
	 * it (brk_fss_launch): the mount's first request (INIT) waits. */
	if ((r = brk_fss_tree_mount(t, agent, &root, &dev, why, whylen)) == 0 &&
	    (r = fsrv_add_tree(f->srv, root, dev, &t->idx)) != 0) {
		if (r == CB_EBUSY)
			snprintf(why, whylen, "served tree %s: no FUSE connection left (at most %u "
			    "trees a sandbox: docs/fsrv.md, \"Bounds\")", t->path, FSRV_MAX_TREES);
		else
			snprintf(why, whylen, "served tree %s: %s", t->path, cb_strerror(r));
	}
	if (root >= 0)
		close(root);
	if (dev >= 0)
		close(dev);
	return r;
}

/* A new file server state for sandbox s holding grants g (taken over: freed
 * here on failure). */
static struct brk_fss *
brk_fss_new(struct brk_sbx *s, struct brk_fss_grant *g, size_t ng)
{
	struct brk_fss *f;

	if (!(f = calloc(1, sizeof(*f)))) {
		brk_fss_grants_free(g, ng);
		return NULL;
	}
	f->s = s;
	f->g = g;
	f->ng = ng;
	f->inst = s->inst;
	f->aud = f->room_log = s->b->aud;
	f->floor = st_now(s->b->st);
	f->stop_pipe[0] = f->stop_pipe[1] = f->aud_efd = -1;
	for (size_t i = 0; i < SBX_SLOTS_MAX; i++) {
		f->slot_mnt[i] = -1;
		f->slots[i].idx = BRK_FSS_NOTREE;
	}
	f->avail = s->aud_bytes;
	snprintf(f->sid, sizeof(f->sid), "%s", s->id);
	f->state_real = s->b->state_real;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cond, NULL);
	return f;
}

/* Open and mount every tree of f into f->mounts; *ws_served says whether
 * the workspace is among them. */
static int
brk_fss_mount_trees(struct brk_fss *f, uid_t agent, bool *ws_served, char *why, size_t whylen)
{
	struct brk_sbx *s = f->s;
	int r;

	for (unsigned i = 0, k = 0; i < f->ntrees; i++) {
		bool ws = !f->trees[i]->dst[0] && strcmp(f->trees[i]->path, s->workspace) == 0;

		if (f->stub_mounts) {
			/* pid 1 makes the mount; the root waits for its
			 * connection (brk_fss_connections). */
			int root;

			if ((r = brk_fss_root_open(f->trees[i], &root, why, whylen)) != 0) {
				if (ws)
					return r;
				continue;
			}
			f->uroot[f->nfuse] = root;
			f->uti[f->nfuse] = i;
			f->fuse_dsts[f->nfuse++] = f->trees[i]->dst[0] ? f->trees[i]->dst :
			    f->trees[i]->path;
			*ws_served |= ws;
			continue;
		}
		if ((r = brk_fss_tree_open(f, f->trees[i], agent, why, whylen)) != 0) {
			/* A grant's root that cannot be opened through the
			 * resolver (missing, a kernel file system, not ours to
			 * search) is not served; capcall still answers for it.
			 * The workspace must be served. */
			if (ws || r != CB_ENOENT)
				return r;
			continue;
		}
		f->mounts[k++] = (struct sbx_mount){ .fd = f->trees[i]->mnt,
			.dst = f->trees[i]->dst[0] ? f->trees[i]->dst : f->trees[i]->path };
		f->nmounts = k;
		*ws_served |= ws;
	}
	return 0;
}

/* Slots a sandbox starts with: the trees granted while it runs that
 * unmodified programs may write (docs/sandbox.md, "Trees granted while the
 * sandbox runs"), the policy's defaults.fs_slots (at most SBX_SLOTS_MAX,
 * checked at load).  Each is a FUSE connection and an empty mount from the
 * start; later trees past them are served read-only to unmodified programs
 * (a root broker) or not at all (a broker that is not root). */
static size_t
brk_fss_nslots(const struct brk_fss *f)
{
	uint64_t n = pol_fs_slots(f->s->pol->pol);

	return n < SBX_SLOTS_MAX ? (size_t)n : SBX_SLOTS_MAX;
}

/* A root broker's slots: for each a fresh FUSE connection, served as a
 * slot (fsrv_add_slot: nothing until a tree is given), and its detached
 * mount, usable by the agent's uid only, for the stub (--slot-fd).  A slot
 * that cannot be made is left out (said once): trees granted later are
 * then served read-only to unmodified programs, as past the last slot. */
static void
brk_fss_make_slots(struct brk_fss *f, uid_t agent)
{
	struct fsrv_mount_opts mo = { .user_id = agent, .group_id = agent, .readahead = true };

	for (size_t i = 0, n = brk_fss_nslots(f); i < n; i++) {
		int dev = open("/dev/fuse", O_RDWR | O_CLOEXEC), mnt = -1, r = CB_EUNSUPPORTED;

		if (dev < 0 || (r = fsrv_mount_detached(dev, &mo, &mnt)) != 0 ||
		    (r = fsrv_add_slot(f->srv, dev, &f->slots[i].idx)) != 0) {
			f->slots[i].idx = BRK_FSS_NOTREE;
			brk_audit_done(f->s, &(struct aud_rec){ .kind = AUD_ADMIN,
			    .reason = r, .op = "fs.serve", .resource = "(slots)", .actor = "broker",
			    .detail = "a slot for trees granted later could not be made: those are "
			    "read-only to unmodified programs" });
			if (dev >= 0)
				close(dev);
			if (mnt >= 0)
				close(mnt);
			return;
		}
		close(dev);	/* the server has its own; the mount lives in mnt */
		f->slot_mnt[i] = mnt;
		f->nslots++;
	}
}

/*
 * Each tree's owner, whose file-system identity its requests are answered
 * with (a root-owned tree is served as root), so files the agent creates
 * belong to the owner and the owner's permissions decide.  Identity is per
 * thread: the pool thread answering a request takes the one its tree asks
 * for (fsrv_tree_owner, fsrv_identity), whichever sandbox it served before.
 */
static int
brk_fss_owners(struct brk_fss *f, char *why, size_t whylen)
{
	int r;

	for (unsigned i = 0; i < f->ntrees && !f->stub_mounts; i++) {
		const struct brk_fss_tree *t = f->trees[i];

		if (t->uid == 0 || t->idx == BRK_FSS_NOTREE)
			continue;
		if ((r = fsrv_tree_owner(f->srv, t->idx, t->uid, t->gid)) != 0) {
			snprintf(why, whylen, "the file server cannot act as the owner of %s: %s",
			    t->path, cb_strerror(r));
			return r;
		}
	}
	return 0;
}

/* The broker's serving threads, made by the first sandbox served. */
static int
brk_fss_pool(struct brk *b, char *why, size_t whylen)
{
	static const struct fsrv_pool_cfg pc = { .min = BRK_FSS_POOL_MIN,
		.max = BRK_FSS_POOL_MAX, .idle_ms = BRK_FSS_POOL_IDLE_MS };
	int r;

	if (b->fss_pool)
		return 0;
	if ((r = fsrv_pool_new(&pc, &b->fss_pool)) != 0)
		snprintf(why, whylen, "the file server's threads: %s", cb_strerror(r));
	return r;
}

/* The audit queue's wake-up on the broker's loop; the server given to the
 * pool's threads, which serve it from here (its stop pipe says when to
 * add trees and when to end). */
static int
brk_fss_launch(struct brk_fss *f, char *why, size_t whylen)
{
	int r;

	if (pipe2(f->stop_pipe, O_CLOEXEC) != 0 ||
	    (f->aud_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    !(f->ev_aud = event_new(f->s->b->base, f->aud_efd, EV_READ | EV_PERSIST,
	    brk_fss_aud_ready, f)) ||
	    !(f->ev_aud_tm = evtimer_new(f->s->b->base, brk_fss_aud_tick, f)) ||
	    !(f->ev_budget = evtimer_new(f->s->b->base, brk_fss_budget_again, f)) ||
	    !(f->ev_exp = evtimer_new(f->s->b->base, brk_fss_expiry_cb, f)) ||
	    !(f->ev_settle = evtimer_new(f->s->b->base, brk_fss_settle_over, f)) ||
	    event_add(f->ev_aud, NULL) != 0) {
		snprintf(why, whylen, "the file server: %s", strerror(errno));
		return CB_EIO;
	}
	if ((r = brk_fss_owners(f, why, whylen)) != 0 || (r = brk_fss_pool(f->s->b, why, whylen)) != 0)
		return r;
	if ((r = fsrv_pool_add(f->s->b->fss_pool, f->srv, f->stop_pipe[0], brk_fss_ctl, brk_fss_gone,
	    f)) != 0) {
		snprintf(why, whylen, "the file server: %s", cb_strerror(r));
		return r;
	}
	return 0;
}

/* Put the served trees in the sandbox's configuration in place of the
 * binds they replace. */
static void
brk_fss_apply(struct brk_fss *f, struct sbx_config *cfg, bool ws_served)
{
	cfg->mounts = f->mounts;
	cfg->nmounts = f->nmounts;
	if (f->binds) {
		/* Served now: no longer bound. */
		size_t k = 0;

		for (size_t i = 0; i < cfg->nbinds; i++)
			if (!brk_fss_rw_served(f, &cfg->binds[i]))
				f->binds[k++] = cfg->binds[i];
		cfg->binds = f->binds;
		cfg->nbinds = k;
	}
	if (!cfg->chdir && ws_served)
		cfg->chdir = f->s->workspace;
}

/* A broker that is not root: may its user open /dev/fuse (as pid 1 will,
 * in the sandbox's user namespace, with the same credentials)?  If not,
 * the workspace (the tree the agent starts in) makes the start fail with
 * the reason; other trees are not served (capcall still answers for them,
 * as for a root that cannot be opened) and the log says so. */
static int
brk_fss_probe(struct brk_fss *f, char *why, size_t whylen)
{
	struct brk_sbx *s = f->s;
	bool ws = false;
	int fd, e;

	if ((fd = open("/dev/fuse", O_RDWR | O_CLOEXEC)) >= 0) {
		close(fd);
		return 0;
	}
	e = errno;
	if (f->ntrees == 0)
		return 0;	/* nothing to say: no slots either (brk_fss_start) */
	for (unsigned i = 0; i < f->ntrees; i++)
		ws |= !f->trees[i]->dst[0] && strcmp(f->trees[i]->path, s->workspace) == 0;
	snprintf(why, whylen, "the file server cannot serve %s: a broker that is not root needs "
	    "/dev/fuse usable by uid %u inside the sandbox (mode 0666; here: %s), and a root "
	    "broker mounts it itself; run capbroker as root, or make /dev/fuse usable",
	    ws ? s->workspace : f->trees[0]->path, (unsigned)geteuid(), strerror(e));
	if (ws)
		return CB_EUNSUPPORTED;
	brk_audit_done(s, &(struct aud_rec){ .kind = AUD_ADMIN,
	    .reason = CB_EUNSUPPORTED, .op = "fs.serve", .resource = f->trees[0]->path,
	    .actor = "broker", .detail = why });
	why[0] = '\0';
	for (unsigned i = 0; i < f->ntrees; i++)
		free(f->trees[i]);	/* none is served (no thread reads them yet) */
	f->ntrees = 0;
	return 0;
}

/* Every sandbox's served files together keep half of the broker's
 * open-files limit free for its own descriptors (channels, pidfds, the log,
 * the admin socket): without it a few sandboxes each holding BRK_FSS_HANDLES
 * files open made every other sandbox's start fail (red-team F8).  Read at
 * each start: the limit is the process's and may change. */
static void
brk_fss_handles_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		fsrv_handles_limit(rl.rlim_cur / 2 > UINT32_MAX ? UINT32_MAX :
		    (uint32_t)(rl.rlim_cur / 2));
}

/* What the stub must do with the file server's mounts: attach the
 * broker's (root broker), or make its own (--fuse-at, --fuse-slots). */
static void
brk_fss_tell_stub(const struct brk_fss *f, struct sbx_config *cfg)
{
	if (f->stub_mounts) {
		cfg->fuse_dsts = f->fuse_dsts;
		cfg->nfuse = f->nfuse;
		cfg->fuse_slots = f->nslots;
		cfg->mount_later = f->nslots != 0;
	} else {
		cfg->mount_later = true;
		cfg->slot_fds = f->slot_mnt;
		cfg->nslots = f->nslots;
	}
}

/* The file server of sandbox s, as its tier's policy has it. */
static struct fsrv_cfg
brk_fss_cfg(const struct brk_sbx *s)
{
	const struct pol_tier *tier = pol_tier_get(s->pol->pol, s->tier_name);

	/* cache_data unless the policy opts out (fs_cache_data = false):
	 * cached pages of an open file are read without a request while its
	 * grants live; a revocation or expiry drops them before it is
	 * acknowledged (brk_fss_settle_begin; docs/fsrv.md). */
	return (struct fsrv_cfg){ .authz = fss_authz, .on_close = fss_closed, .on_pages = fss_pages,
		.max_handles_all = BRK_FSS_HANDLES, .on_full = fss_full,
		.entry_timeout = BRK_FSS_TIMEOUT, .negative_timeout = BRK_FSS_NEG_TIMEOUT,
		.attr_timeout = BRK_FSS_TIMEOUT, .keep_identity = true,
		.cache_data = !tier || pol_tier_fs_cache_data(tier),
		.passthrough = tier && pol_tier_fs_passthrough(tier),
		/* Bounded per sandbox, all its trees together; past half the
		 * kernel is asked to forget the least recently used names. */
		.max_nodes = (uint32_t)pol_served_names(s->pol->pol), .release_names = true,
		/* A root broker's agent is nobody, whom the owner's files would
		 * not be: shown as its own, so that the kernel lets it ask for
		 * what only an owner may (sed -i's and cp -a's ACL copy). */
		.owner_as_agent = geteuid() == 0, .agent_uid = SBX_ROOT_AGENT_ID,
		.agent_gid = SBX_ROOT_AGENT_ID };
}

int
brk_fss_start(struct brk_sbx *s, struct sbx_config *cfg, char *why, size_t whylen)
{
	struct fsrv_cfg fc = brk_fss_cfg(s);
	struct brk_fss *f;
	struct brk_fss_grant *g = NULL;
	size_t ng = 0;
	bool ws_served = false;
	uid_t agent = geteuid() == 0 ? SBX_ROOT_AGENT_ID : geteuid();
	int r;

	if (s->stier == SBX_TIER_LOW)
		return 0;
	/* The high tier's writable binds are served too, so that they are
	 * revocable: each gets a token of its own for its source tree. */
	if ((r = brk_fss_rw_tokens(s, cfg, why, whylen)) != 0)
		return r;
	if ((r = brk_fss_collect(s, &g, &ng)) != 0) {
		snprintf(why, whylen, "the file server: %s", cb_strerror(r));
		return r;
	}
	if (!(f = brk_fss_new(s, g, ng)))
		return CB_ENOMEM;
	if ((r = brk_fss_keep_binds(f, cfg)) != 0)
		goto fail;
	/* The trees: the root of every fs.* grant the sandbox starts with
	 * that can be shown at its own path (the workspace token's root is
	 * the workspace). */
	for (size_t i = 0; i < ng; i++)
		if (brk_fss_servable(f, g[i].root) && (r = brk_fss_want(f, g[i].root)) != 0)
			goto fail;
	if ((r = brk_fss_rw_trees(f, cfg)) != 0)
		goto fail;
	/* With no tree yet the broker serves all the same: a tree granted
	 * while the sandbox runs is mounted then (brk_fss_grow), in a slot.
	 * A /dev/fuse opened outside the sandbox's user namespace cannot be
	 * mounted inside it, and a broker that is not root cannot mount at
	 * all: pid 1 opens its own and mounts the trees (--fuse-at) and the
	 * slots (--fuse-slots), and sends the connections; where it cannot,
	 * a sandbox whose workspace is served does not start (125, saying
	 * why), and one without trees starts without slots (docs/sandbox.md). */
	f->stub_mounts = geteuid() != 0;
	if (f->stub_mounts) {
		int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

		if (fd >= 0) {
			close(fd);
			f->nslots = brk_fss_nslots(f);
		}
		if ((r = brk_fss_probe(f, why, whylen)) != 0)
			goto fail;
		if (f->ntrees == 0 && f->nslots == 0) {
			brk_fss_discard(f);
			return 0;
		}
	}
	fc.authz_arg = f;
	brk_fss_handles_limit();
	if ((r = fsrv_new(&fc, &f->srv)) != 0) {
		snprintf(why, whylen, "the file server: %s", cb_strerror(r));
		goto fail;
	}
	if ((r = brk_fss_mount_trees(f, agent, &ws_served, why, whylen)) != 0)
		goto fail;
	if (!f->stub_mounts)
		brk_fss_make_slots(f, agent);
	if ((r = brk_fss_launch(f, why, whylen)) != 0)
		goto fail;
	s->fss = f;
	brk_fss_apply(f, cfg, ws_served);
	brk_fss_expiry(f, cb_now());
	brk_fss_tell_stub(f, cfg);
	return 0;
fail:
	brk_fss_discard(f);
	return r;
}

/* ---- trees granted while the sandbox runs (loop thread) ------------- */

static void
brk_fss_serve_audit(struct brk_fss *f, int reason, const char *path, const char *detail)
{
	brk_audit_done(f->s, &(struct aud_rec){ .kind = AUD_ADMIN, .reason = reason,
	    .op = "fs.serve", .resource = path, .actor = "broker", .detail = detail });
}

/* Is path a served tree's root or inside one (asked for already)? */
static bool
brk_fss_known(const struct brk_fss *f, const char *path)
{
	for (unsigned i = 0; i < f->ntrees; i++)
		if (brk_fss_within(f->trees[i]->path, path))
			return true;
	return false;
}

/* A slot for path: one served and unused, or none.  *wait says a slot of
 * pid 1's is not served yet (the grant waits for it: brk_fss_aud_ready).
 * Beneath /tmp pid 1 attaches nothing later (the agent makes directories
 * there), so no slot is spent on it. */
static struct brk_fss_slot *
brk_fss_slot_free(struct brk_fss *f, const char *path, bool *wait)
{
	struct brk_fss_slot *sl = NULL;

	*wait = false;
	if (brk_fss_within("/tmp", path))
		return NULL;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nslots && !sl; i++) {
		if (f->slots[i].used)
			continue;
		if (f->slots[i].idx == BRK_FSS_NOTREE)
			*wait = true;
		else
			sl = &f->slots[i];
	}
	pthread_mutex_unlock(&f->mu);
	return sl;
}

/*
 * Give tree t (the table's newest) slot sl: the server takes t's root for
 * the slot's connection (before it answers the slot's next request), then
 * pid 1 attaches the slot at t's path (sbx_slot_send).  Why this is safe:
 * the slot's mount is the agent's only way to its root, and every request
 * there is decided by fss_authz against live tokens for t's path, exactly
 * as for any served tree; Landlock's write rule for the slot's root (made
 * when the sandbox started) only lets the request reach the broker.  A
 * slot is used once, whatever happens.
 */
static int
brk_fss_slot_tree(struct brk_fss *f, struct brk_fss_tree *t, struct brk_fss_slot *sl,
    char *why, size_t whylen)
{
	int root = -1, r;

	pthread_mutex_lock(&f->mu);
	sl->used = true;
	pthread_mutex_unlock(&f->mu);
	if ((r = brk_fss_root_open(t, &root, why, whylen)) != 0)
		return r;
	/* A root-owned tree is served as root (the thread's own identity),
	 * as at the start; a broker that is not root has no other. */
	r = fsrv_slot_fill(f->srv, sl->idx, root, !f->stub_mounts && t->uid != 0, t->uid, t->gid);
	close(root);
	if (r != 0) {
		snprintf(why, whylen, "not served: the file server refused the tree: %s",
		    cb_strerror(r));
		return r;
	}
	pthread_mutex_lock(&f->mu);
	t->idx = sl->idx;
	t->slot = true;
	pthread_mutex_unlock(&f->mu);
	if ((r = sbx_slot_send(&f->s->proc, (unsigned)(sl - f->slots), t->path)) != 0)
		snprintf(why, whylen, "not served: the sandbox's mount channel: %s",
		    cb_strerror(r));
	return r;
}

/* Serve the tree rooted at path, granted while the sandbox runs: in a slot
 * while one is left; past them (a root broker) a fresh FUSE connection for
 * the thread, its detached mount for pid 1, which attaches it at path
 * (sbx_mount_send).  Tried once: a tree that fails stays in the table (no
 * index), so the tick does not try it again. */
static void
brk_fss_late_tree(struct brk_fss *f, const char *path)
{
	struct brk_fss_tree *t;
	unsigned ti;
	struct brk_fss_slot *sl;
	char why[512];
	int root = -1, dev = -1, r;
	const char add = 'a';
	bool wait;

	if (f->ntrees == BRK_FSS_TREES_MAX || f->ntrees >= FSRV_MAX_TREES) {
		if (!f->full_said)
			brk_fss_serve_audit(f, CB_ETOOBIG, path, "not served: the sandbox has "
			    "as many served trees as it may; capcall still answers");
		f->full_said = true;
		return;
	}
	sl = brk_fss_slot_free(f, path, &wait);
	if (!sl && wait)
		return;		/* tried again once pid 1's slots are served */
	if ((t = brk_fss_tree_new(path, "")) == NULL) {
		brk_fss_serve_audit(f, CB_ENOMEM, path, "not served: out of memory");
		return;
	}
	pthread_mutex_lock(&f->mu);
	ti = f->ntrees;
	f->trees[f->ntrees++] = t;
	pthread_mutex_unlock(&f->mu);
	why[0] = '\0';
	if (sl) {
		if (brk_fss_slot_tree(f, t, sl, why, sizeof(why)) != 0)
			brk_fss_serve_audit(f, CB_EIO, path, why);
		return;
	}
	if (f->stub_mounts) {
		/* pid 1 cannot open /dev/fuse again once the root has moved,
		 * and the broker cannot mount in its user namespace. */
		brk_fss_serve_audit(f, CB_EUNSUPPORTED, path, "not served: no slot left for a tree "
		    "granted while the sandbox runs (a broker that is not root mounts no other); "
		    "capcall still answers");
		return;
	}
	if ((r = brk_fss_tree_mount(t, SBX_ROOT_AGENT_ID, &root, &dev, why, sizeof(why))) != 0 ||
	    (r = sbx_mount_send(&f->s->proc, t->mnt, t->path)) != 0) {
		if (r != 0 && why[0] == '\0')
			snprintf(why, sizeof(why), "not served: the sandbox's mount channel: %s",
			    cb_strerror(r));
		brk_fss_serve_audit(f, r, path, why);
		goto out;
	}
	why[0] = '\0';
	pthread_mutex_lock(&f->mu);
	f->late[f->nlate++] = (struct brk_fss_late){ .ti = ti, .root = root,
	    .dev = dev };
	pthread_mutex_unlock(&f->mu);
	root = dev = -1;
	cb_ignore((int)write(f->stop_pipe[1], &add, 1));
out:
	if (t->mnt >= 0)
		close(t->mnt);	/* pid 1 has its own */
	t->mnt = -1;
	if (root >= 0)
		close(root);
	if (dev >= 0)
		close(dev);
}

/* Every servable root of a live grant that no tree covers yet. */
static void
brk_fss_grow(struct brk_fss *f)
{
	if (!f->chan_ok)
		return;
	/* f->g is the loop's own (it replaces it): read without the lock. */
	for (size_t i = 0; i < f->ng; i++)
		if (!brk_fss_known(f, f->g[i].root) && brk_fss_servable(f, f->g[i].root))
			brk_fss_late_tree(f, f->g[i].root);
}

/* pid 1 answered a later mount: audit it. */
static void
brk_fss_chan(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_fss *f = arg;
	char dst[CAP_STR_MAX + 1], why[320], detail[400];
	bool ok;
	int r;

	(void)fd;
	(void)ev;
	while ((r = sbx_mount_answer(&f->s->proc, dst, sizeof(dst), &ok, why, sizeof(why))) == 0) {
		bool slot = false;

		for (unsigned i = 0; i < f->ntrees; i++)
			slot |= f->trees[i]->slot && strcmp(f->trees[i]->path, dst) == 0;
		if (ok)
			snprintf(detail, sizeof(detail), "served at its host path (granted while the "
			    "sandbox runs; %s)", slot ? "unmodified programs may write where fs.write "
			    "covers it" : "no slot left: read-only to unmodified programs, writes "
			    "through capcall");
		else
			snprintf(detail, sizeof(detail), "not served: the sandbox could not attach "
			    "it: %s", why);
		brk_fss_serve_audit(f, ok ? 0 : CB_EIO, dst, detail);
	}
	if (r != CB_EBUSY) {
		/* pid 1 is gone: nothing more can be attached. */
		event_del(f->ev_chan);
		f->chan_ok = false;
	}
}

void
brk_fss_connections(struct brk_sbx *s)
{
	struct brk_fss *f = s->fss;
	const char add = 'a';

	/* Once: sbx_spawn_finish takes the "fuse" reports, checked to be
	 * what was asked for (the trees', then the slots'), each a /dev/fuse
	 * (launch.c). */
	if (!f || !f->stub_mounts || f->fuse_taken ||
	    s->proc.nfuse_got != f->nfuse + f->nslots)
		return;
	f->fuse_taken = true;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nfuse; i++) {
		f->late[f->nlate++] = (struct brk_fss_late){ .ti = f->uti[i], .root = f->uroot[i],
		    .dev = s->proc.fuse_fds[i] };
		f->uroot[i] = -1;
		s->proc.fuse_fds[i] = -1;
	}
	/* The slots' connections follow the trees' (launch.c, take_fuse). */
	for (size_t i = 0; i < f->nslots; i++) {
		f->late[f->nlate++] = (struct brk_fss_late){ .ti = BRK_FSS_NOTREE, .root = -1,
		    .dev = s->proc.fuse_fds[f->nfuse + i], .slot = (unsigned)i };
		s->proc.fuse_fds[f->nfuse + i] = -1;
	}
	pthread_mutex_unlock(&f->mu);
	cb_ignore((int)write(f->stop_pipe[1], &add, 1));
}

void
brk_fss_ready(struct brk_sbx *s)
{
	struct brk_fss *f = s->fss;

	if (!f || f->chan_ok || f->s->proc.status_fd < 0)
		return;
	if (!f->ev_chan && !(f->ev_chan = event_new(s->b->base, s->proc.status_fd,
	    EV_READ | EV_PERSIST, brk_fss_chan, f)))
		return;
	if (event_add(f->ev_chan, NULL) != 0)
		return;
	f->chan_ok = true;
	brk_fss_grow(f);
}

void
brk_fss_spawned(struct brk_sbx *s)
{
	struct brk_fss *f = s->fss;

	if (!f)
		return;
	for (unsigned i = 0; i < f->ntrees; i++) {
		if (f->trees[i]->mnt >= 0)
			close(f->trees[i]->mnt);
		f->trees[i]->mnt = -1;
	}
	/* pid 1 holds the slots now; the server keeps the connections. */
	for (size_t i = 0; i < SBX_SLOTS_MAX; i++) {
		if (f->slot_mnt[i] >= 0)
			close(f->slot_mnt[i]);
		f->slot_mnt[i] = -1;
	}
	free(f->binds);		/* cfg's binds pointed here until the spawn */
	f->binds = NULL;
}

void
brk_fss_stop(struct brk_sbx *s)
{
	struct brk_fss *f = s->fss;

	if (!f)
		return;
	s->fss = NULL;
	brk_fss_spawned(s);
	/* Refuse everything from now on: from here the thread reads nothing of
	 * the sandbox or the broker, and queues nothing more; then write what
	 * it did so far. */
	pthread_mutex_lock(&f->mu);
	f->stopping = true;
	f->inst = NULL;
	f->aud = NULL;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->mu);
	brk_fss_drain(f);
	/* Its agent is gone: no page of it can be read any more. */
	brk_fss_settle_end(f, 0);
	event_free(f->ev_aud_tm);
	event_free(f->ev_budget);
	event_free(f->ev_exp);
	event_free(f->ev_settle);
	f->ev_aud_tm = f->ev_budget = f->ev_exp = f->ev_settle = NULL;
	if (f->ev_chan)
		event_free(f->ev_chan);
	f->ev_chan = NULL;
	f->chan_ok = false;
	brk_fss_binds_free(f);
	/* The sandbox is about to be freed: from here f speaks in its id
	 * (f->sid) only.  The loop never waits for the thread (its last
	 * invalidations may take a moment); ev_aud brings its last close
	 * lines and its end (brk_fss_ending). */
	f->b = s->b;
	f->s = NULL;
	f->next_ending = f->b->fss_ending;
	f->b->fss_ending = f;
	cb_ignore((int)write(f->stop_pipe[1], "x", 1));
	close(f->stop_pipe[1]);
	f->stop_pipe[1] = -1;
}

/* The pool's threads end once it serves no sandbox (fsrv_pool_free
 * refuses while it does; with 0 it waits for nothing, and the last thread
 * frees it): a broker at rest keeps neither threads nor the pool's
 * descriptor, and the next sandbox served makes a new pool
 * (brk_fss_pool).  ms: how long to wait for the threads (the loop: 0). */
static void
brk_fss_pool_idle(struct brk *b, unsigned ms)
{
	int r = fsrv_pool_free(b->fss_pool, ms);

	if (r == 0 || r == CB_ETIMEDOUT)
		b->fss_pool = NULL;
}

/* A stopped server, after the pool has forgotten it: unlinked and freed. */
static void
brk_fss_free_ended(struct brk_fss *f)
{
	struct brk *b = f->b;

	for (struct brk_fss **p = &f->b->fss_ending; *p; p = &(*p)->next_ending)
		if (*p == f) {
			*p = f->next_ending;
			break;
		}
	brk_fss_drain(f);	/* what it queued last */
	for (unsigned i = 0; i < f->ntrees; i++) {
		if (f->trees[i]->mnt >= 0)
			close(f->trees[i]->mnt);
		free(f->trees[i]);
	}
	brk_fss_grants_free(f->g, f->ng);
	free(f->rename_from);
	free(f->aq);
	free(f->aq_spare);
	event_free(f->ev_aud);
	close(f->aud_efd);
	close(f->stop_pipe[0]);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->mu);
	free(f);
	brk_fss_pool_idle(b, 0);
}

/* A stopped server's wake-up: write its last lines; free it once its
 * thread has ended. */
static void
brk_fss_ending(struct brk_fss *f)
{
	bool ended;

	brk_fss_drain(f);
	pthread_mutex_lock(&f->mu);
	ended = f->ended;
	pthread_mutex_unlock(&f->mu);
	if (ended)
		brk_fss_free_ended(f);
}

void
brk_fss_end_all(struct brk *b)
{
	uint64_t until = cb_mono_ns() + (uint64_t)BRK_FSS_END_MS * 1000000u;

	while (b->fss_ending) {
		struct brk_fss *f = b->fss_ending;
		bool ended;

		brk_fss_drain(f);
		pthread_mutex_lock(&f->mu);
		ended = f->ended;
		pthread_mutex_unlock(&f->mu);
		if (ended) {
			brk_fss_free_ended(f);
			continue;
		}
		if (cb_mono_ns() >= until) {
			/* Left running (the process is ending); f stays
			 * allocated for it. */
			brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .sandbox = f->sid,
			    .reason = CB_ETIMEDOUT, .op = "fs.serve", .actor = "broker",
			    .detail = "the file server did not end in time: the close lines of "
			    "files still open may be missing" });
			b->fss_ending = f->next_ending;
			event_free(f->ev_aud);
			continue;
		}
		usleep(BRK_FSS_END_STEP_MS * 1000);
	}
	/* Every server has gone from the pool but those left running (then
	 * the pool is left to them): its threads end now. */
	brk_fss_pool_idle(b, BRK_FSS_END_MS);
}
