/*
 * capctl_watch.c - `capctl watch`: subscribe to elevation requests and
 * prompt for each (or, with --json, stream them).
 *
 * Trust domain: an administrator's process, at a terminal.  What a request
 * says (its sandbox, command, capability, reason) is shown through
 * ctl_text(), so an agent cannot paint a fake prompt or make one request
 * read as another; an answer is read a byte at a time, and only y, n, s or
 * a number is taken for one.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "client/capctl_int.h"

#define CTL_QUEUE_MAX	64	/* requests shown but not yet answered */
#define CTL_SEEN_MAX	256	/* request ids remembered, so none is queued twice */

struct ctl_watch {
	struct ctl_req q[CTL_QUEUE_MAX];
	size_t n;
	uint64_t seen[CTL_SEEN_MAX];	/* rids already queued (pending + events overlap) */
	size_t nseen;
	bool tty_eof;
	/* The last request shown expired unanswered: the next prompt ignores
	 * answers until quiet_until (mono ns), which were meant for that one
	 * (red team, fourth pass, as at run's tty prompt). */
	bool switched;
	uint64_t quiet_until;
};

#define CTL_QUIET_NS	(1000ULL * 1000 * 1000)

static void
ctl_watch_add(struct ctl *c, struct ctl_watch *w, const struct wire_adm_elev *e)
{
	struct ctl_req q;

	ctl_req_get(e, &q);
	for (size_t i = 0; i < w->nseen && i < CTL_SEEN_MAX; i++)
		if (w->seen[i] == q.rid)
			return;
	w->seen[w->nseen++ % CTL_SEEN_MAX] = q.rid;
	if (c->json) {
		ctl_json(c, ctl_req_json(&q, "request"));
		fflush(stdout);
		return;
	}
	if (w->n == CTL_QUEUE_MAX) {
		printf("capctl: more than %d requests waiting; request %" PRIu64
		    " is left to `capctl pending`\n", CTL_QUEUE_MAX, q.rid);
		return;
	}
	w->q[w->n++] = q;
}

/* Read whatever the broker sent: events join the queue; a reply to
 * want_id (0: none expected) is returned in *reply. */
static int
ctl_watch_pump(struct ctl *c, struct ctl_watch *w, int timeout_ms, uint64_t want_id,
    struct wire_msg *reply, bool *got)
{
	struct wire_msg m;
	struct wire_adm_event ev;
	uint64_t id;
	bool to;
	int r;

	*got = false;
	if ((r = ctl_recv(c, &m, timeout_ms, &to)) != CTL_OK || to)
		return r;
	if ((r = wire_adm_msg_id(&m, &id)) == CB_ENOENT) {
		if (wire_adm_event_get(&m, &ev) != 0) {
			ctl_err("malformed event from the broker");
			return CTL_PROTO;
		}
		if (ev.kind == WIRE_ADM_EV_REQUEST)
			ctl_watch_add(c, w, &ev.req);
		return CTL_OK;
	}
	if (r != 0) {
		ctl_err("malformed reply from the broker");
		return CTL_PROTO;
	}
	if (want_id && id == want_id) {
		*reply = m;
		*got = true;
	}
	return CTL_OK;
}

static void
ctl_watch_show(const struct ctl_req *q)
{
	char t[32];
	uint64_t now = cb_now();

	printf("\nrequest %" PRIu64 " from sandbox ", q->rid);
	ctl_text(stdout, q->sandbox);
	printf("\n  command:    ");
	ctl_text(stdout, q->command);
	printf("\n  capability: ");
	ctl_text(stdout, q->cap);
	printf("\n  for:        %" PRIu64 " s\n  reason:     ", q->ttl);
	if (q->reason[0])
		ctl_reason(stdout, q->reason);
	else
		fputs("(none given)", stdout);
	if (q->broker[0]) {	/* in a cluster: the broker holding the sandbox */
		printf("\n  broker:     ");
		ctl_text(stdout, q->broker);
	}
	printf("\n  asked:      %s (expires in %" PRIu64 " s)\n", ctl_time(q->asked, t, sizeof(t)),
	    q->expires > now ? q->expires - now : 0);
	printf("Approve? [y]es, [n]o, [s] for this session, or a shorter number of seconds: ");
	fflush(stdout);
}

/* One answer line from stdin, waiting at most until the request expires
 * while still taking in new events.  0: a line; 1: expired; 2: EOF. */
