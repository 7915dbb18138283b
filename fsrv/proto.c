/*
 * proto.c - the kernel's FUSE protocol, spoken over /dev/fuse by fsrv
 * itself: each request decoded (fsrv_msg_decode, a pure function with its
 * own fuzz target), handed to ops.c, and answered; the INIT negotiation;
 * the invalidation notices; spliced replies for large reads.
 *
 * Why not libfuse (docs/dependencies.md, "The FUSE protocol"): libfuse
 * 3.14 takes a pthread key for every session, glibc has 1,024 a process,
 * and a medium sandbox has five connections, so a broker could not serve
 * more than about 190 sandboxes; 3.14 also predates passthrough, which we
 * had to splice into its I/O.  What it gave us is small: the subset of the
 * protocol a file server of ours answers is about twenty fixed layouts.
 *
 * Trust domain: broker.  The bytes come from the kernel, which builds them
 * from the agent's system calls: names are the agent's, sizes and offsets
 * are the agent's within what the kernel checks.  So nothing is taken on
 * trust here: the header's length must be what was read, every fixed part
 * must be there whole, every name must end inside the request, a write's
 * data must be inside it, a batch of forgets is bounded by its bytes, and
 * anything not understood is answered ENOSYS (or, before INIT, EIO), never
 * dereferenced.  Node ids and file handles are only ever ours (ops.c looks
 * ids up in the node table; a handle is one we gave the kernel, which
 * keeps it from the agent).
 *
 * The structures are the kernel's own (linux/fuse.h); we answer with
 * protocol 7.38 (FUSE_KERNEL_MINOR_VERSION of Debian 12's headers) and
 * refuse a kernel older than 7.31, so there are no older layouts to
 * decode.  Passthrough (7.40) is asked for by its flag, which a 7.38 reply
 * may carry; its two fields are in space 7.38 leaves unused.
 */
#include "fsrv/srv_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#define FSRV_MINOR_MIN 31u	/* Linux 5.10: every layout below is this or newer */

/* Passthrough's protocol (7.40), which Debian 12's headers predate. */
#define FSRV_PASSTHROUGH_HI (1u << (37 - 32))	/* FUSE_PASSTHROUGH, in flags2 */
#define FSRV_FOPEN_PASSTHROUGH (1u << 7)
#define FSRV_STACK_DEPTH 2u	/* FILESYSTEM_MAX_STACK_DEPTH: the tree may be on overlayfs */

/* What each request served carries after its header: a fixed part of
 * this many bytes, then names (NUL-terminated) or data.  An opcode without
 * an entry (served false) is not served. */
enum { ARG_NONE, ARG_NAME, ARG_NAME2, ARG_DATA, ARG_FORGETS };

