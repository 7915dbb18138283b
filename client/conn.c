/*
 * conn.c - the client's channel to its broker: framing, fd passing and
 * matching replies to requests by id.
 *
 * Agent side (inside the sandbox).  The broker is trusted, but a reply is
 * still decoded strictly through wire/ and checked against what we asked:
 * a reply for an id we never sent, a packet that does not fit, garbage, or
 * an fd we did not expect fails the channel cleanly instead of confusing the
 * caller.  Every fd that arrives is either handed to the caller or closed.
 */
#include "client/cc_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How long a call waits for its own reply after one to an unknown id. */
#define CC_STALE_GRACE_MS 1000

_Static_assert(CC_F_CREATE == WIRE_F_CREATE && CC_F_TRUNC == WIRE_F_TRUNC &&
    CC_F_APPEND == WIRE_F_APPEND && CC_F_EXCL == WIRE_F_EXCL, "flag values");
_Static_assert(CC_DATA_MAX == WIRE_DATA_MAX, "data limit");

static void
cc_set_reason(struct cc_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
cc_set_reason(struct cc_conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
}

int
cc_fail(struct cc_conn *c, int err, const char *why)
{
	c->last_err = err;
	cc_set_reason(c, "%s", why ? why : cb_strerror(err));
	return err;
}

/* The channel is unusable from now on; say why once. */
static int
cc_break(struct cc_conn *c, int err, const char *why)
{
	c->broken = true;
	c->last_err = err;
	cc_set_reason(c, "broker channel: %s", why);
	return err;
}

static void
cc_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- opening and closing ------------------------------------------------- */

int
cc_open_fd(int fd, struct cc_conn **out)
{
	struct cc_conn *c = NULL;
	int type = 0, r;
	socklen_t tlen = sizeof(type);
	uint32_t seed;

	*out = NULL;
	if (fd < 0)
		return CB_EINVAL;
	/* Anything but our SEQPACKET channel would frame replies wrongly. */
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_SEQPACKET) {
		r = CB_EINVAL;
		goto out;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		r = CB_ENOMEM;
		goto out;
	}
	c->fd = fd;
	c->timeout_ms = CC_TIMEOUT_MS;
	c->request_timeout_ms = CC_TIMEOUT_REQUEST_MS;
	{
		const char *t = getenv(CC_ENV_TIMEOUT);
		char *end;
		unsigned long v;

		if (t != NULL && *t != '\0') {
			errno = 0;
			v = strtoul(t, &end, 10);
			if (errno == 0 && *end == '\0' && v <= UINT_MAX / 1000)
				c->timeout_ms = (unsigned)v * 1000;
		}
	}
	fd = -1;
	for (size_t i = 0; i < CC_MAX_INFLIGHT; i++)
		c->slots[i].fd = -1;
	if (!(c->tx = malloc(WIRE_REQ_MAX)) || !(c->rx = malloc(WIRE_REPLY_MAX))) {
		r = CB_ENOMEM;
		goto out;
	}
	if ((r = wire_dec_new(WIRE_REPLY_MAX, &c->dec)) != 0)
		goto out;
	/* Ids start at random so that a reply meant for another process
	 * sharing this channel is recognised as not ours. */
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
		seed = (uint32_t)(cb_mono_ns() ^ ((uint64_t)getpid() << 16));
	c->next_id = seed;
	*out = c;
	c = NULL;
	r = 0;
out:
	cc_close(c);
	cc_close_fd(&fd);
	return r;
}

int
cc_open_env(struct cc_conn **out)
{
	const char *s = getenv(CC_ENV_FD);
	char *end = NULL;
	long v;
	int fd;

	*out = NULL;
	if (!s || !*s)
		return CB_ENOENT;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > INT_MAX || !(s[0] >= '0' && s[0] <= '9'))
		return CB_EINVAL;
	/* Our own copy: cc_close() must not take the inherited fd away from
	 * the rest of the agent; close-on-exec so it does not leak further. */
	if ((fd = fcntl((int)v, F_DUPFD_CLOEXEC, 3)) < 0)
		return errno == EBADF ? CB_EINVAL : CB_EIO;
	return cc_open_fd(fd, out);
}

