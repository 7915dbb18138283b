/*
 * floor.c - the physical floor the broker is measured against: what a
 * request/response over a SOCK_SEQPACKET socketpair between two processes
 * costs with nothing else in the way.
 *
 * Trust domain: none (a host-side measurement program; no capbroker code).
 *
 *   floor lat echo|open|shape CLIENT_CPU SERVER_CPU ITERS REPS DIR
 *       One client, one server process, 64-byte messages.  echo: the
 *       server sends the message back.  open: the server also opens
 *       DIR/file with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 *       RESOLVE_NO_MAGICLINKS) beneath a directory fd and passes the fd
 *       back with SCM_RIGHTS; the client closes it.  A CPU of -1 leaves
 *       that process unpinned.  Prints REPS samples of ns per round trip.
 *
 *   floor tput echo|open NCLIENTS DURATION_MS REPS DIR
 *       NCLIENTS client processes, each with its own socketpair to one
 *       single-threaded epoll server (the broker's shape), each in a
 *       closed loop for DURATION_MS after a common start.  Prints REPS
 *       samples of round trips per second (all clients together).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"

#define MSG 64
#define RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

static int
open_file(int dirfd)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
		.resolve = RESOLVE };

	return (int)syscall(SYS_openat2, dirfd, "file", &how, sizeof(how));
}

static int
send_fd(int sock, const void *buf, size_t len, int fd)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.b;
		m.msg_controllen = sizeof(u.b);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &m, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* Receive one reply; close the fd it carries.  0 ok, -1 EOF/error. */
static int
recv_reply(int sock, void *buf)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = MSG };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
		.msg_controllen = sizeof(u.b) };
	ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);

	if (n <= 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int fd;

			memcpy(&fd, CMSG_DATA(c), sizeof(int));
			close(fd);
		}
	}
	return 0;
}

/* Serve one request on sock: 0, or -1 when the peer is gone. */
static int
serve_one(int sock, int dirfd, bool open)
{
	char buf[MSG];
	ssize_t n = recv(sock, buf, sizeof(buf), 0);
	int fd = -1, r;

	if (n <= 0)
		return -1;
	if (open && (fd = open_file(dirfd)) < 0)
		die("openat2");
	r = send_fd(sock, buf, (size_t)n, fd);
	if (fd >= 0)
		close(fd);
	return r;
}

/*
 * The broker's system-call shape without the broker: an epoll loop over a
 * non-blocking socket, recvmsg until EAGAIN, openat2, fstat (regular file?),
 * fcntl (clear O_NONBLOCK), sendmsg with the fd, close.  The gap between
 * this and `open` is what the broker's design costs in system calls; the gap
 * between the broker and this is its user-space work (and the audit writer).
 */
static void
serve_shape(int sock, int dirfd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN, .data.fd = sock };

	if (ep < 0 || fcntl(sock, F_SETFL, O_NONBLOCK) != 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, sock, &e) != 0)
		die("shape set-up");
	for (;;) {
		if (epoll_wait(ep, &e, 1, -1) < 0)
			continue;
		for (int i = 0; i < 32; i++) {
			char buf[MSG];
			struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
			union {
				char b[CMSG_SPACE(16 * sizeof(int))];
				struct cmsghdr align;
			} u;
			struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
				.msg_controllen = sizeof(u.b) };
			ssize_t n = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
			struct stat st;
			int fd;

			if (n < 0 && errno == EAGAIN)
				break;
			if (n <= 0)
				return;
			if ((fd = open_file(dirfd)) < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
			    fcntl(fd, F_SETFL, 0) != 0)
				die("shape open");
			iov.iov_len = (size_t)n;
			{
				union {
					char b[CMSG_SPACE(sizeof(int))];
					struct cmsghdr align;
				} v;
				struct msghdr o = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = v.b,
					.msg_controllen = sizeof(v.b) };
				struct cmsghdr *c = CMSG_FIRSTHDR(&o);

				c->cmsg_level = SOL_SOCKET;
				c->cmsg_type = SCM_RIGHTS;
				c->cmsg_len = CMSG_LEN(sizeof(int));
				memcpy(CMSG_DATA(c), &fd, sizeof(int));
				if (sendmsg(sock, &o, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
					return;
			}
			close(fd);
		}
	}
}

static double
ru_ns(const struct rusage *r)
{
	return ((double)r->ru_utime.tv_sec + (double)r->ru_stime.tv_sec) * 1e9 +
	    ((double)r->ru_utime.tv_usec + (double)r->ru_stime.tv_usec) * 1e3;
}

static int
open_dir(const char *dir)
{
	int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (d < 0)
		die(dir);
	return d;
}