static const struct {
	bool served;
	uint16_t fixed;
	uint8_t tail;
} fsrv_layout[] = {
	[FUSE_LOOKUP] = { true, 0, ARG_NAME },
	[FUSE_FORGET] = { true, sizeof(struct fuse_forget_in), ARG_NONE },
	[FUSE_GETATTR] = { true, sizeof(struct fuse_getattr_in), ARG_NONE },
	[FUSE_SETATTR] = { true, sizeof(struct fuse_setattr_in), ARG_NONE },
	[FUSE_READLINK] = { true, 0, ARG_NONE },
	[FUSE_SYMLINK] = { true, 0, ARG_NAME2 },
	[FUSE_MKNOD] = { true, sizeof(struct fuse_mknod_in), ARG_NAME },
	[FUSE_MKDIR] = { true, sizeof(struct fuse_mkdir_in), ARG_NAME },
	[FUSE_UNLINK] = { true, 0, ARG_NAME },
	[FUSE_RMDIR] = { true, 0, ARG_NAME },
	[FUSE_RENAME] = { true, sizeof(struct fuse_rename_in), ARG_NAME2 },
	[FUSE_LINK] = { true, sizeof(struct fuse_link_in), ARG_NAME },
	[FUSE_OPEN] = { true, sizeof(struct fuse_open_in), ARG_NONE },
	[FUSE_READ] = { true, sizeof(struct fuse_read_in), ARG_NONE },
	[FUSE_WRITE] = { true, sizeof(struct fuse_write_in), ARG_DATA },
	[FUSE_STATFS] = { true, 0, ARG_NONE },
	[FUSE_RELEASE] = { true, sizeof(struct fuse_release_in), ARG_NONE },
	[FUSE_FSYNC] = { true, sizeof(struct fuse_fsync_in), ARG_NONE },
	/* INIT's fixed part is its 7.6 one; the rest is read if there. */
	[FUSE_INIT] = { true, offsetof(struct fuse_init_in, flags2), ARG_NONE },
	[FUSE_OPENDIR] = { true, sizeof(struct fuse_open_in), ARG_NONE },
	[FUSE_READDIR] = { true, sizeof(struct fuse_read_in), ARG_NONE },
	[FUSE_RELEASEDIR] = { true, sizeof(struct fuse_release_in), ARG_NONE },
	[FUSE_CREATE] = { true, sizeof(struct fuse_create_in), ARG_NAME },
	[FUSE_INTERRUPT] = { true, sizeof(struct fuse_interrupt_in), ARG_NONE },
	[FUSE_DESTROY] = { true, 0, ARG_NONE },
	[FUSE_BATCH_FORGET] = { true, sizeof(struct fuse_batch_forget_in), ARG_FORGETS },
	[FUSE_RENAME2] = { true, sizeof(struct fuse_rename2_in), ARG_NAME2 },
	[FUSE_FALLOCATE] = { true, sizeof(struct fuse_fallocate_in), ARG_NONE },
};

/* A name starting at p, ending (with its NUL) before end; NULL if not. */
static const char *
fsrv_name_at(const char *p, const char *end)
{
	if (p >= end || memchr(p, '\0', (size_t)(end - p)) == NULL)
		return NULL;
	return p;
}

int
fsrv_msg_decode(const void *buf, size_t len, struct fsrv_msg *m)
{
	const char *p = buf, *end, *q;
	size_t body, fixed;

	memset(m, 0, sizeof(*m));
	if (len < sizeof(m->h))
		return -1;	/* not even a request to answer */
	memcpy(&m->h, p, sizeof(m->h));
	if (m->h.len != len)
		return EIO;
	m->known = m->h.opcode < sizeof(fsrv_layout) / sizeof(fsrv_layout[0]) &&
	    fsrv_layout[m->h.opcode].served;
	if (!m->known)
		return ENOSYS;
	/* Extensions (7.36: a security context, supplementary groups) are
	 * sent only when INIT asked for them, which we never do; they sit
	 * at the end, and are never taken for a name. */
	body = len - sizeof(m->h);
	if ((size_t)m->h.total_extlen * 8 > body)
		return EIO;
	body -= (size_t)m->h.total_extlen * 8;
	fixed = fsrv_layout[m->h.opcode].fixed;
	if (body < fixed)
		return EIO;
	/* A copy: the union is aligned and zeroed past what was sent (INIT's
	 * flags2 and the rest of a 7.6-sized INIT). */
	memcpy(&m->a, p + sizeof(m->h),
	    m->h.opcode == FUSE_INIT && body > sizeof(m->a.init) ? sizeof(m->a.init) :
	    m->h.opcode == FUSE_INIT ? body : fixed);
	p += sizeof(m->h) + fixed;
	end = (const char *)buf + sizeof(m->h) + body;
	switch (fsrv_layout[m->h.opcode].tail) {
	case ARG_NAME2:
		if ((m->name = fsrv_name_at(p, end)) == NULL)
			return EIO;
		q = p + strlen(p) + 1;
		if ((m->name2 = fsrv_name_at(q, end)) == NULL)
			return EIO;
		break;
	case ARG_NAME:
		if ((m->name = fsrv_name_at(p, end)) == NULL)
			return EIO;
		break;
	case ARG_DATA:
		/* The kernel sends exactly size bytes; anything else is not a
		 * write we understand. */
		if (m->a.write.size != (size_t)(end - p))
			return EIO;
		m->data = p;
		m->datalen = m->a.write.size;
		break;
	case ARG_FORGETS:
		if (m->a.forgets.count > (size_t)(end - p) / sizeof(struct fuse_forget_one))
			return EIO;
		m->data = p;
		m->datalen = (size_t)m->a.forgets.count * sizeof(struct fuse_forget_one);
		break;
	default:
		break;
	}
	return 0;
}