void
cc_close(struct cc_conn *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nslots; i++) {
		cc_close_fd(&c->slots[i].fd);
		free(c->slots[i].pkt);
	}
	if (c->fd >= 0)
		close(c->fd);
	wire_dec_free(c->dec);
	free(c->tx);
	free(c->rx);
	free(c->held);
	free(c->tok);
	free(c);
}

const char *
cc_last_reason(const struct cc_conn *c)
{
	return c->reason;
}

int
cc_last_error(const struct cc_conn *c)
{
	return c->last_err;
}

bool
cc_is_broken(const struct cc_conn *c)
{
	return c->broken;
}

int
cc_token_use(struct cc_conn *c, const char *token)
{
	char *t = NULL;

	if (token && !(t = strdup(token)))
		return cc_fail(c, CB_ENOMEM, NULL);
	free(c->tok);
	c->tok = t;
	c->has_th = false;
	return 0;
}

void
cc_token_use_handle(struct cc_conn *c, uint32_t th)
{
	free(c->tok);
	c->tok = NULL;
	c->has_th = true;
	c->th = th;
}

/* ---- slots ------------------------------------------------------------------ */

static struct cc_slot *
cc_slot_find(struct cc_conn *c, uint32_t id)
{
	for (size_t i = 0; i < c->nslots; i++)
		if (c->slots[i].id == id)
			return &c->slots[i];
	return NULL;
}

/* Remove a slot, keeping the array dense.  Its packet and fd must already
 * have been taken or released. */
static void
cc_slot_drop(struct cc_conn *c, struct cc_slot *s)
{
	size_t i = (size_t)(s - c->slots);

	c->slots[i] = c->slots[--c->nslots];
	c->slots[c->nslots] = (struct cc_slot){ .fd = -1 };
}

static void
cc_slot_release(struct cc_conn *c, struct cc_slot *s)
{
	cc_close_fd(&s->fd);
	free(s->pkt);
	s->pkt = NULL;
	cc_slot_drop(c, s);
}

void
cc_discard(struct cc_conn *c, uint32_t id)
{
	struct cc_slot *s = cc_slot_find(c, id);

	if (!s)
		return;
	if (s->arrived)
		cc_slot_release(c, s);
	else
		s->discard = true;
}

/* ---- sending ------------------------------------------------------------------ */

int
cc_send(struct cc_conn *c, struct wire_req *r, uint32_t *id)
{
	size_t len;
	ssize_t n;
	int err;

	*id = 0;
	if (c->broken)
		return cc_fail(c, CB_ECLOSED, "broker channel closed");
	if (c->nslots == CC_MAX_INFLIGHT)
		return cc_fail(c, CB_EBUSY, "too many requests in flight on this connection");
	/* Never reuse an id that is still in flight (after 2^32 requests). */
	do
		r->id = c->next_id++;
	while (cc_slot_find(c, r->id));
	if (!r->tok && !r->has_th) {
		r->tok = c->tok;
		r->has_th = c->has_th;
		r->th = c->th;
	}
	if ((err = wire_req_encode(r, c->tx, WIRE_REQ_MAX, &len)) != 0)
		return cc_fail(c, err, err == CB_ETOOBIG ?
		    "request larger than the protocol allows" : "request cannot be encoded");
	/* MSG_NOSIGNAL: a broker that went away is an error, not a SIGPIPE. */
	do
		n = send(c->fd, c->tx, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		struct pollfd p = { .fd = c->fd, .events = POLLOUT };

		while (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				break;
			n = send(c->fd, c->tx, len, MSG_NOSIGNAL);
		}
	}
	if (n < 0) {
		err = errno;
		return cc_break(c, (err == EPIPE || err == ECONNRESET) ? CB_ECLOSED : CB_EIO,
		    strerror(err));
	}
	if ((size_t)n != len)
		return cc_break(c, CB_EIO, "short send");
	c->slots[c->nslots++] = (struct cc_slot){ .id = r->id, .fd = -1 };
	*id = r->id;
	return 0;
}

/* ---- receiving ---------------------------------------------------------------- */

