/*
 * approval.c - elevation requests waiting for a human: the pending queue,
 * the decision (admin socket or terminal), expiry, and the grant that an
 * approval mints.
 *
 * Trust domain: broker.  The request's capability was parsed and judged
 * requestable by the policy (ops_tok.c) before it is queued here; the
 * reason and command line are the agent's and reach a terminal only
 * through the one escaper.  An undecided request expires, and expiry
 * means deny.
 */
#include "broker/core.h"
#include "broker/budget.h"
#include "broker/approval.h"
#include "broker/chan.h"
#include "broker/commit.h"
#include "broker/fleet.h"
#include "broker/tokens.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define BRK_TTY_QUIET_NS (1000ULL * 1000 * 1000)	/* answers ignored after a switch */

struct brk_pending {
	struct brk_pending *next;
	uint64_t rid;
	struct brk_sbx *s;
	uint32_t qid;
	struct cap *cap;
	uint64_t ttl, max_ttl, expires_at;
	char reason[ST_TEXT_MAX + 1];
};

static void
brk_pending_free(struct brk_pending *p)
{
	cap_free(p->cap);
	free(p);
}

static void
brk_pending_unlink(struct brk *b, struct brk_pending *p)
{
	for (struct brk_pending **pp = &b->pending; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	if (b->tty_current == p) {
		b->tty_current = NULL;
		b->tty_switched = !b->tty_answering;
	}
	p->s->inflight--;
	brk_sbx_release(p->s);
}

struct brk_decide_arg {
	uint64_t rid;
	const char *by;
	uint64_t now, ttl;
	enum st_scope scope;
	const struct st_token *tok;	/* approve; NULL: deny */
	const char *reason;
};

static int
brk_decide_apply(struct brk *b, void *arg)
{
	struct brk_decide_arg *d = arg;

	if (d->tok == NULL)
		return st_request_deny(b->st, d->rid, d->by, d->now, d->reason ? d->reason : "");
	if (d->rid)
		return st_request_approve(b->st, &(struct st_approval){ .id = d->rid, .by = d->by,
		    .now = d->now, .ttl = d->ttl, .scope = d->scope, .tok = d->tok });
	return st_token_add(b->st, d->tok);
}

/* Deny request rid on record (state and log) through the commit gate;
 * where: the broker of the cluster it was decided on, or NULL. */
static int
brk_deny_request(struct brk *b, uint64_t rid, const char *sandbox, const char *cap,
    const char *by, const char *reason, const char *where)
{
	struct brk_decide_arg da = { .rid = rid, .by = by, .now = st_now(b->st), .reason = reason };
	char detail[ST_TEXT_MAX + BRK_PATH_MAX + 256];
	struct brk_dec d = { .op = "deny", .sandbox = sandbox, .resource = cap, .actor = by,
		.detail = reason, .decision = AUD_DENY, .reason = CB_EDENIED,
		.apply = brk_decide_apply, .arg = &da };

	if (where) {
		snprintf(detail, sizeof(detail), "%s%srequest %llu, decided on broker %s of the cluster",
		    reason ? reason : "", reason && *reason ? "; " : "",
		    (unsigned long long)brk_fleet_rid(b, rid), where);
		d.detail = detail;
	}
	return brk_decide(b, &d);
}

/* Keep s's approval of cap "for this session", approved as token id.
 * Out of memory: not kept (later requests ask a human: never less safe). */
static void
brk_session_add(struct brk_sbx *s, const struct cap *cap, uint64_t ttl, const uint8_t *id)
{
	size_t n = s->nsession;

	if (!(s->session_ids[n] = malloc(CAP_ID_LEN)))
		return;
	if (cap_dup(cap, &s->session_caps[n]) != 0) {
		free(s->session_ids[n]);
		s->session_ids[n] = NULL;
		return;
	}
	memcpy(s->session_ids[n], id, CAP_ID_LEN);
	s->session_nids[n] = 1;
	s->session_ttl[n] = ttl;
	s->nsession++;
}

void
brk_session_drop(struct brk_sbx *s, size_t i)
{
	cap_free(s->session_caps[i]);
	free(s->session_ids[i]);
	for (size_t k = i + 1; k < s->nsession; k++) {
		s->session_caps[k - 1] = s->session_caps[k];
		s->session_ids[k - 1] = s->session_ids[k];
		s->session_nids[k - 1] = s->session_nids[k];
		s->session_ttl[k - 1] = s->session_ttl[k];
	}
	s->nsession--;
	s->session_caps[s->nsession] = NULL;
	s->session_ids[s->nsession] = NULL;
	s->session_nids[s->nsession] = 0;
}

/* Session i granted token id: remembered, so that its revocation ends
 * the approval too.  Out of memory: the approval ends now (it could not
 * be ended by that revocation later). */
static void
brk_session_minted(struct brk_sbx *s, size_t i, const uint8_t *id)
{
	uint8_t *ids = realloc(s->session_ids[i], (s->session_nids[i] + 1) * CAP_ID_LEN);

	if (!ids) {
		brk_session_drop(s, i);
		return;
	}
	memcpy(ids + s->session_nids[i] * CAP_ID_LEN, id, CAP_ID_LEN);
	s->session_ids[i] = ids;
	s->session_nids[i]++;
}

bool
brk_session_live(const struct brk_sbx *s, size_t i)
{
	for (size_t k = 0; k < s->session_nids[i]; k++)
		if (st_is_revoked(s->b->st, s->session_ids[i] + k * CAP_ID_LEN))
			return false;
	return true;
}

int
brk_grant(struct brk_sbx *s, uint32_t qid, const struct brk_grant *g)
{
	struct brk *b = s->b;
	struct cap *cap = g->cap;
	uint64_t ttl = g->ttl;
	const char *by = g->by;
	bool session = g->session;
	struct wire_reply rp = { .id = qid };
	struct st_token rec;
	char *text = NULL, tid[2 * CAP_ID_LEN + 1], detail[BRK_PATH_MAX + 256];
	uint64_t now = cb_now();
	int e;

	/* Every table this grant needs has room, or nothing is minted: no
	 * record is ever dropped while the token goes out. */
	if (s->nheld >= BRK_HELD_MAX || (session && s->nsession >= BRK_SESSION_MAX))
		return CB_EBUSY;
	if ((e = brk_fleet_mint_ok(b, NULL, 0)) != 0 || (e = brk_mint_charge(s)) != 0)
		return e;
	/* A session's later grants are children of the human's approval:
	 * revoking that one revokes them all. */
	if ((e = brk_tok_sign(b, &(struct brk_mint){ .aud = s->id, .caps = &cap, .ncaps = 1,
		.nbf = now, .exp = now + ttl, .elevated = true, .instance = s->instance, .by = by,
		.parent = g->of_session ? s->session_ids[g->of_session - 1] : NULL },
		&text, &rec)) != 0)
		return e;
	snprintf(detail, sizeof(detail), "ttl %llus, scope %s", (unsigned long long)ttl,
	    session ? "session" : "once");
	if (g->where)	/* who decided where (docs/cluster.md) */
		snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail), "; request %llu, "
		    "decided on broker %s of the cluster", (unsigned long long)brk_fleet_rid(b, g->rid),
		    g->where);
	{
		/* The approval is on disk (state and audit, sealed by a signed
		 * checkpoint so that cutting the line after a crash shows)
		 * before anyone learns of it. */
		struct brk_decide_arg da = { .rid = g->rid, .by = by, .now = now, .ttl = ttl,
			.scope = session ? ST_SCOPE_SESSION : ST_SCOPE_ONCE, .tok = &rec };
		struct brk_dec d = { .op = "approve", .sandbox = s->id, .resource = cap->text,
			.tid = rec.id, .actor = by, .detail = detail, .decision = AUD_ALLOW,
			.apply = brk_decide_apply, .arg = &da };

		e = brk_decide(b, &d);
	}
	if (e == 0)	/* in the background; retried while the database is away */
		cb_ignore(brk_fleet_token(b, &rec, NULL, NULL));
	if (e == 0) {
		/* A human approved this for this sandbox instance: the state
		 * recorded it against the instance with the token (rec.instance),
		 * so it dies with it (brk_sbx_close_channel, or the next start),
		 * and a later sandbox given the same id never inherits it. */
		cap_hex(rec.id, CAP_ID_LEN, tid);
		rp.token = text;
		rp.tid = tid;
		if (brk_held_add(s, text, strlen(text), true, &rp.th) == 0)
			rp.has_th = true;
		/* room checked above; only an allocation failure leaves it out,
		 * and then later requests ask a human again (never less safe) */
		if (session)
			brk_session_add(s, cap, ttl, rec.id);
		else if (g->of_session)
			brk_session_minted(s, g->of_session - 1, rec.id);
		brk_reply(s, &rp, -1);
	}
	free(text);
	free(rec.caps);
	return e;
}

