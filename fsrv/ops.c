/*
 * ops.c - the FUSE operations of the file server: one handler a request
 * kind, each asking the caller's authorisation function first.
 *
 * Trust domain: broker, acting on host files for a hostile agent.  Why the
 * handlers are safe:
 *  - proto.c decodes the kernel's requests (lengths, names and sizes
 *    checked there); the kernel builds them from the agent's system calls.  Names are checked again here (fsrv_name_ok: one
 *    component, no "." or "..", no '/'), node ids are looked up in the
 *    tree's table (never cast to pointers), flags and modes are masked.
 *  - The path judged by the authorisation function is the path acted on:
 *    it is rebuilt from the node table and resolved from the tree's root fd
 *    with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 *    RESOLVE_NO_MAGICLINKS).  A symlink anywhere on the way, a /proc magic
 *    link or a rename racing the request makes the kernel refuse
 *    (ELOOP/EXDEV) instead of walking out of the tree.  A final-component
 *    operation (mkdirat, unlinkat, renameat2, symlinkat, linkat,
 *    readlinkat) works on a parent fd resolved that way and one checked name,
 *    and none of them follows a final symlink.  Attribute changes go
 *    through an O_PATH fd of the object itself (AT_EMPTY_PATH), never a
 *    name that could be swapped for a symlink.
 *  - Only regular files are opened for reading and writing (statx, then
 *    fstat on the opened fd), so a device, FIFO or socket planted in the
 *    tree is never opened by the broker; the mount is nodev and nosuid.
 *  - Reads and writes on an open file, and each batch of a directory
 *    listing, ask the authorisation function again: a revoked token stops
 *    an open file at its next read.  File data bypasses the page cache
 *    (direct I/O), so no read is answered by the kernel alone.
 *  - No set-id bits are created or set, and served as root a set-id
 *    file is never opened for writing (fsrv_open_regular); chown is
 *    refused; mknod is not offered (EPERM).
 */
#include "fsrv/srv_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

#define FSRV_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static struct fsrv_tree *
fsrv_t(const struct fsrv_req *req)
{
	return req->t;
}

/*
 * The one resolver: rel beneath the tree's root, no symlink, no magic
 * link, no "..", no escape.  "" is the root itself.  Nothing on a kernel
 * file system (procfs, sysfs, cgroup, debugfs...: cb_fd_kernfs) is
 * served, as the broker's own resolver refuses it (common/resolve.c): a
 * procfs or sysfs mounted beneath a granted tree on the host would
 * otherwise be served with the tree's identity, as root for a root-owned
 * tree (an agent wrote /proc/sys/kernel/hostname that way: red team,
 * tests/integration/132-fs-served-kernfs.sh).  An fd on the root's own
 * file system (same st_dev: one superblock, and the root is checked when
 * the tree is added) needs no fstatfs; anything else is asked.  Every
 * lookup goes through here (O_PATH), so the kernel meets such a mount's
 * root as EACCES and never gets a node beneath it.  The fstat that
 * decides is returned in st (fsrv_open_at_st): it is the opened fd's, so
 * callers take it as their authority on the type, links and owner
 * instead of asking the kernel a second time.
 */
static int
fsrv_open_at_st(struct fsrv_tree *t, const char *rel, uint64_t flags, mode_t mode,
		struct stat *st)
{
	struct open_how how = { .flags = flags | O_CLOEXEC,
		.mode = (flags & O_CREAT) ? mode : 0, .resolve = FSRV_RESOLVE };
	int fd = (int)syscall(SYS_openat2, t->root_fd, rel[0] ? rel : ".", &how, sizeof(how));

	if (fd < 0)
		return -1;
	if (fstat(fd, st) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	if (st->st_dev != t->root_dev && cb_fd_kernfs(fd)) {
		close(fd);
		errno = EACCES;
		return -1;
	}
	return fd;
}

static int
fsrv_open_at(struct fsrv_tree *t, const char *rel, uint64_t flags, mode_t mode)
{
	struct stat st;

	return fsrv_open_at_st(t, rel, flags, mode, &st);
}

/* The errno the agent sees for a failed resolution: a symlink or escape on
 * the way reads as "no such file" would leak nothing, but ELOOP is what
 * the kernel itself says for a loop, so keep it; EXDEV (an escape) becomes
 * EACCES. */
static int
fsrv_err(int e)
{
	return e == EXDEV ? EACCES : e;
}

/* What the agent is told of a refusal: a path the caller cannot judge at
 * all (fsrv_authz_fn: too long, or a name it refuses) says so, as a file
 * system that cannot hold such a name would; anything else is EACCES. */
static int
fsrv_denied(int r)
{
	return r == 0 ? 0 : r == CB_ETOOBIG ? ENAMETOOLONG : r == CB_EINVAL ? EINVAL : EACCES;
}

/* Ask the caller.  0, EACCES, or ENAMETOOLONG or EINVAL (fsrv_denied). */
static int
fsrv_check(struct fsrv_req *req, enum fsrv_op op, unsigned need, const char *path)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_check c = { .tree = t->idx, .op = op, .need = need, .path = path,
		.pid = req->pid, .uid = req->uid, .gid = req->gid, .ttl = &t->ttl };
	double was = t->ttl;
	int r;

	/* A slot without its root yet (fsrv_add_slot) serves nothing. */
	if (t->root_fd < 0)
		return EACCES;
	r = t->srv->cfg.authz(t->srv->cfg.authz_arg, &c);
	if (t->ttl < was)
		t->ttl_at = cb_mono_ns();	/* counted from here (fsrv_ttl) */
	return fsrv_denied(r);
}

/* A cache time for this request's answer: at most what its checks left
 * (struct fsrv_check.ttl) less the time since, so that a thread held up
 * between its check and its reply (a loaded machine) does not stretch it;
 * never negative. */
static double
fsrv_ttl(const struct fsrv_tree *t, double configured)
{
	double v = configured;

	if (t->ttl < configured)
		v = t->ttl - (double)(cb_mono_ns() - t->ttl_at) / 1e9;
	return v > 0 ? v : 0;
}

/* The path of node ino (name == NULL) or of its child name, into buf.
 * Optionally the node itself.  0 or an errno. */
static int
fsrv_path(struct fsrv_req *req, uint64_t ino, const char *name, char *buf, struct fsrv_node **np)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_node *n;
	int e = 0;

	if (name != NULL && !fsrv_name_ok(name))
		return strlen(name) > FSRV_NAME_MAX ? ENAMETOOLONG : EINVAL;
	/* A slot without its root yet has no node table either (it is made
	 * with the root: fsrv_slot_take), and serves nothing. */
	if (t->root_fd < 0)
		return EACCES;
	pthread_mutex_lock(&t->srv->lock);
	n = fsrv_node_get(&t->nodes, ino);
	if (n == NULL)
		e = ESTALE;
	else if (name != NULL ? fsrv_child_path(n, name, buf, FSRV_PATH_MAX) != 0
			      : fsrv_node_path(n, buf, FSRV_PATH_MAX) != 0)
		e = ENAMETOOLONG;
	pthread_mutex_unlock(&t->srv->lock);
	if (np != NULL)
		*np = n;
	return e;
}

