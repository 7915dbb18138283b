/*
 * ops_fs.c - fs.read, fs.write, fs.list, fs.stat, fs.mkdir, fs.delete,
 * fs.rename and the mediated io.* operations.
 *
 * Trust domain: broker, acting on host files for a hostile agent.  Why the
 * handlers are safe:
 *  - The request path is first checked as a string (absolute, no "." or
 *    "..", no empty component) and matched against the token's glob.  It is
 *    then never opened as a string: it is resolved beneath a directory fd
 *    pinned on the capability's fixed prefix by the one resolver,
 *    cb_openat2() (common/resolve.c: openat2(RESOLVE_BENEATH |
 *    RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)), so a symlink anywhere on
 *    the way, a /proc magic link, or a rename racing the request makes the
 *    kernel refuse instead of walking out of the root.  The resolver also
 *    refuses every fd on a kernel file system (procfs, sysfs, ...), decided
 *    by fstatfs() on the fd, wherever that file system is mounted.
 *  - The root itself is opened with the same flags from "/", so the agent
 *    cannot swap a component of the root for a symlink either; a kept root
 *    fd is used only while the root's name leads to that very inode
 *    (brk_root).
 *  - Only regular files are opened (brk_open_regular: the type is read
 *    from an O_PATH probe first, and checked again on the open fd): device nodes,
 *    FIFOs and sockets are refused without being opened, so opening cannot
 *    act on them; directories are listed by the broker, never handed over
 *    (openat(dirfd, "..") would escape).
 *  - Created files and directories get exactly mode & 0777 (no set-id
 *    bits), not narrowed by the broker's umask.
 */
#include "broker/core.h"
#include "broker/budget.h"
#include "broker/chan.h"
#include "broker/ops.h"
#include "broker/tokens.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BRK_LIST_MAX 4096		/* entries in one fs.list reply */
#define BRK_LIST_BYTES (150 * 1024)	/* name bytes in one fs.list reply */
#define BRK_GROUPS_MAX	64	/* the broker's supplementary groups, saved to restore */

/* Every path below is opened through the one resolver (common/resolve.c). */
static int
brk_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode)
{
	return cb_openat2(dirfd, path, (int)flags, (unsigned)mode);
}

static int
brk_errno(int e)
{
	switch (e) {
	case ELOOP:
	case EXDEV:
		return CB_EESCAPE;	/* a symlink, magic link or escape on the way */
	case ENOENT:
	case ENOTDIR:
		return CB_ENOENT;
	case EACCES:
	case EPERM:
	case EROFS:
		return CB_EPERM;
	case EEXIST:
	case ENOTEMPTY:
		return CB_EEXIST;
	case EISDIR:
	case ENXIO:
		return CB_EFTYPE;
	case ENAMETOOLONG:
		return CB_ETOOBIG;
	default:
		return CB_EIO;
	}
}

/* A set-uid or set-gid file is never opened for writing, whoever asks. */
static bool
brk_setid_write(const struct stat *st, uint64_t flags)
{
	return (flags & (O_ACCMODE | O_TRUNC)) != O_RDONLY && (st->st_mode & (S_ISUID | S_ISGID));
}

/* The hardlink rule: a file with more than one link that does not belong
 * to the grant root's owner may have been linked in by someone who could not
 * read it (fs.protected_hardlinks off): refused. */
static bool
brk_foreign_link(const struct stat *st, uid_t owner)
{
	return st->st_nlink > 1 && st->st_uid != owner;
}

/*
 * Open rel beneath dirfd for reading or writing without opening a FIFO,
 * socket or device: opening one can act (a blocked FIFO writer is
 * released, a watchdog arms).  A probe first tells the type and the file
 * system without opening anything (a statx for a plain regular file on
 * the root's file system, else an O_PATH open through the resolver), and only a
 * regular file (or a name that does not exist yet, for O_CREAT) is opened;
 * the fstat() after the real open stays the authority and must name the
 * same inode as the probe.  The window between the two is the one residual
 * case: a party with write access to the directory swapping in an existing
 * FIFO or device at that instant makes the open act, and the file is still
 * refused.  (A race-free reopen through /proc/self/fd costs about four times
 * as much on every open; see docs/threat-model.md.)
 * A set-uid or set-gid file is refused for writing, and a file another
 * than owner has more than one link to for anything (EPERM).
 * A name the probe did not find is created exclusively (*created says
 * so): EEXIST then means another made it meanwhile, and the caller asks
 * again, or says EEXIST if it asked for O_EXCL itself.
 * Returns an fd or -1 with errno set (ENXIO: not a regular file).
 */
