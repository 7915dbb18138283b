/*
 * test_common_resolve.c - the one path resolver (common/resolve.c):
 * cb_openat2, cb_openat2_st, cb_statat, cb_stat_same_fs, cb_open_abs,
 * cb_open_proc_sys, cb_fd_kernfs and cb_kernfs_below.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "tests/tap.h"

/* fd < 0 with errno want (the fd is closed if the call succeeded). */
static bool
fails(int fd, int want)
{
	int e = errno;

	if (fd >= 0) {
		close(fd);
		return false;
	}
	return e == want;
}

/*
 * On overlayfs a regular file reports its layer's device and its directory
 * the overlay's: the same file system is then told by the mount id
 * (cb_stat_same_fs), and a kernel file system mounted inside is still
 * another mount, refused.  Needs root (a mount namespace of this process's
 * own, so nothing is mounted for anyone else) and a directory overlayfs
 * accepts as its upper layer (not on a machine whose / is itself an
 * overlay): otherwise skipped, said so.
 */
static void
overlay(const char *dir)
{
	char lo[256], tm[256], up[300], wk[300], mnt[256], opts[1024], path[512];
	struct cb_stat dst, fst, st;
	int d, fd;

	snprintf(lo, sizeof(lo), "%s/ovl-lo", dir);
	snprintf(tm, sizeof(tm), "%s/ovl-tmp", dir);
	snprintf(up, sizeof(up), "%s/up", tm);
	snprintf(wk, sizeof(wk), "%s/wk", tm);
	snprintf(mnt, sizeof(mnt), "%s/ovl", dir);
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lo, up, wk);
	mkdir(lo, 0755);
	mkdir(tm, 0755);
	mkdir(mnt, 0755);
	snprintf(path, sizeof(path), "%s/f", lo);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	/* The upper layer on a tmpfs of its own: layers on two file systems,
	 * so that (without xino) a lower file reports another device than the
	 * overlay directory, as on most containers' overlays. */
	if (geteuid() != 0 || unshare(CLONE_NEWNS) != 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("tmpfs", tm, "tmpfs", 0, "size=1m") != 0 || mkdir(up, 0755) != 0 ||
	    mkdir(wk, 0755) != 0 || mount("overlay", mnt, "overlay", 0, opts) != 0) {
		printf("# overlayfs checks skipped: needs root and an overlay of %s\n", dir);
		return;
	}
	d = cb_open_abs(mnt, O_PATH | O_DIRECTORY);
	T_OK(d >= 0 && cb_statat(d, "", AT_EMPTY_PATH, &dst) == 0 &&
	    cb_statat(d, "f", AT_SYMLINK_NOFOLLOW, &fst) == 0, "an overlay mount and its file");
	if (d >= 0 && fst.st.st_dev == dst.st.st_dev)
		printf("# this overlay reports one device (xino): the mount id is not needed\n");
	T_OK(d >= 0 && cb_stat_same_fs(&fst, &dst),
	    "cb_stat_same_fs: a lower-layer file is on its overlay directory's file system");
	fd = d >= 0 ? cb_openat2_st(d, &dst, "f", O_RDONLY, 0, &st) : -1;
	T_OK(fd >= 0 && st.mnt == dst.mnt && st.st.st_ino == fst.st.st_ino,
	    "cb_openat2_st reads it (same mount)");
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "%s/p", mnt);
	mkdir(path, 0755);
	if (d >= 0 && mount("proc", path, "proc", 0, NULL) == 0) {
		T_OK(cb_statat(d, "p/version", AT_SYMLINK_NOFOLLOW, &st) == 0 &&
		    !cb_stat_same_fs(&st, &dst), "a procfs mounted inside the overlay: another mount");
		T_OK(fails(cb_openat2_st(d, &dst, "p/version", O_RDONLY, 0, &st), EACCES),
		    "cb_openat2_st: a procfs mounted inside the overlay is refused");
		umount2(path, MNT_DETACH);
	} else {
		T_OK(false, "mount a procfs inside the overlay");
	}
	if (d >= 0)
		close(d);
	umount2(mnt, MNT_DETACH);
	umount2(tm, MNT_DETACH);
}

/*
 * cb_kernfs_below keeps the table between calls (common/resolve.c): a
 * kernel file system mounted or unmounted after the first call must be
 * seen by the next, and so must a change of mount namespace (the table
 * cached before it describes another namespace).  Needs root (a mount
 * namespace of this process's own): otherwise skipped, said so.
 */