void
brk_pending_add(struct brk_sbx *s, const struct wire_req *q, struct cap **cap, uint64_t ttl,
    uint64_t max_ttl)
{
	struct brk *b = s->b;
	struct brk_pending *p = NULL;
	struct st_request rq;
	size_t mine = 0;
	int e;

	for (struct brk_pending *o = b->pending; o; o = o->next)
		mine += o->s == s;
	/* One agent's flood must not bury everyone else's requests. */
	if (mine >= BRK_PENDING_MAX) {
		brk_deny(s, q, CB_EBUSY, (*cap)->text, NULL, "too many requests already waiting");
		return;
	}
	/* In a cluster a request needs its cluster-wide id, drawn at the
	 * first connection to the database (docs/cluster.md). */
	if (brk_fleet_on(b) && brk_fleet_rid(b, 1) == 0) {
		brk_deny(s, q, CB_ECLUSTER, (*cap)->text, NULL, "this broker has not reached the "
		    "cluster database since it started: no requests yet");
		return;
	}
	memset(&rq, 0, sizeof(rq));
	snprintf(rq.sandbox, sizeof(rq.sandbox), "%s", s->id);
	snprintf(rq.command, sizeof(rq.command), "%s", s->command ? s->command : "");
	snprintf(rq.capability, sizeof(rq.capability), "%s", (*cap)->text);
	snprintf(rq.reason, sizeof(rq.reason), "%s", q->reason ? q->reason : "");
	rq.ttl = ttl;
	rq.asked_at = cb_now();
	rq.expires_at = rq.asked_at + pol_request_expiry(b->pol);
	if ((e = st_request_add(b->st, &rq)) != 0 || !(p = calloc(1, sizeof(*p)))) {
		brk_deny(s, q, e ? e : CB_ENOMEM, (*cap)->text, NULL, NULL);
		return;
	}
	p->rid = rq.id;
	brk_fleet_request(b, &rq);
	p->s = s;
	p->qid = q->id;
	p->cap = *cap;
	*cap = NULL;
	p->ttl = ttl;
	p->max_ttl = max_ttl;
	p->expires_at = rq.expires_at;
	snprintf(p->reason, sizeof(p->reason), "%s", rq.reason);
	p->next = b->pending;
	b->pending = p;
	s->inflight++;
	brk_sbx_hold(s);
	{
		char detail[ST_TEXT_MAX + 128];

		snprintf(detail, sizeof(detail), "request %llu, ttl %llus: %s",
		    (unsigned long long)brk_fleet_rid(b, p->rid), (unsigned long long)ttl, p->reason);
		brk_audit_done(s, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .op = "request", .resource = p->cap->text, .actor = "agent",
		    .detail = detail });
	}
	b->request_arrived(b, p->rid);
	if (b->opts.approve == BRK_APPROVE_TTY && !b->tty_current)
		brk_tty_prompt_next(b);
	if (b->opts.approve == BRK_APPROVE_ADMIN && b->wait_hook)
		b->wait_hook(b->wait_arg, &(struct brk_wait){ .rid = brk_fleet_rid(b, p->rid),
		    .sandbox = s->id, .cap = p->cap->text,
		    .expires_in = (uint64_t)(p->expires_at > rq.asked_at ? p->expires_at - rq.asked_at : 0) });
}