/*
 * Waiting for a reply with a deadline takes a poll() before the recvmsg():
 * the socket is shared by every process of the sandbox, so its own receive
 * timeout (SO_RCVTIMEO) cannot carry one call's deadline.  But on one CPU
 * the reply is often there already when the agent starts to wait (the
 * broker ran as soon as the request woke it), and then a non-blocking
 * recvmsg() alone gets it: one system call fewer.  When replies are mostly
 * not there yet (the agent runs before the broker does: many sandboxes,
 * two CPUs), looking first costs one failed recvmsg() instead; so look first
 * only while it has lately paid (+1 for a reply found, -1 for none, within
 * +-CC_EARLY_MAX; one found brings a negative count back to 0), and
 * otherwise every CC_EARLY_PROBE-th time, to notice when it pays again.
 * (docs/performance.md, "Reading on, looking first")
 */
#define CC_EARLY_MAX 4
#define CC_EARLY_PROBE 16

static bool
cc_look_first(struct cc_conn *c)
{
	return c->early >= 0 || ++c->probe % CC_EARLY_PROBE == 0;
}

static void
cc_looked(struct cc_conn *c, bool there)
{
	/* one reply found waiting is enough to look first again */
	if (there)
		c->early = c->early < 0 ? 0 : c->early < CC_EARLY_MAX ? c->early + 1 : CC_EARLY_MAX;
	else if (c->early > -CC_EARLY_MAX)
		c->early--;
}

/*
 * Receive one packet into c->rx.  *fd gets the one fd that came with it (or
 * -1); any further fds are closed here.  Truncated packets and truncated
 * control data fail the channel: we cannot know which request they answer.
 * Without wait, CB_EBUSY (the channel intact) when no packet is waiting.
 */
static int
cc_recv_packet(struct cc_conn *c, size_t *len, int *fd, bool wait)
{
	struct wire_packet pk;
	ssize_t n;
	int r = 0;
	bool look = wait && c->deadline != 0 && cc_look_first(c);

	*fd = -1;
	*len = 0;
	for (;;) {
		if (wait && c->deadline != 0 && !look) {
			/* wait for the reply at most until the call's deadline */
			struct timespec now;
			struct pollfd p = { .fd = c->fd, .events = POLLIN };
			uint64_t t;
			int pr;

			clock_gettime(CLOCK_MONOTONIC, &now);
			t = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
			if (t >= c->deadline)
				return CB_ETIMEDOUT;
			pr = poll(&p, 1, (int)((c->deadline - t + 999999) / 1000000));
			if (pr == 0)
				return CB_ETIMEDOUT;
			if (pr < 0 && errno != EINTR)
				return cc_break(c, CB_EIO, strerror(errno));
			if (pr < 0)
				continue;
		}
		n = wire_packet_recv(c->fd, c->rx, WIRE_REPLY_MAX, wait && !look ? 0 : MSG_DONTWAIT,
		    &pk);
		if (look && (n >= 0 || errno == EAGAIN || errno == EWOULDBLOCK)) {
			cc_looked(c, n >= 0);
			look = false;
		}
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (wait && c->deadline != 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			continue;	/* looked first: now wait (poll) */
		if (!wait && (errno == EAGAIN || errno == EWOULDBLOCK))
			return CB_EBUSY;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			struct pollfd p = { .fd = c->fd, .events = POLLIN };

			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return cc_break(c, CB_EIO, strerror(errno));
			continue;
		}
		return cc_break(c, errno == ECONNRESET ? CB_ECLOSED : CB_EIO, strerror(errno));
	}
	/* The first descriptor is the reply's; any other is refused below. */
	if (pk.nfds > 0) {
		*fd = pk.fds[0];
		pk.fds[0] = -1;
	}
	if (n == 0 && *fd < 0)
		return cc_break(c, CB_ECLOSED, "the broker closed the channel");
	if (pk.trunc)
		r = cc_break(c, CB_ETOOBIG, "reply larger than the protocol allows");
	else if (pk.ctrunc)
		r = cc_break(c, CB_EPROTO, "reply carried more descriptors than allowed");
	else if (pk.nfds > 1)
		r = cc_break(c, CB_EPROTO, "reply carried more than one descriptor");
	for (size_t i = 1; i < pk.nfds; i++)
		close(pk.fds[i]);
	if (r != 0) {
		cc_close_fd(fd);
		return r;
	}
	*len = (size_t)n;
	return 0;
}