static void
kernfs_changes(const char *dir)
{
	char kp[256];

	snprintf(kp, sizeof(kp), "%s/kp", dir);
	mkdir(kp, 0755);
	T_OK(!cb_kernfs_below(dir), "cb_kernfs_below: nothing beneath, cached");
	if (geteuid() != 0 || unshare(CLONE_NEWNS) != 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		printf("# cb_kernfs_below's table changes skipped: needs root\n");
		return;
	}
	/* A namespace of its own, with the same mounts: nothing yet. */
	T_OK(!cb_kernfs_below(dir), "... the same in a new mount namespace");
	T_OK(mount("proc", kp, "proc", 0, NULL) == 0, "mount a procfs beneath the directory");
	T_OK(cb_kernfs_below(dir) && cb_kernfs_below(kp),
	    "cb_kernfs_below: a procfs mounted after the table was read is seen");
	umount2(kp, MNT_DETACH);
	T_OK(!cb_kernfs_below(dir), "cb_kernfs_below: ... and its unmount too");
	T_OK(mount("tmpfs", kp, "tmpfs", 0, "size=64k") == 0 && !cb_kernfs_below(dir),
	    "cb_kernfs_below: a tmpfs is not a kernel file system");
	T_OK(mount("sysfs", kp, "sysfs", 0, NULL) == 0 && cb_kernfs_below(dir),
	    "cb_kernfs_below: a sysfs stacked on it is");
	umount2(kp, MNT_DETACH);
	umount2(kp, MNT_DETACH);
	T_OK(!cb_kernfs_below(dir), "cb_kernfs_below: both gone");
	/* Another namespace after the table was cached in this one: the
	 * procfs mounted here must not be taken for this one's table. */
	T_OK(mount("proc", kp, "proc", 0, NULL) == 0 && cb_kernfs_below(dir),
	    "a procfs mounted again, seen");
	T_OK(unshare(CLONE_NEWNS) == 0 && umount2(kp, MNT_DETACH) == 0 && !cb_kernfs_below(dir),
	    "cb_kernfs_below: a new namespace without it reads its own table");
}

