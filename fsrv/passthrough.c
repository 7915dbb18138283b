/*
 * passthrough.c - FUSE passthrough for trees whose policy opts in
 * (fsrv_cfg.passthrough): after our open, the kernel reads and writes the
 * file's backing fd (ours, opened with the checked flags) itself, without a
 * request, until the agent closes it.  Near host speed; but such an open
 * file outlives its token exactly as a descriptor handed out by capcall
 * does (docs/fsrv.md, "What an open file means after revocation").
 *
 * It is asked for at INIT (proto.c, when the kernel offers it), and an
 * open's reply carries the backing id made here (FOPEN_PASSTHROUGH).
 *
 * Trust domain: broker.  The fd is ours, opened with the checked flags.
 */
#include "fsrv/srv_int.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

/* The kernel's ioctls (7.40), which Debian 12's headers predate. */
struct fsrv_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};

#define FSRV_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct fsrv_backing_map)
#define FSRV_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

int
fsrv_pt_backing(struct fsrv_tree *t, int fd)
{
	struct fsrv_backing_map m = { .fd = fd };
	int id;

	if (!t->pt_on)
		return 0;
	/* Needs CAP_SYS_ADMIN in the initial namespace: a root broker.  A
	 * refusal leaves the file checked per operation, as without the
	 * opt-in. */
	id = ioctl(t->dev_fd, FSRV_DEV_IOC_BACKING_OPEN, &m);
	return id > 0 ? id : 0;
}

void
fsrv_pt_close(struct fsrv_tree *t, int id)
{
	uint32_t v = (uint32_t)id;

	if (id > 0 && t->dev_fd >= 0 && !t->closed)
		cb_ignore(ioctl(t->dev_fd, FSRV_DEV_IOC_BACKING_CLOSE, &v));
}
