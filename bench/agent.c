/*
 * agent.c - the benchmark's agent: runs inside a capbroker sandbox (bound in
 * with --ro-bind) and drives the broker through the C client library, the
 * way a production agent would.
 *
 * Trust domain: the agent (sandboxed, untrusted).  It uses only its broker
 * channel ($CAPBROKER_FD) and the fds the broker hands back.
 *
 *   agent lat PLACEMENT CPU PATH DENYPATH NTOK REPS ITERS
 *       Pins itself to CPU (-1: free).  First use of each of the held
 *       tokens 1..NTOK-1 (signature verified then), then REPS batches of
 *       ITERS fs.read opens with token 0 (cached), pings, denied opens of
 *       DENYPATH, and pings without the client library (raw packets).
 *       Batches stay under the per-sandbox burst and are spaced so the
 *       rate limiter never throttles them: this measures the cost of one
 *       operation, not the rate limit (measured apart).
 *   agent tput START_NS DUR_MS REPS GAP_MS PATH
 *       REPS windows of DUR_MS (GAP_MS apart) in a closed loop; prints the
 *       count of each window
 *   agent fair START_NS END_NS PERIOD_US PATH
 *       one open every PERIOD_US; prints p50 and p99 latency
 *   agent flood START_NS END_NS PATH
 *       as fast as the channel takes them: valid requests and malformed
 *       frames, draining (and closing) replies without waiting for them
 *   agent cpu read|ping N PATH           N operations between two quiet
 *                                         seconds (CPU time per op, by thread)
 *   agent raw NAME CPU REPS ITERS         ping without libclient (raw packets)
 *   agent exec NAME N [GAP_MS]            proc.exec of /usr/bin/true N times, GAP_MS
 *                                         apart (default 0: back to back)
 *   agent net MODE PORT REPS ITERS        REPS batches of ITERS TCP connects to
 *                                         127.0.0.1:PORT, each closed at once:
 *                                         MODE mediated (socket + connect(), which
 *                                         the broker serves by seccomp user
 *                                         notification), explicit (cc_net_connect)
 *                                         or host (plain connect, run outside any
 *                                         sandbox); prints ns per connect
 *   agent idle                            holds its channel until killed
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench.h"
#include "client/capclient.h"
#include "wire/wire.h"

static struct cc_conn *
conn(void)
{
	struct cc_conn *c = NULL;
	int r = cc_open_env(&c);

	if (r != 0) {
		fprintf(stderr, "agent: cc_open_env: %s\n", cb_strerror(r));
		exit(69);
	}
	return c;
}

static void
one_read(struct cc_conn *c, const char *path, bool want_ok)
{
	int fd = -1, r = cc_fs_read(c, path, &fd);

	if ((r == 0) != want_ok) {
		fprintf(stderr, "agent: fs.read %s: %s (%s)\n", path, cb_strerror(r),
		    cc_last_reason(c));
		exit(1);
	}
	if (fd >= 0)
		close(fd);
}

static void
one_ping(struct cc_conn *c, const char *path, bool want_ok)
{
	(void)path;
	(void)want_ok;
	if (cc_ping(c) != 0) {
		fprintf(stderr, "agent: ping: %s\n", cc_last_reason(c));
		exit(1);
	}
}

/* REPS batches of ITERS calls; sample = mean ns per call in a batch. */
static void
batches(struct cc_conn *c, const char *name, void (*fn)(struct cc_conn *, const char *, bool),
    const char *path, bool want_ok, int reps, int iters)
{
	double *v = calloc((size_t)reps, sizeof(double));
	/* The broker refills 20 requests per ms (BRK_RATE) up to a burst of
	 * 2000; wait long enough between batches to start each one full. */
	struct timespec gap = { 0, ((long)iters * 1000000L / 20) + 5000000L };

	for (int i = 0; i < 50; i++)
		fn(c, path, want_ok);
	nanosleep(&gap, NULL);
	for (int r = 0; r < reps; r++) {
		uint64_t t0 = bn_now();

		for (int i = 0; i < iters; i++)
			fn(c, path, want_ok);
		v[r] = (double)(bn_now() - t0) / iters;
		nanosleep(&gap, NULL);
	}
	bn_emit(name, "ns", v, (size_t)reps);
	free(v);
}