/* Decode a packet (in c->rx or a slot's copy) as the reply it claims to be. */
static int
cc_decode(struct cc_conn *c, const uint8_t *pkt, size_t len, struct wire_reply *rep)
{
	int r = wire_reply_decode(c->dec, pkt, len, rep);

	if (r != 0)
		return cc_break(c, r == CB_ETOOBIG ? CB_ETOOBIG : CB_EPROTO,
		    "malformed reply from the broker");
	return 0;
}

/* The reply to id came earlier and was queued: decode it from its own copy,
 * kept in c->held until the next call so the caller's *rep stays valid. */
static int
cc_take_queued(struct cc_conn *c, struct cc_slot *s, struct wire_reply *rep, int *fd)
{
	size_t len = s->len;

	c->held = s->pkt;
	*fd = s->fd;
	s->pkt = NULL;
	s->fd = -1;
	cc_slot_drop(c, s);
	return cc_decode(c, c->held, len, rep);
}

/* Keep the packet in c->rx (len bytes, with *fd) as slot s's reply, for a
 * later cc_recv(); a discarded request's reply is dropped instead. */
static int
cc_queue(struct cc_conn *c, struct cc_slot *s, size_t len, int *fd)
{
	if (s->discard) {
		cc_close_fd(fd);
		cc_slot_drop(c, s);
		return 0;
	}
	if (!(s->pkt = malloc(len)))
		return cc_fail(c, CB_ENOMEM, NULL);
	memcpy(s->pkt, c->rx, len);
	s->len = len;
	s->fd = *fd;
	s->arrived = true;
	*fd = -1;
	return 0;
}

/* Read packets until the reply to id arrives, queueing the replies to other
 * requests in flight (and dropping those to discarded ones). */
static uint64_t
cc_mono_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int
cc_read_until(struct cc_conn *c, uint32_t id, struct wire_reply *rep, int *fdp)
{
	struct cc_slot *s;
	size_t len;
	uint64_t call_deadline = c->deadline, grace = 0;
	int fd = -1, r;

	for (;;) {
		r = cc_recv_packet(c, &len, &fd, true);
		if (r == CB_ETIMEDOUT && grace != 0 && (call_deadline == 0 || grace < call_deadline)) {
			r = cc_break(c, CB_EPROTO, "reply to a request never sent");
			goto out;
		}
		if (r == CB_ETIMEDOUT) {
			/* The channel stays in step: a late reply to id is
			 * dropped when it comes. */
			cc_discard(c, id);
			r = cc_fail(c, CB_ETIMEDOUT, "the broker did not answer in time (stopped or "
			    "overloaded?)");
			goto out;
		}
		if (r != 0)
			goto out;
		if ((r = cc_decode(c, c->rx, len, rep)) != 0)
			goto out;
		if (!(s = cc_slot_find(c, rep->id)) || s->arrived) {
			/* The channel is shared by the sandbox's processes: this may
			 * be the late reply to a call another process gave up on (a
			 * broker that was stopped).  Drop it and wait a moment for
			 * ours; if ours does not come, the reply was simply wrong. */
			if (grace != 0 || (s != NULL && s->arrived)) {
				r = cc_break(c, CB_EPROTO, "reply to a request never sent");
				goto out;
			}
			cc_close_fd(&fd);
			grace = cc_mono_ns() + CC_STALE_GRACE_MS * 1000000u;
			c->deadline = call_deadline != 0 && call_deadline < grace ? call_deadline : grace;
			continue;
		}
		if (rep->id == id) {
			cc_slot_drop(c, s);
			break;
		}
		if ((r = cc_queue(c, s, len, &fd)) != 0)
			goto out;
	}
	*fdp = fd;
	fd = -1;
	r = 0;
out:
	c->deadline = call_deadline;
	cc_close_fd(&fd);
	return r;
}