/* Split a path into its parent (in place) and last name. */
static const char *
fsrv_split(char *path)
{
	char *s = strrchr(path, '/');

	if (s == NULL) {
		memmove(path + 1, path, strlen(path) + 1);
		path[0] = '\0';
		return path + 1;
	}
	*s = '\0';
	return s + 1;
}

/* The parent directory of a child path, as an O_PATH fd; *name its last
 * component.  path is modified.  An fd or -errno. */
static int
fsrv_parent(struct fsrv_tree *t, char *path, const char **name)
{
	int fd;

	*name = fsrv_split(path);
	fd = fsrv_open_at(t, path, O_PATH | O_DIRECTORY, 0);
	return fd < 0 ? -fsrv_err(errno) : fd;
}

/* stat of path itself (a final symlink is not followed): the resolver's
 * own fstat of the fd.  0 or errno. */
static int
fsrv_stat_path(struct fsrv_tree *t, const char *path, struct stat *st)
{
	int fd = fsrv_open_at_st(t, path, O_PATH | O_NOFOLLOW, 0, st);

	if (fd < 0)
		return fsrv_err(errno);
	close(fd);
	return 0;
}

/*
 * The hardlink rule, as the broker's explicit fs.* operations keep it
 * (broker/ops_fs.c, brk_foreign_link): a regular file with more than one
 * link whose owner is not the owner of the tree's root may have been
 * linked in by someone who could not read it (fs.protected_hardlinks
 * off).  Served with the owner's identity that someone gains nothing the
 * owner could not do, but a root-owned tree is served as root, which
 * would read, write, truncate and chmod whatever was linked in (a link to
 * /etc/shadow in a world-writable root-owned directory).  Refused (EPERM)
 * for every data and attribute operation, whatever the identity.
 */
static bool
fsrv_foreign_link(const struct fsrv_tree *t, const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_nlink > 1 && st->st_uid != t->root_uid;
}

/*
 * The owner the agent is told (owner_as_agent).  An agent of another uid
 * than the root's owner (a root broker's: nobody) saw every file of the
 * tree as someone else's, and the kernel refused, before asking us, what
 * only an owner may do: setting a POSIX ACL, which `sed -i` and `cp -a`
 * do after every copy ("preserving permissions ...: Operation not
 * permitted").  Shown as the agent's, the request reaches the server,
 * which has no xattrs (EOPNOTSUPP: "no ACLs here" to both).  Nothing else
 * changes hands: the mount has no default_permissions, so chmod, utimes,
 * chown and every open came here before and are checked as before, as the
 * owner.  Only what is reported changes, never what is acted on.
 */
static void
fsrv_shown(const struct fsrv_tree *t, struct stat *st)
{
	if (!t->srv->cfg.owner_as_agent)
		return;
	if (st->st_uid == t->root_uid)
		st->st_uid = t->srv->cfg.agent_uid;
	if (st->st_gid == t->root_gid)
		st->st_gid = t->srv->cfg.agent_gid;
}

/* The owner and group a chown names, as the host knows them: the agent's
 * own, which fsrv_shown put on the root owner's files, are the owner's. */
static void
fsrv_chown_host(const struct fsrv_tree *t, const struct stat *cur, struct stat *attr)
{
	if (!t->srv->cfg.owner_as_agent)
		return;
	if (attr->st_uid == t->srv->cfg.agent_uid && cur->st_uid == t->root_uid)
		attr->st_uid = cur->st_uid;
	if (attr->st_gid == t->srv->cfg.agent_gid && cur->st_gid == t->root_gid)
		attr->st_gid = cur->st_gid;
}

/*
 * Open a regular file beneath the root without opening anything else: a
 * FIFO, socket or device is refused before it is opened (opening one can
 * act).  statx() is only a cheap hint (it follows symlinks on the way, so
 * what it says of a non-regular file is confirmed through the resolver
 * before the agent hears of it: no answer tells the type of something
 * outside the tree); the fstat() of the opened fd is the authority.  The
 * residual window is the broker's (broker/ops_fs.c, brk_open_regular): a
 * host party swapping in an existing FIFO or device at that instant makes
 * the open act, and the file is still refused.  An fd or -errno.
 */
static int
fsrv_open_regular(struct fsrv_tree *t, const char *path, int flags, mode_t mode,
		  struct stat *out)
{
	struct statx sx;
	struct stat st;
	int fd;

	if (statx(t->root_fd, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC,
		  STATX_TYPE, &sx) == 0 && !S_ISREG(sx.stx_mode)) {
		int e = fsrv_stat_path(t, path, &st);

		if (e != 0)
			return -e;
		if (!S_ISREG(st.st_mode))
			return S_ISDIR(st.st_mode) ? -EISDIR : S_ISLNK(st.st_mode) ? -ELOOP : -ENXIO;
	}
	/* O_TRUNC waits for the set-id check below: it would act at open. */
	fd = fsrv_open_at_st(t, path, (uint64_t)((flags & ~O_TRUNC) | O_NONBLOCK), mode, &st);
	if (fd < 0)
		return -fsrv_err(errno);
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -ENXIO;
	}
	if (fsrv_foreign_link(t, &st)) {
		close(fd);
		return -EPERM;
	}
	/* Served as root (a root-owned tree: fsuid 0 keeps CAP_FSETID), a
	 * set-uid or set-gid file is never opened for writing, as the
	 * broker's fs.write: the kernel would keep the bit on content the
	 * agent wrote.  Any other identity has the bit cleared by the write. */
	if (((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) &&
	    (st.st_mode & (S_ISUID | S_ISGID)) && setfsuid((uid_t)-1) == 0) {
		close(fd);
		return -EPERM;
	}
	/* The size (and times) the caller reports are the truncated file's. */
	if ((flags & O_TRUNC) && (ftruncate(fd, 0) != 0 || fstat(fd, &st) != 0)) {
		int e = errno;

		close(fd);
		return -e;
	}
	/* O_NONBLOCK stays: regular files ignore it, and this fd is ours,
	 * never handed to the agent. */
	*out = st;
	return fd;
}

static void fsrv_handle_free(struct fsrv_tree *t, struct fsrv_handle *h);