/*
 * Ping without the client library: a ping request encoded once, then raw
 * send/recv on the channel.  Against capbroker it prices libclient (compare
 * with broker.ping); under tests/escape/launch, whose loop echoes packets,
 * it prices the sandbox boundary (compare with floor.echo).
 */
static int
cmd_raw(const char *name, int cpu, int reps, int iters)
{
	const char *env = getenv(CC_ENV_FD);
	int fd = env ? atoi(env) : -1;
	struct wire_req q = { .id = 1, .op = WIRE_OP_PING };
	uint8_t pkt[64], buf[512];
	size_t len;
	double *v = calloc((size_t)reps, sizeof(double));

	if (fd < 0 || bn_pin(cpu) != 0 || wire_req_encode(&q, pkt, sizeof(pkt), &len) != 0 || !v) {
		fprintf(stderr, "agent: raw set-up failed\n");
		return 1;
	}
	for (int r = -1; r < reps; r++) {
		uint64_t t0 = bn_now();

		for (int i = 0; i < iters; i++) {
			if (send(fd, pkt, len, MSG_NOSIGNAL) < 0 || recv(fd, buf, sizeof(buf), 0) <= 0) {
				fprintf(stderr, "agent: raw: %s\n", strerror(errno));
				return 1;
			}
		}
		if (r >= 0)
			v[r] = (double)(bn_now() - t0) / iters;
		{
			struct timespec gap = { 0, (long)iters * 50000L + 5000000L };

			nanosleep(&gap, NULL);
		}
	}
	bn_emit(name, "ns", v, (size_t)reps);
	free(v);
	return 0;
}

static int
cmd_lat(const char *pl, int cpu, const char *path, const char *deny, int ntok, int reps, int iters)
{
	struct cc_conn *c;
	char name[96];
	double *first = calloc((size_t)ntok, sizeof(double));
	size_t nf = 0;

	if (bn_pin(cpu) != 0) {
		fprintf(stderr, "agent: sched_setaffinity(%d): %s\n", cpu, strerror(errno));
		return 1;
	}
	c = conn();
	/* First use: tokens 1..ntok-1 were granted but never presented, so
	 * the broker verifies each signature now (then caches it). */
	for (int th = 1; th < ntok; th++) {
		uint64_t t0;

		cc_token_use_handle(c, (uint32_t)th);
		t0 = bn_now();
		one_read(c, path, true);
		first[nf++] = (double)(bn_now() - t0);
	}
	snprintf(name, sizeof(name), "broker.first.%s", pl);
	if (nf)
		bn_emit(name, "ns", first, nf);
	cc_token_use_handle(c, 0);
	snprintf(name, sizeof(name), "broker.read.%s", pl);
	batches(c, name, one_read, path, true, reps, iters);
	snprintf(name, sizeof(name), "broker.ping.%s", pl);
	batches(c, name, one_ping, path, true, reps, iters);
	snprintf(name, sizeof(name), "broker.deny.%s", pl);
	batches(c, name, one_read, deny, false, reps, iters / 4);
	cc_close(c);
	free(first);
	snprintf(name, sizeof(name), "broker.rawping.%s", pl);
	return cmd_raw(name, -1, reps, iters);
}

/*
 * N operations (read or ping) in batches under the rate limit, with a
 * second of quiet before and after, so that the driver can read every
 * thread's CPU time (schedstat) around them: CPU per operation, by thread.
 */
static int
cmd_cpu(const char *op, int n, const char *path)
{
	struct cc_conn *c = conn();
	struct timespec quiet = { 1, 0 }, gap = { 0, 55000000 };
	bool ping = strcmp(op, "ping") == 0;

	cc_token_use_handle(c, 0);
	one_read(c, path, true);
	printf("{\"name\":\"cpu.ready\",\"unit\":\"\",\"samples\":[]}\n");
	fflush(stdout);
	nanosleep(&quiet, NULL);
	for (int i = 0; i < n; i++) {
		if (ping)
			one_ping(c, path, true);
		else
			one_read(c, path, true);
		if (i % 1000 == 999)
			nanosleep(&gap, NULL);
	}
	printf("{\"name\":\"cpu.done\",\"unit\":\"\",\"samples\":[]}\n");
	fflush(stdout);
	nanosleep(&quiet, NULL);
	cc_close(c);
	return 0;
}

