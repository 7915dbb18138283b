/*
 * srv_int.h - the server's state, shared by server.c (sessions, loop,
 * invalidation) and ops.c (the FUSE operations).  Private to fsrv/.
 *
 * Trust domain: broker.
 */
#ifndef CB_FSRV_SRV_INT_H
#define CB_FSRV_SRV_INT_H

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>

#include "fsrv/fsrv_int.h"

#define FSRV_IO_MAX (1u << 20)	/* the largest read we answer at once */
#define FSRV_GROUPS_MAX 64	/* supplementary groups restored after a request */

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
	dev_t root_dev;			/* the root's file system (fsrv_open_at) */
	struct fuse_session *se;
	struct fuse_buf buf;
	struct fsrv_nodes nodes;	/* guarded by srv->lock */
	uint32_t nhandles;
	struct fsrv_handle *handles;	/* freed by fsrv_free if still open */
	char *io;			/* read buffer */
	size_t iolen;
	bool closed;
	bool as_owner;			/* act as uid/gid (fsrv_tree_owner) */
	/* Whether the next request has lately been queued already when one
	 * was answered, and a count that makes every FSRV_LOOK_PROBE-th
	 * answer look anyway: fsrv_serve in server.c. */
	int8_t early;
	uint8_t probe;
	/* Passthrough (fsrv_cfg.passthrough): libfuse 3.14 cannot ask for it,
	 * so the tree's I/O goes through fsrv_pt_read/fsrv_pt_writev, which
	 * see every request and reply (passthrough.c). */
	int dev_fd;			/* the session's /dev/fuse (owned by the session) */
	uint64_t cur_unique;		/* the request being answered */
	double ttl;			/* its answer's cache time (fsrv_check may lower it) */
	uint64_t ttl_at;		/* ... lowered then (cb_mono_ns) */
	uint32_t cur_opcode;
	bool pt_offered;		/* the kernel offered FUSE_PASSTHROUGH */
	bool pt_on;			/* ... and we asked for it */
	int pt_reply;			/* backing id to put in the next open reply */
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

/* One queued kernel invalidation. */
struct fsrv_inval {
	unsigned tree;
	uint64_t id;		/* the inode (or the parent, for an entry) */
	char *name;		/* an entry's name, or NULL for an inode */
	bool data;		/* an inode whose pages the kernel may hold (paged) */
};

struct fsrv {
	struct fsrv_cfg cfg;
	gid_t groups[FSRV_GROUPS_MAX];	/* the serving thread's own groups */
	int ngroups;
	uid_t own_uid;			/* and its own fsuid, fsgid */
	gid_t own_gid;
	const struct fsrv_tree *ident;	/* whose identity the thread has now */
	struct fsrv_tree *trees[FSRV_MAX_TREES];
	unsigned ntrees;
	_Atomic uint32_t nhandles;	/* open over all trees (max_handles_all) */
	pthread_mutex_t lock;	/* node tables and the queue */
	pthread_cond_t cond;
	struct fsrv_inval *q;
	size_t nq, capq;
	bool stop, busy, started;
	bool splice;		/* the kernel takes spliced replies (fsrv_init) */
	/* Invalidations of paged nodes queued and written (under lock), and
	 * one that could not be queued: fsrv_invalidate_settle. */
	uint64_t data_queued, data_done;
	bool data_lost;
	pthread_t notifier;
	uint32_t nnodes;	/* names of every tree together (the pool), under lock */
	bool full;		/* a name was refused; on_full said so */
};

/* The FUSE operations (ops.c). */
extern const struct fuse_lowlevel_ops fsrv_ops;

/* Passthrough (passthrough.c): the session's I/O, a backing id for an
 * open file (0 when passthrough is off or refused), and its release. */
extern const struct fuse_custom_io fsrv_pt_io;
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
