/*
 * passthrough.c - FUSE passthrough for trees whose policy opts in
 * (fsrv_cfg.passthrough): after our open, the kernel reads and writes the
 * file's backing fd (ours, opened with the checked flags) itself, without a
 * request, until the agent closes it.  Near host speed; but such an open
 * file outlives its token exactly as a descriptor handed out by capcall
 * does (docs/fsrv.md, "What an open file means after revocation").
 *
 * libfuse 3.14 (Debian 12) predates passthrough: it cannot ask for
 * FUSE_PASSTHROUGH in its INIT reply nor put a backing id in an open reply.
 * So a passthrough tree's session does its I/O through these callbacks
 * (fuse_session_custom_io), which read each request as libfuse would and
 * amend two replies in place: INIT (FUSE_PASSTHROUGH in flags2, the stack
 * depth) when the kernel offered it, and an OPEN or CREATE that
 * fsrv_pt_backing() prepared (FOPEN_PASSTHROUGH and the backing id).
 *
 * Trust domain: broker.  What is parsed here comes from the kernel (the
 * request header and INIT's flags), after a length check; nothing the agent
 * sends is interpreted here (libfuse decodes the rest, as for every tree).
 * Single-threaded per tree: a request is read, handled and answered before
 * the next is read, so the reply being written belongs to cur_unique.
 */
#include "fsrv/srv_int.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

/* The kernel's protocol (7.40), which Debian 12's headers predate. */
#define FSRV_FUSE_INIT 26u
#define FSRV_FUSE_OPEN 14u
#define FSRV_FUSE_CREATE 35u
#define FSRV_INIT_EXT (1u << 30)
#define FSRV_PASSTHROUGH_HI (1u << (37 - 32))	/* FUSE_PASSTHROUGH, in flags2 */
#define FSRV_FOPEN_PASSTHROUGH (1u << 7)
#define FSRV_STACK_DEPTH 2u	/* FILESYSTEM_MAX_STACK_DEPTH: the tree may be on overlayfs */

struct fsrv_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};

#define FSRV_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct fsrv_backing_map)
#define FSRV_DEV_IOC_BACKING_CLOSE _IOW(229, 2, uint32_t)

/* Offsets in the kernel's structures (include/uapi/linux/fuse.h). */
#define IN_HDR_LEN 40u		/* fuse_in_header */
#define IN_OPCODE 4u
#define IN_UNIQUE 8u
#define INIT_IN_FLAGS 12u	/* fuse_init_in, after the header */
#define INIT_IN_FLAGS2 16u
#define INIT_OUT_FLAGS 12u	/* fuse_init_out */
#define INIT_OUT_FLAGS2 32u
#define INIT_OUT_STACK 36u	/* max_stack_depth */
#define INIT_OUT_LEN 64u
#define OUT_UNIQUE 8u		/* fuse_out_header */
#define OUT_ERROR 4u
#define OPEN_OUT_FLAGS 8u	/* fuse_open_out */
#define OPEN_OUT_BACKING 12u
#define OPEN_OUT_LEN 16u

static uint32_t
get32(const void *p, size_t off)
{
	uint32_t v;

	memcpy(&v, (const char *)p + off, sizeof(v));
	return v;
}

static void
put32(void *p, size_t off, uint32_t v)
{
	memcpy((char *)p + off, &v, sizeof(v));
}

static ssize_t
fsrv_pt_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fsrv_tree *t = userdata;
	ssize_t n = read(fd, buf, len);

	if (n >= (ssize_t)IN_HDR_LEN) {
		memcpy(&t->cur_unique, (char *)buf + IN_UNIQUE, sizeof(t->cur_unique));
		t->cur_opcode = get32(buf, IN_OPCODE);
		if (t->cur_opcode == FSRV_FUSE_INIT && n >= (ssize_t)(IN_HDR_LEN + INIT_IN_FLAGS2 + 4))
			t->pt_offered = (get32(buf, IN_HDR_LEN + INIT_IN_FLAGS) & FSRV_INIT_EXT) &&
			    (get32(buf, IN_HDR_LEN + INIT_IN_FLAGS2) & FSRV_PASSTHROUGH_HI);
	}
	return n;
}

static ssize_t
fsrv_pt_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fsrv_tree *t = userdata;
	uint64_t unique = 0;

	/* A notification (unique 0) comes from the notifier thread: it is
	 * written as it is, and nothing of t is touched. */
	if (iov[0].iov_len >= 16)
		memcpy(&unique, (char *)iov[0].iov_base + OUT_UNIQUE, sizeof(unique));
	if (unique == 0)
		return writev(fd, iov, count);
	if (count >= 2 && unique == t->cur_unique && get32(iov[0].iov_base, OUT_ERROR) == 0) {
		if (t->cur_opcode == FSRV_FUSE_INIT && t->cur_opcode == FSRV_FUSE_INIT && t->pt_offered &&
		    iov[1].iov_len >= INIT_OUT_LEN) {
			/* Ask for passthrough, as libfuse 3.17 would. */
			put32(iov[1].iov_base, INIT_OUT_FLAGS,
			    get32(iov[1].iov_base, INIT_OUT_FLAGS) | FSRV_INIT_EXT);
			put32(iov[1].iov_base, INIT_OUT_FLAGS2,
			    get32(iov[1].iov_base, INIT_OUT_FLAGS2) | FSRV_PASSTHROUGH_HI);
			put32(iov[1].iov_base, INIT_OUT_STACK, FSRV_STACK_DEPTH);
			t->pt_on = true;
		} else if (t->pt_reply > 0 &&
		    (t->cur_opcode == FSRV_FUSE_OPEN || t->cur_opcode == FSRV_FUSE_CREATE) &&
		    iov[1].iov_len >= OPEN_OUT_LEN) {
			/* The open reply is the last 16 bytes (CREATE: after
			 * the entry). */
			size_t o = iov[1].iov_len - OPEN_OUT_LEN;

			put32(iov[1].iov_base, o + OPEN_OUT_FLAGS,
			    get32(iov[1].iov_base, o + OPEN_OUT_FLAGS) | FSRV_FOPEN_PASSTHROUGH);
			put32(iov[1].iov_base, o + OPEN_OUT_BACKING, (uint32_t)t->pt_reply);
		}
	}
	t->pt_reply = 0;
	return writev(fd, iov, count);
}

const struct fuse_custom_io fsrv_pt_io = {
	.read = fsrv_pt_read,
	.writev = fsrv_pt_writev,
};

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
