/*
 * resolve.c - the one path resolver: every host path the broker opens,
 * lists, creates, renames, deletes or binds into a sandbox goes through
 * cb_openat2().
 *
 * Trust domain: the broker (and the launcher half of sandbox-stub, which runs
 * in the broker).  Paths come from tokens an agent presented or derived, so
 * they are hostile.  Why this is safe:
 *  - openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
 *    makes the kernel refuse ".." out of the start directory, any symlink on
 *    the way (the last component included) and /proc magic links, and it is
 *    atomic against renames racing the walk (EXDEV/EAGAIN instead of an
 *    escape).  Callers then use the fd, never the string again.
 *  - The file system of the fd decides whether it may be served at all: a
 *    procfs mounted (or bind-mounted) inside a granted tree, or a grant that
 *    names /proc or /sys outright, would otherwise reach the broker's own
 *    /proc/PID/mem, where its signing key lives, or the machine's knobs.  A
 *    string check on "/proc" cannot see a procfs mounted somewhere else;
 *    fstatfs() on the opened fd can.  The one exception is read-only access
 *    beneath /proc/sys (the kernel's tunables, readable by anyone), and only
 *    from a directory fd cb_open_proc_sys() opened: on the procfs that is
 *    mounted at /proc (its root inode), without crossing another mount, and
 *    RESOLVE_BENEATH keeps every later walk inside /proc/sys, away from the
 *    process directories.
 */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define CB_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define CB_PROC_ROOT_INO 1	/* the root directory of every procfs */

/* Not in every linux/stat.h (6.8): a mount id never used again. */
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

/* Magic numbers not in every linux/magic.h. */
#ifndef BINFMTFS_MAGIC
#define BINFMTFS_MAGIC 0x42494e4d
#endif
#ifndef CONFIGFS_MAGIC
#define CONFIGFS_MAGIC 0x62656570
#endif
#ifndef FUSECTL_SUPER_MAGIC
#define FUSECTL_SUPER_MAGIC 0x65735543
#endif
#ifndef SELINUX_MAGIC
#define SELINUX_MAGIC 0xf97cff8c
#endif
#ifndef SMACK_MAGIC
#define SMACK_MAGIC 0x43415d53
#endif

bool
cb_fd_kernfs(int fd)
{
	static const unsigned long kern[] = {
		PROC_SUPER_MAGIC, SYSFS_MAGIC, DEBUGFS_MAGIC, TRACEFS_MAGIC, SECURITYFS_MAGIC,
		BPF_FS_MAGIC, CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, EFIVARFS_MAGIC,
		PSTOREFS_MAGIC, CONFIGFS_MAGIC, DEVPTS_SUPER_MAGIC, NSFS_MAGIC, BINFMTFS_MAGIC,
		FUSECTL_SUPER_MAGIC, SELINUX_MAGIC, SMACK_MAGIC,
	};
	struct statfs sf;

	if (fstatfs(fd, &sf) != 0)
		return true;	/* cannot tell: refuse */
	for (size_t i = 0; i < sizeof(kern) / sizeof(kern[0]); i++)
		if ((unsigned long)sf.f_type == kern[i])
			return true;
	return false;
}

/* Decode mountinfo's octal escapes (\040 for a space, \011, \012,
 * \134) in place. */
