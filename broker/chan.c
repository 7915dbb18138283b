/*
 * chan.c - a sandbox's channel: reading one packet, the per-sandbox rate,
 * the reply queue, and the reply, deny and audit helpers every handler
 * uses.  The bottom of the broker: it calls no handler.  A decoded request
 * goes back to its caller (dispatch.c); a channel that must close is
 * reported through b->chan_closed (sbx.c).
 *
 * Trust domain: broker.  Every packet on a sandbox channel is hostile.  The
 * rules that keep one agent from hurting the others or the broker:
 *  - one receive buffer of WIRE_REQ_MAX + 1 bytes: a larger packet is seen
 *    truncated (MSG_TRUNC) and refused, never allocated for;
 *  - file descriptors an agent sends are refused by the kernel
 *    (brk_unix_norights), or on a kernel before 6.16 closed unread;
 *  - at most BRK_BATCH packets per wakeup and a token-bucket rate per
 *    sandbox, so a flood stalls only its own channel;
 *  - replies that the agent does not read are queued up to BRK_OUTQ_MAX,
 *    then the channel is closed: the loop never waits for an agent;
 *  - a malformed packet gets an error reply and an audit line; the loop
 *    carries on with the next one.
 */
#include "broker/core.h"
#include "broker/budget.h"
#include "broker/chan.h"

#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct brk_out {
	struct brk_out *next;
	size_t len;
	int fd;
	uint8_t data[];
};

static void
brk_chan_close(struct brk_sbx *s, const char *why)
{
	s->b->chan_closed(s, why);
}