/* How the kernel may cache an open file's data.  With cache_data (the
 * broker's default) it keeps the pages of a file between opens and reads
 * them without asking: so the node is marked paged, and a revocation
 * drops its pages before it is acknowledged (fsrv_invalidate_settle).
 * The pages are kept across this open only when the file (st: the fstat
 * of the fd just opened) is the very file, of the same size and times, as
 * at the last cached open; otherwise the kernel drops them at open, so a
 * change made on the host outside the mount is read at the next open
 * (close-to-open, as NFS).  Without cache_data: direct I/O, every read and
 * write reaches the check.  Passthrough (a backing id): the kernel does
 * the I/O on our fd.  True when the kernel's pages are dropped at this
 * open (its attributes may be as old as the attribute timeout too). */
static bool
fsrv_open_mode(const struct fsrv_tree *t, struct fsrv_fi *fi, const struct fsrv_handle *h,
	       const struct stat *st)
{
	struct fsrv_node *n = h->node;
	bool cache = t->srv->cfg.cache_data && h->backing == 0, same = false;
	uint64_t mt = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
	uint64_t ct = (uint64_t)st->st_ctim.tv_sec * 1000000000u + (uint64_t)st->st_ctim.tv_nsec;

	fi->direct_io = !t->srv->cfg.cache_data && h->backing == 0;
	if (fi->direct_io && n != NULL) {
		/* Direct I/O still maps MAP_PRIVATE through the page cache:
		 * those pages answer without a request too, so a revocation
		 * waits for them as for cached ones (fsrv_invalidate_settle). */
		pthread_mutex_lock(&t->srv->lock);
		n->paged = true;
		pthread_mutex_unlock(&t->srv->lock);
	}
	if (cache && n != NULL) {
		pthread_mutex_lock(&t->srv->lock);
		same = n->paged && n->c_ino == (uint64_t)st->st_ino &&
		       n->c_size == (uint64_t)st->st_size && n->c_mtime == mt && n->c_ctime == ct;
		n->paged = true;
		n->c_ino = (uint64_t)st->st_ino;
		n->c_size = (uint64_t)st->st_size;
		n->c_mtime = mt;
		n->c_ctime = ct;
		pthread_mutex_unlock(&t->srv->lock);
	}
	fi->keep_cache = same;
	return cache && !same;
}

/* Hand the kernel a node for (parent, name) with attributes st; for a
 * create, also the open handle h (freed here if that fails). */
static void
fsrv_give_entry(struct fsrv_req *req, uint64_t parent, const char *name, const struct stat *st,
		 struct fsrv_fi *fi, struct fsrv_handle *h)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_entry e;
	struct fsrv_node *p, *n = NULL;
	bool full = false;
	uint32_t names;
	int r = ESTALE;

	memset(&e, 0, sizeof(e));
	pthread_mutex_lock(&t->srv->lock);
	p = fsrv_node_get(&t->nodes, parent);
	if (p != NULL) {
		r = fsrv_node_ref(&t->nodes, p, name, &n);
		full = fsrv_names_note(t->srv, r == CB_EBUSY);
		r = r == 0 ? 0 : r == CB_EBUSY ? ENFILE : ENOMEM;
	}
	if (r == 0 && h != NULL) {
		h->node = n;
		fsrv_node_hold(n);
	}
	names = t->srv->nnodes;
	pthread_mutex_unlock(&t->srv->lock);
	if (full && t->srv->cfg.on_full != NULL)
		t->srv->cfg.on_full(t->srv->cfg.authz_arg, t->idx, names);
	if (r != 0) {
		if (h != NULL)
			fsrv_handle_free(t, h);
		fsrv_reply_err(req, r);
		return;
	}
	e.ino = n->id;
	e.generation = n->gen;
	e.attr = *st;
	fsrv_shown(t, &e.attr);
	e.attr_timeout = fsrv_ttl(t, t->srv->cfg.attr_timeout);
	e.entry_timeout = fsrv_ttl(t, t->srv->cfg.entry_timeout);
	if (fi != NULL) {
		fi->fh = (uint64_t)(uintptr_t)h;
		cb_ignore(fsrv_open_mode(t, fi, h, st));
		fi->backing = (uint32_t)h->backing;
		if (fsrv_reply_create(req, &e, fi) != 0) {
			/* Interrupted: the kernel holds neither name nor handle. */
			pthread_mutex_lock(&t->srv->lock);
			fsrv_node_forget(&t->nodes, n, 1);
			pthread_mutex_unlock(&t->srv->lock);
			fsrv_handle_free(t, h);
		}
	} else {
		fsrv_reply_entry(req, &e);
	}
}

static void
fsrv_lookup(struct fsrv_req *req, uint64_t parent, const char *name)
{
	struct fsrv_tree *t = fsrv_t(req);
	char path[FSRV_PATH_MAX];
	struct stat st;
	int e;

	if ((e = fsrv_path(req, parent, name, path, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_LOOKUP, FSRV_CAP_SEE, path)) != 0) {
		fsrv_reply_err(req, e);
		return;
	}
	e = fsrv_stat_path(t, path, &st);
	if (e == ENOENT && t->srv->cfg.entry_timeout > 0) {
		/* A negative entry: the kernel may remember "no such name". */
		struct fsrv_entry ne;

		memset(&ne, 0, sizeof(ne));
		ne.entry_timeout = t->srv->cfg.negative_timeout > 0 &&
		    t->srv->cfg.negative_timeout < t->srv->cfg.entry_timeout ?
		    t->srv->cfg.negative_timeout : t->srv->cfg.entry_timeout;
		fsrv_reply_entry(req, &ne);
		return;
	}
	if (e != 0) {
		fsrv_reply_err(req, e);
		return;
	}
	fsrv_give_entry(req, parent, name, &st, NULL, NULL);
}

static void
fsrv_forget(struct fsrv_req *req, uint64_t ino, uint64_t nlookup)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_node *n;

	pthread_mutex_lock(&t->srv->lock);
	n = fsrv_node_get(&t->nodes, ino);
	if (n != NULL)
		fsrv_node_forget(&t->nodes, n, nlookup);
	pthread_mutex_unlock(&t->srv->lock);
}

static void
fsrv_forget_multi(struct fsrv_req *req, size_t count, const struct fuse_forget_one *f)
{
	struct fsrv_tree *t = fsrv_t(req);

	pthread_mutex_lock(&t->srv->lock);
	for (size_t i = 0; i < count; i++) {
		struct fsrv_node *n = fsrv_node_get(&t->nodes, f[i].nodeid);

		if (n != NULL)
			fsrv_node_forget(&t->nodes, n, f[i].nlookup);
	}
	pthread_mutex_unlock(&t->srv->lock);
}