static void
cb_mi_unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* One line of /proc/self/mountinfo ("ID PARENT MAJ:MIN ROOT MOUNTPOINT
 * OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS", proc(5)): the mount
 * point (unescaped, in place) if the line is a kernel file system's, else
 * NULL. */
static const char *
cb_mi_line_kernfs(char *line)
{
	static const char *const kern[] = { "proc", "sysfs", "debugfs", "tracefs",
		"securityfs", "bpf", "cgroup", "cgroup2", "efivarfs", "pstore", "configfs",
		"devpts", "nsfs", "binfmt_misc", "fusectl", "selinuxfs", "smackfs", NULL };
	char *save = NULL, *f, *mp = NULL, *type = NULL;
	int n = 0;
	bool dash = false;

	for (f = strtok_r(line, " \n", &save); f; f = strtok_r(NULL, " \n", &save)) {
		if (++n == 5)
			mp = f;
		else if (n > 6 && dash) {
			type = f;
			break;
		} else if (n > 6 && strcmp(f, "-") == 0)
			dash = true;
	}
	if (!mp || !type)
		return NULL;
	for (size_t i = 0; kern[i]; i++)
		if (strcmp(type, kern[i]) == 0) {
			cb_mi_unescape(mp);
			return mp;
		}
	return NULL;
}

/*
 * The kernel file systems' mount points of the broker's mount namespace,
 * kept between calls: a proc.exec binds every fs.read root into its child
 * and asks cb_kernfs_below for each, and reading mountinfo on the loop was
 * the longest step of a pooled proc.exec's request (0.15-0.2 ms here with
 * 25 mounts; a host with container or snap mounts lists thousands).
 * The list is read again whenever the kernel says the table changed: an
 * open mountinfo polls POLLPRI once after any mount or unmount in its
 * namespace (proc(5)), and the poll itself takes the event.  It is asked
 * before the list is read, so a mount made while it is read is seen by
 * the next call at the latest, as a mount made just after the read always
 * was.  The descriptor belongs to the namespace it was opened in: a
 * caller in another one (after unshare or setns; a forked child that did)
 * opens it again.
 */
static struct {
	pthread_mutex_t mu;
	int fd;			/* /proc/self/mountinfo, or -1 */
	uint64_t root_mnt;	/* ... of the namespace whose root has this mount id */
	bool valid;		/* mp[] is the table since the last event */
	char *mp;		/* the mount points, each NUL-terminated, */
	size_t len;		/* ... len bytes in all */
} cb_mi = { .mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* Read the table again into cb_mi.mp; false if it cannot be read. */
static bool
cb_mi_reload(void)
{
	FILE *f;
	char *line = NULL, *mp = NULL;
	size_t cap = 0, len = 0;
	int dfd;
	bool ok;

	if (lseek(cb_mi.fd, 0, SEEK_SET) != 0 || (dfd = dup(cb_mi.fd)) < 0)
		return false;
	if (!(f = fdopen(dfd, "r"))) {
		close(dfd);
		return false;
	}
	ok = true;
	while (ok && getline(&line, &cap, f) > 0) {
		const char *m = cb_mi_line_kernfs(line);
		size_t l = m ? strlen(m) + 1 : 0;
		char *n;

		if (!m)
			continue;
		if (!(n = realloc(mp, len + l))) {
			ok = false;
			break;
		}
		mp = n;
		memcpy(mp + len, m, l);
		len += l;
	}
	ok = ok && !ferror(f);
	free(line);
	fclose(f);
	if (!ok) {
		free(mp);
		return false;
	}
	free(cb_mi.mp);
	cb_mi.mp = mp;
	cb_mi.len = len;
	return true;
}

/* Make cb_mi the caller's namespace's table now; called with cb_mi.mu.
 * The namespace is told by its root's mount id: every namespace has mounts
 * of its own (a new one copies them, with new ids), and it costs a statx
 * of "/" (about 1 us here, where a stat of /proc/self/ns/mnt took 7). */
static bool
cb_mi_current(void)
{
	struct statx sx;
	struct pollfd p;

	if (statx(AT_FDCWD, "/", 0, STATX_MNT_ID | STATX_MNT_ID_UNIQUE, &sx) != 0 ||
	    !(sx.stx_mask & (STATX_MNT_ID | STATX_MNT_ID_UNIQUE)))
		return false;
	if (cb_mi.fd >= 0 && sx.stx_mnt_id != cb_mi.root_mnt) {
		close(cb_mi.fd);
		cb_mi.fd = -1;
	}
	if (cb_mi.fd < 0) {
		if ((cb_mi.fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)) < 0)
			return false;
		cb_mi.root_mnt = sx.stx_mnt_id;
		cb_mi.valid = false;
	}
	p = (struct pollfd){ .fd = cb_mi.fd, .events = POLLPRI };
	if (poll(&p, 1, 0) != 0)	/* a change (or a poll that failed): read again */
		cb_mi.valid = false;
	if (!cb_mi.valid)
		cb_mi.valid = cb_mi_reload();
	return cb_mi.valid;
}

bool
cb_kernfs_below(const char *dir)
{
	size_t dl = strlen(dir);
	bool found = false;

	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	pthread_mutex_lock(&cb_mi.mu);
	if (!cb_mi_current()) {
		pthread_mutex_unlock(&cb_mi.mu);
		return true;	/* cannot tell: refuse */
	}
	for (size_t o = 0; !found && o < cb_mi.len; o += strlen(cb_mi.mp + o) + 1) {
		const char *mp = cb_mi.mp + o;

		/* dir "/" holds every mount point */
		found = dl <= 1 || (strncmp(mp, dir, dl) == 0 && (mp[dl] == '\0' || mp[dl] == '/'));
	}
	pthread_mutex_unlock(&cb_mi.mu);
	return found;
}

static bool
cb_fd_procfs(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC;
}

static int
cb_openat2_how(int dirfd, const char *rel, int flags, unsigned mode, uint64_t resolve)
{
	/* openat2 refuses a mode without O_CREAT (unlike openat). */
	struct open_how how = { .flags = (uint64_t)flags | O_CLOEXEC,
		.mode = (flags & O_CREAT) ? mode : 0, .resolve = resolve };

	return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
}

int
cb_openat2(int dirfd, const char *rel, int flags, unsigned mode)
{
	bool ro = (flags & (O_ACCMODE | O_CREAT | O_TRUNC)) == O_RDONLY;
	int fd;

	fd = cb_openat2_how(dirfd, rel, flags, mode, CB_RESOLVE);
	if (fd < 0)
		return -1;
	/* The one exception: read-only, beneath a procfs directory we were
	 * given, which only cb_open_proc_sys() hands out (/proc/sys). */
	if (cb_fd_kernfs(fd) && !(ro && cb_fd_procfs(fd) && cb_fd_procfs(dirfd))) {
		close(fd);
		errno = EACCES;
		return -1;
	}
	return fd;
}

int
cb_statat(int dirfd, const char *path, int atflags, struct cb_stat *cs)
{
	struct statx sx;

	/* Asking for the unique id gets it where the kernel has one, else the
	 * older mount id (always given since 5.8); either is one mount's. */
	if (statx(dirfd, path, atflags, STATX_BASIC_STATS | STATX_MNT_ID | STATX_MNT_ID_UNIQUE,
	    &sx) != 0)
		return -1;
	memset(&cs->st, 0, sizeof(cs->st));
	cs->st.st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	cs->st.st_ino = sx.stx_ino;
	cs->st.st_mode = sx.stx_mode;
	cs->st.st_nlink = sx.stx_nlink;
	cs->st.st_uid = sx.stx_uid;
	cs->st.st_gid = sx.stx_gid;
	cs->st.st_rdev = makedev(sx.stx_rdev_major, sx.stx_rdev_minor);
	cs->st.st_size = (off_t)sx.stx_size;
	cs->st.st_blksize = (blksize_t)sx.stx_blksize;
	cs->st.st_blocks = (blkcnt_t)sx.stx_blocks;
	cs->st.st_atim = (struct timespec){ sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec };
	cs->st.st_mtim = (struct timespec){ sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec };
	cs->st.st_ctim = (struct timespec){ sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec };
	cs->mnt = sx.stx_mask & (STATX_MNT_ID | STATX_MNT_ID_UNIQUE) ? sx.stx_mnt_id : CB_MNT_NONE;
	return 0;
}

bool
cb_stat_same_fs(const struct cb_stat *cs, const struct cb_stat *dirst)
{
	return cs->st.st_dev == dirst->st.st_dev ||
	    (cs->mnt != CB_MNT_NONE && cs->mnt == dirst->mnt);
}

int
cb_openat2_st(int dirfd, const struct cb_stat *dirst, const char *rel, int flags, unsigned mode,
    struct cb_stat *st)
{
	bool ro = (flags & (O_ACCMODE | O_CREAT | O_TRUNC)) == O_RDONLY;
	int fd, e;

	fd = cb_openat2_how(dirfd, rel, flags, mode, CB_RESOLVE);
	if (fd < 0)
		return -1;
	if (cb_statat(fd, "", AT_EMPTY_PATH, st) != 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	/* On dirfd's file system (the same superblock, or the same mount:
	 * cb_stat_same_fs), so of dirfd's file system type, which the
	 * resolver handed out (it passed the check, or it is the read-only
	 * /proc/sys exception, which a read-only open from it keeps).  Only
	 * then is fstatfs skipped, and only for a read-only open; anything
	 * else is checked as cb_openat2 does. */
	if (ro && dirst != NULL && cb_stat_same_fs(st, dirst))
		return fd;
	if (cb_fd_kernfs(fd) && !(ro && cb_fd_procfs(fd) && cb_fd_procfs(dirfd))) {
		close(fd);
		errno = EACCES;
		return -1;
	}
	return fd;
}

/* path from "/" through the resolver flags, without the file system check. */
static int
cb_open_abs_raw(const char *path)
{
	int root, fd, e;

	if ((root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	fd = cb_openat2_how(root, path + 1, O_PATH | O_DIRECTORY, 0, CB_RESOLVE);
	e = errno;
	close(root);
	errno = e;
	return fd;
}

int
cb_open_abs(const char *path, int flags)
{
	int root, fd;

	if (path[0] != '/') {
		errno = EINVAL;
		return -1;
	}
	if ((root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	fd = cb_openat2(root, path[1] ? path + 1 : ".", flags, 0);
	if (fd < 0) {
		int e = errno;

		close(root);
		errno = e;
		return -1;
	}
	close(root);
	return fd;
}

int
cb_open_proc_sys(const char *path, int flags)
{
	struct stat st;
	int proc, fd, e;

	if (strncmp(path, "/proc/sys", 9) != 0 || (path[9] != '/' && path[9] != '\0') ||
	    (flags & (O_ACCMODE | O_CREAT | O_TRUNC)) != O_RDONLY) {
		errno = EACCES;
		return -1;
	}
	/* /proc must be the root of a procfs (not a bind of a process
	 * directory), and nothing below it may cross into another mount. */
	if ((proc = cb_open_abs_raw("/proc")) < 0)
		return -1;
	if (!cb_fd_procfs(proc) || fstat(proc, &st) != 0 || st.st_ino != CB_PROC_ROOT_INO) {
		close(proc);
		errno = EACCES;
		return -1;
	}
	fd = cb_openat2_how(proc, path + 6, flags, 0, CB_RESOLVE | RESOLVE_NO_XDEV);
	e = errno;
	close(proc);
	errno = e;
	return fd;
}
