/*
 * fsrv_int.h - fsrv's private parts: the node table (the names the kernel
 * holds, as parent + name, so every operation can rebuild the path it acts
 * on from the tree's root) and the pure rules (which names are acceptable,
 * what an open needs).  Exposed for the unit tests; nothing outside fsrv/
 * includes it.
 *
 * Trust domain: broker.  Names come from the kernel's FUSE driver, which
 * takes them from the agent; node ids come from the kernel and are only
 * ever ids this table handed out, but are still looked up, never cast.
 */
#ifndef CB_FSRV_INT_H
#define CB_FSRV_INT_H

#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsrv/fsrv.h"

#define FSRV_PATH_MAX 4096	/* a rebuilt relative path, with its NUL */
#define FSRV_NAME_MAX 255	/* one component */
#define FSRV_ROOT_ID 1		/* FUSE_ROOT_ID */
/* The largest read the kernel asks for at once (the mount's max_read):
 * half of a default 1 MiB pipe, so that a reply and its header fit the
 * pipe replies are spliced through (proto.c: a 1 MiB reply needs 257 pipe
 * slots, and growing a pipe past /proc/sys/fs/pipe-max-size needs
 * CAP_SYS_RESOURCE). */
#define FSRV_READ_MAX (512u * 1024u)
#define FSRV_SPLICE_MIN (8u * 1024u)	/* smaller replies are copied (as libfuse did: 2 pages) */

/* A name the kernel holds.  nodeid is the FUSE node id; the path is the
 * chain of names up to the root.  A node stays while the kernel holds it
 * (nlookup), a child names it as parent, or a handle is open on it. */
struct fsrv_node {
	uint64_t id;
	uint64_t gen;
	struct fsrv_node *parent;	/* NULL only for the root */
	struct fsrv_node *hnext;	/* chain in the (parent, name) hash */
	struct fsrv_node *lru_prev;	/* the table's names, most recently looked up */
	struct fsrv_node *lru_next;	/* first (the root is not in it) */
	char *name;			/* "" for the root */
	uint64_t nlookup;
	uint32_t nchild;
	uint32_t nopen;
	bool linked;			/* reachable by (parent, name) */
	bool released;			/* the kernel was asked to forget it (fsrv_nodes_lru)
					 * and has not looked it up since */
	/* Data caching (cache_data): opened with the kernel keeping its
	 * pages, so a revocation must drop them before it is acknowledged
	 * (fsrv_invalidate_settle); and the file as it was at that open, so
	 * that a change made on the host makes the next open drop them. */
	bool paged;
	uint64_t c_ino, c_size, c_mtime, c_ctime;	/* c_*time: nanoseconds */
};

struct fsrv_nodes {
	struct fsrv_node **byid;	/* byid[id - 1] */
	uint32_t nids, capids;
	uint32_t *freeids;		/* ids to reuse */
	uint32_t nfree;
	struct fsrv_node **buckets;
	uint32_t nbuckets;		/* a power of two */
	uint32_t count, max;
	uint64_t gen;
	struct fsrv_node *lru_head, *lru_tail;
	uint32_t nreleased;		/* names asked for and not yet forgotten */
	/* Optional: a bound shared with other tables (a server's trees
	 * together): *pool counts their names (roots not included), and no
	 * new name is made while it is pool_max or more. */
	uint32_t *pool, pool_max;
};

/* An empty table holding only the root (id FSRV_ROOT_ID).  CB_ENOMEM. */
int fsrv_nodes_init(struct fsrv_nodes *t, uint32_t max) CB_WARN_UNUSED;
void fsrv_nodes_fini(struct fsrv_nodes *t);

/* The node of a kernel id, or NULL. */
struct fsrv_node *fsrv_node_get(const struct fsrv_nodes *t, uint64_t id);

/* The linked child called name of parent, or NULL. */
struct fsrv_node *fsrv_node_find(const struct fsrv_nodes *t, const struct fsrv_node *parent,
				 const char *name);

/* Find or make the child name of parent and count one kernel lookup.
 * CB_ENOMEM, CB_EBUSY (the table is full). */
int fsrv_node_ref(struct fsrv_nodes *t, struct fsrv_node *parent, const char *name,
		  struct fsrv_node **out) CB_WARN_UNUSED;