static int
ctl_watch_answer(struct ctl *c, struct ctl_watch *w, const struct ctl_req *q, char *line,
    size_t len, int *err)
{
	size_t l = 0;

	*err = CTL_OK;
	for (;;) {
		struct pollfd p[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
			{ .fd = cc_adm_fd(c->adm), .events = POLLIN } };
		uint64_t now = cb_now();
		uint64_t left = q->expires > now ? q->expires - now : 0;
		int timeout = left ? (int)(left < 3600 ? left : 3600) * 1000 + 500 : 0;
		ssize_t n;
		char ch;
		bool got;
		struct wire_msg dummy;

		if (poll(p, 2, timeout) < 0) {
			if (errno == EINTR)
				continue;
			*err = CTL_FAIL;
			return 2;
		}
		if (p[1].revents) {
			if ((*err = ctl_watch_pump(c, w, 0, 0, &dummy, &got)) != CTL_OK)
				return 2;
			continue;
		}
		if (!p[0].revents) {
			if (cb_now() >= q->expires)
				return 1;
			continue;
		}
		/* Byte by byte: what follows the line stays for the next prompt. */
		n = read(STDIN_FILENO, &ch, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return l ? 0 : 2;
		if (ch == '\n') {
			line[l] = '\0';
			if (cb_mono_ns() >= w->quiet_until)
				return 0;
			printf("(ignored: this is another request than the one shown before; "
			    "read it, then answer) ");
			fflush(stdout);
			l = 0;
			continue;
		}
		if (l + 1 < len)
			line[l++] = ch;
		line[l] = '\0';
	}
}

static int
ctl_watch_decide(struct ctl *c, struct ctl_watch *w, const struct ctl_req *q, const char *line)
{
	struct wire_adm_req rq;
	struct wire_adm_rep rp;
	struct wire_msg m;
	unsigned long long secs = 0;
	bool approve, session = false, got = false;
	char *end;
	uint64_t want;
	int r;

	if (strcmp(line, "y") == 0 || strcmp(line, "yes") == 0) {
		approve = true;
	} else if (strcmp(line, "s") == 0 || strcmp(line, "session") == 0) {
		approve = session = true;
	} else if (line[0] >= '1' && line[0] <= '9' && (secs = strtoull(line, &end, 10)) > 0 &&
	    *end == '\0') {
		approve = true;
	} else if (strcmp(line, "n") == 0 || strcmp(line, "no") == 0 || line[0] == '\0') {
		approve = false;
	} else {
		return -1;	/* ask again */
	}
	ctl_begin(c, &rq, approve ? WIRE_ADM_APPROVE : WIRE_ADM_DENY);
	rq.has_rid = true;
	rq.rid = q->rid;
	if (secs)
		rq.ttl = secs;
	if (session)
		rq.session = true;
	if (!approve)
		rq.reason = "refused by the administrator";
	want = cc_adm_id(c->adm);
	if ((r = ctl_send(c, &rq)) != CTL_OK)
		return r;
	while (!got)
		if ((r = ctl_watch_pump(c, w, CTL_TIMEOUT_MS, want, &m, &got)) != CTL_OK)
			return r;
	if (wire_adm_rep_get(&m, rq.cmd, &rp) != 0) {
		ctl_err("malformed reply from the broker");
		return CTL_PROTO;
	}
	if (!isatty(STDIN_FILENO))
		putchar('\n');	/* no echoed answer ended the prompt's line */
	if (!rp.err) {
		printf("%s request %" PRIu64 "%s\n", approve ? "approved" : "denied", q->rid,
		    session ? " for this session" : "");
	} else {
		printf("request %" PRIu64 " not %s: ", q->rid, approve ? "approved" : "denied");
		ctl_text(stdout, rp.reason);
		putchar('\n');
	}
	fflush(stdout);
	return CTL_OK;
}

int
ctl_watch(struct ctl *c, int argc, char **argv)
{
	static struct ctl_watch w;
	struct wire_adm_req rq;
	struct wire_adm_rep rp;
	struct wire_msg m;
	int r;

	(void)argv;
	if (argc > 1)
		return ctl_usage("watch takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	/* Watch first, then list what is already pending: a request made
	 * in between shows in both and is queued once. */
	ctl_begin(c, &rq, WIRE_ADM_WATCH);
	if ((r = ctl_call(c, &rq, &rp)) != CTL_OK)
		return r;
	for (uint64_t offset = 0, more = 1; more;) {
		ctl_begin(c, &rq, WIRE_ADM_PENDING);
		rq.offset = offset;
		if ((r = ctl_call(c, &rq, &rp)) != CTL_OK)
			return r;
		for (size_t i = 0; i < rp.nrequests; i++)
			ctl_watch_add(c, &w, &rp.requests[i]);
		more = rp.more && rp.nrequests > 0;
		offset += rp.nrequests;
	}
	if (!c->json) {
		printf("watching for elevation requests (Ctrl-C to stop)\n");
		fflush(stdout);
	}
	for (;;) {
		bool got;
		struct ctl_req q;
		char line[64];
		int a, err;

		if (c->json || w.n == 0 || w.tty_eof) {
			if ((r = ctl_watch_pump(c, &w, -1, 0, &m, &got)) != CTL_OK)
				return r;
			if (!c->json && w.tty_eof) {
				for (size_t i = 0; i < w.n; i++) {
					printf("\nrequest %" PRIu64 " (no one to ask: stdin is closed)",
					    w.q[i].rid);
				}
				w.n = 0;
				fflush(stdout);
			}
			continue;
		}
		q = w.q[0];
		memmove(&w.q[0], &w.q[1], (w.n - 1) * sizeof(w.q[0]));
		w.n--;
		if (q.expires && q.expires <= cb_now())
			continue;
		/* On a terminal, keys typed for an earlier prompt (a "y" typed
		 * twice, or ahead) must not answer this one, which no one has
		 * read yet: as the tty prompt of `run` (approval.c).  A pipe
		 * keeps what follows a line: a script answers that way. */
		if (isatty(STDIN_FILENO))
			(void)tcflush(STDIN_FILENO, TCIFLUSH);
		w.quiet_until = w.switched && isatty(STDIN_FILENO) ? cb_mono_ns() + CTL_QUIET_NS : 0;
		w.switched = false;
		ctl_watch_show(&q);
		for (;;) {
			a = ctl_watch_answer(c, &w, &q, line, sizeof(line), &err);
			if (err != CTL_OK)
				return err;
			if (a == 1) {
				printf("\n(request %" PRIu64 " expired)\n", q.rid);
				w.switched = true;
				break;
			}
			if (a == 2) {
				printf("\n(stdin closed: request %" PRIu64 " left undecided)\n", q.rid);
				w.tty_eof = true;
				break;
			}
			if ((r = ctl_watch_decide(c, &w, &q, line)) == CTL_OK)
				break;
			if (r > 0)
				return r;
			printf("answer y, n, s or a number of seconds: ");
			fflush(stdout);
		}
		fflush(stdout);
	}
}