static int
brk_send(int sock, const uint8_t *buf, size_t len, int fd)
{
	return wire_packet_send(sock, buf, len, &fd, fd >= 0 ? 1 : 0,
	    MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static int
brk_queue(struct brk_sbx *s, const uint8_t *buf, size_t len, int fd)
{
	struct brk_out *o;

	if (s->noutq >= BRK_OUTQ_MAX || !(o = malloc(sizeof(*o) + len)))
		return CB_EBUSY;
	o->next = NULL;
	o->len = len;
	o->fd = fd;
	memcpy(o->data, buf, len);
	if (s->outq_tail)
		s->outq_tail->next = o;
	else
		s->outq = o;
	s->outq_tail = o;
	s->noutq++;
	event_add(s->ev_write, NULL);
	return 0;
}

/*
 * The broker's close of a descriptor the agent may hold too is the last
 * one whenever the agent closed its own first, and the last close of a TCP
 * socket with SO_LINGER and unsent data towards a peer that reads nothing
 * waits the linger time the agent set (up to 2^31 s), here on the loop:
 * every sandbox unserved meanwhile.  The agent's copy can be gone within
 * the broker's few system calls between taking or sending the descriptor
 * and closing its own: on one CPU the agent, woken by the reply, runs
 * first (red team: a mediated connect() of a connected socket, closed on
 * its EISCONN, stopped the loop for the linger in 1 of about 40 tries).
 * So the linger is cleared first (the kernel still sends the data after
 * the close, as for any socket without one); ENOTSOCK for anything else.
 * What is left is the window between these two calls, in which the agent
 * would have to set its linger again and drop every copy it has.
 */
void
brk_close_agent(int fd)
{
	static const struct linger none = { 0, 0 };

	if (fd < 0)
		return;
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &none, sizeof(none));
	close(fd);
}

void
brk_reply(struct brk_sbx *s, const struct wire_reply *r, int fd)
{
	struct brk *b = s->b;
	size_t len;
	int e;

	if (s->dead) {
		brk_close_agent(fd);
		return;
	}
	if (wire_reply_encode(r, b->sbuf, WIRE_REPLY_MAX, &len) != 0) {
		struct wire_reply small = { .id = r->id, .err = CB_ETOOBIG };

		brk_close_agent(fd);
		fd = -1;
		if (wire_reply_encode(&small, b->sbuf, WIRE_REPLY_MAX, &len) != 0)
			return;
	}
	if (!s->outq) {
		e = brk_send(s->fd, b->sbuf, len, fd);
		if (e == 0) {
			brk_close_agent(fd);
			return;
		}
		if (e != -EAGAIN && e != -ENOBUFS) {
			brk_close_agent(fd);
			brk_chan_close(s, "send failed");
			return;
		}
	}
	if (brk_queue(s, b->sbuf, len, fd) != 0) {
		brk_close_agent(fd);
		brk_chan_close(s, "agent does not read its replies");
	}
}

void
brk_chan_writable(evutil_socket_t sock, short ev, void *arg)
{
	struct brk_sbx *s = arg;

	(void)sock;
	(void)ev;
	while (s->outq) {
		struct brk_out *o = s->outq;
		int e = brk_send(s->fd, o->data, o->len, o->fd);

		if (e == -EAGAIN || e == -ENOBUFS)
			return;	/* still full: EV_PERSIST keeps us waiting */
		brk_close_agent(o->fd);
		s->outq = o->next;
		if (!s->outq)
			s->outq_tail = NULL;
		s->noutq--;
		free(o);
		if (e != 0) {
			brk_chan_close(s, "send failed");
			return;
		}
	}
	event_del(s->ev_write);
}

void
brk_deny(struct brk_sbx *s, const struct wire_req *q, int err, const char *resource,
    const uint8_t *tid, const char *detail)
{
	struct wire_reply r = { .id = q ? q->id : 0, .err = err };
	char reason[512];

	/* The reason the agent reads starts with the error: "not covered
	 * by the token: address 10.0.0.1". */
	if (detail) {
		snprintf(reason, sizeof(reason), "%s: %s", cb_strerror(err), detail);
		r.reason = reason;
	} else if (q && resource) {
		snprintf(reason, sizeof(reason), "%s (%s %s)", cb_strerror(err), wire_op_name(q->op),
		    resource);
		r.reason = reason;
	}
	brk_budget_deny(s, err, q ? wire_op_name(q->op) : "frame", resource, tid, detail);
	brk_reply(s, &r, -1);
}

void
brk_chan_drop_queue(struct brk_sbx *s)
{
	while (s->outq) {
		struct brk_out *o = s->outq;

		s->outq = o->next;
		brk_close_agent(o->fd);
		free(o);
	}
	s->outq_tail = NULL;
	s->noutq = 0;
}

/* Refill s's rate bucket and say whether it holds a request's token.
 * Nothing is taken here: the token is taken once a packet has actually
 * been received (brk_chan_recv), never for the read that finds the channel
 * empty - an agent in lock-step (one request, wait for its reply) ends
 * every batch with such a read, and paying for it held it to about 60-80%
 * of BRK_RATE (docs/performance.md).  A flood is still stopped here: it
 * cannot be read while the bucket is below one token. */
static bool
brk_rate_ready(struct brk_sbx *s)
{
	uint64_t now = cb_mono_ns();

	s->bucket += (double)(now - s->bucket_ns) * BRK_RATE / 1e9;
	if (s->bucket > BRK_BURST)
		s->bucket = BRK_BURST;
	s->bucket_ns = now;
	return s->bucket >= 1.0;
}

void
brk_chan_rate_resume(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_sbx *s = arg;

	(void)fd;
	(void)ev;
	if (!s->dead)
		event_add(s->ev_read, NULL);
}

/* A zero-length read on SOCK_SEQPACKET is either an empty packet or the
 * peer's close; POLLHUP tells them apart. */
static bool
brk_peer_closed(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* Read one packet from s's channel (sock) into q.  BRK_CHAN_REQ: q holds
 * a decoded request for the dispatcher.  BRK_CHAN_NEXT: the packet was bad
 * and has been answered; read on.  BRK_CHAN_STOP: nothing more to read now
 * (empty, rate or budget stall, or the channel closed). */
enum brk_chan_got
brk_chan_recv(struct brk_sbx *s, evutil_socket_t sock, struct wire_req *q)
{
	struct brk *b = s->b;
	struct wire_packet pk;
	bool fds;
	ssize_t n;
	int r;
	struct timeval wait;
	char why[256];

	switch (brk_budget_check(s, &wait, why, sizeof(why))) {
	case BRK_BUDGET_OK:
		break;
	case BRK_BUDGET_WAIT:
		event_del(s->ev_read);
		evtimer_add(s->ev_rate, &wait);
		return BRK_CHAN_STOP;
	case BRK_BUDGET_STOP:
		/* Its line before the stop, never after: should the log refuse
		 * it for now (the writer behind a burst), nothing is read
		 * meanwhile and the next check tries again.  A log that failed
		 * for good takes no line at all. */
		if (brk_audit_sbx(s, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .op = "sandbox.channel-closed", .actor = "broker", .detail = why }) != 0 &&
		    aud_healthy(b->aud)) {
			struct timeval again = { 0, 100000 };

			event_del(s->ev_read);
			evtimer_add(s->ev_rate, &again);
			return BRK_CHAN_STOP;
		}
		s->close_noted = true;
		brk_chan_close(s, why);
		return BRK_CHAN_STOP;
	}
	if (!brk_rate_ready(s)) {
		struct timeval tv = { 0, 2000 };

		event_del(s->ev_read);
		evtimer_add(s->ev_rate, &tv);
		return BRK_CHAN_STOP;
	}
	n = wire_packet_recv(sock, b->rbuf, WIRE_REQ_MAX + 1, MSG_DONTWAIT, &pk);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			brk_chan_close(s, "receive failed");
		return BRK_CHAN_STOP;
	}
	/* A packet (or the peer's close) was received: its token. */
	s->bucket -= 1.0;
	/* An agent has no business sending descriptors: close them. */
	fds = pk.nfds > 0;
	for (size_t i = 0; i < pk.nfds; i++)
		brk_close_agent(pk.fds[i]);
	pk.nfds = 0;
	if (n == 0 && !fds && brk_peer_closed(sock)) {
		brk_chan_close(s, "agent closed its channel");
		return BRK_CHAN_STOP;
	}
	s->nreq++;
	if (fds || pk.ctrunc) {
		s->nbad++;
		s->bucket -= BRK_BAD_COST - 1;
		brk_deny(s, NULL, CB_EPROTO, NULL, NULL, "descriptors sent to the broker were closed");
		return BRK_CHAN_NEXT;
	}
	if (pk.trunc) {
		s->nbad++;
		s->bucket -= BRK_BAD_COST - 1;
		brk_deny(s, NULL, CB_ETOOBIG, NULL, NULL, "packet larger than the 64 KiB limit");
		return BRK_CHAN_NEXT;
	}
	r = wire_req_decode(b->dec, b->rbuf, (size_t)n, q);
	if (r != 0) {
		/* Malformed packets cost more of the sandbox's rate: a
		 * well-behaved agent never sends one, and each costs the
		 * broker a denial, an audit record and a reply. */
		s->nbad++;
		s->bucket -= BRK_BAD_COST - 1;
		/* A known id lets the agent match the error to its call. */
		brk_deny(s, q->id ? q : NULL, r, NULL, NULL, q->why);
		return BRK_CHAN_NEXT;
	}
	return BRK_CHAN_REQ;
}

void
brk_chan_batch_end(struct brk_sbx *s)
{
	/* An agent that keeps sending garbage has nothing to say. */
	if (!s->dead && s->nbad > BRK_BAD_MAX)
		brk_chan_close(s, "too many malformed packets");
}
