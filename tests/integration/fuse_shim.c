/*
 * fuse_shim.c - LD_PRELOAD into a capbroker (serve or run) to make its
 * file server's dealings with the kernel slow at chosen points, as on a
 * loaded machine, so that tests can order events without timing them.
 *
 *  - CB_SHIM_RELEASE_MS (871-fs-served-close-at-stop.sh): every
 *    FUSE_RELEASE request the server reads from /dev/fuse is handed to it
 *    that many milliseconds late.  The kernel sends a release when the
 *    agent's last descriptor of a file goes, at the latest when the agent
 *    exits, so the releases of the files open at the agent's end reach the
 *    server after the stop (or never: those still queued when the
 *    sandbox's last mount goes are dropped with the connection).
 *  - CB_SHIM_INVAL_ARM, CB_SHIM_INVAL_MS (872-fs-served-revoke-async.sh):
 *    while the file $CB_SHIM_INVAL_ARM exists, the next page invalidation
 *    the server writes (FUSE_NOTIFY_INVAL_INODE of the pages, offset >= 0)
 *    is written that many milliseconds late (once: the file is removed,
 *    and $CB_SHIM_INVAL_ARM.hit made when the wait begins), as the kernel
 *    dropping the pages of a sandbox holding many cached files would be.
 *  - CB_SHIM_OPEN_ARM (874-fs-served-stop-refused.sh): while the file
 *    $CB_SHIM_OPEN_ARM exists, the next FUSE_OPEN the server reads from
 *    /dev/fuse is handed to it only once $CB_SHIM_OPEN_ARM.hold is gone
 *    (at most 30 s; once: the arm file is removed, and
 *    $CB_SHIM_OPEN_ARM.hit made when the wait begins).  The agent that
 *    opened waits for its answer meanwhile (the kernel sent the request:
 *    not even SIGKILL ends that wait), so the test can stop the sandbox
 *    and then let the server judge the open, as a request that raced the
 *    stop on a loaded machine.
 *
 * Nothing else changes.  Test code, never built into the product.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);

static int
is_dev_fuse(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 10 &&
	    minor(st.st_rdev) == 229;
}

static void
sleep_ms(const char *ms)
{
	long v = atol(ms);
	struct timespec ts = { v / 1000, (v % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* CB_SHIM_OPEN_ARM: an open read while armed waits for the hold to go. */
static void
open_hold(const char *arm)
{
	char hit[4096], hold[4096];
	int h;

	if (unlink(arm) != 0)
		return;
	snprintf(hit, sizeof(hit), "%s.hit", arm);
	snprintf(hold, sizeof(hold), "%s.hold", arm);
	if ((h = open(hit, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0)
		close(h);
	for (int i = 0; i < 3000 && access(hold, F_OK) == 0; i++)
		sleep_ms("10");
}

ssize_t
read(int fd, void *buf, size_t len)
{
	static read_fn real;
	const char *ms = getenv("CB_SHIM_RELEASE_MS"), *arm = getenv("CB_SHIM_OPEN_ARM");
	ssize_t n;

	if (!real)
		real = (read_fn)dlsym(RTLD_NEXT, "read");
	n = real(fd, buf, len);
	if (n < (ssize_t)sizeof(struct fuse_in_header))
		return n;
	if (ms && ((const struct fuse_in_header *)buf)->opcode == FUSE_RELEASE && is_dev_fuse(fd))
		sleep_ms(ms);
	if (arm && ((const struct fuse_in_header *)buf)->opcode == FUSE_OPEN && is_dev_fuse(fd))
		open_hold(arm);
	return n;
}

/* Is iov a page invalidation (FUSE_NOTIFY_INVAL_INODE from offset 0 or
 * more; -1 is the attributes only)? */
static int
is_page_inval(const struct iovec *iov, int n)
{
	const struct fuse_out_header *h;
	const struct fuse_notify_inval_inode_out *o;

	if (n < 2 || iov[0].iov_len < sizeof(*h) || iov[1].iov_len < sizeof(*o))
		return 0;
	h = iov[0].iov_base;
	o = iov[1].iov_base;
	return h->unique == 0 && h->error == FUSE_NOTIFY_INVAL_INODE && o->off >= 0;
}

ssize_t
writev(int fd, const struct iovec *iov, int n)
{
	static writev_fn real;
	const char *arm = getenv("CB_SHIM_INVAL_ARM"), *ms = getenv("CB_SHIM_INVAL_MS");

	if (!real)
		real = (writev_fn)dlsym(RTLD_NEXT, "writev");
	if (arm && ms && is_page_inval(iov, n) && unlink(arm) == 0 && is_dev_fuse(fd)) {
		char hit[4096];
		int h;

		snprintf(hit, sizeof(hit), "%s.hit", arm);
		if ((h = open(hit, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0)
			close(h);
		sleep_ms(ms);
	}
	return real(fd, iov, n);
}
