/*
 * packet.c - send and receive one packet with descriptors (see packet.h).
 *
 * Runs in the broker on sockets agents write to (hostile), in the sandbox
 * stub and in clients.  The control buffer is sized for WIRE_PACKET_FDS
 * descriptors; every SCM_RIGHTS message in it is read, and descriptors
 * beyond what the caller can take are closed rather than leaked.
 */
#include "wire/packet.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

union wire_cmsg {
	char buf[CMSG_SPACE(WIRE_PACKET_FDS * sizeof(int))];
	struct cmsghdr align;
};

ssize_t
wire_packet_send(int sock, const void *buf, size_t len, const int *fds, size_t nfds, int flags)
{
	union wire_cmsg u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds > WIRE_PACKET_FDS) {
		errno = EINVAL;
		return -1;
	}
	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	return sendmsg(sock, &m, flags);
}

/* Take the descriptors of one SCM_RIGHTS message: keep what fits. */
static void
wire_packet_take(const struct cmsghdr *c, struct wire_packet *p)
{
	size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

	for (size_t j = 0; j < k; j++) {
		int fd;

		memcpy(&fd, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
		if (p->nfds < WIRE_PACKET_FDS) {
			p->fds[p->nfds++] = fd;
		} else {
			close(fd);
			p->ctrunc = true;
		}
	}
}

ssize_t
wire_packet_recv(int sock, void *buf, size_t cap, int flags, struct wire_packet *p)
{
	union wire_cmsg u;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = sizeof(u.buf) };
	ssize_t n;

	memset(p, 0, sizeof(*p));
	n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			wire_packet_take(c, p);
	p->trunc = (m.msg_flags & MSG_TRUNC) != 0;
	p->ctrunc = p->ctrunc || (m.msg_flags & MSG_CTRUNC) != 0;
	return n;
}

void
wire_packet_close(struct wire_packet *p)
{
	for (size_t i = 0; i < p->nfds; i++)
		close(p->fds[i]);
	p->nfds = 0;
}