static void
fsrv_getattr(struct fsrv_req *req, uint64_t ino, struct fsrv_fi *fi)
{
	struct fsrv_tree *t = fsrv_t(req);
	char path[FSRV_PATH_MAX];
	struct stat st;
	int e;

	if ((e = fsrv_path(req, ino, NULL, path, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_GETATTR, FSRV_CAP_SEE, path)) != 0) {
		fsrv_reply_err(req, e);
		return;
	}
	if (fi != NULL && fi->fh != 0) {
		const struct fsrv_handle *h = (const struct fsrv_handle *)(uintptr_t)fi->fh;

		e = fstat(h->fd, &st) == 0 ? 0 : errno;
	} else {
		e = fsrv_stat_path(t, path, &st);
	}
	if (e != 0) {
		fsrv_reply_err(req, e);
	} else {
		fsrv_shown(t, &st);
		fsrv_reply_attr(req, &st, fsrv_ttl(t, t->srv->cfg.attr_timeout));
	}
}

/* Apply the attribute changes of a setattr to the object at path. */
static int
fsrv_apply_attr(struct fsrv_tree *t, const char *path, const struct stat *a, int to_set,
		const struct fsrv_handle *h)
{
	int fd = -1, e = 0;
	struct stat st;

	fd = fsrv_open_at_st(t, path, O_PATH | O_NOFOLLOW, 0, &st);
	if (fd < 0)
		return fsrv_err(errno);
	if (fsrv_foreign_link(t, &st)) {
		e = EPERM;
		goto out;
	}
	if (to_set & FATTR_MODE) {
		/* No set-id bits: a served tree never gains a set-id file. */
		if (a->st_mode & (S_ISUID | S_ISGID)) {
			e = EPERM;
			goto out;
		}
		if (syscall(SYS_fchmodat2, fd, "", a->st_mode & 01777, AT_EMPTY_PATH) != 0) {
			e = errno;
			goto out;
		}
	}
	if (to_set & FATTR_SIZE) {
		struct stat ost;
		int wfd = h != NULL ? -1 : fsrv_open_regular(t, path, O_WRONLY, 0, &ost);

		if (h == NULL && wfd < 0) {
			e = -wfd;
			goto out;
		}
		if (ftruncate(h != NULL ? h->fd : wfd, a->st_size) != 0)
			e = errno;
		if (wfd >= 0)
			close(wfd);
		if (e != 0)
			goto out;
	}
	if (to_set & (FATTR_ATIME | FATTR_MTIME)) {
		struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };

		if (to_set & FATTR_ATIME_NOW)
			ts[0].tv_nsec = UTIME_NOW;
		else if (to_set & FATTR_ATIME)
			ts[0] = a->st_atim;
		if (to_set & FATTR_MTIME_NOW)
			ts[1].tv_nsec = UTIME_NOW;
		else if (to_set & FATTR_MTIME)
			ts[1] = a->st_mtim;
		if (utimensat(fd, "", ts, AT_EMPTY_PATH) != 0) {
			e = errno;
			goto out;
		}
	}
out:
	close(fd);
	return e;
}

/* Ask the caller about a setattr; a mode change says from what to what
 * (the current mode read without following a final symlink). */
static int
fsrv_check_setattr(struct fsrv_req *req, const char *path, const struct stat *attr, int to_set)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_check c = { .tree = t->idx, .op = FSRV_OP_SETATTR, .need = FSRV_CAP_WRITE,
		.path = path, .pid = req->pid, .uid = req->uid, .gid = req->gid };
	struct stat cur;
	int e;

	if (t->root_fd < 0)
		return EACCES;	/* a slot without its root */
	if (to_set & FATTR_MODE) {
		if ((e = fsrv_stat_path(t, path, &cur)) != 0)
			return e;
		c.set_mode = true;
		c.mode = attr->st_mode & 07777;
		c.cur_mode = cur.st_mode & 07777;
	}
	return fsrv_denied(t->srv->cfg.authz(t->srv->cfg.authz_arg, &c));
}

static void
fsrv_setattr(struct fsrv_req *req, uint64_t ino, struct stat *attr, int to_set,
	     struct fsrv_fi *fi)
{
	struct fsrv_tree *t = fsrv_t(req);
	const struct fsrv_handle *h = NULL;
	char path[FSRV_PATH_MAX];
	struct stat st;
	int e;

	if ((e = fsrv_path(req, ino, NULL, path, NULL)) != 0 ||
	    (e = fsrv_check_setattr(req, path, attr, to_set)) != 0)
		goto out;
	/* Files belong to the tree's owner: an agent cannot give them away.
	 * A chown to the owner and group the file has already changes
	 * nothing and is allowed: `cp -a`, `tar -p` and `rsync -a` restore a
	 * served file's own owner, which succeeds where the agent's uid maps
	 * to the tree's owner (an unprivileged broker), or where the owner's
	 * files are shown as the agent's (owner_as_agent: a root broker's),
	 * whose uid and gid the request then names (docs/fsrv.md,
	 * "Ownership"). */
	if (to_set & (FATTR_UID | FATTR_GID)) {
		struct stat cur;

		if ((e = fsrv_stat_path(t, path, &cur)) != 0)
			goto out;
		fsrv_chown_host(t, &cur, attr);
		if (((to_set & FATTR_UID) && attr->st_uid != cur.st_uid) ||
		    ((to_set & FATTR_GID) && attr->st_gid != cur.st_gid)) {
			e = EPERM;
			goto out;
		}
		to_set &= ~(FATTR_UID | FATTR_GID);
	}
	if (fi != NULL && fi->fh != 0)
		h = (const struct fsrv_handle *)(uintptr_t)fi->fh;
	if ((e = fsrv_apply_attr(t, path, attr, to_set, h)) != 0)
		goto out;
	e = h != NULL ? (fstat(h->fd, &st) == 0 ? 0 : errno) : fsrv_stat_path(t, path, &st);
out:
	if (e != 0) {
		fsrv_reply_err(req, e);
	} else {
		fsrv_shown(t, &st);
		fsrv_reply_attr(req, &st, fsrv_ttl(t, t->srv->cfg.attr_timeout));
	}
}

static void
fsrv_readlink(struct fsrv_req *req, uint64_t ino)
{
	struct fsrv_tree *t = fsrv_t(req);
	char path[FSRV_PATH_MAX], target[FSRV_PATH_MAX];
	const char *name;
	ssize_t n = -1;
	int e, pfd = -1;

	if ((e = fsrv_path(req, ino, NULL, path, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_READLINK, FSRV_CAP_READ, path)) != 0)
		goto out;
	if (path[0] == '\0') {
		e = EINVAL;
		goto out;
	}
	if ((pfd = fsrv_parent(t, path, &name)) < 0) {
		e = -pfd;
		goto out;
	}
	/* The link's text is shown, never followed here: following it is the
	 * kernel's job inside the mount, where "/" is the sandbox's root. */
	n = readlinkat(pfd, name, target, sizeof(target) - 1);
	if (n < 0)
		e = errno;
	else
		target[n] = '\0';
out:
	if (pfd >= 0)
		close(pfd);
	if (e != 0)
		fsrv_reply_err(req, e);
	else
		fsrv_reply_readlink(req, target);
}

