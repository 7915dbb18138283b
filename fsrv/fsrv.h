/*
 * fsrv.h - the broker's FUSE file server: serves host directory trees to a
 * sandbox, asking the caller before every operation.
 *
 * Trust domain: broker (privileged side).  The requests come from the
 * kernel's FUSE driver on behalf of a hostile agent; everything the agent
 * controls (names, paths, flags, modes, offsets, sizes) is checked here or
 * by the kernel before it acts.
 *
 * A server holds one or more trees.  Each tree is one FUSE connection (one
 * /dev/fuse descriptor, one mount) rooted at a host directory given as an
 * fd.  For every lookup, getattr, open, create, read, write, readdir, mkdir,
 * unlink, rmdir, rename, link, symlink, readlink and setattr the server
 * first asks the caller's authorisation function (struct fsrv_check: the
 * operation, the path relative to the tree's root, the fs.* capabilities it
 * needs), and only on 0 performs it, resolving the path with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
 * from the root fd.  Reads and writes on an already-open file ask again on
 * every call the kernel sends.  File data is not cached by the kernel
 * (direct I/O, so every read reaches the check) unless cache_data asks
 * for it; then reads of cached pages are answered by the kernel, and a
 * revocation must drop them (fsrv_invalidate_*(), then
 * fsrv_invalidate_settle()) before it is reported done.  Entries and
 * attributes are cached for at most the configured timeouts, and
 * fsrv_invalidate_*() drops them too.
 *
 * Threads: one thread (the caller's event loop, or the pool thread serving
 * the server: fsrv_pool_add) calls fsrv_process() and every other function
 * except fsrv_invalidate_*() and fsrv_slot_fill(), which may be called from
 * any thread.  The server owns one helper thread that writes the kernel
 * invalidations, because a notification can wait for a directory lock held
 * by a request that only the serving thread can answer.
 *
 * See docs/fsrv.md for the design and what remains to wire it into the
 * broker.
 */
#ifndef CB_FSRV_H
#define CB_FSRV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

/* The capabilities an operation needs (fs.read, fs.list, fs.write,
 * fs.delete), and FSRV_CAP_SEE: the name may be looked up and stat'ed.  A
 * broker grants SEE for a path that any fs.* capability covers or that lies
 * on the way to one (a parent directory of a granted tree or file). */
enum fsrv_cap {
	FSRV_CAP_READ = 1u << 0,
	FSRV_CAP_LIST = 1u << 1,
	FSRV_CAP_WRITE = 1u << 2,
	FSRV_CAP_DELETE = 1u << 3,
	FSRV_CAP_SEE = 1u << 4,
};

/* The operations the authorisation function is asked about. */
enum fsrv_op {
	FSRV_OP_LOOKUP,
	FSRV_OP_GETATTR,
	FSRV_OP_SETATTR,
	FSRV_OP_READLINK,
	FSRV_OP_MKDIR,
	FSRV_OP_UNLINK,
	FSRV_OP_RMDIR,
	FSRV_OP_SYMLINK,
	FSRV_OP_RENAME,		/* asked twice: the old name, then the new */
	FSRV_OP_LINK,		/* asked twice: the existing file, then the new name */
	FSRV_OP_OPEN,
	FSRV_OP_CREATE,
	FSRV_OP_READ,		/* every read of an open file */
	FSRV_OP_WRITE,		/* every write of an open file */
	FSRV_OP_OPENDIR,
	FSRV_OP_READDIR,	/* every batch of entries of an open directory */
	FSRV_OP_STATFS,
	FSRV_OP_COUNT_
};

/* One question to the caller.  path is relative to the tree's root, never
 * starts with '/', has no "." or ".." component and no empty component; ""
 * is the root itself.  It is only valid during the call. */