int
brk_pending_decide(struct brk *b, const struct brk_verdict *v)
{
	struct brk_pending *p;
	uint64_t rid = v->rid, ttl = v->ttl;
	const char *by = v->by, *reason = v->reason;
	int e;

	for (p = b->pending; p && p->rid != rid; p = p->next)
		;
	if (!p) {
		struct st_request rq;

		/* Known but no longer waiting (decided, expired, or its sandbox
		 * is gone) versus never heard of. */
		if (st_request_get(b->st, rid, &rq) != 0)
			return CB_ENOENT;
		if (rq.state == ST_REQ_PENDING) {
			e = brk_deny_request(b, rid, rq.sandbox, rq.capability, by, "sandbox is gone",
			    v->where);
			return e ? e : CB_ENOENT;
		}
		return rq.state == ST_REQ_EXPIRED ? CB_EEXPIREDREQ : CB_EEXIST;
	}
	if (v->approve) {
		/* The approver may shorten, never lengthen beyond the policy. */
		if (ttl == 0 || ttl > p->ttl)
			ttl = p->ttl;
		e = brk_grant(p->s, p->qid, &(struct brk_grant){ .cap = p->cap, .ttl = ttl,
		    .rid = rid, .by = by, .session = v->session, .where = v->where });
	} else {
		e = brk_deny_request(b, rid, p->s->id, p->cap->text, by, reason, v->where);
		if (e == 0) {
			char why[300];
			struct wire_reply rp = { .id = p->qid, .err = CB_EDENIED, .reason = why };

			snprintf(why, sizeof(why), "denied by %s%s%s", by, reason && *reason ? ": " : "",
			    reason ? reason : "");
			brk_reply(p->s, &rp, -1);
		}
	}
	if (e == CB_EEXPIREDREQ) {
		struct wire_reply rp = { .id = p->qid, .err = CB_EEXPIREDREQ };

		brk_reply(p->s, &rp, -1);
	}
	if (e == 0 || e == CB_EEXPIREDREQ || e == CB_EEXIST) {
		brk_pending_unlink(b, p);
		brk_pending_free(p);
		if (b->opts.approve == BRK_APPROVE_TTY && !b->tty_current)
			brk_tty_prompt_next(b);
	}
	return e;
}