static int
cmd_tput(uint64_t start, long dur_ms, int reps, long gap_ms, const char *path)
{
	struct cc_conn *c = conn();
	double *v = calloc((size_t)reps, sizeof(double));

	cc_token_use_handle(c, 0);
	one_read(c, path, true);
	for (int r = 0; r < reps; r++) {
		uint64_t t = start + (uint64_t)r * (uint64_t)(dur_ms + gap_ms) * 1000000ull;
		uint64_t end = t + (uint64_t)dur_ms * 1000000ull, n = 0;

		bn_wait_until(t);
		while (bn_wall() < end) {
			one_read(c, path, true);
			n++;
		}
		v[r] = (double)n;
	}
	bn_emit("count", "ops", v, (size_t)reps);
	cc_close(c);
	free(v);
	return 0;
}

static int
cmd_fair(uint64_t start, uint64_t end, long period_us, const char *path)
{
	struct cc_conn *c = conn();
	size_t cap = (size_t)((end - start) / 1000 / (uint64_t)period_us) + 16, n = 0;
	double *v = calloc(cap, sizeof(double)), out[3];
	uint64_t next;

	cc_token_use_handle(c, 0);
	one_read(c, path, true);
	bn_wait_until(start);
	next = bn_wall();
	while (bn_wall() < end && n < cap) {
		uint64_t t0 = bn_now();

		one_read(c, path, true);
		v[n++] = (double)(bn_now() - t0);
		next += (uint64_t)period_us * 1000;
		bn_wait_until(next);
	}
	qsort(v, n, sizeof(double), bn_cmp_double);
	out[0] = bn_pct(v, n, 50);
	out[1] = bn_pct(v, n, 99);
	out[2] = (double)n;
	bn_emit("fair", "ns", out, 3);	/* p50, p99, count */
	cc_close(c);
	free(v);
	return 0;
}