struct fsrv_check {
	unsigned tree;		/* index returned by fsrv_add_tree() */
	enum fsrv_op op;
	unsigned need;		/* FSRV_CAP_* bits: all of them are required */
	const char *path;
	pid_t pid;		/* requesting thread, as the kernel reports it */
	uid_t uid;		/* its fsuid and fsgid, as the kernel reports them */
	gid_t gid;
	/* FSRV_OP_SETATTR changing the mode: to mode, from cur_mode (both
	 * permission bits only, 07777), so the caller may refuse a mode it
	 * will not have on a given path (docs/fsrv.md: a grant's root). */
	bool set_mode;
	mode_t mode, cur_mode;
	/* How long the kernel may cache the name and attributes this answer
	 * gives (seconds; it starts at the configured timeouts): the caller
	 * may lower *ttl, to the time the grants that allowed it have left.
	 * Why it matters (docs/fsrv.md): with cache_data, a read of a cached
	 * page asks for the attributes again once they are stale, and that
	 * request is checked, so cached pages are read no longer than the
	 * attributes live. */
	double *ttl;
};

/* Returns 0 to allow, a negative CB_E* code to deny: the agent sees EACCES,
 * except for CB_ETOOBIG (ENAMETOOLONG: a path longer than the caller can
 * judge) and CB_EINVAL (EINVAL: a name it refuses to judge, as a file
 * system refuses a name it cannot hold).
 * Called on the serving thread, synchronously, once or twice per request:
 * it must be fast and must not call back into the server. */
typedef int (*fsrv_authz_fn)(void *arg, const struct fsrv_check *c);

/* A file the agent closed (its last descriptor went): how much it read and
 * wrote through this open.  path as in struct fsrv_check; "" when the name
 * is gone (unlinked while open).  at_stop: no release came for it before
 * the server stopped (fsrv_free closed it: a connection aborted with the
 * release still queued, or the agent's files still open). */
struct fsrv_close {
	unsigned tree;
	const char *path;
	uint64_t nread, nwritten;
	bool at_stop;
};

/* Called on the serving thread at each release of an open file, and by
 * fsrv_free for each file still open then (at_stop), so that every open
 * file is reported exactly once (optional; with authz_arg).  Must be fast
 * and must not call back into the server. */
typedef void (*fsrv_close_fn)(void *arg, const struct fsrv_close *c);

/* Called on the serving thread (optional; with authz_arg) when a new name
 * of tree was refused (ENFILE) because the server holds max_nodes names:
 * once, then again only after the server has had room (below 7/8 of the
 * bound).  names: how many it holds.  Must be fast and must not call back
 * into the server. */
typedef void (*fsrv_full_fn)(void *arg, unsigned tree, uint32_t names);

/* Called on the server's notifier thread (optional; with authz_arg) after
 * it has written page invalidations: fsrv_invalidate_reached() may say
 * yes now.  Must be fast and must not call into the server. */
typedef void (*fsrv_pages_fn)(void *arg);

struct fsrv_cfg {
	fsrv_authz_fn authz;
	void *authz_arg;
	fsrv_close_fn on_close;	/* may be NULL */
	fsrv_full_fn on_full;	/* may be NULL */
	fsrv_pages_fn on_pages;	/* may be NULL */
	double entry_timeout;	/* seconds the kernel may cache a name (0: no cache) */
	double attr_timeout;	/* seconds it may cache attributes */
	double negative_timeout;	/* ... that a name does not exist (0, or more
					 * than entry_timeout: entry_timeout) */
	uint32_t max_nodes;	/* names the kernel may hold, all trees together
				 * (0: default); past it a new name is ENFILE */
	bool release_names;	/* past half of max_nodes, ask the kernel to forget
				 * the least recently looked-up names (docs/fsrv.md) */
	uint32_t max_handles;	/* open files and directories per tree (0: default) */
	uint32_t max_handles_all;	/* ... and over all the server's trees
					 * together (0: no more than max_handles) */
	bool cache_data;	/* let the kernel cache file data, kept across opens
				 * while the file is unchanged (docs/fsrv.md) */
	bool passthrough;	/* FUSE passthrough: the kernel reads and writes an
				 * open file's backing fd itself, unchecked, until it
				 * is closed (docs/fsrv.md); needs CAP_SYS_ADMIN */
	bool keep_identity;	/* the serving thread does nothing else: keep a
				 * tree owner's identity between requests */
	bool owner_as_agent;	/* show what the root's owner owns as agent_uid's,
				 * and its group as agent_gid (docs/fsrv.md,
				 * "Ownership"): for an agent of another uid */
	uid_t agent_uid;
	gid_t agent_gid;
};