void
brk_pending_tick(struct brk *b)
{
	uint64_t now = st_now(b->st);
	struct brk_pending *p, *next;
	size_t n;

	if (!b->pending)
		return;
	cb_ignore(st_request_expire(b->st, now, &n));
	for (p = b->pending; p; p = next) {
		next = p->next;
		if (p->expires_at > now)
			continue;
		{
			struct wire_reply rp = { .id = p->qid, .err = CB_EEXPIREDREQ,
				.reason = "no one decided in time; expiry means deny" };

			brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .decision = AUD_DENY,
			    .reason = CB_EEXPIREDREQ, .sandbox = p->s->id, .op = "expire",
			    .resource = p->cap->text, .actor = "broker" });
			brk_reply(p->s, &rp, -1);
			brk_fleet_closed(b, p->rid, true, "broker", "no one decided in time");
		}
		if (b->tty_current == p && b->tty_fd >= 0) {
			const char msg[] = "\n(request expired)\n";

			(void)!write(b->tty_fd, msg, sizeof(msg) - 1);
		}
		brk_pending_unlink(b, p);
		brk_pending_free(p);
	}
	if (b->opts.approve == BRK_APPROVE_TTY && !b->tty_current)
		brk_tty_prompt_next(b);
}

void
brk_pending_drop_sbx(struct brk *b, struct brk_sbx *s)
{
	struct brk_pending *p, *next;

	/* The sandbox is gone: its requests are denied on record and their
	 * hold on it released. */
	for (p = b->pending; p; p = next) {
		next = p->next;
		if (p->s != s)
			continue;
		/* A failure here leaves the request pending in the state; it
		 * lapses at its expiry like any other. */
		cb_ignore(brk_deny_request(b, p->rid, s->id, p->cap->text, "broker", "sandbox is gone",
		    NULL));
		brk_fleet_closed(b, p->rid, false, "broker", "sandbox is gone");
		brk_pending_unlink(b, p);
		brk_pending_free(p);
	}
	if (b->opts.approve == BRK_APPROVE_TTY && !b->tty_current)
		brk_tty_prompt_next(b);
}