/* Is directory rel of t sticky and world-writable (/var/tmp)?  0, EPERM,
 * or the error of opening it. */
static int
fsrv_sticky(struct fsrv_tree *t, const char *rel)
{
	struct stat st;
	int fd = fsrv_open_at_st(t, rel, O_PATH | O_DIRECTORY, 0, &st), e = 0;

	if (fd < 0)
		return fsrv_err(errno);
	if ((st.st_mode & (S_ISVTX | S_IWOTH)) == (S_ISVTX | S_IWOTH))
		e = EPERM;
	close(fd);
	return e;
}

/*
 * May a symlink be made as root in directory dir (relative to the tree's
 * root)?  Not in or beneath a sticky, world-writable directory of the tree
 * (/var/tmp granted in the high tier): there fs.protected_symlinks lets
 * every process follow a link whose owner owns the directory, so a link
 * the agent made as root would redirect the host's root processes (a cron
 * job's /var/tmp/NAME pointing at /etc/passwd) where a link of the agent's
 * own uid would be refused; and beneath it, in a directory the agent made
 * there, the link and the directory would both be root's, which such a
 * process trusts.  Another identity makes links as itself.  The broker's
 * explicit operations make no symlinks at all.  0, EPERM or an errno.
 */
static int
fsrv_symlink_ok(struct fsrv_tree *t, const char *dir)
{
	char rel[FSRV_PATH_MAX];
	size_t n = strlen(dir);
	int e;

	if (setfsuid((uid_t)-1) != 0)
		return 0;
	if (n >= sizeof(rel))
		return ENAMETOOLONG;
	memcpy(rel, dir, n + 1);
	if ((e = fsrv_sticky(t, "")) != 0)
		return e;
	for (size_t i = 0; i <= n && n > 0; i++) {
		if (rel[i] != '/' && rel[i] != '\0')
			continue;
		rel[i] = '\0';
		e = fsrv_sticky(t, rel);
		rel[i] = dir[i];
		if (e != 0)
			return e;
	}
	return 0;
}

/* mkdir and symlink: make name in parent with make(), then reply with its
 * entry.  target is the symlink's text (NULL for mkdir). */
static void
fsrv_make(struct fsrv_req *req, uint64_t parent, const char *name, mode_t mode, const char *target)
{
	struct fsrv_tree *t = fsrv_t(req);
	char path[FSRV_PATH_MAX];
	const char *base;
	struct stat st;
	int e, pfd = -1;
	enum fsrv_op op = target != NULL ? FSRV_OP_SYMLINK : FSRV_OP_MKDIR;

	if ((e = fsrv_path(req, parent, name, path, NULL)) != 0 ||
	    (e = fsrv_check(req, op, FSRV_CAP_WRITE, path)) != 0)
		goto out;
	if ((pfd = fsrv_parent(t, path, &base)) < 0) {
		e = -pfd;
		goto out;
	}
	if (target != NULL && (e = fsrv_symlink_ok(t, path)) != 0)
		goto out;
	if ((target != NULL ? symlinkat(target, pfd, base) : mkdirat(pfd, base, mode & 01777)) != 0 ||
	    fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0)
		e = errno;
out:
	if (pfd >= 0)
		close(pfd);
	if (e != 0)
		fsrv_reply_err(req, e);
	else
		fsrv_give_entry(req, parent, name, &st, NULL, NULL);
}

static void
fsrv_mkdir(struct fsrv_req *req, uint64_t parent, const char *name, mode_t mode)
{
	fsrv_make(req, parent, name, mode, NULL);
}

static void
fsrv_symlink(struct fsrv_req *req, const char *link, uint64_t parent, const char *name)
{
	if (strnlen(link, FSRV_PATH_MAX) >= FSRV_PATH_MAX) {
		fsrv_reply_err(req, ENAMETOOLONG);
		return;
	}
	fsrv_make(req, parent, name, 0, link);
}

static void
fsrv_mknod(struct fsrv_req *req, uint64_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	/* Regular files come through create; devices, FIFOs and sockets are
	 * never made in a served tree. */
	fsrv_reply_err(req, EPERM);
}

static void
fsrv_remove(struct fsrv_req *req, uint64_t parent, const char *name, bool dir)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_node *p;
	char path[FSRV_PATH_MAX];
	const char *base;
	int e, pfd = -1;

	if ((e = fsrv_path(req, parent, name, path, NULL)) != 0 ||
	    (e = fsrv_check(req, dir ? FSRV_OP_RMDIR : FSRV_OP_UNLINK, FSRV_CAP_DELETE, path)) != 0)
		goto out;
	if ((pfd = fsrv_parent(t, path, &base)) < 0) {
		e = -pfd;
		goto out;
	}
	/* unlinkat never follows a final symlink: removing a link removes the
	 * link, not what it points to. */
	if (unlinkat(pfd, base, dir ? AT_REMOVEDIR : 0) != 0) {
		e = errno;
		goto out;
	}
	pthread_mutex_lock(&t->srv->lock);
	p = fsrv_node_get(&t->nodes, parent);
	if (p != NULL)
		fsrv_node_unlink(&t->nodes, p, name);
	pthread_mutex_unlock(&t->srv->lock);
out:
	if (pfd >= 0)
		close(pfd);
	fsrv_reply_err(req, e);
}

static void
fsrv_unlink(struct fsrv_req *req, uint64_t parent, const char *name)
{
	fsrv_remove(req, parent, name, false);
}

static void
fsrv_rmdir(struct fsrv_req *req, uint64_t parent, const char *name)
{
	fsrv_remove(req, parent, name, true);
}

static void
fsrv_rename(struct fsrv_req *req, uint64_t parent, const char *name, uint64_t newparent,
	    const char *newname, unsigned int flags)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_node *op, *np;
	char p1[FSRV_PATH_MAX], p2[FSRV_PATH_MAX];
	const char *b1, *b2;
	int e, f1 = -1, f2 = -1;

	/* RENAME_WHITEOUT makes a device node: never. */
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		e = EINVAL;
		goto out;
	}
	/* As the broker's fs.rename: fs.write on both names. */
	if ((e = fsrv_path(req, parent, name, p1, NULL)) != 0 ||
	    (e = fsrv_path(req, newparent, newname, p2, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_RENAME, FSRV_CAP_WRITE, p1)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_RENAME, FSRV_CAP_WRITE, p2)) != 0)
		goto out;
	if ((f1 = fsrv_parent(t, p1, &b1)) < 0) {
		e = -f1;
		goto out;
	}
	if ((f2 = fsrv_parent(t, p2, &b2)) < 0) {
		e = -f2;
		goto out;
	}
	if (renameat2(f1, b1, f2, b2, flags) != 0) {
		e = errno;
		goto out;
	}
	pthread_mutex_lock(&t->srv->lock);
	op = fsrv_node_get(&t->nodes, parent);
	np = fsrv_node_get(&t->nodes, newparent);
	if (op != NULL && np != NULL &&
	    fsrv_node_rename(&t->nodes, op, name, np, newname, flags & RENAME_EXCHANGE) != 0) {
		/* Out of memory: the kernel must not keep the old name. */
		fsrv_node_unlink(&t->nodes, op, name);
	}
	pthread_mutex_unlock(&t->srv->lock);
