/*
 * srv_int.h - the server's state, shared by server.c (sessions, loop,
 * invalidation) and ops.c (the FUSE operations).  Private to fsrv/.
 *
 * Trust domain: broker.
 */
#ifndef CB_FSRV_SRV_INT_H
#define CB_FSRV_SRV_INT_H

#include <dirent.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "fsrv/fsrv_int.h"

#define FSRV_IO_MAX (1u << 20)	/* the largest read we answer at once */
#define FSRV_GROUPS_MAX 64	/* supplementary groups restored after a request */
#define FSRV_WRITE_MAX (1u << 20)	/* the largest write the kernel sends (max_write) */
/* A request buffer: the largest write and its headers (libfuse's
 * FUSE_BUFFER_HEADER_SIZE; the kernel wants room for at least that). */
#define FSRV_RBUF_LEN (FSRV_WRITE_MAX + 4096u)
/* The attribute changes a setattr may ask for that ops.c looks at. */
#define FSRV_FATTR_KNOWN (FATTR_MODE | FATTR_UID | FATTR_GID | FATTR_SIZE | FATTR_ATIME | \
			  FATTR_MTIME | FATTR_ATIME_NOW | FATTR_MTIME_NOW | FATTR_CTIME)

struct fsrv_tree;

/* One request being answered: whose, and who asked (the kernel's word
 * for the calling process; in the sandbox's namespaces as seen from the
 * broker's). */
struct fsrv_req {
	struct fsrv_tree *t;
	uint64_t unique;
	uid_t uid;
	gid_t gid;
	pid_t pid;
};

/* An open, its handle and how the kernel is to treat the file. */
struct fsrv_fi {
	uint32_t flags;		/* open(2)'s flags, as the kernel sent them */
	uint64_t fh;		/* ours: a struct fsrv_handle */
	bool direct_io, keep_cache;
	uint32_t backing;	/* passthrough: the kernel's backing id, or 0 */
};

/* A name handed to the kernel (ino 0: a negative entry). */
struct fsrv_entry {
	uint64_t ino, generation;
	struct stat attr;
	double attr_timeout, entry_timeout;
};

/* The handlers (ops.c); proto.c decodes and calls them.  Each answers its
 * request (or, for the forgets, does not: the kernel wants no answer). */
struct fsrv_ll_ops {
	void (*lookup)(struct fsrv_req *, uint64_t parent, const char *name);
	void (*forget)(struct fsrv_req *, uint64_t ino, uint64_t nlookup);
	void (*forget_multi)(struct fsrv_req *, size_t count, const struct fuse_forget_one *);
	void (*getattr)(struct fsrv_req *, uint64_t ino, struct fsrv_fi *);
	void (*setattr)(struct fsrv_req *, uint64_t ino, struct stat *, int to_set, struct fsrv_fi *);
	void (*readlink)(struct fsrv_req *, uint64_t ino);
	void (*mknod)(struct fsrv_req *, uint64_t parent, const char *name, mode_t, dev_t);
	void (*mkdir)(struct fsrv_req *, uint64_t parent, const char *name, mode_t);
	void (*unlink)(struct fsrv_req *, uint64_t parent, const char *name);
	void (*rmdir)(struct fsrv_req *, uint64_t parent, const char *name);
	void (*symlink)(struct fsrv_req *, const char *link, uint64_t parent, const char *name);
	void (*rename)(struct fsrv_req *, uint64_t parent, const char *name, uint64_t newparent,
		       const char *newname, unsigned int flags);
	void (*link)(struct fsrv_req *, uint64_t ino, uint64_t newparent, const char *newname);
	void (*open)(struct fsrv_req *, uint64_t ino, struct fsrv_fi *);
	void (*read)(struct fsrv_req *, uint64_t ino, size_t size, off_t off, struct fsrv_fi *);
	void (*write)(struct fsrv_req *, uint64_t ino, const char *buf, size_t size, off_t off,
		      struct fsrv_fi *);
	void (*release)(struct fsrv_req *, uint64_t ino, struct fsrv_fi *);
	void (*fsync)(struct fsrv_req *, uint64_t ino, int datasync, struct fsrv_fi *);
	void (*fallocate)(struct fsrv_req *, uint64_t ino, uint32_t mode, uint64_t off, uint64_t len,
			  struct fsrv_fi *);
	void (*opendir)(struct fsrv_req *, uint64_t ino, struct fsrv_fi *);
	void (*readdir)(struct fsrv_req *, uint64_t ino, size_t size, off_t off, struct fsrv_fi *);
	void (*releasedir)(struct fsrv_req *, uint64_t ino, struct fsrv_fi *);
	void (*statfs)(struct fsrv_req *, uint64_t ino);
	void (*create)(struct fsrv_req *, uint64_t parent, const char *name, mode_t,
		       struct fsrv_fi *);
};

