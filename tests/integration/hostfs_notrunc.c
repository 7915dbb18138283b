/*
 * hostfs_notrunc.c - a host FUSE file system (libfuse's high-level API)
 * holding one file, "f", that can be opened, read and written but not
 * truncated: it has no truncate operation, so libfuse answers a size
 * change ENOSYS, as many small FUSE file systems do.  Mounted on the host
 * by tests/integration/875-fs-served-host-enosys.sh and served to a
 * sandbox as its workspace.  Test code, never built into the product.
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fuse.h>
#include <string.h>
#include <sys/stat.h>

static char data[4096] = "hello\n";
static size_t len = 6;

static int
h_getattr(const char *p, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (strcmp(p, "/") == 0) {
		st->st_mode = S_IFDIR | 0777;
		st->st_nlink = 2;
		return 0;
	}
	if (strcmp(p, "/f") != 0)
		return -ENOENT;
	st->st_mode = S_IFREG | 0666;
	st->st_nlink = 1;
	st->st_size = (off_t)len;
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
	return 0;
}

static int
h_open(const char *p, struct fuse_file_info *fi)
{
	(void)fi;
	return strcmp(p, "/f") == 0 ? 0 : -ENOENT;
}

static int
h_read(const char *p, char *b, size_t n, off_t o, struct fuse_file_info *fi)
{
	(void)p, (void)fi;
	if ((size_t)o >= len)
		return 0;
	if (n > len - (size_t)o)
		n = len - (size_t)o;
	memcpy(b, data + o, n);
	return (int)n;
}

static int
h_write(const char *p, const char *b, size_t n, off_t o, struct fuse_file_info *fi)
{
	(void)p, (void)fi;
	if ((size_t)o > sizeof(data) || n > sizeof(data) - (size_t)o)
		return -EFBIG;
	memcpy(data + o, b, n);
	if ((size_t)o + n > len)
		len = (size_t)o + n;
	return (int)n;
}

static const struct fuse_operations ops = {
	.getattr = h_getattr,
	.readdir = h_readdir,
	.open = h_open,
	.read = h_read,
	.write = h_write,
};

int
main(int argc, char **argv)
{
	return fuse_main(argc, argv, &ops, NULL);
}