out:
	if (f1 >= 0)
		close(f1);
	if (f2 >= 0)
		close(f2);
	fsrv_reply_err(req, e);
}

static void
fsrv_link(struct fsrv_req *req, uint64_t ino, uint64_t newparent, const char *newname)
{
	struct fsrv_tree *t = fsrv_t(req);
	char p1[FSRV_PATH_MAX], p2[FSRV_PATH_MAX];
	const char *b1, *b2;
	struct stat st;
	int e, f1 = -1, f2 = -1;

	/* A second name writes through to the first: the agent must already
	 * be able to read and write the file, and to write the new name. */
	if ((e = fsrv_path(req, ino, NULL, p1, NULL)) != 0 ||
	    (e = fsrv_path(req, newparent, newname, p2, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_LINK, FSRV_CAP_READ | FSRV_CAP_WRITE, p1)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_LINK, FSRV_CAP_WRITE, p2)) != 0)
		goto out;
	if (p1[0] == '\0') {
		e = EPERM;
		goto out;
	}
	if ((f1 = fsrv_parent(t, p1, &b1)) < 0) {
		e = -f1;
		goto out;
	}
	if ((f2 = fsrv_parent(t, p2, &b2)) < 0) {
		e = -f2;
		goto out;
	}
	/* Without AT_SYMLINK_FOLLOW, linkat links a symlink itself. */
	if (linkat(f1, b1, f2, b2, 0) != 0 || fstatat(f2, b2, &st, AT_SYMLINK_NOFOLLOW) != 0)
		e = errno;
out:
	if (f1 >= 0)
		close(f1);
	if (f2 >= 0)
		close(f2);
	if (e != 0)
		fsrv_reply_err(req, e);
	else
		fsrv_give_entry(req, newparent, newname, &st, NULL, NULL);
}

/* Every server's open handles, their bound (fsrv_handles_limit), and the
 * servers sharing it. */
static _Atomic uint32_t fsrv_proc_handles;
static _Atomic uint32_t fsrv_proc_handles_max;
static _Atomic uint32_t fsrv_proc_servers;

void
fsrv_handles_limit(uint32_t n)
{
	atomic_store(&fsrv_proc_handles_max, n);
}

void
fsrv_handles_server(int delta)
{
	if (delta > 0)
		atomic_fetch_add(&fsrv_proc_servers, 1);
	else
		atomic_fetch_sub(&fsrv_proc_servers, 1);
}

/* Take one handle of the server's and the process's bounds; false: over
 * one of them (nothing taken).  Shared fairly: a server below its share of
 * the process's bound (the bound over one more than the servers there are,
 * so a newcomer always finds room) takes one while the process is below
 * its bound; one above its share only while the process is below half of
 * it.  So servers holding more than their share hold at most half the
 * bound beyond their shares, and any server can open its share. */
static bool
fsrv_handle_take(struct fsrv *s)
{
	uint32_t pmax = atomic_load(&fsrv_proc_handles_max);
	uint32_t mine = atomic_fetch_add(&s->nhandles, 1), lim = pmax;

	if (mine >= s->cfg.max_handles_all) {
		atomic_fetch_sub(&s->nhandles, 1);
		return false;
	}
	if (pmax != 0 && mine >= pmax / (atomic_load(&fsrv_proc_servers) + 1))
		lim = pmax / 2;
	if (atomic_fetch_add(&fsrv_proc_handles, 1) >= lim && pmax != 0) {
		atomic_fetch_sub(&fsrv_proc_handles, 1);
		atomic_fetch_sub(&s->nhandles, 1);
		return false;
	}
	return true;
}

static void
fsrv_handle_give(struct fsrv *s)
{
	atomic_fetch_sub(&fsrv_proc_handles, 1);
	atomic_fetch_sub(&s->nhandles, 1);
}

/* A handle for fd on node, counted against the tree's bound, the server's
 * (all its trees) and the process's (every server: each handle is one of
 * its descriptors, and a broker serving many sandboxes must keep room for
 * its own; red-team F8). */
static struct fsrv_handle *
fsrv_handle_new(struct fsrv_tree *t, int fd)
{
	struct fsrv_handle *h;

	if (t->nhandles >= t->srv->cfg.max_handles || !fsrv_handle_take(t->srv))
		return NULL;
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		fsrv_handle_give(t->srv);
		return NULL;
	}
	h->fd = fd;
	h->next = t->handles;
	if (h->next != NULL)
		h->next->prev = h;
	t->handles = h;
	t->nhandles++;
	return h;
}

static void
fsrv_handle_free(struct fsrv_tree *t, struct fsrv_handle *h)
{
	fsrv_pt_close(t, h->backing);
	if (h->dir != NULL)
		closedir(h->dir);	/* closes h->fd */
	else if (h->fd >= 0)
		close(h->fd);
	if (h->node != NULL) {
		pthread_mutex_lock(&t->srv->lock);
		fsrv_node_release(&t->nodes, h->node);
		pthread_mutex_unlock(&t->srv->lock);
	}
	if (h->prev != NULL)
		h->prev->next = h->next;
	else
		t->handles = h->next;
	if (h->next != NULL)
		h->next->prev = h->prev;
	free(h);
	t->nhandles--;
	fsrv_handle_give(t->srv);
}

void
fsrv_handles_close(struct fsrv_tree *t)
{
	while (t->handles != NULL) {
		struct fsrv_handle *h = t->handles;

		/* A file whose release never reached us is reported all the
		 * same: one close per open, whatever the kernel managed to
		 * send before the connection ended. */
		if (h->dir == NULL && t->srv->cfg.on_close != NULL) {
			char path[FSRV_PATH_MAX] = "";
			struct fsrv_close c = { .tree = t->idx, .path = path, .nread = h->nread,
				.nwritten = h->nwritten, .at_stop = true };

			pthread_mutex_lock(&t->srv->lock);
			if (h->node == NULL || fsrv_node_path(h->node, path, sizeof(path)) != 0)
				path[0] = '\0';
			pthread_mutex_unlock(&t->srv->lock);
			t->srv->cfg.on_close(t->srv->cfg.authz_arg, &c);
		}
		fsrv_handle_free(t, h);
	}
}