int
main(void)
{
	char dir[] = "/tmp/cbresolve.XXXXXX", path[256];
	int root, fd;

	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/sub", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/sub/f", dir);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	snprintf(path, sizeof(path), "%s/link", dir);
	if (symlink("sub", path) != 0)
		abort();
	snprintf(path, sizeof(path), "%s/proclink", dir);
	if (symlink("/proc/self/root", path) != 0)
		abort();

	T_OK((root = cb_open_abs(dir, O_PATH | O_DIRECTORY)) >= 0, "a root opens from /");
	fd = cb_openat2(root, "sub/f", O_RDONLY, 0);
	T_OK(fd >= 0, "a file beneath the root opens");
	if (fd >= 0)
		close(fd);
	T_OK(fails(cb_openat2(root, "link/f", O_RDONLY, 0), ELOOP), "a symlink on the way: ELOOP");
	T_OK(fails(cb_openat2(root, "link", O_PATH, 0), ELOOP), "a symlink as the last component: ELOOP");
	T_OK(fails(cb_openat2(root, "proclink/etc", O_RDONLY, 0), ELOOP), "a link to a magic link: ELOOP");
	T_OK(fails(cb_openat2(root, "../etc/passwd", O_RDONLY, 0), EXDEV), "..: EXDEV");
	T_OK(fails(cb_openat2(root, "/etc/passwd", O_RDONLY, 0), EXDEV), "an absolute path: EXDEV");
	snprintf(path, sizeof(path), "%s/link/f", dir);
	T_OK(fails(cb_open_abs(path, O_RDONLY), ELOOP), "cb_open_abs follows no symlink either");

	T_OK(fails(cb_open_abs("/proc/1/status", O_RDONLY), EACCES), "procfs: EACCES");
	T_OK(fails(cb_open_abs("/proc", O_PATH | O_DIRECTORY), EACCES), "procfs, O_PATH too");
	T_OK(fails(cb_open_abs("/sys/kernel", O_PATH | O_DIRECTORY), EACCES), "sysfs: EACCES");
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	T_OK(fd >= 0 && cb_fd_kernfs(fd), "cb_fd_kernfs: /proc");
	if (fd >= 0)
		close(fd);
	T_OK(!cb_fd_kernfs(root), "cb_fd_kernfs: not a temporary directory");
	T_OK(cb_kernfs_below("/"), "cb_kernfs_below: / holds /proc");
	T_OK(cb_kernfs_below("/proc") && cb_kernfs_below("/proc/"),
	    "cb_kernfs_below: a kernel file system's own mount point");
	T_OK(!cb_kernfs_below(dir), "cb_kernfs_below: not beneath a temporary directory");
	T_OK(!cb_kernfs_below("/pro"), "cb_kernfs_below: a name that only starts the same");

	fd = cb_open_proc_sys("/proc/sys/kernel", O_PATH | O_DIRECTORY);
	T_OK(fd >= 0, "cb_open_proc_sys opens /proc/sys/kernel");
	if (fd >= 0) {
		int f = cb_openat2(fd, "ostype", O_RDONLY, 0);

		T_OK(f >= 0, "... and reads beneath it");
		if (f >= 0)
			close(f);
		T_OK(fails(cb_openat2(fd, "hostname", O_WRONLY, 0), EACCES), "... never for writing");
		T_OK(fails(cb_openat2(fd, "../../1/status", O_RDONLY, 0), EXDEV), "... nor out of it");
		close(fd);
	}
	T_OK(fails(cb_open_proc_sys("/proc/1", O_PATH), EACCES), "cb_open_proc_sys: only /proc/sys");
	T_OK(fails(cb_open_proc_sys("/proc/sysrq-trigger", O_RDONLY), EACCES), "... by component");
	T_OK(fails(cb_open_proc_sys("/proc/sys/kernel/hostname", O_WRONLY), EACCES),
	    "... read-only");
	/* A procfs fd from elsewhere is not a start directory for writes or
	 * for reads: only cb_open_proc_sys hands those out. */
	fd = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
	T_OK(fd >= 0 && fails(cb_openat2(fd, "environ", O_WRONLY, 0), EACCES),
	    "a procfs start directory never lets a write through");
	if (fd >= 0)
		close(fd);

	/* cb_openat2_st skips fstatfs only on dirfd's own file system and
	 * only for reading: everything else is still checked. */
	{
		struct cb_stat rst, st;
		struct stat want;
		int slash = cb_open_abs("/", O_PATH | O_DIRECTORY), psys;

		T_OK(cb_statat(root, "", AT_EMPTY_PATH, &rst) == 0 && rst.mnt != CB_MNT_NONE,
		    "cb_statat of the root, with its mount id");
		fd = cb_openat2_st(root, &rst, "sub/f", O_RDONLY, 0, &st);
		snprintf(path, sizeof(path), "%s/sub/f", dir);
		T_OK(fd >= 0 && stat(path, &want) == 0 && st.st.st_ino == want.st_ino &&
		    st.st.st_dev == want.st_dev && S_ISREG(st.st.st_mode) && st.mnt == rst.mnt,
		    "cb_openat2_st: opens beneath the root and returns the fd's stat");
		if (fd >= 0)
			close(fd);
		T_OK(fails(cb_openat2_st(root, &rst, "link/f", O_RDONLY, 0, &st), ELOOP),
		    "cb_openat2_st: a symlink on the way: ELOOP");
		T_OK(fails(cb_openat2_st(root, &rst, "../etc", O_PATH, 0, &st), EXDEV),
		    "cb_openat2_st: ..: EXDEV");
		fd = cb_openat2_st(root, &rst, "new", O_WRONLY | O_CREAT, 0600, &st);
		T_OK(fd >= 0 && S_ISREG(st.st.st_mode), "cb_openat2_st: a created file (checked)");
		if (fd >= 0)
			close(fd);
		T_OK(slash >= 0 && cb_statat(slash, "", AT_EMPTY_PATH, &rst) == 0,
		    "/ opens through the resolver");
		T_OK(fails(cb_openat2_st(slash, &rst, "proc/1/status", O_RDONLY, 0, &st), EACCES),
		    "cb_openat2_st: procfs below a checked directory: EACCES (another st_dev)");
		T_OK(fails(cb_openat2_st(slash, &rst, "proc", O_PATH | O_DIRECTORY, 0, &st), EACCES),
		    "cb_openat2_st: procfs, O_PATH too");
		T_OK(fails(cb_openat2_st(slash, &rst, "sys/kernel", O_PATH, 0, &st), EACCES),
		    "cb_openat2_st: sysfs: EACCES");
		if (slash >= 0)
			close(slash);
		psys = cb_open_proc_sys("/proc/sys/kernel", O_PATH | O_DIRECTORY);
		T_OK(psys >= 0 && cb_statat(psys, "", AT_EMPTY_PATH, &rst) == 0,
		    "/proc/sys/kernel for cb_openat2_st");
		fd = cb_openat2_st(psys, &rst, "ostype", O_RDONLY, 0, &st);
		T_OK(fd >= 0, "cb_openat2_st: reads beneath /proc/sys");
		if (fd >= 0)
			close(fd);
		T_OK(fails(cb_openat2_st(psys, &rst, "hostname", O_WRONLY, 0, &st), EACCES),
		    "cb_openat2_st: never writes beneath /proc/sys, same st_dev or not");
		if (psys >= 0)
			close(psys);
	}

	overlay(dir);
	kernfs_changes(dir);
	close(root);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	if (system(path) != 0)
		return 1;
	return t_done();
}
