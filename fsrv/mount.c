/*
 * mount.c - detached FUSE mounts: made by a privileged process with the
 * new mount API, attached by whoever receives the mount fd (the sandbox
 * stub, inside the sandbox's own mount and user namespaces).
 *
 * Trust domain: broker (fsrv_mount_detached) and sandbox setup
 * (fsrv_mount_move).  Nothing here reads agent input.  The mount is made
 * nosuid and nodev, so a set-id file or a device node in a served tree
 * gives the agent nothing, whatever the server reports.
 */
#include "fsrv/fsrv_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static int
fsrv_mount_err(int e)
{
	switch (e) {
	case EPERM:
	case EACCES:
		return CB_EPERM;
	case ENODEV:
	case ENOSYS:
		return CB_EUNSUPPORTED;
	default:
		return CB_EIO;
	}
}

/*
 * Raise the readahead of the FUSE connection behind mount fd m to one
 * max_read (FSRV_READ_MAX).  The kernel gives every FUSE connection a bdi
 * of its own, named after the mount's anonymous device (0:N), with the
 * default 128 KiB: a cold 1 MiB read is then eight read requests (each a
 * wake-up of the server, a check and a splice) where two do.  The device
 * comes from statx with an empty mask, which FUSE answers from the super
 * block without a request (the server may not be serving yet, and the
 * mount is not ours to use: user_id is the agent's).  What we write is a
 * property of this connection alone, gone with it; the INIT reply asks
 * for the same (proto.c, fsrv_init), so the order of the two does not
 * matter.  Best effort: without it reads are only smaller.  Cached pages
 * still come only from checked reads, and a revocation drops them all.
 */
static void
fsrv_mount_readahead(int m)
{
	struct statx sx;
	char path[96], kb[16];
	int fd, n;

	if (statx(m, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, 0, &sx) != 0)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", sx.stx_dev_major,
	    sx.stx_dev_minor);
	n = snprintf(kb, sizeof(kb), "%u", FSRV_READ_MAX / 1024u);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return;
	cb_ignore((int)write(fd, kb, (size_t)n));
	close(fd);
}

int
fsrv_mount_detached(int dev_fd, const struct fsrv_mount_opts *o, int *mnt_fd)
{
	char num[4][24];
	unsigned attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	int fs = -1, m = -1, e = 0;

	*mnt_fd = -1;
	snprintf(num[0], sizeof(num[0]), "%d", dev_fd);
	snprintf(num[1], sizeof(num[1]), "%u", (unsigned)o->user_id);
	snprintf(num[2], sizeof(num[2]), "%u", (unsigned)o->group_id);
	snprintf(num[3], sizeof(num[3]), "%u", FSRV_READ_MAX);
	fs = fsopen("fuse", FSOPEN_CLOEXEC);
	if (fs < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "source", "capbroker", 0) != 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "subtype", "capbroker", 0) != 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "fd", num[0], 0) != 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "rootmode", "40000", 0) != 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "user_id", num[1], 0) != 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "group_id", num[2], 0) != 0 ||
	    /* Direct-I/O reads come in pieces that fit a pipe with their
	     * header, so that they can be spliced (ops.c, fsrv_read). */
	    fsconfig(fs, FSCONFIG_SET_STRING, "max_read", num[3], 0) != 0 ||
	    (o->allow_other && fsconfig(fs, FSCONFIG_SET_FLAG, "allow_other", NULL, 0) != 0) ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0) {
		e = fsrv_mount_err(errno);
		goto out;
	}
	if (o->read_only)
		attr |= MOUNT_ATTR_RDONLY;
	m = fsmount(fs, FSMOUNT_CLOEXEC, attr);
	if (m < 0) {
		e = fsrv_mount_err(errno);
		goto out;
	}
	if (o->readahead)
		fsrv_mount_readahead(m);
	*mnt_fd = m;
out:
	if (fs >= 0) {
		int saved = errno;

		close(fs);
		errno = saved;
	}
	return e;
}

int
fsrv_mount_move(int mnt_fd, const char *target)
{
	if (move_mount(mnt_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) != 0)
		return CB_EIO;
	return 0;
}