#define FSRV_MAX_NODES_DEFAULT (256u * 1024u)
#define FSRV_MAX_HANDLES_DEFAULT 4096u
#define FSRV_MAX_TREES 64u

struct fsrv;

/* Open files and directories of every server of this process together,
 * at most n (0: no such bound; the default).  Each is a descriptor of the
 * process's, so a process serving many trees keeps room for its own
 * descriptors this way (fsrv_cfg.max_handles bounds one tree, and
 * max_handles_all one server).  Past it an open gets EMFILE. */
void fsrv_handles_limit(uint32_t n);

/* A server with no tree yet.  *out is freed with fsrv_free().
 * CB_EINVAL (no authz function), CB_ENOMEM, CB_EINTERNAL (thread). */
int fsrv_new(const struct fsrv_cfg *cfg, struct fsrv **out) CB_WARN_UNUSED;

/* Serve the directory root_fd on the FUSE connection dev_fd (an open
 * /dev/fuse, mounted or about to be: see fsrv_mount_detached()).  Both fds
 * are duplicated; the caller keeps and closes its own (the device's open
 * file is made O_NONBLOCK, which the caller's copy shares).  The connection
 * ends when the server closes its copy of dev_fd (fsrv_free), so the caller
 * must not keep its copy of dev_fd open longer than it wants the mount to
 * stay alive.  *tree receives the index the authorisation function sees.
 * CB_EINVAL (root_fd not a directory), CB_EBUSY (FSRV_MAX_TREES),
 * CB_ENOMEM, CB_EIO (the descriptors could not be duplicated). */
int fsrv_add_tree(struct fsrv *s, int root_fd, int dev_fd, unsigned *tree) CB_WARN_UNUSED;

/*
 * A slot: a tree on the FUSE connection dev_fd whose root comes later
 * (fsrv_slot_fill).  Until then every request of it is refused (EACCES)
 * without asking the caller, and nothing is resolved.  What a slot is for:
 * its mount can be made before the sandbox starts, so that the sandbox's
 * Landlock rules name its root (docs/sandbox.md, "Trees granted while the
 * sandbox runs"), and given a tree once one is granted.  Same thread and
 * descriptor rules as fsrv_add_tree.  CB_EBUSY, CB_ENOMEM, CB_EIO.
 */
int fsrv_add_slot(struct fsrv *s, int dev_fd, unsigned *tree) CB_WARN_UNUSED;

/*
 * Give slot tree its root (root_fd, duplicated; a directory), once; with
 * owner, served as fsrv_tree_owner(uid, gid) would.  May be called from
 * any thread: the serving thread takes the root before it answers the
 * slot's next request, so a request that reaches the slot after this
 * returns is served from the root.  CB_EINVAL (not a slot, filled already,
 * root_fd not a directory), CB_EIO (dup).
 */
int fsrv_slot_fill(struct fsrv *s, unsigned tree, int root_fd, bool owner, uid_t uid,
    gid_t gid) CB_WARN_UNUSED;

/* Act on tree with the file-system identity of uid and gid (the owner of
 * the tree's root): the thread answering a request of this tree takes
 * fsuid uid, fsgid gid and no supplementary groups for it and gets its
 * own back after it, so files the agent creates belong to the owner, the
 * owner's permissions decide, and the kernel clears set-id bits on writes
 * as for any unprivileged writer.  Needs root (CAP_SETUID, CAP_SETGID)
 * unless uid and gid are the caller's own.  Any thread (before the
 * server is served; the identity is each answering thread's, which
 * records its own groups at its first change).  Switching costs several
 * microseconds a change; with fsrv_cfg.keep_identity (a thread that only
 * serves) a thread keeps the identity between requests until a request
 * needs another, and takes its own back at fsrv_free.  CB_EINVAL (also:
 * more supplementary groups than a thread restores, 64), CB_EPERM. */
int fsrv_tree_owner(struct fsrv *s, unsigned tree, uid_t uid, gid_t gid) CB_WARN_UNUSED;

/* The fd to poll for POLLIN on behalf of tree; -1 for an unknown tree. */
int fsrv_fd(const struct fsrv *s, unsigned tree);