static void
fsrv_open(struct fsrv_req *req, uint64_t ino, struct fsrv_fi *fi)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_handle *h;
	struct fsrv_node *n;
	char path[FSRV_PATH_MAX];
	struct stat st;
	int e, fd;

	if ((e = fsrv_path(req, ino, NULL, path, &n)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_OPEN, fsrv_open_need((int)fi->flags), path)) != 0) {
		fsrv_reply_err(req, e);
		return;
	}
	fd = fsrv_open_regular(t, path, fsrv_open_flags((int)fi->flags) & ~(O_CREAT | O_EXCL), 0, &st);
	if (fd < 0) {
		fsrv_reply_err(req, -fd);
		return;
	}
	if ((h = fsrv_handle_new(t, fd)) == NULL) {
		close(fd);
		fsrv_reply_err(req, EMFILE);
		return;
	}
	pthread_mutex_lock(&t->srv->lock);
	h->node = n;
	fsrv_node_hold(n);
	pthread_mutex_unlock(&t->srv->lock);
	h->backing = fsrv_pt_backing(t, fd);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* A file that changed (or is opened cached for the first time): the
	 * kernel drops its pages at this open, and its attributes go too, so
	 * that the first read asks for the size now on the host (a file grown
	 * on the host would otherwise read short until the attribute timeout).
	 * Attributes only (offset -1): that waits for no page lock, so the
	 * serving thread may write it, unlike a page invalidation. */
	if (fsrv_open_mode(t, fi, h, &st))
		cb_ignore(fsrv_notify_inval_inode(t, ino, -1, 0));
	fi->backing = (uint32_t)h->backing;
	if (fsrv_reply_open(req, fi) != 0)
		fsrv_handle_free(t, h);	/* interrupted: the kernel has no handle */
}

static void
fsrv_create(struct fsrv_req *req, uint64_t parent, const char *name, mode_t mode,
	    struct fsrv_fi *fi)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_handle *h;
	char path[FSRV_PATH_MAX];
	struct stat st;
	int e, fd;

	if ((e = fsrv_path(req, parent, name, path, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_CREATE, fsrv_open_need((int)fi->flags | O_CREAT), path)) != 0) {
		fsrv_reply_err(req, e);
		return;
	}
	fd = fsrv_open_regular(t, path, fsrv_open_flags((int)fi->flags) | O_CREAT, mode & 0777, &st);
	if (fd < 0) {
		fsrv_reply_err(req, -fd);
		return;
	}
	if ((h = fsrv_handle_new(t, fd)) == NULL) {
		close(fd);
		fsrv_reply_err(req, EMFILE);
		return;
	}
	h->backing = fsrv_pt_backing(t, fd);
	fsrv_give_entry(req, parent, name, &st, fi, h);
}

static void
fsrv_read(struct fsrv_req *req, uint64_t ino, size_t size, off_t off, struct fsrv_fi *fi)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_handle *h = (struct fsrv_handle *)(uintptr_t)fi->fh;
	struct fsrv_work *w = fsrv_w(t->srv);
	char path[FSRV_PATH_MAX];
	ssize_t n;
	int e;

	if ((e = fsrv_path(req, ino, NULL, path, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_READ, FSRV_CAP_READ, path)) != 0) {
		fsrv_reply_err(req, e);
		return;
	}
	if (size > FSRV_IO_MAX)
		size = FSRV_IO_MAX;
	if (size >= FSRV_SPLICE_MIN) {
		/* Large reads: the file's pages are spliced into a pipe and
		 * the pipe into /dev/fuse, one copy (into the agent's buffer)
		 * instead of two (pread here, then the write to the kernel).
		 * The reply is exactly what the file holds at off now (the
		 * size from fstat, capped); a file that shrank meanwhile, or a
		 * pipe that cannot be had, is copied below instead. */
		struct stat st;
		size_t len;

		if (fstat(h->fd, &st) != 0) {
			fsrv_reply_err(req, errno);
			return;
		}
		len = st.st_size <= off ? 0 :
			(size_t)st.st_size - (size_t)off < size ? (size_t)(st.st_size - off) : size;
		if (len == 0) {
			fsrv_reply_buf(req, NULL, 0);	/* at or past the end */
			return;
		}
		if (fsrv_reply_splice(req, h->fd, off, len) <= 0) {
			h->nread += len;
			return;
		}
	}
	if (w->iolen < size) {
		char *b = realloc(w->io, size);

		if (b == NULL) {
			fsrv_reply_err(req, ENOMEM);
			return;
		}
		w->io = b;
		w->iolen = size;
	}
	n = pread(h->fd, w->io, size, off);
	if (n < 0) {
		fsrv_reply_err(req, errno);
	} else {
		h->nread += (uint64_t)n;
		fsrv_reply_buf(req, w->io, (size_t)n);
	}
}

static void
fsrv_write(struct fsrv_req *req, uint64_t ino, const char *buf, size_t size, off_t off,
	   struct fsrv_fi *fi)
{
	struct fsrv_handle *h = (struct fsrv_handle *)(uintptr_t)fi->fh;
	char path[FSRV_PATH_MAX];
	ssize_t n;
	int e;

	if ((e = fsrv_path(req, ino, NULL, path, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_WRITE, FSRV_CAP_WRITE, path)) != 0) {
		fsrv_reply_err(req, e);
		return;
	}
	n = pwrite(h->fd, buf, size, off);
	if (n < 0) {
		fsrv_reply_err(req, errno);
	} else {
		h->nwritten += (uint64_t)n;
		fsrv_reply_write(req, (size_t)n);
	}
}

static void
fsrv_release(struct fsrv_req *req, uint64_t ino, struct fsrv_fi *fi)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_handle *h = (struct fsrv_handle *)(uintptr_t)fi->fh;

	if (t->srv->cfg.on_close != NULL) {
		char path[FSRV_PATH_MAX];
		struct fsrv_close c = { .tree = t->idx, .path = path, .nread = h->nread,
			.nwritten = h->nwritten };

		if (fsrv_path(req, ino, NULL, path, NULL) != 0)
			path[0] = '\0';
		t->srv->cfg.on_close(t->srv->cfg.authz_arg, &c);
	}
	fsrv_handle_free(t, h);
	fsrv_reply_err(req, 0);
}

static void
fsrv_fsync(struct fsrv_req *req, uint64_t ino, int datasync, struct fsrv_fi *fi)
{
	const struct fsrv_handle *h = (const struct fsrv_handle *)(uintptr_t)fi->fh;

	(void)ino;
	fsrv_reply_err(req, (datasync ? fdatasync(h->fd) : fsync(h->fd)) == 0 ? 0 : errno);
}