/* Drain whatever replies are there; their fds are closed unread. */
static uint64_t
drain(int fd, bool *closed)
{
	uint8_t buf[4096];
	uint64_t n = 0;

	for (;;) {
		union {
			char b[CMSG_SPACE(8 * sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			.msg_controllen = sizeof(u.b) };
		ssize_t k = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (k < 0)
			return n;
		if (k == 0) {
			*closed = true;
			return n;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				size_t nf = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

				for (size_t j = 0; j < nf; j++) {
					int x;

					memcpy(&x, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
					close(x);
				}
			}
		}
		n++;
	}
}

static int
cmd_flood(uint64_t start, uint64_t end, const char *path)
{
	const char *env = getenv(CC_ENV_FD);
	int fd = env ? atoi(env) : -1;
	uint8_t good[512], bad[3][64];
	size_t glen, blen[3] = { 5, 40, 64 };
	struct wire_req q = { .id = 1, .op = WIRE_OP_FS_READ, .path = path, .has_th = true };
	uint64_t sent = 0, replies = 0, i = 0;
	bool closed = false;
	double out[3];

	if (fd < 0 || wire_req_encode(&q, good, sizeof(good), &glen) != 0) {
		fprintf(stderr, "agent: flood set-up failed\n");
		return 1;
	}
	/* Malformed frames: truncated msgpack, a map with a bogus op, noise. */
	memcpy(bad[0], "\x85\xa2id\x01\xa2", 5);
	memset(bad[1], 0xc1, sizeof(bad[1]));
	for (size_t k = 0; k < sizeof(bad[2]); k++)
		bad[2][k] = (uint8_t)(k * 37 + 11);
	bn_wait_until(start);
	while (!closed && bn_wall() < end) {
		const uint8_t *p = (i % 2) ? good : bad[(i / 2) % 3];
		size_t len = (i % 2) ? glen : blen[(i / 2) % 3];

		if (send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			struct pollfd pf = { .fd = fd, .events = POLLIN | POLLOUT };

			if (errno != EAGAIN && errno != ENOBUFS)
				break;
			poll(&pf, 1, 1);
		} else {
			sent++;
			i++;
		}
		replies += drain(fd, &closed);
	}
	out[0] = (double)sent;
	out[1] = (double)replies;
	out[2] = closed ? 1 : 0;
	bn_emit("flood", "count", out, 3);	/* sent, replies, channel closed by broker */
	return 0;
}

static int
cmd_exec(const char *name, int n, int gap_ms)
{
	struct cc_conn *c = conn();
	const char *argv[] = { "/usr/bin/true", NULL };
	double *v = calloc((size_t)n, sizeof(double));

	for (int i = 0; i < n; i++) {
		struct cc_exec *x = NULL;
		struct timespec gap = { gap_ms / 1000, (long)(gap_ms % 1000) * 1000000L };
		uint64_t t0;
		int r;

		if (gap_ms > 0)
			nanosleep(&gap, NULL);
		t0 = bn_now();
		r = cc_proc_exec(c, argv, 0, &x);

		v[i] = (double)(bn_now() - t0);
		if (r != 0 || x->status != 0) {
			fprintf(stderr, "agent: proc.exec: %s (%s) status %d: %s\n", cb_strerror(r),
			    cc_last_reason(c), x ? x->status : -1, x && x->err ? (const char *)x->err : "");
			return 1;
		}
		cc_exec_free(x);
	}
	bn_emit(name, "ns", v, (size_t)n);
	cc_close(c);
	free(v);
	return 0;
}

/* One connect of MODE; 0 or -1 (reason on stderr). */
static int
net_one(const char *mode, struct cc_conn *c, const struct sockaddr_in *a)
{
	int fd = -1, r;

	if (strcmp(mode, "explicit") == 0) {
		if ((r = cc_net_connect(c, "127.0.0.1", ntohs(a->sin_port), 5000, &fd)) != 0) {
			fprintf(stderr, "agent: net.connect: %s (%s)\n", cb_strerror(r), cc_last_reason(c));
			return -1;
		}
	} else if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(fd, (const struct sockaddr *)a, sizeof(*a)) != 0) {
		fprintf(stderr, "agent: connect: %s\n", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int
cmd_net(const char *mode, int port, int reps, int iters)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct cc_conn *c = strcmp(mode, "explicit") == 0 ? conn() : NULL;
	double *v = calloc((size_t)reps, sizeof(double));

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!v)
		return 1;
	for (int k = 0; k < 50; k++)	/* warm up */
		if (net_one(mode, c, &a) != 0)
			return 1;
	for (int r = 0; r < reps; r++) {
		uint64_t t0 = bn_now();

		for (int i = 0; i < iters; i++)
			if (net_one(mode, c, &a) != 0)
				return 1;
		v[r] = (double)(bn_now() - t0) / iters;
	}
	{
		char name[64];

		snprintf(name, sizeof(name), "net.%s", mode);
		bn_emit(name, "ns", v, (size_t)reps);
	}
	if (c)
		cc_close(c);
	free(v);
	return 0;
}

int
main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 9 && strcmp(argv[1], "lat") == 0)
		return cmd_lat(argv[2], atoi(argv[3]), argv[4], argv[5], atoi(argv[6]),
		    atoi(argv[7]), atoi(argv[8]));
	if (argc == 7 && strcmp(argv[1], "tput") == 0)
		return cmd_tput(strtoull(argv[2], NULL, 10), atol(argv[3]), atoi(argv[4]),
		    atol(argv[5]), argv[6]);
	if (argc == 6 && strcmp(argv[1], "fair") == 0)
		return cmd_fair(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10),
		    atol(argv[4]), argv[5]);
	if (argc == 5 && strcmp(argv[1], "flood") == 0)
		return cmd_flood(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), argv[4]);
	if (argc == 6 && strcmp(argv[1], "raw") == 0)
		return cmd_raw(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	if (argc == 5 && strcmp(argv[1], "cpu") == 0)
		return cmd_cpu(argv[2], atoi(argv[3]), argv[4]);
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "exec") == 0)
		return cmd_exec(argv[2], atoi(argv[3]), argc == 5 ? atoi(argv[4]) : 0);
	if (argc == 6 && strcmp(argv[1], "net") == 0)
		return cmd_net(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	if (argc == 2 && strcmp(argv[1], "idle") == 0) {
		for (;;)
			pause();
	}
	fprintf(stderr, "agent: bad arguments (see bench/agent.c)\n");
	return 64;
}