/* ---- replies ---- */

/* One message to the kernel: the header and up to two parts.  0, or
 * -errno (ENOENT: the request was interrupted, and the kernel no longer
 * waits for it). */
static int
fsrv_send(const struct fsrv_req *r, int error, const void *a, size_t alen, const void *b,
    size_t blen)
{
	struct fuse_out_header h = { .unique = r->unique };
	struct iovec iov[3];
	int n = 0;

	/* The kernel refuses an error outside 1..511 and would then wait
	 * for the answer for ever. */
	if (error < 0 || error >= 512)
		error = EIO;
	h.error = -error;
	iov[n++] = (struct iovec){ &h, sizeof(h) };
	if (alen > 0)
		iov[n++] = (struct iovec){ (void *)a, alen };
	if (blen > 0)
		iov[n++] = (struct iovec){ (void *)b, blen };
	h.len = (uint32_t)(sizeof(h) + alen + blen);
	if (writev(r->t->dev_fd, iov, n) < 0)
		return -errno;
	return 0;
}

/*
 * A handler's error.  ENOSYS is never one: to the kernel it means "this
 * server has no such operation", remembered for the connection, and for
 * OPEN that means every later open succeeds without asking us (unchecked)
 * with file handle 0 (for CREATE: every create fails, EPERM from mknod).
 * A handler gets ENOSYS only from the host (a host FUSE file system
 * without truncate answers the ftruncate of an open with O_TRUNC so), so
 * it is sent as EOPNOTSUPP; only fsrv_dispatch says ENOSYS, for the
 * opcodes not served.
 */
int
fsrv_reply_err(const struct fsrv_req *r, int error)
{
	return fsrv_send(r, error == ENOSYS ? EOPNOTSUPP : error, NULL, 0, NULL, 0);
}

/* libfuse's conversion of a cache time: whole seconds, saturated, and the
 * fraction in nanoseconds; negative is none. */
static void
fsrv_timeout(double t, uint64_t *sec, uint32_t *nsec)
{
	double f;

	if (!(t > 0)) {
		*sec = 0;
		*nsec = 0;
		return;
	}
	if (t >= 18446744073709551615.0) {
		*sec = UINT64_MAX;
		*nsec = 0;
		return;
	}
	*sec = (uint64_t)t;
	f = t - (double)*sec;
	*nsec = f <= 0 ? 0 : f >= 0.999999999 ? 999999999u : (uint32_t)(f * 1e9);
}

static void
fsrv_attr(const struct stat *st, struct fuse_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = (uint64_t)st->st_ino;
	a->mode = (uint32_t)st->st_mode;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = (uint32_t)st->st_uid;
	a->gid = (uint32_t)st->st_gid;
	a->rdev = (uint32_t)st->st_rdev;
	a->size = (uint64_t)st->st_size;
	a->blksize = (uint32_t)st->st_blksize;
	a->blocks = (uint64_t)st->st_blocks;
	a->atime = (uint64_t)st->st_atim.tv_sec;
	a->mtime = (uint64_t)st->st_mtim.tv_sec;
	a->ctime = (uint64_t)st->st_ctim.tv_sec;
	a->atimensec = (uint32_t)st->st_atim.tv_nsec;
	a->mtimensec = (uint32_t)st->st_mtim.tv_nsec;
	a->ctimensec = (uint32_t)st->st_ctim.tv_nsec;
}

static void
fsrv_entry_out(const struct fsrv_entry *e, struct fuse_entry_out *o)
{
	memset(o, 0, sizeof(*o));
	o->nodeid = e->ino;
	o->generation = e->generation;
	fsrv_timeout(e->entry_timeout, &o->entry_valid, &o->entry_valid_nsec);
	fsrv_timeout(e->attr_timeout, &o->attr_valid, &o->attr_valid_nsec);
	/* A negative entry (ino 0) carries no attributes. */
	if (e->ino != 0)
		fsrv_attr(&e->attr, &o->attr);
}