/* ---- the terminal prompt (--approve tty) ------------------------------ */

/* In a cluster the terminal's answer is one decision among the cluster's
 * administrators': it goes through the database like theirs (exactly one
 * wins), and is applied here when it comes back (fleet.c). */
static void
brk_tty_cluster(struct brk *b, struct brk_pending *p, const char *line)
{
	struct brk_verdict v = { .rid = brk_fleet_rid(b, p->rid), .by = "tty" };
	char *end;
	unsigned long secs = strtoul(line, &end, 10);

	if (strcmp(line, "y") == 0 || strcmp(line, "yes") == 0) {
		v.approve = true;
	} else if (strcmp(line, "s") == 0 || strcmp(line, "session") == 0) {
		v.approve = v.session = true;
	} else if (line[0] && *end == '\0' && secs > 0) {
		v.approve = true;
		v.ttl = secs;
	} else if (strcmp(line, "n") == 0 || strcmp(line, "no") == 0 || line[0] == '\0') {
		v.reason = "refused at the terminal";
	} else {
		const char again[] = "answer y, n, s or a number of seconds: ";

		(void)!write(b->tty_fd, again, sizeof(again) - 1);
		return;
	}
	if (brk_fleet_decide(b, &v, NULL, NULL) != 0) {
		const char fail[] = "the decision could not be handed to the cluster; try again: ";

		(void)!write(b->tty_fd, fail, sizeof(fail) - 1);
	}
}

static void brk_tty_decide(struct brk *b, struct brk_pending *p, char *line);

static void
brk_tty_read(evutil_socket_t fd, short ev, void *arg)
{
	struct brk *b = arg;
	struct brk_pending *p = b->tty_current;
	char line[64] = "";
	ssize_t n;

	(void)ev;
	n = read(fd, line, sizeof(line) - 1);
	if (n <= 0) {
		event_del(b->ev_tty);
		return;
	}
	line[n] = '\0';
	if (!p)
		return;
	if (cb_mono_ns() < b->tty_quiet_until) {
		const char quiet[] = "(ignored: this is another request than the one shown before; "
		    "read it, then answer) ";

		(void)!write(b->tty_fd, quiet, sizeof(quiet) - 1);
		return;
	}
	b->tty_answering = true;
	brk_tty_decide(b, p, line);
	b->tty_answering = false;
}

/* The terminal's answer line to request p. */
static void
brk_tty_decide(struct brk *b, struct brk_pending *p, char *line)
{
	char *end;
	unsigned long secs;

	line[strcspn(line, "\r\n")] = '\0';
	secs = strtoul(line, &end, 10);
	if (brk_fleet_on(b)) {
		brk_tty_cluster(b, p, line);
		return;
	}
	if (strcmp(line, "y") == 0 || strcmp(line, "yes") == 0)
		cb_ignore(brk_pending_decide(b, &(struct brk_verdict){ .rid = p->rid, .approve = true,
		    .by = "tty" }));
	else if (strcmp(line, "s") == 0 || strcmp(line, "session") == 0) {
		if (brk_pending_decide(b, &(struct brk_verdict){ .rid = p->rid, .approve = true,
		    .session = true, .by = "tty" }) == CB_EBUSY) {
			const char full[] = "this sandbox cannot take more (session approvals or tokens): "
			    "answer y, n or a number of seconds: ";

			(void)!write(b->tty_fd, full, sizeof(full) - 1);
		}
	}
	else if (line[0] && *end == '\0' && secs > 0)
		cb_ignore(brk_pending_decide(b, &(struct brk_verdict){ .rid = p->rid, .approve = true,
		    .ttl = secs, .by = "tty" }));
	else if (strcmp(line, "n") == 0 || strcmp(line, "no") == 0 || line[0] == '\0')
		cb_ignore(brk_pending_decide(b, &(struct brk_verdict){ .rid = p->rid, .by = "tty",
		    .reason = "refused at the terminal" }));
	else {
		const char again[] = "answer y, n, s or a number of seconds: ";

		(void)!write(b->tty_fd, again, sizeof(again) - 1);
	}
}

