/*
 * hostfs_slow.c - a host FUSE file system (libfuse's high-level API) with
 * two files: "f", read at once, and "slow", whose every read first
 * appends "held" to the file named by HOSTFS_LOG, sleeps HOSTFS_SLEEP
 * seconds, then appends "done": a slow disk, as the broker's file server
 * sees it.  Opens are direct I/O, so that every read of "slow" reaches it
 * (none waits in the kernel behind another's page).  Mounted on the host
 * by tests/integration/904-fs-served-pool-stall.sh and served to
 * sandboxes as their workspace.  Test code, never built into the product.
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char fdata[] = "fast\n";
static const char sdata[] = "slow\n";

static int
h_getattr(const char *p, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (strcmp(p, "/") == 0) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	st->st_mode = S_IFREG | 0644;
	st->st_nlink = 1;
	if (strcmp(p, "/f") == 0)
		st->st_size = (off_t)strlen(fdata);
	else if (strcmp(p, "/slow") == 0)
		st->st_size = (off_t)strlen(sdata);
	else
		return -ENOENT;
	return 0;
}

static int
h_readdir(const char *p, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
	  enum fuse_readdir_flags fl)
{
	(void)off, (void)fi, (void)fl;
	if (strcmp(p, "/") != 0)
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "f", NULL, 0, 0);
	fill(buf, "slow", NULL, 0, 0);
	return 0;
}

static int
h_open(const char *p, struct fuse_file_info *fi)
{
	if (strcmp(p, "/f") != 0 && strcmp(p, "/slow") != 0)
		return -ENOENT;
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EACCES;
	fi->direct_io = 1;
	return 0;
}

static void
h_log(const char *what)
{
	const char *log = getenv("HOSTFS_LOG");
	int fd;

	if (log == NULL || (fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)
		return;
	if (write(fd, what, strlen(what)) < 0)
		(void)0;
	close(fd);
}

static int
h_read(const char *p, char *b, size_t n, off_t o, struct fuse_file_info *fi)
{
	const char *d = strcmp(p, "/slow") == 0 ? sdata : fdata;
	size_t len = strlen(d);

	(void)fi;
	if (d == sdata) {
		const char *s = getenv("HOSTFS_SLEEP");

		h_log("held\n");
		sleep(s ? (unsigned)atoi(s) : 10);
		h_log("done\n");
	}
	if ((size_t)o >= len)
		return 0;
	if (n > len - (size_t)o)
		n = len - (size_t)o;
	memcpy(b, d + o, n);
	return (int)n;
}

static const struct fuse_operations ops = {
	.getattr = h_getattr,
	.readdir = h_readdir,
	.open = h_open,
	.read = h_read,
};

int
main(int argc, char **argv)
{
	return fuse_main(argc, argv, &ops, NULL);
}