/* An open file or directory.  fd is the broker's own descriptor, opened
 * beneath the root at open time; it is never handed to the agent. */
struct fsrv_handle {
	int fd;
	DIR *dir;		/* directories: fdopendir(fd) */
	struct dirent *entry;	/* read from dir, not yet sent */
	off_t offset;
	uint64_t nread, nwritten;	/* bytes, reported at release (fsrv_cfg.on_close) */
	struct fsrv_node *node;
	int backing;			/* passthrough: the kernel's backing id, or 0 */
	struct fsrv_handle *prev, *next;	/* the tree's open handles */
};

struct fsrv_tree {
	struct fsrv *srv;
	unsigned idx;
	int root_fd;
	uid_t root_uid;			/* the root's owner: the hardlink rule */
	gid_t root_gid;			/* ... and group (owner_as_agent) */
	dev_t root_dev;			/* the root's file system (fsrv_open_at) */
	int dev_fd;			/* the connection's /dev/fuse, ours (non-blocking) */
	uint32_t minor;			/* the protocol's minor, agreed at INIT */
	bool got_init;
	struct fsrv_nodes nodes;	/* guarded by srv->lock */
	uint32_t nhandles;
	struct fsrv_handle *handles;	/* freed by fsrv_free if still open */
	bool closed;
	bool as_owner;			/* act as uid/gid (fsrv_tree_owner) */
	/* Whether the next request has lately been queued already when one
	 * was answered, and a count that makes every FSRV_LOOK_PROBE-th
	 * answer look anyway: fsrv_serve in server.c. */
	int8_t early;
	uint8_t probe;
	double ttl;			/* its answer's cache time (fsrv_check may lower it) */
	uint64_t ttl_at;		/* ... lowered then (cb_mono_ns) */
	bool pt_on;			/* passthrough asked for at INIT (fsrv_cfg.passthrough) */
	uid_t uid;
	gid_t gid;
	/* A slot (fsrv_add_slot): root_fd is -1 until fsrv_slot_fill's root
	 * is taken, on this tree's serving thread, before its next request
	 * (fsrv_slot_take).  Under srv->lock: */
	bool slot;
	int slot_root;			/* the root given, not yet taken (-1: none) */
	bool slot_owner;		/* ... served as slot_uid, slot_gid */
	uid_t slot_uid;
	gid_t slot_gid;
};

/* What one request needs while it is answered and never after: the
 * buffer it is read into and a copied reply's data.  A server served by
 * one thread of its own (calling fsrv_process) has its own; the threads
 * of a pool (pool.c) have one each (fsrv_tw), shared by every server they
 * serve, so a server at rest holds neither.  (The pipe of spliced replies
 * stays the server's, made at its first spliced read: a pool thread's
 * would be two descriptors held for as long as the thread lives, after
 * every sandbox that used it has gone.) */
struct fsrv_work {
	char *rbuf;
	char *io;
	size_t iolen;
};

/* A pool thread's (pool.c); NULL on any other thread. */
extern _Thread_local struct fsrv_work *fsrv_tw;

/* A server's place in a pool (pool.c): its own epoll set of its trees'
 * connections and its control descriptor. */
struct fsrv_pool_srv;

/* One queued kernel invalidation. */
struct fsrv_inval {
	unsigned tree;
	uint64_t id;		/* the inode (or the parent, for an entry) */
	char *name;		/* an entry's name, or NULL for an inode */
	bool data;		/* an inode whose pages the kernel may hold (paged) */
};

struct fsrv {
	struct fsrv_cfg cfg;
	uint32_t max_nodes;		/* cfg's, or the default */
	struct fsrv_tree *trees[FSRV_MAX_TREES];
	unsigned ntrees;
	_Atomic uint32_t nhandles;	/* open over all trees (max_handles_all) */
	pthread_mutex_t lock;	/* node tables and the queue */
	pthread_cond_t cond;
	struct fsrv_inval *q;
	size_t nq, capq;
	bool stop, busy, started;
	struct fsrv_work w;	/* when no pool thread serves it (fsrv_tw) */
	/* The pipe of spliced replies (proto.c), made at the first. */
	int pipe[2];
	bool no_splice;		/* the pipe cannot be made big enough here */
	struct fsrv_pool_srv *pent;	/* in a pool: its place there, or NULL */
	/* Invalidations of paged nodes queued and written (under lock), and
	 * one that could not be queued: fsrv_invalidate_settle. */
	uint64_t data_queued, data_done;
	bool data_lost;
	pthread_t notifier;	/* once notifying: started by the first invalidation */
	bool notifying;
	uint32_t nnodes;	/* names of every tree together (the pool), under lock */
	bool full;		/* a name was refused; on_full said so */
};