static int
cmd_lat(bool open, bool shape, int ccpu, int scpu, long iters, int reps, const char *dir)
{
	int sv[2], dirfd = open_dir(dir), st;
	struct rusage ru0, ru1, ruc;
	char msg[MSG];
	double *v = calloc((size_t)reps, sizeof(double));
	pid_t pid;

	if (!v || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		die("socketpair");
	if ((pid = fork()) < 0)
		die("fork");
	if (pid == 0) {
		close(sv[0]);
		if (bn_pin(scpu) != 0)
			die("sched_setaffinity");
		if (shape)
			serve_shape(sv[1], dirfd);
		else
			while (serve_one(sv[1], dirfd, open) == 0)
				;
		_exit(0);
	}
	close(sv[1]);
	if (bn_pin(ccpu) != 0)
		die("sched_setaffinity");
	memset(msg, 'x', sizeof(msg));
	for (long i = 0; i < iters / 4; i++) {	/* warm up */
		if (send(sv[0], msg, sizeof(msg), 0) < 0 || recv_reply(sv[0], msg) != 0)
			die("warmup");
	}
	getrusage(RUSAGE_SELF, &ru0);
	for (int r = 0; r < reps; r++) {
		uint64_t t0 = bn_now();

		for (long i = 0; i < iters; i++) {
			if (send(sv[0], msg, sizeof(msg), 0) < 0 || recv_reply(sv[0], msg) != 0)
				die("round trip");
		}
		v[r] = (double)(bn_now() - t0) / (double)iters;
	}
	getrusage(RUSAGE_SELF, &ru1);
	close(sv[0]);
	waitpid(pid, &st, 0);
	getrusage(RUSAGE_CHILDREN, &ruc);
	{
		char name[64];
		const char *pl = ccpu < 0 ? "free" : ccpu == scpu ? "onecpu" : "split";
		const char *kind = shape ? "shape" : open ? "open" : "echo";

		snprintf(name, sizeof(name), "floor.%s.%s", kind, pl);
		bn_emit(name, "ns", v, (size_t)reps);
		/* CPU time per round trip on each side (robust against other
		 * load, unlike wall time): the client over the timed part, the
		 * server over its whole life (warm-up included). */
		snprintf(name, sizeof(name), "cpu.floor_%s.%s.client", kind, pl);
		bn_emit1(name, "ns", (ru_ns(&ru1) - ru_ns(&ru0)) / ((double)iters * reps));
		snprintf(name, sizeof(name), "cpu.floor_%s.%s.server", kind, pl);
		bn_emit1(name, "ns", ru_ns(&ruc) / ((double)iters * reps + (double)(iters / 4)));
	}
	free(v);
	return 0;
}

/* The server of tput: one epoll loop over every client's socket. */
static void
tput_server(int *socks, int n, int dirfd, bool open)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), live = n;
	struct epoll_event evs[64];

	if (ep < 0)
		die("epoll_create1");
	for (int i = 0; i < n; i++) {
		struct epoll_event e = { .events = EPOLLIN, .data.fd = socks[i] };

		if (epoll_ctl(ep, EPOLL_CTL_ADD, socks[i], &e) != 0)
			die("epoll_ctl");
	}
	while (live > 0) {
		int k = epoll_wait(ep, evs, 64, -1);

		for (int i = 0; i < k; i++) {
			if (serve_one(evs[i].data.fd, dirfd, open) != 0) {
				epoll_ctl(ep, EPOLL_CTL_DEL, evs[i].data.fd, NULL);
				close(evs[i].data.fd);
				live--;
			}
		}
	}
}

static int
cmd_tput(bool open, int nclients, long dur_ms, int reps, const char *dir)
{
	double *v = calloc((size_t)reps, sizeof(double));
	int dirfd = open_dir(dir);

	if (!v)
		die("calloc");
	for (int r = 0; r < reps; r++) {
		uint64_t *counts = mmap(NULL, sizeof(uint64_t) * (size_t)nclients,
		    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		int *ss = calloc((size_t)nclients, sizeof(int)), st;
		uint64_t start = bn_wall() + 100000000ull + (uint64_t)nclients * 1000000ull;
		uint64_t end = start + (uint64_t)dur_ms * 1000000ull, total = 0;
		pid_t server;

		if (counts == MAP_FAILED || !ss)
			die("mmap");
		for (int i = 0; i < nclients; i++) {
			int sv[2];
			pid_t pid;

			if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
				die("socketpair");
			if ((pid = fork()) < 0)
				die("fork");
			if (pid == 0) {
				char msg[MSG];
				uint64_t c = 0;

				close(sv[1]);
				for (int j = 0; j < i; j++)
					close(ss[j]);
				memset(msg, 'x', sizeof(msg));
				bn_wait_until(start);
				while (bn_wall() < end) {
					if (send(sv[0], msg, sizeof(msg), 0) < 0 ||
					    recv_reply(sv[0], msg) != 0)
						_exit(1);
					c++;
				}
				counts[i] = c;
				_exit(0);
			}
			close(sv[0]);
			ss[i] = sv[1];
		}
		if ((server = fork()) < 0)
			die("fork");
		if (server == 0) {
			tput_server(ss, nclients, dirfd, open);
			_exit(0);
		}
		for (int i = 0; i < nclients; i++)
			close(ss[i]);
		while (wait(&st) > 0)
			;
		for (int i = 0; i < nclients; i++)
			total += counts[i];
		v[r] = (double)total * 1000.0 / (double)dur_ms;
		munmap(counts, sizeof(uint64_t) * (size_t)nclients);
		free(ss);
	}
	{
		char name[64];

		snprintf(name, sizeof(name), "floor.%s.tput.%d", open ? "open" : "echo", nclients);
		bn_emit(name, "ops/s", v, (size_t)reps);
	}
	free(v);
	return 0;
}

int
main(int argc, char **argv)
{
	bool open;

	signal(SIGPIPE, SIG_IGN);
	if (argc < 3)
		goto usage;
	open = strcmp(argv[2], "open") == 0;
	if (strcmp(argv[1], "lat") == 0 && argc == 8)
		return cmd_lat(open, strcmp(argv[2], "shape") == 0, atoi(argv[3]), atoi(argv[4]), atol(argv[5]), atoi(argv[6]),
		    argv[7]);
	if (strcmp(argv[1], "tput") == 0 && argc == 7)
		return cmd_tput(open, atoi(argv[3]), atol(argv[4]), atoi(argv[5]), argv[6]);
usage:
	fprintf(stderr, "usage: floor lat echo|open|shape CCPU SCPU ITERS REPS DIR\n"
	    "       floor tput echo|open NCLIENTS DURATION_MS REPS DIR\n");
	return 64;
}