/* Up to want names the kernel may be asked to forget, least recently
 * looked up first: linked, not open, no child known (a directory's
 * children go first), not asked already (a name is released once until
 * the kernel looks it up again: its FORGET may be on the way).  Each one
 * chosen moves to the front.  Looks at a bounded number of names.
 * Returns how many were put in out. */
size_t fsrv_nodes_lru(struct fsrv_nodes *t, size_t want, struct fsrv_node **out);

/* The kernel dropped n lookups (FUSE_FORGET); frees what nothing holds. */
void fsrv_node_forget(struct fsrv_nodes *t, struct fsrv_node *n, uint64_t nlookup);

/* Open handles hold their node: */
void fsrv_node_hold(struct fsrv_node *n);
void fsrv_node_release(struct fsrv_nodes *t, struct fsrv_node *n);

/* The name was removed (unlink, rmdir): its node is no longer found by
 * name, but keeps its last path for the handles still open on it. */
void fsrv_node_unlink(struct fsrv_nodes *t, struct fsrv_node *parent, const char *name);

/* A rename succeeded: move the node of (op, on) to (np, nn), replacing
 * whatever was there; with exchange, swap the two.  CB_ENOMEM. */
int fsrv_node_rename(struct fsrv_nodes *t, struct fsrv_node *op, const char *on,
		     struct fsrv_node *np, const char *nn, bool exchange) CB_WARN_UNUSED;

/* The path of n relative to the root ("" for the root) into buf.
 * CB_ETOOBIG when it does not fit in len. */
int fsrv_node_path(const struct fsrv_node *n, char *buf, size_t len) CB_WARN_UNUSED;

/* The path of child name of parent (parent's path + "/" + name). */
int fsrv_child_path(const struct fsrv_node *parent, const char *name, char *buf,
		    size_t len) CB_WARN_UNUSED;

/* A single path component the server accepts: not empty, not "." or "..",
 * no '/', at most FSRV_NAME_MAX bytes. */
bool fsrv_name_ok(const char *name);

/* The capabilities an open with these flags needs. */
unsigned fsrv_open_need(int flags);

/* The open flags the server passes on to the host (the rest are dropped:
 * O_DIRECT, O_NOATIME, O_PATH, O_TMPFILE, O_NOFOLLOW-type and the like). */
int fsrv_open_flags(int flags);

/* Is path equal to prefix or beneath it?  ("" is the root: everything.) */
bool fsrv_path_within(const char *path, const char *prefix);

/* A request from /dev/fuse, decoded (proto.c).  Every pointer is into the
 * buffer given, and every name ends inside it. */
struct fsrv_msg {
	struct fuse_in_header h;
	bool known;		/* an opcode fsrv answers (otherwise ENOSYS) */
	union {			/* the opcode's fixed part, copied (aligned) */
		struct fuse_init_in init;
		struct fuse_forget_in forget;
		struct fuse_batch_forget_in forgets;
		struct fuse_getattr_in getattr;
		struct fuse_setattr_in setattr;
		struct fuse_mknod_in mknod;
		struct fuse_mkdir_in mkdir;
		struct fuse_rename_in rename;
		struct fuse_rename2_in rename2;
		struct fuse_link_in link;
		struct fuse_open_in open;
		struct fuse_create_in create;
		struct fuse_read_in read;
		struct fuse_write_in write;
		struct fuse_release_in release;
		struct fuse_fsync_in fsync;
		struct fuse_fallocate_in fallocate;
		struct fuse_interrupt_in interrupt;
	} a;
	const char *name;	/* LOOKUP, MKNOD, MKDIR, UNLINK, RMDIR, LINK, CREATE: the name;
				 * SYMLINK: the new name; RENAME(2): the old name */
	const char *name2;	/* SYMLINK: the link's text; RENAME(2): the new name */
	const void *data;	/* WRITE: the data; BATCH_FORGET: its entries */
	size_t datalen;
};

/* Decode len bytes read from /dev/fuse into m.  0; an errno to answer
 * the request with (EIO: malformed, ENOSYS: an opcode not served); or -1
 * when it is too short to have a header (nothing can be answered).  Pure:
 * no state, no system call (the fuzz target's entry point). */
int fsrv_msg_decode(const void *buf, size_t len, struct fsrv_msg *m) CB_WARN_UNUSED;

#endif