/* The FUSE operations (ops.c). */
extern const struct fsrv_ll_ops fsrv_ops;

/* The protocol (proto.c).  Decode and answer one request read from t's
 * connection; serving thread. */
void fsrv_dispatch(struct fsrv_tree *t, const void *buf, size_t len);

/* Answers: 0, or -errno of the write (-ENOENT: the request was
 * interrupted and the kernel no longer waits for it). */
int fsrv_reply_err(const struct fsrv_req *r, int error);
int fsrv_reply_entry(const struct fsrv_req *r, const struct fsrv_entry *e);
int fsrv_reply_create(const struct fsrv_req *r, const struct fsrv_entry *e,
		      const struct fsrv_fi *fi);
int fsrv_reply_attr(const struct fsrv_req *r, const struct stat *st, double timeout);
int fsrv_reply_open(const struct fsrv_req *r, const struct fsrv_fi *fi);
int fsrv_reply_write(const struct fsrv_req *r, size_t n);
int fsrv_reply_buf(const struct fsrv_req *r, const void *buf, size_t n);
int fsrv_reply_readlink(const struct fsrv_req *r, const char *target);
int fsrv_reply_statfs(const struct fsrv_req *r, const struct statvfs *sv);
/* len bytes of fd at off, spliced: 0, 1 (not spliced: copy them), -errno. */
int fsrv_reply_splice(const struct fsrv_req *r, int fd, off_t off, size_t len);
void fsrv_pipe_close(struct fsrv *s);
/* The work space of the thread answering one of s's requests. */
static inline struct fsrv_work *
fsrv_w(struct fsrv *s)
{
	return fsrv_tw != NULL ? fsrv_tw : &s->w;
}
/* Free what w holds. */
void fsrv_work_fini(struct fsrv_work *w);
/* One directory entry into buf (rem bytes left): its padded length,
 * written only if it fits. */
size_t fsrv_add_direntry(char *buf, size_t rem, const char *name, const struct stat *st,
			 off_t off);
/* Notices, from any thread: 0 or -errno (-ENOENT: the kernel holds no
 * such name or inode). */
int fsrv_notify_inval_inode(const struct fsrv_tree *t, uint64_t ino, int64_t off, int64_t len);
int fsrv_notify_inval_entry(const struct fsrv_tree *t, uint64_t parent, const char *name);

/* Serve tree i, which has a request, and read on while requests are
 * queued already (server.c): 0, CB_ETIMEDOUT, CB_ECLOSED, CB_ENOMEM. */
int fsrv_serve(struct fsrv *s, unsigned i);
/* Take back the thread's own file-system identity (server.c): before a
 * pool thread starts another, which inherits its credentials. */
void fsrv_identity_own(void);
/* Tree number tree of s, which is in a pool, is being added: watch its
 * connection fd (pool.c).  0 or CB_EIO. */
int fsrv_pool_watch(struct fsrv *s, unsigned tree, int fd);
/* Tree i of s is closed: stop watching it (pool.c). */
void fsrv_pool_unwatch(struct fsrv *s, unsigned tree);

/* Passthrough (passthrough.c): a backing id for an open file (0 when
 * passthrough is off or refused), and its release. */
int fsrv_pt_backing(struct fsrv_tree *t, int fd);
void fsrv_pt_close(struct fsrv_tree *t, int id);

/* Close every handle still open on t (the connection is going away),
 * each file reported to on_close (at_stop) as a release would have. */
void fsrv_handles_close(struct fsrv_tree *t);

/* (ops.c) A server was made (1) or freed (-1): the process's servers
 * share its handle bound (fsrv_handles_limit). */
void fsrv_handles_server(int delta);

/* After a name was made (refused false) or refused for want of room;
 * called with s->lock held.  Releases names if past the mark (with
 * release_names); true when the caller should call on_full. */
bool fsrv_names_note(struct fsrv *s, bool refused);

#endif