/*
 * fallocate(2) of an open file: posix_fallocate's reservation, `fallocate
 * -l`, a punched or zeroed range.  Safe for the agent: it changes the
 * contents or size of a file it opened for writing (the kernel sends this
 * only for such a descriptor, and the handle is ours), so it is a write
 * and is checked as one against the live tokens, every time.  Only the
 * modes the kernel forwards are done (FUSE's own list), anything else is
 * EOPNOTSUPP as on a file system without it; offset and length are the
 * agent's, bounded here to what off_t holds (the host kernel checks the
 * rest, and the agent's own file size limit was applied by its kernel
 * before the request was sent).
 */
static void
fsrv_fallocate(struct fsrv_req *req, uint64_t ino, uint32_t mode, uint64_t off, uint64_t len,
	       struct fsrv_fi *fi)
{
	const struct fsrv_handle *h = (const struct fsrv_handle *)(uintptr_t)fi->fh;
	const uint32_t known = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE;
	char path[FSRV_PATH_MAX];
	int e;

	if ((mode & ~known) != 0) {
		fsrv_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (off > INT64_MAX || len == 0 || len > INT64_MAX - off) {
		fsrv_reply_err(req, len == 0 ? EINVAL : EFBIG);
		return;
	}
	if ((e = fsrv_path(req, ino, NULL, path, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_WRITE, FSRV_CAP_WRITE, path)) != 0) {
		fsrv_reply_err(req, e);
		return;
	}
	fsrv_reply_err(req, fallocate(h->fd, (int)mode, (off_t)off, (off_t)len) == 0 ? 0 : errno);
}

static void
fsrv_opendir(struct fsrv_req *req, uint64_t ino, struct fsrv_fi *fi)
{
	struct fsrv_tree *t = fsrv_t(req);
	struct fsrv_handle *h = NULL;
	struct fsrv_node *n;
	char path[FSRV_PATH_MAX];
	int e, fd = -1;

	if ((e = fsrv_path(req, ino, NULL, path, &n)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_OPENDIR, FSRV_CAP_LIST, path)) != 0)
		goto out;
	fd = fsrv_open_at(t, path, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
	if (fd < 0) {
		e = fsrv_err(errno);
		goto out;
	}
	if ((h = fsrv_handle_new(t, fd)) == NULL) {
		e = EMFILE;
		goto out;
	}
	fd = -1;
	if ((h->dir = fdopendir(h->fd)) == NULL) {
		e = errno;
		goto out;
	}
	pthread_mutex_lock(&t->srv->lock);
	h->node = n;
	fsrv_node_hold(n);
	pthread_mutex_unlock(&t->srv->lock);
	fi->fh = (uint64_t)(uintptr_t)h;
	if (fsrv_reply_open(req, fi) != 0)
		fsrv_handle_free(t, h);
	return;
out:
	if (fd >= 0)
		close(fd);
	if (h != NULL)
		fsrv_handle_free(t, h);
	fsrv_reply_err(req, e);
}

static void
fsrv_readdir(struct fsrv_req *req, uint64_t ino, size_t size, off_t off, struct fsrv_fi *fi)
{
	struct fsrv_handle *h = (struct fsrv_handle *)(uintptr_t)fi->fh;
	char path[FSRV_PATH_MAX];
	char *buf = NULL, *p;
	size_t rem = 0;
	int e;

	if ((e = fsrv_path(req, ino, NULL, path, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_READDIR, FSRV_CAP_LIST, path)) != 0)
		goto out;
	if (size > FSRV_IO_MAX)
		size = FSRV_IO_MAX;
	if ((buf = malloc(size)) == NULL) {
		e = ENOMEM;
		goto out;
	}
	if (off != h->offset) {
		seekdir(h->dir, off);
		h->entry = NULL;
		h->offset = off;
	}
	for (p = buf, rem = size;;) {
		struct stat st;
		size_t len;

		if (h->entry == NULL) {
			errno = 0;
			h->entry = readdir(h->dir);
			if (h->entry == NULL) {
				if (errno != 0 && p == buf)
					e = errno;
				break;
			}
		}
		memset(&st, 0, sizeof(st));
		st.st_ino = h->entry->d_ino;
		st.st_mode = (mode_t)h->entry->d_type << 12;
		len = fsrv_add_direntry(p, rem, h->entry->d_name, &st, h->entry->d_off);
		if (len > rem)
			break;	/* kept for the next batch */
		p += len;
		rem -= len;
		h->offset = h->entry->d_off;
		h->entry = NULL;
	}
out:
	if (e != 0)
		fsrv_reply_err(req, e);
	else
		fsrv_reply_buf(req, buf, size - rem);
	free(buf);
}

static void
fsrv_releasedir(struct fsrv_req *req, uint64_t ino, struct fsrv_fi *fi)
{
	(void)ino;
	fsrv_handle_free(fsrv_t(req), (struct fsrv_handle *)(uintptr_t)fi->fh);
	fsrv_reply_err(req, 0);
}

static void
fsrv_statfs(struct fsrv_req *req, uint64_t ino)
{
	struct fsrv_tree *t = fsrv_t(req);
	char path[FSRV_PATH_MAX];
	struct statvfs sv;
	int e;

	if ((e = fsrv_path(req, ino, NULL, path, NULL)) != 0 ||
	    (e = fsrv_check(req, FSRV_OP_STATFS, FSRV_CAP_SEE, path)) != 0) {
		fsrv_reply_err(req, e);
		return;
	}
	if (fstatvfs(t->root_fd, &sv) != 0)
		fsrv_reply_err(req, errno);
	else
		fsrv_reply_statfs(req, &sv);
}

const struct fsrv_ll_ops fsrv_ops = {
	.lookup = fsrv_lookup,
	.forget = fsrv_forget,
	.forget_multi = fsrv_forget_multi,
	.getattr = fsrv_getattr,
	.setattr = fsrv_setattr,
	.readlink = fsrv_readlink,
	.mknod = fsrv_mknod,
	.mkdir = fsrv_mkdir,
	.unlink = fsrv_unlink,
	.rmdir = fsrv_rmdir,
	.symlink = fsrv_symlink,
	.rename = fsrv_rename,
	.link = fsrv_link,
	.open = fsrv_open,
	.read = fsrv_read,
	.write = fsrv_write,
	.release = fsrv_release,
	.fsync = fsrv_fsync,
	.fallocate = fsrv_fallocate,
	.opendir = fsrv_opendir,
	.readdir = fsrv_readdir,
	.releasedir = fsrv_releasedir,
	.statfs = fsrv_statfs,
	.create = fsrv_create,
};