static int
brk_open_regular_once(int dirfd, const struct cb_stat *dirst, const char *rel, uint64_t flags,
    uint64_t mode, uid_t owner, bool *created)
{
	struct cb_stat pst, st;
	bool probed = false;
	int fd, e;

	/* The common case first, without an fd: a plain statx says the name
	 * is a regular file on the root's own file system (same device or same
	 * mount: cb_stat_same_fs, so on a file system the resolver accepted,
	 * overlayfs included) that may be opened as asked.  statx does
	 * follow symlinks on the way, but it only decides whether to try: the
	 * open below walks strictly (a symlink fails it before anything is
	 * opened) and its fstat must name this very inode.  Anything else
	 * (another type, another file system, a refusal, no such name) is
	 * asked again of the strict O_PATH probe, so what the agent is told,
	 * and what a symlink out of the root reveals, stay the same. */
	if (cb_statat(dirfd, rel, AT_SYMLINK_NOFOLLOW, &pst) == 0 && S_ISREG(pst.st.st_mode) &&
	    cb_stat_same_fs(&pst, dirst) && !brk_setid_write(&pst.st, flags) &&
	    !brk_foreign_link(&pst.st, owner)) {
		probed = true;
	} else if ((fd = cb_openat2_st(dirfd, dirst, rel, O_PATH, 0, &pst)) >= 0) {
		e = !S_ISREG(pst.st.st_mode) ?
		    (S_ISDIR(pst.st.st_mode) ? EISDIR : ENXIO) : brk_setid_write(&pst.st, flags) ||
		    brk_foreign_link(&pst.st, owner) ? EPERM : 0;
		close(fd);
		if (e) {
			errno = e;
			return -1;
		}
		probed = true;
	} else if (errno != ENOENT || !(flags & O_CREAT)) {
		return -1;
	}
	if (!probed)
		flags |= O_EXCL;
	fd = cb_openat2_st(dirfd, dirst, rel, (int)(flags | O_NONBLOCK), (unsigned)mode, &st);
	if (fd < 0)
		return -1;
	*created = !probed;
	if (!S_ISREG(st.st.st_mode) || brk_setid_write(&st.st, flags) ||
	    brk_foreign_link(&st.st, owner) ||
	    (probed && (st.st.st_dev != pst.st.st_dev || st.st.st_ino != pst.st.st_ino))) {
		e = S_ISDIR(st.st.st_mode) ? EISDIR : S_ISREG(st.st.st_mode) ? EPERM : ENXIO;
		close(fd);
		errno = e;
		return -1;
	}
	/* Regular files ignore O_NONBLOCK; a writable fd gets plain flags. */
	if ((flags & O_ACCMODE) != O_RDONLY &&
	    fcntl(fd, F_SETFL, (int)(flags & O_APPEND)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * brk_open_regular_once, asked again once if the name appeared between its
 * probe and its exclusive create.  A file it created gets mode exactly:
 * the broker's umask (077, for its own files) would have taken the
 * group's and others' bits of every file an agent wrote (capcall fs.write,
 * MCP's write_file) whatever mode it asked for.  fchmod acts on the new
 * file's own descriptor, as the identity that created it.
 */
static int
brk_open_regular(int dirfd, const struct cb_stat *dirst, const char *rel, uint64_t flags,
    uint64_t mode, uid_t owner)
{
	bool created = false;
	int fd = brk_open_regular_once(dirfd, dirst, rel, flags, mode, owner, &created);

	if (fd < 0 && errno == EEXIST && !(flags & O_EXCL))
		fd = brk_open_regular_once(dirfd, dirst, rel, flags, mode, owner, &created);
	if (fd >= 0 && created && fchmod(fd, (mode_t)(mode & 0777)) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * The directory fd of a capability root.  The first request for a root
 * resolves it from "/" through the resolver (every component, no symlink,
 * no magic link, no kernel file system) and keeps the O_PATH fd in a small
 * table (brk_roots); a later request for the same root looks at what the
 * root's name leads to now (one fstatat, the last component not followed)
 * and uses the kept fd only if that is the very inode the strict walk
 * opened: holding the fd pins the inode, so its number cannot be reused
 * for another directory while it is kept.  A root moved away and replaced,
 * or now a symlink, or covered by a mount, names another inode: the entry
 * is dropped and the root resolved again strictly (the new one is used, or
 * refused).  The owner and group are read fresh on every request (a chown
 * of the root counts at once).  An entry unused for one to two seconds is
 * closed at the tick (brk_fs_roots_tick), so a kept fd does not hold a
 * file system busy; an entry in use (a rename holds two roots) is never
 * evicted.  Files run on the loop thread only (work.c), which owns the
 * table.  docs/broker.md ("Root fds") says what this leaves.
 * *st gets the root's owner: the hardlink rule and the identity of changes;
 * *ent the table entry to release (brk_fsctx_done), or NULL when *fd is
 * the caller's to close.
 */
#define BRK_ROOTS_MAX 16	/* kept root fds; 2 are ever in use at once */

struct brk_rootent {
	char *path;		/* NULL: free slot */
	int fd;
	dev_t dev;
	ino_t ino;
	uint64_t mnt;		/* fd's mount (held by fd: its id stays its own) */
	unsigned refs;		/* held by an operation: not evicted */
	bool used;		/* since the last tick */
};

static struct brk_rootent brk_roots[BRK_ROOTS_MAX];

static void
brk_rootent_drop(struct brk_rootent *r)
{
	if (r->path == NULL || r->refs > 0)
		return;
	close(r->fd);
	free(r->path);
	*r = (struct brk_rootent){ .fd = -1 };
}

void
brk_fs_roots_tick(void)
{
	for (size_t i = 0; i < BRK_ROOTS_MAX; i++) {
		if (brk_roots[i].path == NULL || brk_roots[i].refs > 0)
			continue;
		if (!brk_roots[i].used)
			brk_rootent_drop(&brk_roots[i]);
		else
			brk_roots[i].used = false;
	}
}

void
brk_fs_roots_drop(void)
{
	for (size_t i = 0; i < BRK_ROOTS_MAX; i++)
		brk_rootent_drop(&brk_roots[i]);
}

/* Keep fd for root; returns its entry, or NULL when the table is full of
 * entries in use (then the fd stays the caller's). */
static struct brk_rootent *
brk_rootent_add(const char *root, int fd, const struct cb_stat *st)
{
	struct brk_rootent *r = NULL;
	char *p;

	/* A free slot, else one not in use, preferably not used lately. */
	for (size_t i = 0; i < BRK_ROOTS_MAX; i++) {
		struct brk_rootent *c = &brk_roots[i];

		if (c->path == NULL) {
			r = c;
			break;
		}
		if (c->refs == 0 && (r == NULL || (r->used && !c->used)))
			r = c;
	}
	if (r == NULL || (p = strdup(root)) == NULL)
		return NULL;
	brk_rootent_drop(r);
	*r = (struct brk_rootent){ .path = p, .fd = fd, .dev = st->st.st_dev, .ino = st->st.st_ino,
		.mnt = st->mnt, .refs = 1, .used = true };
	return r;
}

/* The kept fd of root, if its name still leads to the kept inode.  *st
 * gets the name's stat (the owner, read fresh) with the kept fd's mount:
 * the name may reach the same inode through another mount (a bind), and
 * only the fd's own mount is held, so only its id may be compared with. */
static struct brk_rootent *
brk_rootent_get(const char *root, int slash, struct cb_stat *st)
{
	for (size_t i = 0; i < BRK_ROOTS_MAX; i++) {
		struct brk_rootent *r = &brk_roots[i];

		if (r->path == NULL || strcmp(r->path, root) != 0)
			continue;
		if (fstatat(slash, root[1] ? root + 1 : ".", &st->st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st->st.st_mode) && st->st.st_dev == r->dev && st->st.st_ino == r->ino) {
			st->mnt = r->mnt;
			r->refs++;
			r->used = true;
			return r;
		}
		brk_rootent_drop(r);
		return NULL;
	}
	return NULL;
}

static int
brk_root(const char *root, int *fd, struct cb_stat *st, struct brk_rootent **ent)
{
	/* "/" itself is opened once (cb_open_abs would open and close it on
	 * every request): the broker never chroots or pivots, so its root
	 * directory stays the same directory. */
	static int slash = -1;
	static struct cb_stat slash_st;
	int f;

	*ent = NULL;
	/* A root inside /proc/sys is the one read-only way into procfs. */
	if (strncmp(root, "/proc/sys", 9) == 0 && (root[9] == '/' || root[9] == '\0')) {
		if ((f = cb_open_proc_sys(root, O_PATH | O_DIRECTORY)) < 0)
			return brk_errno(errno);
		if (cb_statat(f, "", AT_EMPTY_PATH, st) != 0) {
			close(f);
			return CB_EIO;
		}
		*fd = f;
		return 0;
	}
	if (root[0] != '/')
		return CB_EINVAL;
	if (slash < 0) {
		/* "/" passes the resolver's file system check like any fd it
		 * hands out, so that cb_openat2_st may rely on it. */
		if ((f = cb_open_abs("/", O_PATH | O_DIRECTORY)) < 0)
			return brk_errno(errno);
		if (cb_statat(f, "", AT_EMPTY_PATH, &slash_st) != 0) {
			close(f);
			return CB_EIO;
		}
		slash = f;
	}
	if ((*ent = brk_rootent_get(root, slash, st)) != NULL) {
		*fd = (*ent)->fd;
		return 0;
	}
	if ((f = cb_openat2_st(slash, &slash_st, root[1] ? root + 1 : ".", O_PATH | O_DIRECTORY, 0,
	    st)) < 0)
		return brk_errno(errno);
	*fd = f;
	*ent = brk_rootent_add(root, f, st);
	return 0;
}

/* path relative to root ("." for the root itself).  The glob matched, so
 * root's components lead path; check anyway rather than trust it. */
static int
brk_rel(const char *root, const char *path, const char **rel)
{
	size_t rl = strlen(root);

	if (strcmp(root, "/") == 0) {
		*rel = path[1] ? path + 1 : ".";
		return 0;
	}
	if (strncmp(path, root, rl) != 0 || (path[rl] != '/' && path[rl] != '\0'))
		return CB_EESCAPE;
	*rel = path[rl] ? path + rl + 1 : ".";
	return 0;
}

/* Everything a handler needs after the token check. */
struct brk_fsctx {
	struct brk_held *h;
	size_t capi;
	int rootfd;		/* brk_fsctx_done closes or releases it */
	struct brk_rootent *rootent;	/* rootfd's kept entry, or NULL: owned */
	struct cb_stat rootst;	/* its stat: file system, mount, owner */
	uid_t owner;		/* the root's owner and group */
	gid_t group;
	const char *rel;
};

static void
brk_fsctx_done(struct brk_fsctx *c)
{
	if (c->rootent != NULL)
		c->rootent->refs--;
	else if (c->rootfd >= 0)
		close(c->rootfd);
	c->rootfd = -1;
	c->rootent = NULL;
}

/* Open the root of token h's capability capi, which the dispatcher chose
 * for path (and checked that path is not the broker's state). */
static int
brk_fs_at(struct brk_held *h, size_t capi, const char *path, struct brk_fsctx *c)
{
	char root[CAP_STR_MAX + 1];
	int e;

	memset(c, 0, sizeof(*c));
	c->rootfd = -1;
	c->h = h;
	c->capi = capi;
	if ((e = cap_path_root(h->tok->c.caps[capi]->res, root, sizeof(root))) != 0)
		return e;
	/* A request for the root itself (the directory a trailing ** covers) resolves from
	 * the root's parent and touches only that one entry: mkdir of the
	 * root, or delete of it, then work like any other name. */
	if (strcmp(root, path) == 0 && strcmp(root, "/") != 0) {
		char *slash = strrchr(root, '/');

		if (slash == root)
			root[1] = '\0';
		else
			*slash = '\0';
	}
	if ((e = brk_rel(root, path, &c->rel)) != 0)
		return e;
	if ((e = brk_root(root, &c->rootfd, &c->rootst, &c->rootent)) != 0)
		return e;
	c->owner = c->rootst.st.st_uid;
	c->group = c->rootst.st.st_gid;
	return 0;
}

/*
 * Changes run with the file-system identity of the grant root's owner, so
 * that what the broker creates in a user's tree belongs to that user, the
 * kernel checks that user's permissions, and a root broker's CAP_FSETID,
 * CAP_DAC_OVERRIDE and CAP_FOWNER do not apply (the kernel drops them with
 * fsuid != 0): set-id bits are cleared as for any unprivileged writer.
 * setfsuid, setfsgid and the raw setgroups system call act on the calling
 * thread only (glibc's setgroups would change every thread): fs operations
 * run on the loop thread, which goes back to the broker's identity at once
 * (brk_as_broker), and the worker threads never touch files.
 * Returns 0 or CB_EPERM (then nothing was changed).
 */
static gid_t brk_groups[BRK_GROUPS_MAX];
static int brk_ngroups = -1;
static bool brk_switched;

static void
brk_as_broker(void)
{
	if (!brk_switched)
		return;
	brk_switched = false;
	(void)setfsuid(geteuid());
	(void)setfsgid(getegid());
	if (brk_ngroups >= 0)
		(void)syscall(SYS_setgroups, (size_t)brk_ngroups, brk_groups);
}

static int
brk_as_owner(const struct brk_fsctx *c)
{
	if (geteuid() != 0 || c->owner == 0)
		return 0;	/* acting as ourselves already */
	if (brk_ngroups < 0 && (brk_ngroups = getgroups(BRK_GROUPS_MAX, brk_groups)) < 0)
		return CB_EPERM;
	if (syscall(SYS_setgroups, (size_t)0, NULL) != 0)
		return CB_EPERM;
	brk_switched = true;
	(void)setfsgid(c->group);
	(void)setfsuid(c->owner);
	/* setfs*id say nothing on failure: ask with an invalid id. */
	if ((uid_t)setfsuid((uid_t)-1) != c->owner || (gid_t)setfsgid((gid_t)-1) != c->group) {
		brk_as_broker();
		return CB_EPERM;
	}
	return 0;
}

static void
brk_allow(struct brk_sbx *s, const struct wire_req *q, const char *res, const struct brk_held *h)
{
	brk_audit_done(s, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_ALLOW,
	    .op = wire_op_name(q->op), .resource = res, .token_id = h ? h->tok->c.id : NULL,
	    .actor = "agent" });
}

static void
brk_deny_fs(struct brk_sbx *s, const struct wire_req *q, int e, struct brk_fsctx *c)
{
	brk_fsctx_done(c);
	brk_deny(s, q, e, q->path, c->h ? c->h->tok->c.id : NULL, NULL);
}

/* Split rel into its parent (beneath the root) and last component. */
static int
brk_parent(const char *rel, char *parent, size_t psize, const char **base)
{
	const char *slash;

	if (strcmp(rel, ".") == 0)
		return CB_EPERM;	/* the capability root itself */
	slash = strrchr(rel, '/');
	if (!slash) {
		snprintf(parent, psize, ".");
		*base = rel;
		return 0;
	}
	if ((size_t)(slash - rel) >= psize)
		return CB_ETOOBIG;
	memcpy(parent, rel, (size_t)(slash - rel));
	parent[slash - rel] = '\0';
	*base = slash + 1;
	return 0;
}

static int
brk_parent_fd(const struct brk_fsctx *c, const char **base, int *pfd)
{
	char parent[CAP_STR_MAX + 1];
	int e;

	if ((e = brk_parent(c->rel, parent, sizeof(parent), base)) != 0)
		return e;
	*pfd = brk_openat2(c->rootfd, parent, O_PATH | O_DIRECTORY, 0);
	return *pfd < 0 ? brk_errno(errno) : 0;
}

static int
brk_handle_new(struct brk_sbx *s, int fd, bool write, uint32_t th, const uint8_t *tid, uint32_t *h)
{
	for (uint32_t i = 0; i < BRK_HANDLES_MAX; i++) {
		if (!s->handles[i].used) {
			s->handles[i] = (struct brk_handle){ .fd = fd, .used = true, .write = write, .th = th };
			memcpy(s->handles[i].tid, tid, CAP_ID_LEN);
			*h = i;
			return 0;
		}
	}
	return CB_EBUSY;
}

/* fs.read and fs.write: the dispatcher chose a token granting the
 * operation on q->path; the file is opened beneath its root, regular files
 * only, a write as the root's owner, after the commit gate.  The fd goes to
 * the agent, or stays here (MEDIATED) so that revocation cuts the stream. */
static void
brk_fs_open(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u, bool wr)
{
	struct brk_fsctx c;
	struct wire_reply rp = { .id = q->id };
	uint64_t flags = O_NOCTTY | (wr ? O_WRONLY : O_RDONLY);
	int e, fd = -1;

	if ((e = brk_fs_at(u->h, u->capi, q->path, &c)) != 0)
		goto deny;
	if (wr) {
		flags |= (q->flags & WIRE_F_CREATE ? O_CREAT : 0) |
		    (q->flags & WIRE_F_TRUNC ? O_TRUNC : 0) |
		    (q->flags & WIRE_F_APPEND ? O_APPEND : 0) |
		    (q->flags & WIRE_F_EXCL ? O_EXCL | O_CREAT : 0);
	} else if (q->flags & ~WIRE_F_MEDIATED) {
		e = CB_EINVAL;
		goto deny;
	}
	if ((e = brk_tok_commit(s, c.h)) != 0 || (wr && (e = brk_as_owner(&c)) != 0))
		goto deny;
	fd = brk_open_regular(c.rootfd, &c.rootst, c.rel, flags, (q->mode ? q->mode : 0644) & 0777, c.owner);
	if (fd < 0) {
		e = brk_errno(errno);
		goto deny;
	}
	/* brk_open_regular checked the type on this fd already. */
	if (wr && q->has_data) {
		size_t off = 0;

		while (off < q->data_len) {
			ssize_t n = write(fd, q->data + off, q->data_len - off);

			if (n < 0) {
				e = errno == EFBIG || errno == ENOSPC ? CB_ETOOBIG : CB_EIO;
				goto deny;
			}
			off += (size_t)n;
		}
		brk_as_broker();
		brk_fsctx_done(&c);
		close(fd);
		fd = -1;
		rp.has_n = true;
		rp.n = off;
		brk_allow(s, q, q->path, c.h);
		brk_reply(s, &rp, -1);
		return;
	}
	brk_as_broker();
	if (q->flags & WIRE_F_MEDIATED) {
		/* The broker keeps the fd, so revoking the token cuts the
		 * stream at the next io.* call. */
		if ((e = brk_handle_new(s, fd, wr, (uint32_t)(c.h - s->held), c.h->tok->c.id,
			 &rp.h)) != 0)
			goto deny;
		rp.has_h = true;
		brk_fsctx_done(&c);
		brk_allow(s, q, q->path, c.h);
		brk_reply(s, &rp, -1);
		return;
	}
	rp.fd = true;
	brk_fsctx_done(&c);
	brk_allow(s, q, q->path, c.h);
	brk_reply(s, &rp, fd);
	return;
deny:
	brk_as_broker();
	if (fd >= 0)
		close(fd);
	brk_deny_fs(s, q, e, &c);
}

static char
brk_dtype(int dirfd, const struct dirent *d)
{
	struct stat st;

	switch (d->d_type) {
	case DT_REG: return 'f';
	case DT_DIR: return 'd';
	case DT_LNK: return 'l';
	case DT_UNKNOWN:
		if (fstatat(dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			return 'o';
		return S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' :
		    S_ISLNK(st.st_mode) ? 'l' : 'o';
	default: return 'o';
	}
}

void
brk_fs_read(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	brk_fs_open(s, q, u, false);
}

void
brk_fs_write(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	brk_fs_open(s, q, u, true);
}

/* fs.list: the directory is opened beneath the token's root and read by
 * the broker (never handed over), at most BRK_LIST_MAX names and
 * BRK_LIST_BYTES bytes of them; the reply says when it was cut. */
void
brk_fs_list(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct brk_fsctx c;
	struct wire_reply rp = { .id = q->id };
	struct wire_entry *ents = NULL;
	char *names = NULL;
	size_t n = 0, used = 0;
	struct dirent *d;
	DIR *dir = NULL;
	int e, fd;

	if ((e = brk_fs_at(u->h, u->capi, q->path, &c)) != 0 ||
	    (e = brk_tok_commit(s, c.h)) != 0)
		goto deny;
	fd = brk_openat2(c.rootfd, c.rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
	if (fd < 0) {
		e = brk_errno(errno);
		goto deny;
	}
	if (!(dir = fdopendir(fd))) {
		close(fd);
		e = CB_EIO;
		goto deny;
	}
	ents = calloc(BRK_LIST_MAX, sizeof(*ents));
	names = malloc(BRK_LIST_BYTES);
	if (!ents || !names) {
		e = CB_ENOMEM;
		goto deny;
	}
	while ((d = readdir(dir)) != NULL) {
		size_t l = strlen(d->d_name) + 1;

		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (n == BRK_LIST_MAX || used + l > BRK_LIST_BYTES) {
			rp.trunc = true;
			break;
		}
		memcpy(names + used, d->d_name, l);
		ents[n].name = names + used;
		ents[n].type = brk_dtype(dirfd(dir), d);
		used += l;
		n++;
	}
	rp.entries = ents;
	rp.nentries = n;
	brk_fsctx_done(&c);
	brk_allow(s, q, q->path, c.h);
	brk_reply(s, &rp, -1);
	goto done;
deny:
	brk_deny_fs(s, q, e, &c);
done:
	if (dir)
		closedir(dir);
	free(ents);
	free(names);
}

/* stat is covered by fs.read, fs.list or fs.write on the path (the
 * dispatch table's need). */
void
brk_fs_stat(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct brk_fsctx c;
	struct wire_reply rp = { .id = q->id };
	struct stat st;
	int e, fd;

	if ((e = brk_fs_at(u->h, u->capi, q->path, &c)) != 0 || (e = brk_tok_commit(s, c.h)) != 0)
		goto deny;
	fd = brk_openat2(c.rootfd, c.rel, O_PATH, 0);
	if (fd < 0) {
		e = brk_errno(errno);
		goto deny;
	}
	e = fstat(fd, &st) == 0 ? 0 : CB_EIO;
	close(fd);
	if (e)
		goto deny;
	rp.has_stat = true;
	rp.stat_size = (uint64_t)st.st_size;
	rp.stat_mtime = (uint64_t)st.st_mtim.tv_sec;
	rp.stat_mode = st.st_mode & 07777;
	rp.stat_type = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : 'o';
	brk_fsctx_done(&c);
	brk_allow(s, q, q->path, c.h);
	brk_reply(s, &rp, -1);
	return;
deny:
	brk_deny_fs(s, q, e, &c);
}

/* Give the directory base of pfd, just made, the mode asked for, which the
 * broker's umask (077) narrowed.  Opened without following a symlink, as a
 * directory: should the name have been swapped meanwhile (only through
 * the tree, so by someone who may change modes there), the mode goes to
 * a directory of the tree, never through a link. */
static int
brk_mkdir_mode(int pfd, const char *base, mode_t mode)
{
	int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;

	if (fd < 0)
		return -1;
	r = fchmod(fd, mode);
	close(fd);
	return r;
}

/* fs.mkdir: created in its parent, resolved beneath the token's root, as
 * the root's owner, mode & 0777. */
void
brk_fs_mkdir(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct brk_fsctx c;
	struct wire_reply rp = { .id = q->id };
	const char *base;
	int e, pfd = -1;

	if ((e = brk_fs_at(u->h, u->capi, q->path, &c)) != 0 ||
	    (e = brk_parent_fd(&c, &base, &pfd)) != 0 || (e = brk_tok_commit(s, c.h)) != 0)
		goto deny;
	if ((e = brk_as_owner(&c)) != 0)
		goto deny;
	if (mkdirat(pfd, base, (q->mode ? q->mode : 0755) & 0777) != 0 ||
	    brk_mkdir_mode(pfd, base, (mode_t)((q->mode ? q->mode : 0755) & 0777)) != 0) {
		e = brk_errno(errno);
		brk_as_broker();
		goto deny;
	}
	brk_as_broker();
	close(pfd);
	brk_fsctx_done(&c);
	brk_allow(s, q, q->path, c.h);
	brk_reply(s, &rp, -1);
	return;
deny:
	if (pfd >= 0)
		close(pfd);
	brk_deny_fs(s, q, e, &c);
}

/* fs.delete: one name in its parent, resolved beneath the token's root, as
 * the root's owner; a symlink is removed, never followed. */
void
brk_fs_delete(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct brk_fsctx c;
	struct wire_reply rp = { .id = q->id };
	const char *base;
	struct stat st;
	int e, pfd = -1;

	if ((e = brk_fs_at(u->h, u->capi, q->path, &c)) != 0 ||
	    (e = brk_parent_fd(&c, &base, &pfd)) != 0 || (e = brk_tok_commit(s, c.h)) != 0)
		goto deny;
	/* unlinkat never follows a final symlink: deleting a link removes the
	 * link, not what it points to. */
	if ((e = brk_as_owner(&c)) != 0)
		goto deny;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    unlinkat(pfd, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0) {
		e = brk_errno(errno);
		brk_as_broker();
		goto deny;
	}
	brk_as_broker();
	close(pfd);
	brk_fsctx_done(&c);
	brk_allow(s, q, q->path, c.h);
	brk_reply(s, &rp, -1);
	return;
deny:
	if (pfd >= 0)
		close(pfd);
	brk_deny_fs(s, q, e, &c);
}

/* rename needs fs.write on both names (the dispatch table's need). */
void
brk_fs_rename(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct brk_fsctx a, c;
	struct wire_reply rp = { .id = q->id };
	const char *base1, *base2;
	int e, p1 = -1, p2 = -1;

	memset(&a, 0, sizeof(a));
	a.rootfd = -1;
	if ((e = brk_fs_at(u->h, u->capi, q->path, &c)) != 0)
		goto deny;
	if ((e = brk_fs_at(u->h2, u->capi2, q->path2, &a)) != 0) {
		brk_fsctx_done(&c);
		c = a;
		a.rootfd = -1;
		goto deny;
	}
	if ((e = brk_parent_fd(&c, &base1, &p1)) != 0 || (e = brk_parent_fd(&a, &base2, &p2)) != 0 ||
	    (e = brk_tok_commit(s, c.h)) != 0 || (a.h != c.h && (e = brk_tok_commit(s, a.h)) != 0))
		goto deny;
	/* As the owner of the source's root: the kernel checks that user's
	 * permissions on both directories. */
	if ((e = brk_as_owner(&c)) != 0)
		goto deny;
	if (renameat(p1, base1, p2, base2) != 0) {
		e = brk_errno(errno);
		brk_as_broker();
		goto deny;
	}
	brk_as_broker();
	close(p1);
	close(p2);
	brk_fsctx_done(&c);
	brk_fsctx_done(&a);
	brk_allow(s, q, q->path, c.h);
	brk_reply(s, &rp, -1);
	return;
deny:
	if (p1 >= 0)
		close(p1);
	if (p2 >= 0)
		close(p2);
	brk_fsctx_done(&a);
	brk_deny_fs(s, q, e, &c);
}

/*
 * io.read / io.write / io.close on a handle the broker kept (MEDIATED).
 * Safe because the fd was opened by brk_fs_open under all its checks, and
 * the token is re-checked (clock, revocation, signature epoch) on every
 * call: a revoked grant stops the stream at once and the handle is closed.
 */
void
brk_op_io(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct wire_reply rp = { .id = q->id };
	struct brk_handle *hd;
	uint8_t buf[WIRE_DATA_MAX];
	int e = 0;

	(void)u;	/* no entry need: the handle's own token is re-checked */
	if (q->h >= BRK_HANDLES_MAX || !s->handles[q->h].used) {
		brk_deny(s, q, CB_EINVAL, NULL, NULL, "no such handle");
		return;
	}
	hd = &s->handles[q->h];
	if (q->op == WIRE_OP_IO_CLOSE) {
		close(hd->fd);
		hd->used = false;
		brk_reply(s, &rp, -1);
		return;
	}
	/* The use was charged when the handle was opened; what can change
	 * since is the clock, revocation and the key. */
	if (hd->th < s->nheld && (e = brk_tok_check(s, &s->held[hd->th], NULL, NULL)) == CB_ESPENT)
		e = 0;
	if (hd->th >= s->nheld || e != 0 || (e = brk_tok_commit(s, NULL)) != 0) {
		if (e == 0)
			e = CB_EREVOKED;
		close(hd->fd);
		hd->used = false;
		brk_deny(s, q, e, NULL, hd->tid, "mediated stream cut");
		return;
	}
	if (q->op == WIRE_OP_IO_READ) {
		size_t want = q->len && q->len < sizeof(buf) ? q->len : sizeof(buf);
		ssize_t n;

		if (hd->write || (n = read(hd->fd, buf, want)) < 0) {
			brk_deny(s, q, hd->write ? CB_EINVAL : CB_EIO, NULL, hd->tid, NULL);
			return;
		}
		rp.has_data = true;
		rp.data = buf;
		rp.data_len = (size_t)n;
	} else {
		ssize_t n;

		if (!hd->write || !q->has_data || (n = write(hd->fd, q->data, q->data_len)) < 0) {
			brk_deny(s, q, !hd->write || !q->has_data ? CB_EINVAL : CB_EIO, NULL, hd->tid, NULL);
			return;
		}
		rp.has_n = true;
		rp.n = (uint64_t)n;
	}
	brk_audit_done(s, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_ALLOW,
	    .op = wire_op_name(q->op), .token_id = hd->tid, .actor = "agent" });
	brk_reply(s, &rp, -1);
}