static void
fsrv_open_out(const struct fsrv_fi *fi, struct fuse_open_out *o)
{
	memset(o, 0, sizeof(*o));
	o->fh = fi->fh;
	if (fi->direct_io)
		o->open_flags |= FOPEN_DIRECT_IO;
	if (fi->keep_cache)
		o->open_flags |= FOPEN_KEEP_CACHE;
	if (fi->backing > 0) {
		/* 7.40: the backing id is in what 7.38 calls padding. */
		o->open_flags |= FSRV_FOPEN_PASSTHROUGH;
		o->padding = fi->backing;
	}
}

int
fsrv_reply_entry(const struct fsrv_req *r, const struct fsrv_entry *e)
{
	struct fuse_entry_out o;

	fsrv_entry_out(e, &o);
	return fsrv_send(r, 0, &o, sizeof(o), NULL, 0);
}

int
fsrv_reply_create(const struct fsrv_req *r, const struct fsrv_entry *e, const struct fsrv_fi *fi)
{
	struct fuse_entry_out o;
	struct fuse_open_out oo;

	fsrv_entry_out(e, &o);
	fsrv_open_out(fi, &oo);
	return fsrv_send(r, 0, &o, sizeof(o), &oo, sizeof(oo));
}

int
fsrv_reply_attr(const struct fsrv_req *r, const struct stat *st, double timeout)
{
	struct fuse_attr_out o;

	memset(&o, 0, sizeof(o));
	fsrv_timeout(timeout, &o.attr_valid, &o.attr_valid_nsec);
	fsrv_attr(st, &o.attr);
	return fsrv_send(r, 0, &o, sizeof(o), NULL, 0);
}

int
fsrv_reply_open(const struct fsrv_req *r, const struct fsrv_fi *fi)
{
	struct fuse_open_out o;

	fsrv_open_out(fi, &o);
	return fsrv_send(r, 0, &o, sizeof(o), NULL, 0);
}

int
fsrv_reply_write(const struct fsrv_req *r, size_t n)
{
	struct fuse_write_out o = { .size = (uint32_t)n };

	return fsrv_send(r, 0, &o, sizeof(o), NULL, 0);
}

int
fsrv_reply_buf(const struct fsrv_req *r, const void *buf, size_t n)
{
	return fsrv_send(r, 0, buf, n, NULL, 0);
}

int
fsrv_reply_readlink(const struct fsrv_req *r, const char *target)
{
	return fsrv_send(r, 0, target, strlen(target), NULL, 0);
}

int
fsrv_reply_statfs(const struct fsrv_req *r, const struct statvfs *sv)
{
	struct fuse_statfs_out o;

	memset(&o, 0, sizeof(o));
	o.st.blocks = sv->f_blocks;
	o.st.bfree = sv->f_bfree;
	o.st.bavail = sv->f_bavail;
	o.st.files = sv->f_files;
	o.st.ffree = sv->f_ffree;
	o.st.bsize = (uint32_t)sv->f_bsize;
	o.st.namelen = (uint32_t)sv->f_namemax;
	o.st.frsize = (uint32_t)sv->f_frsize;
	return fsrv_send(r, 0, &o, sizeof(o), NULL, 0);
}

size_t
fsrv_add_direntry(char *buf, size_t rem, const char *name, const struct stat *st, off_t off)
{
	size_t namelen = strlen(name);
	size_t len = FUSE_NAME_OFFSET + namelen, padded = FUSE_DIRENT_ALIGN(len);
	struct fuse_dirent d;

	if (padded > rem)
		return padded;	/* the caller keeps the entry for the next batch */
	d.ino = (uint64_t)st->st_ino;
	d.off = (uint64_t)off;
	d.namelen = (uint32_t)namelen;
	d.type = ((uint32_t)st->st_mode & S_IFMT) >> 12;
	memcpy(buf, &d, FUSE_NAME_OFFSET);
	memcpy(buf + FUSE_NAME_OFFSET, name, namelen);
	memset(buf + len, 0, padded - len);
	return padded;
}

