/*
 * release_shim.c - LD_PRELOAD into a capbroker (serve or run) by
 * 871-fs-served-close-at-stop.sh: every FUSE_RELEASE request the file
 * server reads from /dev/fuse is handed to it $CB_SHIM_RELEASE_MS
 * milliseconds late, as on a machine so loaded that the server thread runs
 * only after the loop has stopped the sandbox.  The kernel sends a release
 * when the agent's last descriptor of a file goes, at the latest when the
 * agent exits, so with the shim the releases of the files open at the
 * agent's end reach the server after the stop, and those still queued when
 * the sandbox's last mount goes are dropped by the kernel (the connection
 * is aborted).  Nothing else changes.  Test code, never built into the
 * product.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

typedef ssize_t (*read_fn)(int, void *, size_t);

static int
is_dev_fuse(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 10 &&
	    minor(st.st_rdev) == 229;
}

ssize_t
read(int fd, void *buf, size_t len)
{
	static read_fn real;
	const char *ms = getenv("CB_SHIM_RELEASE_MS");
	ssize_t n;

	if (!real)
		real = (read_fn)dlsym(RTLD_NEXT, "read");
	n = real(fd, buf, len);
	if (ms && n >= (ssize_t)sizeof(struct fuse_in_header) &&
	    ((const struct fuse_in_header *)buf)->opcode == FUSE_RELEASE && is_dev_fuse(fd)) {
		long v = atol(ms);
		struct timespec ts = { v / 1000, (v % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) != 0)
			;
	}
	return n;
}