/* Read and answer one request of tree.  The tree's device is
 * non-blocking (fsrv_add_tree and fsrv_add_slot make it so).  Returns 0,
 * CB_ETIMEDOUT when nothing was pending, CB_ECLOSED once the connection is
 * gone (unmounted, aborted, or any other read error: stop polling this
 * tree; the others are served on), CB_ENOMEM (no request buffer). */
int fsrv_process(struct fsrv *s, unsigned tree);

/* Give the calling thread a file-system context of its own (its umask,
 * working directory and root, unshared from the process's) with umask 0,
 * for the thread that serves.  The kernel has already applied the agent's
 * umask to the mode of every create and mkdir it sends (we never ask for
 * dont_mask), so the server's own umask (a broker's is 077) must not narrow
 * it a second time: without this every file an agent made was private on
 * the host, whatever its umask.  The process's umask, which the broker's
 * own files are made with, is untouched.  Returns 0 or CB_EINTERNAL. */
int fsrv_thread_umask(void) CB_WARN_UNUSED;
/*
 * A pool of serving threads for many servers (fsrv/pool.c), in place of a
 * thread per server.  Each server added has an epoll set
 * of its own (its trees' connections and a control descriptor of the
 * caller's), watched by the pool's set one-shot: one thread at a time
 * serves a server, and nothing else does, from its add until its control
 * function says it is gone.  When a thread takes a server and leaves no
 * other waiting, another is started (up to max), so that a server whose
 * thread is held (a slow disk, a sandbox's spent audit budget, a full
 * audit queue) holds up no other server's requests; a thread idle for
 * idle_ms ends while more than min are left.  The request buffer and a
 * copied reply's data are the thread's, not the server's (the splice pipe
 * stays the server's: it is two descriptors); each request is answered with the file-system identity its
 * tree asks for (fsrv_tree_owner), whatever the thread did before.
 */
struct fsrv_pool;

/* The control descriptor of a server is readable: called on the thread
 * serving it (it may add trees, fsrv_add_tree, and the like).  Returns
 * true when it has freed the server (fsrv_free): the pool forgets it,
 * never looks at it again, and then calls the server's done function
 * (fsrv_pool_add), after which it touches nothing of arg either. */
typedef bool (*fsrv_ctl_fn)(void *arg);

struct fsrv_pool_cfg {
	unsigned min;		/* threads kept when idle (at least 1) */
	unsigned max;		/* threads at most */
	unsigned idle_ms;	/* a thread idle this long ends, beyond min */
};

/* A pool with one thread.  CB_EINVAL, CB_ENOMEM, CB_EIO, CB_EINTERNAL. */
int fsrv_pool_new(const struct fsrv_pool_cfg *cfg, struct fsrv_pool **out) CB_WARN_UNUSED;

/* Serve s from the pool from now on: its trees, those added later, and
 * ctl_fd (level-triggered: ctl must read what made it readable); done
 * (may be NULL) is told once the pool has forgotten s, so that whoever
 * frees the pool (fsrv_pool_free refuses one serving a server) knows when
 * it may.  From here only the pool's thread serving s may call s's
 * functions, but for those any thread may (fsrv_slot_fill,
 * fsrv_invalidate_*).  0, CB_ENOMEM, CB_EIO. */
int fsrv_pool_add(struct fsrv_pool *p, struct fsrv *s, int ctl_fd, fsrv_ctl_fn ctl,
		  void (*done)(void *arg), void *arg) CB_WARN_UNUSED;

/* Threads the pool has now (started or starting). */
unsigned fsrv_pool_threads(struct fsrv_pool *p);

/* End the pool's threads and free it, once every server added has gone
 * (its done function was called); CB_EBUSY while one is served (nothing
 * done).  Waits at most ms for the threads to end (0: not at all); a pool
 * whose threads have not ended by then is freed by the last of them.
 * 0, CB_ETIMEDOUT (left to its threads, as with ms 0: a caller may forget
 * it either way), CB_EBUSY, CB_EIO.  Accepts NULL. */
int fsrv_pool_free(struct fsrv_pool *p, unsigned ms);