/* The serving thread's pipe for spliced replies, made on first use and
 * sized for the largest one (FSRV_READ_MAX and its header); false when
 * there is none (the reply is then copied). */
static bool
fsrv_pipe(struct fsrv *s)
{
	if (s->pipe[0] >= 0)
		return true;
	if (s->no_splice)
		return false;
	if (pipe2(s->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		s->pipe[0] = s->pipe[1] = -1;
		return false;
	}
	if (fcntl(s->pipe[0], F_SETPIPE_SZ, (int)(FSRV_READ_MAX + 2 * 4096)) <
	    (int)(FSRV_READ_MAX + 2 * 4096)) {
		/* pipe-max-size lowered on this host: copy, always. */
		fsrv_pipe_close(s);
		s->no_splice = true;
		return false;
	}
	return true;
}

void
fsrv_pipe_close(struct fsrv *s)
{
	if (s->pipe[0] >= 0)
		close(s->pipe[0]);
	if (s->pipe[1] >= 0)
		close(s->pipe[1]);
	s->pipe[0] = s->pipe[1] = -1;
}

/*
 * Answer a read with len bytes of fd at off, the file's pages spliced
 * through the pipe into /dev/fuse: one copy (into the agent's buffer)
 * instead of two (a pread here, then the write to the kernel).  The header
 * goes into the pipe first, saying len; should the file have shrunk since
 * the caller's fstat (fewer bytes spliced), the pipe is emptied and the
 * reply copied instead, so what is sent is always what the header says.
 * 0, 1 (not spliced: the caller copies), or -errno of the final write.
 */
int
fsrv_reply_splice(const struct fsrv_req *r, int fd, off_t off, size_t len)
{
	struct fsrv *s = r->t->srv;
	struct fuse_out_header h = { .len = (uint32_t)(sizeof(h) + len), .unique = r->unique };
	size_t got = 0;
	loff_t pos = off;
	ssize_t n;

	if (!fsrv_pipe(s))
		return 1;
	if (write(s->pipe[1], &h, sizeof(h)) != (ssize_t)sizeof(h))
		goto broken;
	while (got < len) {
		n = splice(fd, &pos, s->pipe[1], NULL, len - got, SPLICE_F_NONBLOCK);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got != len)
		goto broken;
	n = splice(s->pipe[0], NULL, r->t->dev_fd, NULL, sizeof(h) + len, 0);
	if (n == (ssize_t)(sizeof(h) + len))
		return 0;
	if (n < 0 && errno == ENOENT) {
		/* The request is gone (the connection was aborted): nothing
		 * of this reply may precede the next one, whatever the kernel
		 * took out of the pipe before it looked the request up. */
		fsrv_pipe_close(s);
		return -ENOENT;
	}
broken:
	/* Whatever is in the pipe would corrupt the next reply: a new one. */
	fsrv_pipe_close(s);
	return 1;
}

/* ---- notices (any thread) ---- */

int
fsrv_notify_inval_inode(const struct fsrv_tree *t, uint64_t ino, int64_t off, int64_t len)
{
	struct fuse_out_header h = { .error = FUSE_NOTIFY_INVAL_INODE };
	struct fuse_notify_inval_inode_out o = { .ino = ino, .off = off, .len = len };
	struct iovec iov[2] = { { &h, sizeof(h) }, { &o, sizeof(o) } };

	h.len = sizeof(h) + sizeof(o);
	return writev(t->dev_fd, iov, 2) < 0 ? -errno : 0;
}

int
fsrv_notify_inval_entry(const struct fsrv_tree *t, uint64_t parent, const char *name)
{
	struct fuse_out_header h = { .error = FUSE_NOTIFY_INVAL_ENTRY };
	struct fuse_notify_inval_entry_out o = { .parent = parent };
	size_t n = strlen(name);
	struct iovec iov[3] = { { &h, sizeof(h) }, { &o, sizeof(o) }, { (void *)name, n + 1 } };

	o.namelen = (uint32_t)n;
	h.len = (uint32_t)(sizeof(h) + sizeof(o) + n + 1);
	return writev(t->dev_fd, iov, 3) < 0 ? -errno : 0;
}

/* ---- INIT ---- */

/*
 * The answer to INIT: what libfuse 3.14 asked for by default, less what we
 * never want.  Asked for when the kernel offers it: asynchronous reads and
 * direct I/O, parallel directory operations, automatic invalidation of
 * cached data when a file's size or mtime changes, killing set-id bits
 * handled by us (HANDLE_KILLPRIV: the broker's own write clears them), an
 * atomic O_TRUNC (open with O_TRUNC in one request), up to 1 MiB a write
 * (MAX_PAGES), and passthrough when the policy opts in.  Never: an
 * exportable file system (handles the agent could forge), a writeback
 * cache (every write is checked), POSIX ACLs, locks, readdirplus,
 * DONT_MASK (the kernel applies the umask), spliced requests (the buffer
 * is ours to check).
 */
static void
fsrv_init(struct fsrv_req *r, const struct fuse_init_in *in)
{
	struct fsrv_tree *t = r->t;
	struct fuse_init_out o;
	uint64_t offered = in->flags, want = FUSE_BIG_WRITES;

	memset(&o, 0, sizeof(o));
	o.major = FUSE_KERNEL_VERSION;
	o.minor = FUSE_KERNEL_MINOR_VERSION;
	if (in->major > FUSE_KERNEL_VERSION) {
		/* The kernel sends INIT again with our major. */
		cb_ignore(fsrv_send(r, 0, &o, sizeof(o), NULL, 0));
		return;
	}
	if (in->major < FUSE_KERNEL_VERSION || in->minor < FSRV_MINOR_MIN) {
		cb_ignore(fsrv_reply_err(r, EPROTO));
		return;
	}
	if (offered & FUSE_INIT_EXT)
		offered |= (uint64_t)in->flags2 << 32;
	want |= offered & (FUSE_ASYNC_READ | FUSE_PARALLEL_DIROPS | FUSE_AUTO_INVAL_DATA |
	    FUSE_HANDLE_KILLPRIV | FUSE_ASYNC_DIO | FUSE_ATOMIC_O_TRUNC);
	o.max_write = FSRV_WRITE_MAX;
	if (offered & FUSE_MAX_PAGES) {
		want |= FUSE_MAX_PAGES;
		o.max_pages = (uint16_t)((FSRV_WRITE_MAX - 1) / 4096 + 1);
	} else {
		o.max_write = 32 * 4096;	/* the kernel's default request size */
	}
	if (t->srv->cfg.passthrough && (offered & ((uint64_t)FSRV_PASSTHROUGH_HI << 32))) {
		want |= (uint64_t)FSRV_PASSTHROUGH_HI << 32;
		o.unused[0] = FSRV_STACK_DEPTH;	/* 7.40's max_stack_depth */
		t->pt_on = true;
	}
	if (offered & FUSE_INIT_EXT) {
		want |= FUSE_INIT_EXT;
		o.flags2 = (uint32_t)(want >> 32);
	}
	o.flags = (uint32_t)want;
	/* Readahead up to one max_read: the kernel keeps the smaller of this
	 * and its connection's read_ahead_kb, which a root mounter raises to
	 * the same (mount.c, fsrv_mount_readahead).  Not the smaller of this
	 * and what INIT offered: that is the bdi's 128 KiB default when the
	 * kernel sent INIT before the mounter raised it. */
	o.max_readahead = FSRV_READ_MAX;
	o.time_gran = 1;
	if (fsrv_send(r, 0, &o, sizeof(o), NULL, 0) == 0) {
		t->minor = in->minor < FUSE_KERNEL_MINOR_VERSION ? in->minor :
		    FUSE_KERNEL_MINOR_VERSION;
		t->got_init = true;
	}
}

/* ---- dispatch ---- */

static void
fsrv_setattr_in(const struct fuse_setattr_in *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = a->mode;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = (off_t)a->size;
	st->st_atim.tv_sec = (time_t)a->atime;
	st->st_atim.tv_nsec = a->atimensec;
	st->st_mtim.tv_sec = (time_t)a->mtime;
	st->st_mtim.tv_nsec = a->mtimensec;
	st->st_ctim.tv_sec = (time_t)a->ctime;
	st->st_ctim.tv_nsec = a->ctimensec;
}

/*
 * Whether m names an open file by a handle of 0.  The handlers of these
 * requests take the handle for the pointer we gave the kernel at the open;
 * the one handle the kernel makes up itself is 0, for an open it did not
 * send us (after an OPEN or OPENDIR was answered ENOSYS), so 0 is refused
 * here (EBADF), never dereferenced.
 */
static bool
fsrv_null_fh(const struct fsrv_msg *m)
{
	switch (m->h.opcode) {
	case FUSE_READ:
	case FUSE_READDIR:
		return m->a.read.fh == 0;
	case FUSE_WRITE:
		return m->a.write.fh == 0;
	case FUSE_FSYNC:
		return m->a.fsync.fh == 0;
	case FUSE_FALLOCATE:
		return m->a.fallocate.fh == 0;
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
		return m->a.release.fh == 0;
	default:
		return false;
	}
}

/* Requests that are never answered. */
static bool
fsrv_no_reply(uint32_t opcode)
{
	return opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET ||
	    opcode == FUSE_INTERRUPT || opcode == FUSE_NOTIFY_REPLY;
}

/* The requests on an open file or directory: true if m is one (and was
 * answered). */
static bool
fsrv_dispatch_fh(struct fsrv_req *r, const struct fsrv_msg *m)
{
	const struct fsrv_ll_ops *ops = &fsrv_ops;
	struct fsrv_fi fi;

	if (fsrv_null_fh(m)) {
		cb_ignore(fsrv_reply_err(r, EBADF));
		return true;
	}
	memset(&fi, 0, sizeof(fi));
	switch (m->h.opcode) {
	case FUSE_OPEN:
		fi.flags = m->a.open.flags;
		ops->open(r, m->h.nodeid, &fi);
		break;
	case FUSE_OPENDIR:
		fi.flags = m->a.open.flags;
		ops->opendir(r, m->h.nodeid, &fi);
		break;
	case FUSE_CREATE:
		fi.flags = m->a.create.flags;
		ops->create(r, m->h.nodeid, m->name, m->a.create.mode, &fi);
		break;
	case FUSE_READ:
		fi.fh = m->a.read.fh;
		fi.flags = m->a.read.flags;
		ops->read(r, m->h.nodeid, m->a.read.size, (off_t)m->a.read.offset, &fi);
		break;
	case FUSE_READDIR:
		fi.fh = m->a.read.fh;
		ops->readdir(r, m->h.nodeid, m->a.read.size, (off_t)m->a.read.offset, &fi);
		break;
	case FUSE_WRITE:
		fi.fh = m->a.write.fh;
		fi.flags = m->a.write.flags;
		ops->write(r, m->h.nodeid, m->data, m->datalen, (off_t)m->a.write.offset, &fi);
		break;
	case FUSE_RELEASE:
		fi.fh = m->a.release.fh;
		fi.flags = m->a.release.flags;
		ops->release(r, m->h.nodeid, &fi);
		break;
	case FUSE_RELEASEDIR:
		fi.fh = m->a.release.fh;
		ops->releasedir(r, m->h.nodeid, &fi);
		break;
	case FUSE_FSYNC:
		fi.fh = m->a.fsync.fh;
		ops->fsync(r, m->h.nodeid, m->a.fsync.fsync_flags & FUSE_FSYNC_FDATASYNC, &fi);
		break;
	case FUSE_FALLOCATE:
		fi.fh = m->a.fallocate.fh;
		ops->fallocate(r, m->h.nodeid, m->a.fallocate.mode, m->a.fallocate.offset,
		    m->a.fallocate.length, &fi);
		break;
	default:
		return false;
	}
	return true;
}

void
fsrv_dispatch(struct fsrv_tree *t, const void *buf, size_t len)
{
	const struct fsrv_ll_ops *ops = &fsrv_ops;
	struct fsrv_msg m;
	struct fsrv_req r = { .t = t };
	struct fsrv_fi fi;
	struct stat st;
	int e = fsrv_msg_decode(buf, len, &m);

	if (e < 0)
		return;
	r.unique = m.h.unique;
	r.uid = m.h.uid;
	r.gid = m.h.gid;
	r.pid = (pid_t)m.h.pid;
	if (e == 0 && !t->got_init && m.h.opcode != FUSE_INIT)
		e = EIO;
	if (e != 0) {
		/* EIO, or ENOSYS for an opcode not served: sent as it is. */
		if (!fsrv_no_reply(m.h.opcode))
			cb_ignore(fsrv_send(&r, e, NULL, 0, NULL, 0));
		return;
	}
	memset(&fi, 0, sizeof(fi));
	switch (m.h.opcode) {
	case FUSE_INIT:
		fsrv_init(&r, &m.a.init);
		break;
	case FUSE_DESTROY:
		cb_ignore(fsrv_reply_err(&r, 0));
		break;
	case FUSE_INTERRUPT:
		break;		/* every request is finished anyway, and soon */
	case FUSE_LOOKUP:
		ops->lookup(&r, m.h.nodeid, m.name);
		break;
	case FUSE_FORGET:
		ops->forget(&r, m.h.nodeid, m.a.forget.nlookup);
		break;
	case FUSE_BATCH_FORGET:
		ops->forget_multi(&r, m.a.forgets.count, m.data);
		break;
	case FUSE_GETATTR:
		if (m.a.getattr.getattr_flags & FUSE_GETATTR_FH) {
			fi.fh = m.a.getattr.fh;
			ops->getattr(&r, m.h.nodeid, &fi);
		} else {
			ops->getattr(&r, m.h.nodeid, NULL);
		}
		break;
	case FUSE_SETATTR:
		fsrv_setattr_in(&m.a.setattr, &st);
		fi.fh = m.a.setattr.fh;
		ops->setattr(&r, m.h.nodeid, &st, (int)(m.a.setattr.valid & FSRV_FATTR_KNOWN),
		    (m.a.setattr.valid & FATTR_FH) ? &fi : NULL);
		break;
	case FUSE_READLINK:
		ops->readlink(&r, m.h.nodeid);
		break;
	case FUSE_SYMLINK:
		/* The new name first, then the link's text. */
		ops->symlink(&r, m.name2, m.h.nodeid, m.name);
		break;
	case FUSE_MKNOD:
		ops->mknod(&r, m.h.nodeid, m.name, m.a.mknod.mode, m.a.mknod.rdev);
		break;
	case FUSE_MKDIR:
		ops->mkdir(&r, m.h.nodeid, m.name, m.a.mkdir.mode);
		break;
	case FUSE_UNLINK:
		ops->unlink(&r, m.h.nodeid, m.name);
		break;
	case FUSE_RMDIR:
		ops->rmdir(&r, m.h.nodeid, m.name);
		break;
	case FUSE_RENAME:
		ops->rename(&r, m.h.nodeid, m.name, m.a.rename.newdir, m.name2, 0);
		break;
	case FUSE_RENAME2:
		ops->rename(&r, m.h.nodeid, m.name, m.a.rename2.newdir, m.name2, m.a.rename2.flags);
		break;
	case FUSE_LINK:
		ops->link(&r, m.a.link.oldnodeid, m.h.nodeid, m.name);
		break;
	case FUSE_STATFS:
		ops->statfs(&r, m.h.nodeid);
		break;
	default:
		/* FLUSH among the ones not served: the kernel stops sending it
		 * (a round trip on every close) after the first ENOSYS; writes
		 * are not buffered here, so there is nothing to flush. */
		if (!fsrv_dispatch_fh(&r, &m))
			cb_ignore(fsrv_send(&r, ENOSYS, NULL, 0, NULL, 0));
		break;
	}
}