/* The agent chose its reason and command line: they reach the approver's
 * terminal only through the one escaper (common/text.c), so an agent
 * cannot clear the screen, move the cursor, paint a prompt of its own or
 * reorder what the human reads with bidi controls.  Text too long for the
 * prompt is cut visibly; the reason, free text, at CB_TEXT_SHOW_MAX
 * (cb_text_show), so it cannot wrap into a block of its own. */
static const char *
brk_tty_clean(const char *in, char *out, size_t len)
{
	static const char cut[] = "[...]";

	/* cb_text_esc cuts between escapes, never inside one */
	if (cb_text_esc(out, len, in) >= len && len >= sizeof(cut)) {
		(void)cb_text_esc(out, len - sizeof(cut) + 1, in);
		memcpy(out + strlen(out), cut, sizeof(cut));
	}
	return out;
}

void
brk_tty_prompt_next(struct brk *b)
{
	struct brk_pending *p, *oldest = NULL;
	char msg[CB_ESC_SIZE(ST_TEXT_MAX) + CB_ESC_SIZE(CAP_STR_MAX) + 1536], cmd[512];
	char sid[CB_ESC_SIZE(CAP_AUD_MAX)], why[CB_TEXT_SHOW_SIZE], capt[CB_ESC_SIZE(CAP_STR_MAX)];
	int n;

	if (b->tty_fd < 0 && b->pending) {
		/* Our own open file description: O_NONBLOCK here never touches
		 * the terminal's other users, and a read can never stall the
		 * loop. */
		b->tty_fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
		if (b->tty_fd < 0)
			return;	/* no terminal: requests wait, then expire (deny) */
		b->ev_tty = event_new(b->base, b->tty_fd, EV_READ | EV_PERSIST, brk_tty_read, b);
		if (b->ev_tty)
			event_add(b->ev_tty, NULL);
	}
	for (p = b->pending; p; p = p->next)
		oldest = p;	/* the list is newest first */
	b->tty_current = oldest;
	/* While a question is on the terminal the agents' output is held
	 * back, so an agent cannot draw over the prompt the human reads. */
	if (b->prompt_hook)
		b->prompt_hook(b->prompt_arg, oldest != NULL);
	if (!oldest)
		return;
	/* Keys typed for an earlier prompt must not answer this one, nor,
	 * for a second, keys typed when the request shown went away by
	 * itself (expired, its sandbox gone, decided elsewhere): they were
	 * meant for that one (red team, fourth pass). */
	tcflush(b->tty_fd, TCIFLUSH);
	if (b->tty_switched)
		b->tty_quiet_until = cb_mono_ns() + BRK_TTY_QUIET_NS;
	b->tty_switched = false;
	n = snprintf(msg, sizeof(msg),
	    "\ncapbroker: sandbox %s (%s) asks for\n    %s\n  for %llu s because: %s\n"
	    "Approve? [y]es, [n]o, [s] for this session, or a shorter number of seconds: ",
	    brk_tty_clean(oldest->s->id, sid, sizeof(sid)),
	    brk_tty_clean(oldest->s->command ? oldest->s->command : "", cmd, sizeof(cmd)),
	    brk_tty_clean(oldest->cap->text, capt, sizeof(capt)), (unsigned long long)oldest->ttl,
	    oldest->reason[0] ? cb_text_show(why, sizeof(why), oldest->reason, CB_TEXT_SHOW_MAX) :
	    "(none given)");
	if (n > 0)
		(void)!write(b->tty_fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}