/* Drop every name and attribute the kernel caches for every tree (call
 * after a revocation or expiry).  Queued for the server's notifier thread;
 * returns at once.  Per-operation checks do not depend on it: opens, reads,
 * writes and directory reads always reach the server. */
int fsrv_invalidate_all(struct fsrv *s);

/* The same for one path of one tree and everything beneath it. */
int fsrv_invalidate_path(struct fsrv *s, unsigned tree, const char *path);

/* Wait, from any thread but the serving one, until the kernel has dropped
 * the pages of every file whose data it may cache (cache_data) that the
 * invalidations queued so far name: from then on no read of them is
 * answered without a request, so without a check.  Waits at most ms
 * milliseconds; call it again to wait longer (the notifier may be waiting
 * for the serving thread to answer a read).  0; CB_ETIMEDOUT; CB_ENOMEM
 * when an invalidation could not be queued (its pages stay cached until
 * the file changes or the connection ends: the caller should not report
 * the revocation complete). */
int fsrv_invalidate_settle(struct fsrv *s, unsigned ms);

/* The page invalidations queued so far (a count that only grows): a mark
 * for fsrv_invalidate_reached().  Any thread. */
uint64_t fsrv_invalidate_mark(struct fsrv *s);

/* Without waiting, from any thread: 0 once the notifier has written every
 * page invalidation queued before mark (the kernel has dropped those
 * pages: no read of them is answered without a request), or the server
 * is stopping; CB_ETIMEDOUT when not yet (fsrv_cfg.on_pages says when to
 * ask again); CB_ENOMEM when an invalidation could not be queued since the
 * last call (its pages stay cached: queue them again, take a new mark). */
int fsrv_invalidate_reached(struct fsrv *s, uint64_t mark);

/* Wait until every queued invalidation has reached the kernel, answering
 * requests of this server's trees meanwhile (a notification can wait for
 * one of them).  Serving thread only.  0, or CB_ETIMEDOUT after about 2 s. */
int fsrv_invalidate_wait(struct fsrv *s);

/* Stop serving and free.  Accepts NULL. */
void fsrv_free(struct fsrv *s);

/* Options for a detached FUSE mount. */
struct fsrv_mount_opts {
	uid_t user_id;		/* the only uid (and gid) allowed to use it ... */
	gid_t group_id;
	bool allow_other;	/* ... unless this is set */
	bool read_only;
	bool readahead;		/* raise the connection's readahead to max_read (root) */
};

/*
 * Create a detached mount of the FUSE connection dev_fd with fsopen("fuse"),
 * fsconfig (fd, rootmode, user_id, group_id) and fsmount, as nosuid, nodev,
 * and return its fd in *mnt_fd (close-on-exec).  The mount is attached
 * nowhere: the caller hands *mnt_fd to the process that attaches it
 * (fsrv_mount_move()), possibly inside another mount and user namespace.
 * Needs CAP_SYS_ADMIN in the user namespace that owns the caller's mount
 * namespace, and dev_fd must have been opened in that user namespace (the
 * kernel refuses a /dev/fuse opened elsewhere with EINVAL).
 * With o->readahead, the connection's readahead (its bdi's read_ahead_kb
 * in sysfs, which only init-namespace root may write) is raised from the
 * kernel's 128 KiB to max_read, so that a cold sequential read asks the
 * server for 512 KiB at a time instead of 128 KiB; best effort (the mount
 * works without it).
 * CB_EPERM, CB_EUNSUPPORTED (no fsopen or no fuse), CB_EIO (errno has
 * detail).
 */
int fsrv_mount_detached(int dev_fd, const struct fsrv_mount_opts *o, int *mnt_fd) CB_WARN_UNUSED;

/* Attach a detached mount at target (move_mount).  CB_EIO, errno set. */
int fsrv_mount_move(int mnt_fd, const char *target) CB_WARN_UNUSED;

/* The capability names of a FSRV_CAP_* mask, for messages ("fs.read"...);
 * the first set bit's name; never NULL. */
const char *fsrv_cap_name(unsigned need);

/* A short name of an operation ("lookup", "read"...); never NULL. */
const char *fsrv_op_name(enum fsrv_op op);

#endif