int
cc_collect(struct cc_conn *c)
{
	struct wire_reply rep;
	struct cc_slot *s;
	size_t len;
	int fd = -1, r;

	if (c->broken)
		return cc_fail(c, CB_ECLOSED, "broker channel closed");
	for (;;) {
		if ((r = cc_recv_packet(c, &len, &fd, false)) != 0)
			break;
		if ((r = cc_decode(c, c->rx, len, &rep)) != 0)
			break;
		if (!(s = cc_slot_find(c, rep.id)) || s->arrived) {
			r = cc_break(c, CB_EPROTO, "reply to a request never sent");
			break;
		}
		if ((r = cc_queue(c, s, len, &fd)) != 0)
			break;
	}
	cc_close_fd(&fd);
	return r == CB_EBUSY ? 0 : r;
}

bool
cc_arrived(const struct cc_conn *c, uint32_t id)
{
	for (size_t i = 0; i < c->nslots; i++)
		if (c->slots[i].id == id)
			return c->slots[i].arrived;
	return false;
}

int
cc_fd(const struct cc_conn *c)
{
	return c->fd;
}

int
cc_recv(struct cc_conn *c, uint32_t id, struct wire_reply *rep, int *fdp)
{
	struct cc_slot *want;
	int fd = -1, r;

	memset(rep, 0, sizeof(*rep));
	if (fdp)
		*fdp = -1;
	free(c->held);
	c->held = NULL;
	if (!(want = cc_slot_find(c, id)) || want->discard)
		return cc_fail(c, CB_EINVAL, "no request in flight with that id");
	if (!want->arrived && c->broken)
		return cc_fail(c, CB_ECLOSED, "broker channel closed");
	if (want->arrived)
		r = cc_take_queued(c, want, rep, &fd);
	else
		r = cc_read_until(c, id, rep, &fd);
	if (r != 0)
		goto out;
	/* An fd must come exactly when the reply says so.  The channel is
	 * still in step: fail this call only. */
	if (rep->fd != (fd >= 0)) {
		r = cc_fail(c, CB_EPROTO, rep->fd ? "reply promised a descriptor but none came" :
		    "reply carried an unannounced descriptor");
		goto out;
	}
	c->last_err = rep->err;
	if (rep->err)
		cc_set_reason(c, "%s", rep->reason ? rep->reason : cb_strerror(rep->err));
	else
		c->reason[0] = '\0';
	if (fdp) {
		*fdp = fd;
		fd = -1;
	}
	r = 0;
out:
	cc_close_fd(&fd);
	if (r != 0)
		memset(rep, 0, sizeof(*rep));
	return r;
}

void
cc_set_timeout(struct cc_conn *c, unsigned ms, unsigned request_ms)
{
	c->timeout_ms = ms;
	c->request_timeout_ms = request_ms;
}

/* The deadline of a call of op (0: none). */
static uint64_t
cc_deadline(const struct cc_conn *c, const struct wire_req *r)
{
	struct timespec now;
	/* a human decides a request; a tool run without a timeout of its own
	 * may take the tier's whole wall clock */
	uint64_t ms = r->op == WIRE_OP_REQUEST || (r->op == WIRE_OP_PROC_EXEC && r->timeout_ms == 0) ?
	    c->request_timeout_ms : c->timeout_ms;

	if (ms == 0)
		return 0;
	/* an operation with a timeout of its own gets that on top */
	if (r->op == WIRE_OP_NET_CONNECT || r->op == WIRE_OP_PROC_EXEC)
		ms += r->timeout_ms;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec + ms * 1000000u;
}

int
cc_call(struct cc_conn *c, struct wire_req *r, struct wire_reply *rep, int *fdp)
{
	uint32_t id;
	int fd = -1, err;

	if (fdp)
		*fdp = -1;
	if ((err = cc_send(c, r, &id)) != 0)
		return err;
	c->deadline = cc_deadline(c, r);
	err = cc_recv(c, id, rep, &fd);
	c->deadline = 0;
	if (err != 0)
		return err;
	if (rep->err) {
		err = rep->err;
		goto out;
	}
	if (fdp && fd < 0) {
		err = cc_fail(c, CB_EPROTO, "reply lacks the expected descriptor");
		goto out;
	}
	if (fdp) {
		*fdp = fd;
		fd = -1;
	}
	err = 0;
out:
	cc_close_fd(&fd);
	return err;
}
