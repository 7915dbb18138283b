/*
 * test_broker_chan.c - the per-sandbox request rate (broker/chan.c):
 * a token is charged for each packet received, never for the read that
 * finds the channel empty, and a flood still stalls on an empty bucket.
 * Tokens are counted, not seconds: the refill the bucket got between two
 * looks is exactly what its own clock (bucket_ns) moved, times BRK_RATE.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker/chan.h"
#include "broker/core.h"
#include "policy/policy.h"
#include "tests/tap.h"

static struct brk b;
static struct brk_pol bp;
static struct brk_sbx s;
static int sv[2];

static void
send_ping(uint32_t id)
{
	uint8_t buf[256];
	size_t len = 0;
	struct wire_req r = { .id = id, .op = WIRE_OP_PING };

	if (wire_req_encode(&r, buf, sizeof(buf), &len) != 0 ||
	    send(sv[1], buf, len, 0) != (ssize_t)len)
		abort();
}

/* Tokens taken from s's bucket since (b0, ns0), refill accounted for;
 * negative when the bucket was clipped at its burst meanwhile. */
static double
charged_since(double b0, uint64_t ns0)
{
	if (s.bucket >= BRK_BURST - 1.0)
		return -1.0;
	return b0 + (double)(s.bucket_ns - ns0) * BRK_RATE / 1e9 - s.bucket;
}

static bool
near(double a, double w)
{
	return a > w - 1e-3 && a < w + 1e-3;
}

int
main(void)
{
	struct wire_req q;
	unsigned i, bad = 0, served = 0, reads = 0;
	double b0;
	uint64_t ns0;
	enum brk_chan_got g;
	bool stalled = false;

	if (!(b.base = event_base_new()) || wire_dec_new(WIRE_REQ_MAX, &b.dec) != 0 ||
	    !(b.rbuf = malloc(WIRE_REQ_MAX + 1)) || pol_default(&bp.pol) != 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv) != 0)
		abort();
	s.b = &b;
	s.pol = &bp;
	s.fd = sv[0];
	s.ev_read = event_new(b.base, sv[0], EV_READ | EV_PERSIST, NULL, NULL);
	s.ev_rate = evtimer_new(b.base, brk_chan_rate_resume, &s);
	if (!s.ev_read || !s.ev_rate)
		abort();
	s.aud_bucket = s.aud_bytes = 1e12;	/* the audit budget is not what is tested */
	s.aud_bucket_ns = s.bucket_ns = cb_mono_ns();

	/* An empty channel, read over and over: nothing charged. */
	s.bucket = 100.5;
	b0 = s.bucket;
	ns0 = s.bucket_ns;
	for (i = 0; i < 1000; i++)
		if (brk_chan_recv(&s, sv[0], &q) != BRK_CHAN_STOP)
			bad++;
	T_OK(bad == 0 && !evtimer_pending(s.ev_rate, NULL) && near(charged_since(b0, ns0), 0.0),
	    "1000 reads of an empty channel charge no token (charged %.3f)", charged_since(b0, ns0));

	/* Lock-step: one request, its read, then the read that finds the
	 * channel empty (what the loop does before waiting again).  Exactly
	 * one token per request, and never a stall while tokens remain. */
	s.bucket = 100.5;
	bad = 0;
	for (i = 0; i < 500; i++) {
		b0 = s.bucket;
		ns0 = s.bucket_ns;
		send_ping(i + 1);
		g = brk_chan_recv(&s, sv[0], &q);
		if (g != BRK_CHAN_REQ || q.id != i + 1 || q.op != WIRE_OP_PING)
			bad++;
		if (brk_chan_recv(&s, sv[0], &q) != BRK_CHAN_STOP || evtimer_pending(s.ev_rate, NULL))
			bad++;
		if (charged_since(b0, ns0) >= 0.0 && !near(charged_since(b0, ns0), 1.0)) {
			printf("# request %u charged %.3f tokens\n", i + 1, charged_since(b0, ns0));
			bad++;
		}
		if (s.bucket < 50.0)
			s.bucket = 100.5;	/* as the clock would refill it between requests */
	}
	T_OK(bad == 0, "500 lock-step requests: each served and charged exactly one token");

	/* A flood: the channel is never empty.  Each packet read costs its
	 * token and reading stops (the resume timer armed) once the bucket
	 * is below one, however many packets wait. */
	s.bucket = 20.5;
	b0 = s.bucket;
	ns0 = s.bucket_ns;
	send_ping(1);
	for (i = 0; i < 100000 && !stalled; i++) {
		send_ping(i + 2);
		g = brk_chan_recv(&s, sv[0], &q);
		if (g == BRK_CHAN_REQ)
			reads++;
		else
			stalled = g == BRK_CHAN_STOP && evtimer_pending(s.ev_rate, NULL);
	}
	served = reads;
	T_OK(stalled && s.bucket < 1.0 && near(charged_since(b0, ns0), (double)served),
	    "a flood stalls on an empty bucket after %u requests, each charged one token", served);

	event_free(s.ev_read);
	event_free(s.ev_rate);
	close(sv[0]);
	close(sv[1]);
	pol_free(bp.pol);
	wire_dec_free(b.dec);
	free(b.rbuf);
	event_base_free(b.base);
	return t_done();
}
