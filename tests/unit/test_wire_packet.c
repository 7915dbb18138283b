/*
 * test_wire_packet.c - one packet with descriptors: what arrives, and the
 * two ways a packet can arrive incomplete (MSG_TRUNC, MSG_CTRUNC).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/tap.h"
#include "wire/packet.h"

static int
open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) != -1)
			n++;
	return n;
}

/* More descriptors than a receiver has room for, built by hand as an agent
 * could. */
static void
send_many(int sock, int fd, size_t n)
{
	union {
		char buf[CMSG_SPACE(64 * sizeof(int))];
		struct cmsghdr align;
	} u;
	char b = 'x';
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
		.msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	for (size_t i = 0; i < n; i++)
		memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != 1)
		abort();
}

int
main(void)
{
	int sp[2], pipefd[2], fds[WIRE_PACKET_FDS + 1], base;
	struct wire_packet p;
	char buf[16];
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0 || pipe(pipefd) != 0)
		abort();
	base = open_fds();

	T_OK(wire_packet_send(sp[0], "hello", 5, NULL, 0, 0) == 5, "a packet without descriptors");
	n = wire_packet_recv(sp[1], buf, sizeof(buf), 0, &p);
	T_OK(n == 5 && memcmp(buf, "hello", 5) == 0 && p.nfds == 0 && !p.trunc && !p.ctrunc,
	    "arrives whole, with none");

	fds[0] = pipefd[0];
	fds[1] = pipefd[1];
	T_OK(wire_packet_send(sp[0], "ab", 2, fds, 2, 0) == 2, "a packet with two descriptors");
	n = wire_packet_recv(sp[1], buf, sizeof(buf), 0, &p);
	T_OK(n == 2 && p.nfds == 2 && !p.trunc && !p.ctrunc, "both arrive");
	T_OK(p.nfds == 2 && (fcntl(p.fds[0], F_GETFD) & FD_CLOEXEC) &&
	    (fcntl(p.fds[1], F_GETFD) & FD_CLOEXEC), "close-on-exec");
	T_OK(p.nfds == 2 && write(p.fds[1], "z", 1) == 1 && read(pipefd[0], buf, 1) == 1 &&
	    buf[0] == 'z', "and are the descriptors sent");
	wire_packet_close(&p);
	T_OK(p.nfds == 0 && open_fds() == base, "wire_packet_close closes them all");

	for (int i = 0; i < WIRE_PACKET_FDS + 1; i++)
		fds[i] = pipefd[0];
	errno = 0;
	T_OK(wire_packet_send(sp[0], "x", 1, fds, WIRE_PACKET_FDS + 1, 0) == -1 && errno == EINVAL,
	    "sending more than WIRE_PACKET_FDS is refused");

	T_OK(wire_packet_send(sp[0], "0123456789", 10, NULL, 0, 0) == 10, "a long packet");
	n = wire_packet_recv(sp[1], buf, 4, 0, &p);
	T_OK(n == 4 && p.trunc && !p.ctrunc, "into a short buffer: MSG_TRUNC reported");

	send_many(sp[0], pipefd[0], WIRE_PACKET_FDS + 8);
	n = wire_packet_recv(sp[1], buf, sizeof(buf), 0, &p);
	T_OK(n == 1 && p.ctrunc, "more descriptors than fit: MSG_CTRUNC reported");
	T_OK(p.nfds <= WIRE_PACKET_FDS, "no more than WIRE_PACKET_FDS kept");
	wire_packet_close(&p);
	T_OK(open_fds() == base, "none of them leaks");

	close(sp[0]);
	n = wire_packet_recv(sp[1], buf, sizeof(buf), 0, &p);
	T_OK(n == 0 && p.nfds == 0, "end of stream: 0, no descriptors");
	n = wire_packet_recv(-1, buf, sizeof(buf), 0, &p);
	T_OK(n == -1 && errno == EBADF && p.nfds == 0, "a failed receive: -1 and errno");
	close(sp[1]);
	close(pipefd[0]);
	close(pipefd[1]);
	return t_done();
}
