/*
 * admin.c - the admin socket (STATE/admin.sock): what capctl and
 * `capbroker run --connect` speak.
 *
 * Trust domain: broker.  Whatever the file modes, every connection's peer
 * is checked with SO_PEERCRED: the broker's own uid, or a uid or gid the
 * policy names as an administrator.  Anyone else is audited and dropped
 * before a byte is read.  Messages are msgpack maps (wire/), one per
 * SOCK_SEQPACKET packet, with the same size limits as agent requests, and
 * the command table below is the single list of what an administrator may
 * ask.  An acknowledgement that changes state (revoke, approve, deny,
 * rotate) is sent only after the change is on disk.
 */
#include "broker/core.h"
#include "broker/admin.h"
#include "broker/approval.h"
#include "broker/budget.h"
#include "broker/commit.h"
#include "broker/fleet.h"
#include "broker/fs_served.h"
#include "broker/sbx.h"
#include "broker/tokens.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define BRK_ADMIN_PAGE 200
/* Room kept free in a reply page: one more entry always fits. */
#define ADM_PAGE_ROOM (4 * ST_TEXT_MAX + 2 * CAP_STR_MAX + 1024)
#define ADM_FLUSH_MS 1000	/* status with flush begins no sandbox's queues after this */

struct brk_admin {
	struct brk_admin *next;
	struct brk *b;
	int fd;
	struct event *ev;
	uid_t uid;
	gid_t gid;
	char actor[32];
	bool watch;
	struct brk_sbx *run;		/* the sandbox this `run --connect` owns */
	uint64_t id;			/* id of the message being answered */
	struct adm_wait *wait;		/* a command waiting for the cluster's database */
};

/* A command answered once the cluster's database has it (fleet.c).  The
 * connection is not read meanwhile, so the answer goes to the command that
 * asked; a connection that goes away leaves a NULL here. */
struct adm_wait {
	struct brk *b;
	struct brk_admin *a;
	uint8_t id[CAP_ID_LEN];
	char sandbox[CAP_AUD_MAX + 1];
	char *text;			/* issue: the token, handed out once published */
	uint64_t exp;
	size_t count;			/* revoke: tokens it revokes here, counted when asked */
	char actor[32];			/* revoke: who asked */
	char unconfirmed[CL_WHY_MAX];	/* revoke: live brokers that did not confirm it */
	struct adm_wait *next;		/* revoke: in b->rv_batch */
};

static void brk_admin_drop(struct brk_admin *a);

static void brk_admin_err(struct brk_admin *a, int err, const char *reason);

static int
brk_admin_send(struct brk_admin *a, struct wire_enc *e, const int *fds, size_t nfds)
{
	size_t len;

	if (wire_enc_finish(e, &len) != 0)
		return CB_ETOOBIG;
	/* Administrators read their replies; one that does not is dropped
	 * rather than waited for. */
	if (wire_packet_send(a->fd, e->buf, len, fds, nfds, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return CB_EIO;
	return 0;
}

/* Start the reply rp to the message being answered (wire/admin.h: the
 * envelope, rp's keys up to its list); brk_admin_finish() ends and sends
 * it. */
static void
brk_admin_begin(struct brk_admin *a, struct wire_enc *e, struct wire_adm_rep *rp)
{
	rp->id = a->id;
	wire_enc_init(e, a->b->sbuf, WIRE_REPLY_MAX);
	wire_adm_rep_begin(e, rp);
}

static void
brk_admin_finish(struct brk_admin *a, struct wire_enc *e, const struct wire_adm_rep *rp)
{
	int r;

	wire_adm_rep_end(e, rp);
	r = brk_admin_send(a, e, NULL, 0);
	if (r == CB_ETOOBIG) {
		/* Say so rather than hang up: the caller should page. */
		struct wire_adm_rep big = { .cmd = WIRE_ADM_COUNT, .err = CB_ETOOBIG,
			.reason = "reply too large" };
		struct wire_enc e2;

		brk_admin_begin(a, &e2, &big);
		wire_adm_rep_end(&e2, &big);
		r = brk_admin_send(a, &e2, NULL, 0);
	}
	if (r != 0)
		brk_admin_drop(a);
}

/* A reply of its own command's keys, all set in rp. */
static void
brk_admin_reply(struct brk_admin *a, struct wire_adm_rep *rp)
{
	struct wire_enc e;

	brk_admin_begin(a, &e, rp);
	brk_admin_finish(a, &e, rp);
}

/* A refusal (err, and reason or NULL for cb_strerror(err)), or with err 0
 * the bare ok of a command whose reply has no keys of its own. */
static void
brk_admin_err(struct brk_admin *a, int err, const char *reason)
{
	brk_admin_reply(a, &(struct wire_adm_rep){ .cmd = WIRE_ADM_COUNT, .err = err,
	    .reason = reason });
}

static void
brk_admin_ok(struct brk_admin *a)
{
	brk_admin_err(a, 0, NULL);
}

static struct adm_wait *
adm_wait_begin(struct brk_admin *a)
{
	struct adm_wait *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->b = a->b;
	w->a = a;
	a->wait = w;
	event_del(a->ev);
	return w;
}

/* The connection that waited (reading again), or NULL if it went away.
 * The caller frees w. */
static struct brk_admin *
adm_wait_end(struct adm_wait *w)
{
	struct brk_admin *a = w->a;

	if (a) {
		a->wait = NULL;
		event_add(a->ev, NULL);
	}
	return a;
}

/* ---- commands --------------------------------------------------------- */

/*
 * Before aud_flush for capctl audit: the lines that wait in a queue before
 * the log's own, made log lines now through the path they take anyway (the
 * order and the chain are the log's): what each served file system queued
 * (brk_fss_flush: the loop writes a batch up to 2 ms late, later when
 * busy), then each sandbox's coalesced counts (brk_budget_flush: up to 2 s
 * late) and the counts of lines the log refused, if it takes them now.
 * Bounded: a drain is at most a queue (BRK_FSS_AUDQ_MAX lines), the work a
 * batch does anyway, and no sandbox is begun after ADM_FLUSH_MS (a log
 * that slow refuses lines, which are counted; the rest is written by its
 * own batch and tick, as always).
 */
static void
adm_flush_queued(struct brk *b)
{
	uint64_t until = cb_mono_ns() + (uint64_t)ADM_FLUSH_MS * 1000000u;

	brk_fss_flush_ending(b);
	for (struct brk_sbx *s = b->sbx; s && cb_mono_ns() < until; s = s->next) {
		brk_fss_flush(s);	/* its denials reach the budget first */
		brk_budget_flush(s);
	}
	brk_unlogged_tick(b, false);
}

static void
adm_status(struct brk_admin *a, const struct wire_adm_req *q)
{
	struct brk *b = a->b;
	struct aud_stats as;

	/* capctl audit reads the file next: a decision the agent was already
	 * answered must be in it (the writer is asynchronous, docs/audit.md),
	 * also one still queued before the log.  A failed log is no refusal
	 * here; audit_healthy says so. */
	if (q->flush) {
		adm_flush_queued(b);
		cb_ignore(aud_flush(b->aud));
	}
	aud_stats(b->aud, &as);
	brk_admin_reply(a, &(struct wire_adm_rep){ .cmd = WIRE_ADM_STATUS, .state = b->state_dir,
	    .pid = (uint64_t)getpid(), .sandboxes = b->nsbx, .audit_healthy = aud_healthy(b->aud),
	    .audit_lines = as.lines, .accept_failures = b->accept_failures,
	    .admin_refused = b->admin_refused,
	    .policy = b->opts.policy_path ? b->opts.policy_path : "(built-in)",
	    /* in a cluster (docs/cluster.md) */
	    .cluster = brk_fleet_on(b) ? b->cl_name : NULL, .cluster_fresh = brk_fleet_fresh(b) == 0,
	    .has_cluster = brk_fleet_on(b), .cluster_applied = b->cl_applied });
}

/* In a cluster the token is handed out only once the database has it:
 * then every broker can verify it and hear of its revocation. */
static void
adm_issue_published(void *arg, const struct cl_job *j)
{
	struct adm_wait *w = arg;
	struct brk_admin *a = adm_wait_end(w);
	struct brk_sbx *s;
	char tid[2 * CAP_ID_LEN + 1], why[CL_WHY_MAX + 128];

	if (!a)
		goto out;
	if (j->err) {
		snprintf(why, sizeof(why), "issued here but not published to the cluster, so not "
		    "handed out: %s", j->why);
		brk_admin_err(a, j->err == CB_ECLUSTER ? CB_ECLUSTER : j->err, why);
		goto out;
	}
	if ((s = brk_sbx_find(w->b, w->sandbox)) && !s->dead) {
		uint32_t th;

		cb_ignore(brk_held_add(s, w->text, strlen(w->text), true, &th));
	}
	cap_hex(w->id, CAP_ID_LEN, tid);
	brk_admin_reply(a, &(struct wire_adm_rep){ .cmd = WIRE_ADM_ISSUE, .token = w->text,
	    .tid = tid, .exp = w->exp });
out:
	free(w->text);
	free(w);
}

static void
adm_issue_cluster(struct brk_admin *a, struct brk_sbx *s, struct cap **caps, size_t ncaps,
    const struct wire_adm_req *q, uint64_t now, uint64_t ttl)
{
	struct brk *b = a->b;
	struct adm_wait *w = adm_wait_begin(a);
	int r;

	if (!w) {
		brk_admin_err(a, CB_ENOMEM, NULL);
		return;
	}
	snprintf(w->sandbox, sizeof(w->sandbox), "%s", s->id);
	w->exp = now + ttl;
	if ((r = brk_tok_mint(b, &(struct brk_mint){ .aud = s->id, .caps = caps, .ncaps = ncaps,
		.nbf = now, .exp = now + ttl, .has_uses = q->has_uses, .uses = (uint32_t)q->uses,
		.by = a->actor, .published = adm_issue_published, .published_arg = w },
		&w->text, w->id)) != 0) {
		adm_wait_end(w);
		free(w);
		brk_admin_err(a, r, brk_decide_why(b, r));
	}
}

static void
adm_issue(struct brk_admin *a, const struct wire_adm_req *q)
{
	struct brk *b = a->b;
	struct cap *caps[CAP_MAX_CAPS];
	size_t ncaps = 0;
	uint64_t ttl = q->ttl, now = cb_now();
	struct brk_sbx *s;
	char *text = NULL, tid[2 * CAP_ID_LEN + 1], why[CAP_STR_MAX + 100];
	uint8_t id[CAP_ID_LEN];
	int r;

	if (!q->sandbox || q->ncaps == 0) {
		brk_admin_err(a, CB_EINVAL, "issue needs --sandbox and at least one --cap");
		return;
	}
	if (q->has_uses && (q->uses == 0 || q->uses > UINT32_MAX)) {
		brk_admin_err(a, CB_EINVAL, "--uses must be 1 or more");
		return;
	}
	if (ttl > CB_DURATION_MAX) {
		brk_admin_err(a, CB_EINVAL, "--ttl is at most 31622400 seconds (366 days)");
		return;
	}
	if (!(s = brk_sbx_find(b, q->sandbox)) || s->dead) {
		snprintf(why, sizeof(why), "no running sandbox '%s'", q->sandbox);
		brk_admin_err(a, CB_ENOENT, why);
		return;
	}
	for (size_t i = 0; i < q->ncaps; i++) {
		if ((r = cap_parse(q->caps[i], &caps[ncaps])) != 0) {
			snprintf(why, sizeof(why), "bad capability '%s': %s", q->caps[i], cb_strerror(r));
			brk_admin_err(a, r, why);
			goto out;
		}
		ncaps++;
		/* Not even an administrator issues beyond the ceiling. */
		if (!pol_inst_within_ceiling(s->inst, caps[i])) {
			char what[CAP_STR_MAX + 8];

			snprintf(what, sizeof(what), "'%s'", caps[i]->text);
			brk_ceiling_refusal(s, what, why, sizeof(why));
			brk_admin_err(a, CB_EPOLICY, why);
			goto out;
		}
	}
	if (!ttl)
		ttl = pol_default_ttl(b->pol);
	if (brk_fleet_on(b)) {
		adm_issue_cluster(a, s, caps, ncaps, q, now, ttl);
		goto out;
	}
	if ((r = brk_tok_mint(b, &(struct brk_mint){ .aud = s->id, .caps = caps, .ncaps = ncaps,
		.nbf = now, .exp = now + ttl, .has_uses = q->has_uses, .uses = (uint32_t)q->uses,
		.by = a->actor }, &text, id)) != 0) {
		brk_admin_err(a, r, brk_decide_why(b, r));
		goto out;
	}
	{
		uint32_t th;

		/* The sandbox holds it at once; capcall finds it without --token. */
		cb_ignore(brk_held_add(s, text, strlen(text), true, &th));
	}
	cap_hex(id, CAP_ID_LEN, tid);
	brk_admin_reply(a, &(struct wire_adm_rep){ .cmd = WIRE_ADM_ISSUE, .token = text, .tid = tid,
	    .exp = now + ttl });
out:
	free(text);
	for (size_t i = 0; i < ncaps; i++)
		cap_free(caps[i]);
}

struct brk_revoke_arg {
	const uint8_t *id;
	size_t count;
};

static int
brk_revoke_apply(struct brk *b, void *arg)
{
	struct brk_revoke_arg *ra = arg;

	return st_revoke(b->st, ra->id, st_now(b->st), &ra->count);
}

int
brk_revoke(struct brk *b, const uint8_t id[CAP_ID_LEN], const char *sandbox, const char *actor,
    const char *detail, size_t *count)
{
	struct brk_revoke_arg ra = { .id = id };
	char hex[2 * CAP_ID_LEN + 1];
	struct brk_dec d = { .op = "revoke", .sandbox = sandbox, .resource = hex, .tid = id,
		.actor = actor, .detail = detail, .apply = brk_revoke_apply, .arg = &ra };
	int r;

	cap_hex(id, CAP_ID_LEN, hex);
	/* Durable in the state (then in memory: the next operation of every
	 * sandbox sees it), then in the log, sealed by a signed checkpoint,
	 * before anyone is told. */
	r = brk_decide(b, &d);
	if (count)
		*count = ra.count;
	/* The file servers judge from a snapshot of live grants: renew it
	 * before anyone is told the token is revoked. */
	brk_fss_refresh_all(b);
	return r;
}

/* The kernel has dropped the pages the sandboxes' file servers had cached
 * for the grants lost (brk_fss_when_settled): the revocation is answered
 * now, so that once capctl revoke returns the next read of a file already
 * open reaches the check and fails.  The loop served everyone else
 * meanwhile; this connection was not read. */
static void
adm_revoke_settled(void *arg)
{
	struct adm_wait *w = arg;
	struct brk_admin *a = adm_wait_end(w);

	if (a)
		brk_admin_reply(a, &(struct wire_adm_rep){ .cmd = WIRE_ADM_REVOKE, .count = w->count,
		    .unconfirmed = w->unconfirmed[0] ? w->unconfirmed : NULL });
	free(w);
}

/* Answer w's revocation (count tokens) once the pages are dropped. */
static void
adm_revoke_answer(struct adm_wait *w, size_t count)
{
	w->count = count;
	if (brk_fss_when_settled(w->b, adm_revoke_settled, w) != 0)
		adm_revoke_settled(w);	/* no memory to wait: answer now */
}

/* Committed in the cluster's database (and so, before this ran, applied
 * by every live broker, or they are past their staleness bound): now the
 * decision here, in the state and the log, as without a cluster, with the
 * others this delivery brought (brk_revoke_flush). */
static void
adm_revoke_committed(void *arg, const struct cl_job *j)
{
	struct adm_wait *w = arg;
	struct brk *b = w->b;
	struct brk_admin *a;

	if (j->err) {
		if ((a = adm_wait_end(w)))
			brk_admin_err(a, j->err, j->why);
		free(w);
		return;
	}
	/* A live broker that did not confirm in time refuses every token by
	 * now (its bound passed); the administrator still learns which, to
	 * look at that host (docs/cluster.md, "Revoking"). */
	if (j->unconfirmed)
		snprintf(w->unconfirmed, sizeof(w->unconfirmed), "%s", j->unconfirmed_by[0] ?
		    j->unconfirmed_by : "(unknown: the database link failed while waiting)");
	w->next = b->rv_batch;
	b->rv_batch = w;
	b->rv_n++;
}

#define ADM_REVOKE_BATCH	256	/* revocations decided in one transaction */

/* The records of a batch, in the log, sealed by one checkpoint.  A token
 * minted elsewhere and not heard of here yet (CB_ENOENT) arrives revoked,
 * as the stream would bring it.  0, or CB_EAUDIT (the state change stands). */
static int
adm_revoke_records(struct brk *b, struct st_revoke_item *it, struct adm_wait **ws, size_t n)
{
	char hex[2 * CAP_ID_LEN + 1];
	int e = 0;

	for (size_t i = 0; i < n && e == 0; i++) {
		const struct st_decision *d = &it[i].dec;

		if (it[i].rc == CB_ENOENT) {
			bool ch = false;

			if ((it[i].rc = st_cl_revoke(b->st, it[i].id, st_now(b->st), &ch)) == 0)
				it[i].count = ch;
			cap_hex(it[i].id, CAP_ID_LEN, hex);
			brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "revoke", .resource = hex,
			    .token_id = it[i].id, .actor = ws[i]->actor,
			    .detail = "with its descendants, in the cluster (minted by another broker)" });
			continue;
		}
		e = aud_append(b->aud, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .decision = (enum aud_decision)d->decision, .reason = d->reason, .op = d->op,
		    .resource = d->resource, .token_id = d->token, .actor = d->actor,
		    .detail = d->detail, .dseq = d->dseq });
	}
	return e == 0 ? aud_checkpoint(b->aud) : e;
}

/* Up to ADM_REVOKE_BATCH of b->rv_batch: room, state (one transaction),
 * log (one checkpoint), then the answers: the commit gate's order
 * (commit.c), each revocation its own decision. */
static void
adm_revoke_batch(struct brk *b)
{
	struct adm_wait *ws[ADM_REVOKE_BATCH], *w;
	struct st_revoke_item *it = NULL;
	char why[BRK_PATH_MAX + 256] = "";
	size_t n = 0;
	int r;

	while (n < ADM_REVOKE_BATCH && (w = b->rv_batch)) {
		b->rv_batch = w->next;
		b->rv_n--;
		ws[n++] = w;
	}
	if (!(it = calloc(n, sizeof(*it)))) {
		r = CB_ENOMEM;
		goto answer;
	}
	for (size_t i = 0; i < n / 2; i++) {
		/* oldest first: the list was built newest first */
		w = ws[n - 1 - i];
		ws[n - 1 - i] = ws[i];
		ws[i] = w;
	}
	for (size_t i = 0; i < n; i++) {
		struct st_decision *d = &it[i].dec;

		memcpy(it[i].id, ws[i]->id, CAP_ID_LEN);
		snprintf(d->op, sizeof(d->op), "revoke");
		cap_hex(ws[i]->id, CAP_ID_LEN, d->resource);
		d->has_token = true;
		memcpy(d->token, ws[i]->id, CAP_ID_LEN);
		snprintf(d->actor, sizeof(d->actor), "%s", ws[i]->actor);
		snprintf(d->detail, sizeof(d->detail), "with its descendants, in the cluster%s%s%s",
		    ws[i]->unconfirmed[0] ? "; not confirmed within the staleness bound by broker " : "",
		    ws[i]->unconfirmed, ws[i]->unconfirmed[0] ? " (failing closed)" : "");
	}
	if (!aud_room(b->aud)) {
		r = CB_EAUDIT;
		snprintf(why, sizeof(why), "nothing was changed here: the audit log %s",
		    aud_healthy(b->aud) ? "has no room reserved for the record (disk full?)" :
		    "cannot be written");
		goto answer;
	}
	if ((r = st_revoke_many(b->st, it, n, st_now(b->st))) != 0) {
		snprintf(why, sizeof(why), "nothing was changed here: the state database %s/state.db "
		    "could not be written (%s)", b->state_dir, cb_strerror(r));
		goto answer;
	}
	if ((r = adm_revoke_records(b, it, ws, n)) != 0) {
		r = CB_EAUDIT;
		snprintf(why, sizeof(why), "it took effect in the state, but its audit record could not "
		    "be made durable; the broker refuses operations until the log is repaired, and "
		    "writes the record at its next start");
	}
	/* The file servers judge from a snapshot of live grants: renew it
	 * before anyone is told the token is revoked. */
	brk_fss_refresh_all(b);
answer:
	for (size_t i = 0; i < n; i++) {
		int ri = r ? r : it[i].rc;
		size_t count = it ? it[i].count : 0;
		struct brk_admin *a;

		if (!ri) {
			/* The stream may have applied it here first: count as when asked. */
			adm_revoke_answer(ws[i], count < ws[i]->count ? ws[i]->count : count);
			continue;
		}
		if ((a = adm_wait_end(ws[i])))
			brk_admin_err(a, ri, why[0] ? why : cb_strerror(ri));
		free(ws[i]);
	}
	free(it);
}

void
brk_revoke_flush(struct brk *b)
{
	while (b->rv_batch)
		adm_revoke_batch(b);
}

static void
adm_revoke_cluster(struct brk_admin *a, const uint8_t id[CAP_ID_LEN])
{
	struct cl_job *j = calloc(1, sizeof(*j));
	struct adm_wait *w;
	int r;

	if (!j || !(w = adm_wait_begin(a))) {
		free(j);
		brk_admin_err(a, CB_ENOMEM, NULL);
		return;
	}
	memcpy(w->id, id, CAP_ID_LEN);
	w->count = st_revoke_count(a->b->st, id);
	snprintf(w->actor, sizeof(w->actor), "%s", a->actor);
	j->op = CL_PUT_REVOKE;
	memcpy(j->id, id, CAP_ID_LEN);
	snprintf(j->by, sizeof(j->by), "%s", a->actor);
	j->done = adm_revoke_committed;
	j->arg = w;
	if ((r = brk_fleet_submit(a->b, j)) != 0) {
		adm_wait_end(w);
		free(w);
		brk_admin_err(a, r, "the cluster database has too many writes waiting");
	}
}

static void
adm_revoke(struct brk_admin *a, const struct wire_adm_req *q)
{
	struct brk *b = a->b;
	struct adm_wait *w;
	uint8_t id[CAP_ID_LEN];
	size_t count = 0;
	int r;

	if (!q->tid || cap_unhex(q->tid, id, CAP_ID_LEN) != 0) {
		brk_admin_err(a, CB_EINVAL, "revoke needs a token id (32 hex digits)");
		return;
	}
	/* In a cluster: in the database first, acknowledged only once it
	 * is committed there (docs/cluster.md). */
	if (brk_fleet_on(b)) {
		adm_revoke_cluster(a, id);
		return;
	}
	if ((r = brk_revoke(b, id, NULL, a->actor, "with its descendants", &count)) != 0) {
		brk_admin_err(a, r, r == CB_ENOENT ? "unknown token id" : brk_decide_why(b, r));
		return;
	}
	if (!(w = adm_wait_begin(a))) {
		/* No memory to wait: answered now (the pages go within ms). */
		brk_admin_reply(a, &(struct wire_adm_rep){ .cmd = WIRE_ADM_REVOKE, .count = count });
		return;
	}
	adm_revoke_answer(w, count);
}

/* ---- the cluster's views and decisions (docs/cluster.md) -------------- */

/* A page of a --cluster view, or of the cluster's pending requests, read
 * from the database by the link's thread; the answer goes to the command
 * that asked (its connection is not read meanwhile). */
static void
adm_view_done(void *arg, const struct cl_job *j)
{
	struct adm_wait *w = arg;
	struct brk *b = w->b;
	struct brk_admin *a = adm_wait_end(w);
	struct wire_adm_rep rp = { .cmd = j->op == CL_GET_TOKENS ? WIRE_ADM_LIST :
		j->op == CL_GET_SANDBOXES ? WIRE_ADM_SANDBOXES : WIRE_ADM_PENDING };
	struct wire_enc e;
	size_t i;

	if (!a)
		goto out;
	if (j->err) {
		char why[CL_WHY_MAX + 64];

		snprintf(why, sizeof(why), "the cluster's view: %s", j->why);
		brk_admin_err(a, j->err, why);
		goto out;
	}
	brk_admin_begin(a, &e, &rp);
	for (i = 0; i < j->nrows; i++) {
		if (e.len + ADM_PAGE_ROOM + ST_CAPS_MAX > e.cap)
			break;	/* the rest on the next page: capctl asks from here */
		if (j->op == CL_GET_REQUESTS) {
			const struct cl_req *r = &j->reqs[i];

			wire_adm_elev_put(&e, &(struct wire_adm_elev){ .rid = r->rid, .sandbox = r->sandbox,
			    .command = r->command, .cap = r->cap, .reason = r->reason, .ttl = r->ttl,
			    .asked = r->asked_at, .expires = r->expires_at, .state = "pending",
			    .broker = r->broker });
		} else if (j->op == CL_GET_SANDBOXES) {
			const struct cl_sbx *c = &j->sbxs[i];
			struct brk_sbx *s = strcmp(c->broker, b->cl_name) == 0 ? brk_sbx_find(b, c->id) : NULL;

			/* Ours live; other brokers' as they last published them
			 * with their sandboxes (a second or so old). */
			wire_adm_sbx_put(&e, &(struct wire_adm_sbx){ .id = c->id, .tier = c->tier,
			    .command = c->command, .workspace = c->workspace, .started = c->started,
			    .pid = c->pid, .owner = c->owner,
			    .tokens = s ? s->nheld : c->tokens == UINT64_MAX ? WIRE_ADM_COUNT_UNKNOWN : c->tokens,
			    .requests = s ? s->nreq : c->requests == UINT64_MAX ? WIRE_ADM_COUNT_UNKNOWN :
			    c->requests, .broker = c->broker });
		} else {
			const struct cl_tok *t = &j->toks[i];
			char hex[2 * CAP_ID_LEN + 1], phex[2 * CAP_ID_LEN + 1];

			cap_hex(t->id, CAP_ID_LEN, hex);
			if (t->has_parent)
				cap_hex(t->parent, CAP_ID_LEN, phex);
			/* Revoked as this broker enforces it (the cluster's
			 * revocations, ancestors included); uses are counted
			 * by the broker that minted it, so not shown here. */
			wire_adm_token_put(&e, &(struct wire_adm_token){ .id = hex,
			    .parent = t->has_parent ? phex : NULL, .sandbox = t->sandbox, .caps = t->caps,
			    .nbf = t->nbf, .exp = t->exp, .revoked = st_is_revoked(b->st, t->id),
			    .elevated = t->elevated, .by = t->by, .broker = t->broker });
		}
	}
	rp.more = i < j->nrows || j->more;
	brk_admin_finish(a, &e, &rp);
out:
	free(w);
}

/* 0 when the view was asked for (answered later), else an error to send. */
static int
adm_view_cluster(struct brk_admin *a, const struct wire_adm_req *q, enum cl_op op)
{
	struct cl_job *j;
	struct adm_wait *w;
	int r;

	if (!brk_fleet_on(a->b))
		return CB_EUNSUPPORTED;
	if (!(j = calloc(1, sizeof(*j))) || !(w = adm_wait_begin(a))) {
		free(j);
		return CB_ENOMEM;
	}
	j->op = op;
	j->offset = q->offset;
	if (op == CL_GET_TOKENS && q->sandbox)
		snprintf(j->sandbox, sizeof(j->sandbox), "%s", q->sandbox);
	j->done = adm_view_done;
	j->arg = w;
	if ((r = brk_fleet_submit(a->b, j)) != 0) {
		adm_wait_end(w);
		free(w);
	}
	return r;
}

static void
adm_view_refused(struct brk_admin *a, int r)
{
	brk_admin_err(a, r, r == CB_EUNSUPPORTED ? "--cluster: this broker is not in a cluster" :
	    r == CB_EBUSY ? "the cluster database has too many jobs waiting" : NULL);
}

/* A decision made here on a request of any broker, once its broker
 * applied it (or with why not).  The holder audits the decision itself
 * (approve or deny, naming this broker); this broker audits that its
 * administrator decided a request held elsewhere. */
static void
adm_decide_done(void *arg, const struct cl_job *j)
{
	struct adm_wait *w = arg;
	struct brk *b = w->b;
	struct brk_admin *a = adm_wait_end(w);
	const struct cl_req *r = j->req;
	bool approve = r->state == CL_REQ_APPROVED;

	if (j->err != CB_ENOENT && r->broker[0] && strcmp(r->broker, b->cl_name) != 0) {
		char detail[CL_WHY_MAX + CL_NAME_MAX + 96];

		snprintf(detail, sizeof(detail), "request %llu of broker %s: %s",
		    (unsigned long long)r->rid, r->broker, j->err ? j->why : "decided here, applied there");
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .op = approve ? "cluster.approve" : "cluster.deny", .sandbox = r->sandbox,
		    .resource = r->cap, .actor = r->by, .reason = j->err, .detail = detail });
	}
	if (a) {
		if (j->err)
			brk_admin_err(a, j->err, j->why);
		else
			brk_admin_ok(a);
	}
	free(w);
}

static void
adm_decide_cluster(struct brk_admin *a, const struct wire_adm_req *q, bool approve)
{
	struct brk *b = a->b;
	char why[CL_WHY_MAX + 128];
	struct adm_wait *w;
	int r;

	/* No approvals while the database is away (docs/cluster.md). */
	if (approve && (r = brk_fleet_mint_ok(b, why, sizeof(why))) != 0) {
		brk_admin_err(a, r, why);
		return;
	}
	if (!(w = adm_wait_begin(a))) {
		brk_admin_err(a, CB_ENOMEM, NULL);
		return;
	}
	r = brk_fleet_decide(b, &(struct brk_verdict){ .rid = q->rid, .approve = approve,
	    .ttl = q->ttl, .session = q->session, .by = a->actor, .reason = q->reason },
	    adm_decide_done, w);
	if (r != 0) {
		adm_wait_end(w);
		free(w);
		brk_admin_err(a, r, r == CB_EBUSY ? "the cluster database has too many jobs waiting" : NULL);
	}
}

struct adm_list {
	struct wire_enc *e;
	uint64_t skip, n;
	bool more;
};

static int
adm_list_one(void *arg, const struct st_token *t)
{
	struct adm_list *l = arg;
	char hex[2 * CAP_ID_LEN + 1], phex[2 * CAP_ID_LEN + 1];

	if (l->skip) {
		l->skip--;
		return 0;
	}
	if (l->n == BRK_ADMIN_PAGE || l->e->len + ADM_PAGE_ROOM + ST_CAPS_MAX > l->e->cap) {
		l->more = true;
		return 1;
	}
	cap_hex(t->id, CAP_ID_LEN, hex);
	if (t->has_parent)
		cap_hex(t->parent, CAP_ID_LEN, phex);
	wire_adm_token_put(l->e, &(struct wire_adm_token){ .id = hex,
	    .parent = t->has_parent ? phex : NULL, .sandbox = t->sandbox,
	    .caps = t->caps ? t->caps : "", .nbf = t->nbf, .exp = t->exp,
	    .has_uses = t->uses_left != ST_UNLIMITED, .uses = t->uses_left,
	    .revoked = t->revoked_at != 0, .elevated = t->elevated, .by = t->issued_by });
	l->n++;
	return 0;
}

static void
adm_list(struct brk_admin *a, const struct wire_adm_req *q)
{
	struct wire_enc e;
	struct wire_adm_rep rp = { .cmd = WIRE_ADM_LIST };
	struct adm_list l = { .e = &e, .skip = q->offset };
	int r;

	if (q->cluster) {
		if ((r = adm_view_cluster(a, q, CL_GET_TOKENS)) != 0)
			adm_view_refused(a, r);
		return;
	}
	brk_admin_begin(a, &e, &rp);
	r = st_token_list(a->b->st, q->sandbox, adm_list_one, &l);
	if (r < 0) {
		brk_admin_err(a, r, NULL);
		return;
	}
	rp.more = l.more;
	brk_admin_finish(a, &e, &rp);
}

static void
adm_sandboxes(struct brk_admin *a, const struct wire_adm_req *q)
{
	struct wire_enc e;
	struct wire_adm_rep rp = { .cmd = WIRE_ADM_SANDBOXES };
	int r;

	if (q->cluster) {
		if ((r = adm_view_cluster(a, q, CL_GET_SANDBOXES)) != 0)
			adm_view_refused(a, r);
		return;
	}
	brk_admin_begin(a, &e, &rp);
	for (struct brk_sbx *s = a->b->sbx; s; s = s->next) {
		if (s->dead)
			continue;
		wire_adm_sbx_put(&e, &(struct wire_adm_sbx){ .id = s->id, .tier = s->tier_name,
		    .command = s->command ? s->command : "",
		    .workspace = s->workspace ? s->workspace : "",
		    .started = s->started_at, .pid = (uint64_t)(s->spawned ? s->proc.pid : 0),
		    .tokens = s->nheld, .requests = s->nreq, .owner = s->owner });
	}
	brk_admin_finish(a, &e, &rp);
}

static void
adm_kill_after(struct brk *b, void *arg)
{
	struct brk_sbx *s = arg;

	(void)b;
	if (s->spawned && !s->exited)
		sbx_kill(&s->proc);
}

static void
adm_kill(struct brk_admin *a, const struct wire_adm_req *q)
{
	struct brk_sbx *s;

	if (!q->sandbox) {
		brk_admin_err(a, CB_EINVAL, "kill needs a sandbox id");
		return;
	}
	if (!(s = brk_sbx_find(a->b, q->sandbox)) || s->dead || s->exited) {
		brk_admin_err(a, CB_ENOENT, "no such running sandbox");
		return;
	}
	{
		/* On record before it happens, and answered after. */
		struct brk_dec d = { .op = "kill", .sandbox = s->id, .actor = a->actor,
			.after = adm_kill_after, .arg = s };
		int r = brk_decide(a->b, &d);

		if (r != 0) {
			brk_admin_err(a, r, brk_decide_why(a->b, r));
			return;
		}
	}
	brk_admin_ok(a);
}

/* A recorded request as the admin protocol describes it (in a cluster,
 * with its cluster-wide id and this broker's name). */
static struct wire_adm_elev
adm_elev(const struct brk *b, const struct st_request *r)
{
	return (struct wire_adm_elev){ .rid = brk_fleet_rid(b, r->id), .sandbox = r->sandbox,
		.broker = brk_fleet_on(b) ? b->cl_name : NULL,
		.command = r->command, .cap = r->capability, .reason = r->reason, .ttl = r->ttl,
		.asked = r->asked_at, .expires = r->expires_at,
		.state = st_req_state_name(r->state) };
}

struct adm_page {
	const struct brk *b;
	struct wire_enc *e;
	uint64_t skip;
	bool more;
};


static int
adm_pending_one(void *arg, const struct st_request *r)
{
	struct adm_page *p = arg;
	struct wire_adm_elev q;

	if (p->skip) {
		p->skip--;
		return 0;
	}
	if (p->e->len + ADM_PAGE_ROOM > p->e->cap) {
		p->more = true;
		return 1;
	}
	q = adm_elev(p->b, r);
	wire_adm_elev_put(p->e, &q);
	return 0;
}

static void
adm_pending(struct brk_admin *a, const struct wire_adm_req *q)
{
	struct wire_enc e;
	struct wire_adm_rep rp = { .cmd = WIRE_ADM_PENDING };

	/* Requests recorded before a restart have no timer of their own (the
	 * loop only times the ones it holds): lapse them here, so the list
	 * never shows a request past its expiry as pending. */
	cb_ignore(st_request_expire(a->b->st, st_now(a->b->st), NULL));
	struct adm_page pg = { .b = a->b, .e = &e, .skip = q->offset };

	/* In a cluster: every broker's requests, from the database; while it
	 * is away, this broker's own (docs/cluster.md). */
	if (brk_fleet_on(a->b) && cl_up(a->b->cl) && adm_view_cluster(a, q, CL_GET_REQUESTS) == 0)
		return;
	brk_admin_begin(a, &e, &rp);
	cb_ignore(st_request_list(a->b->st, ST_REQ_PENDING, adm_pending_one, &pg));
	rp.more = pg.more;
	brk_admin_finish(a, &e, &rp);
}

static void
adm_decide(struct brk_admin *a, const struct wire_adm_req *q, bool approve)
{
	int r;

	if (!q->has_rid) {
		brk_admin_err(a, CB_EINVAL, "need a request id");
		return;
	}
	if (q->ttl > CB_DURATION_MAX) {
		brk_admin_err(a, CB_EINVAL, "--ttl is at most 31622400 seconds (366 days)");
		return;
	}
	/* As in adm_pending: a lapsed request is expired, not undecided. */
	cb_ignore(st_request_expire(a->b->st, st_now(a->b->st), NULL));
	if (brk_fleet_on(a->b)) {
		adm_decide_cluster(a, q, approve);
		return;
	}
	r = brk_pending_decide(a->b, &(struct brk_verdict){ .rid = q->rid, .approve = approve,
	    .ttl = q->ttl, .session = q->session, .by = a->actor, .reason = q->reason });
	if (r == CB_ENOENT)
		brk_admin_err(a, r, "no such pending request");
	else if (r == CB_EEXIST)
		brk_admin_err(a, r, "that request was already decided");
	else if (r == CB_EEXPIREDREQ)
		brk_admin_err(a, r, "that request expired undecided (expiry means deny)");
	else if (r)
		brk_admin_err(a, r, NULL);
	else
		brk_admin_ok(a);
}

static void adm_approve(struct brk_admin *a, const struct wire_adm_req *q) { adm_decide(a, q, true); }
static void adm_deny(struct brk_admin *a, const struct wire_adm_req *q) { adm_decide(a, q, false); }

static void
adm_watch(struct brk_admin *a, const struct wire_adm_req *q)
{
	(void)q;
	a->watch = true;
	/* In a cluster, other brokers' new requests too (docs/cluster.md). */
	if (a->b->cl)
		cl_watch(a->b->cl, true);
	brk_admin_ok(a);
}

static int
adm_rotate_apply(struct brk *b, void *arg)
{
	return st_rotate_key(b->st, arg);
}

static void
adm_rotate(struct brk_admin *a, const struct wire_adm_req *q)
{
	uint8_t kid[CAP_KID_LEN];
	char hex[2 * CAP_KID_LEN + 1];
	int r;

	(void)q;
	{
		struct brk_dec d = { .op = "rotate-key", .actor = a->actor, .apply = adm_rotate_apply,
			.arg = kid };

		if ((r = brk_decide(a->b, &d)) != 0) {
			brk_admin_err(a, r, brk_decide_why(a->b, r));
			return;
		}
	}
	/* The other brokers learn the new key (and that the old one no longer
	 * signs) in the background; tokens it signs verify there once they
	 * have it, as the tokens themselves reach them. */
	brk_fleet_keys(a->b);
	cap_hex(kid, CAP_KID_LEN, hex);
	brk_admin_reply(a, &(struct wire_adm_rep){ .cmd = WIRE_ADM_ROTATE_KEY, .kid = hex });
}

static int
adm_retire_apply(struct brk *b, void *arg)
{
	return st_retire_key(b->st, arg);
}

/* Retired in the cluster's database: here too (a key of ours, as a
 * decision; another broker's arrives through the stream as well). */
static void
adm_retire_committed(void *arg, const struct cl_job *j)
{
	struct adm_wait *w = arg;
	struct brk_admin *a = adm_wait_end(w);
	uint8_t kid[CAP_KID_LEN];
	char hex[2 * CAP_KID_LEN + 1];
	int r = j->err;

	memcpy(kid, w->id, CAP_KID_LEN);
	cap_hex(kid, CAP_KID_LEN, hex);
	if (r == 0) {
		struct brk_dec d = { .op = "retire-key", .resource = hex, .actor = a ? a->actor : "broker",
			.detail = "in the cluster", .apply = adm_retire_apply, .arg = kid };

		r = brk_decide(w->b, &d);
		if (r == CB_ENOENT) {	/* another broker's key */
			r = 0;
			brk_audit(w->b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "retire-key",
			    .resource = hex, .actor = a ? a->actor : "broker",
			    .detail = "in the cluster (a key of another broker)" });
		}
		if (r == 0)
			brk_fleet_keys(w->b);
	}
	if (a) {
		if (r != 0)
			brk_admin_err(a, r, j->err ? j->why : brk_decide_why(w->b, r));
		else
			brk_admin_ok(a);
	}
	free(w);
}

static void
adm_retire(struct brk_admin *a, const struct wire_adm_req *q)
{
	uint8_t kid[CAP_KID_LEN];
	int r;

	if (!q->kid || cap_unhex(q->kid, kid, CAP_KID_LEN) != 0) {
		brk_admin_err(a, CB_EINVAL, "need a key id (16 hex digits)");
		return;
	}
	if (brk_fleet_on(a->b)) {
		struct cl_job *j = calloc(1, sizeof(*j));
		struct adm_wait *w;

		if (!j || !(w = adm_wait_begin(a))) {
			free(j);
			brk_admin_err(a, CB_ENOMEM, NULL);
			return;
		}
		memcpy(w->id, kid, CAP_KID_LEN);
		j->op = CL_PUT_RETIRE;
		memcpy(j->kid, kid, CAP_KID_LEN);
		j->done = adm_retire_committed;
		j->arg = w;
		if ((r = brk_fleet_submit(a->b, j)) != 0) {
			adm_wait_end(w);
			free(w);
			brk_admin_err(a, r, "the cluster database has too many writes waiting");
		}
		return;
	}
	{
		/* Acknowledged only once durable in the state and the log. */
		struct brk_dec d = { .op = "retire-key", .resource = q->kid, .actor = a->actor,
			.apply = adm_retire_apply, .arg = kid };

		if ((r = brk_decide(a->b, &d)) != 0) {
			brk_admin_err(a, r, r == CB_EBUSY ? "the signing key cannot be retired" :
			    brk_decide_why(a->b, r));
			return;
		}
	}
	brk_admin_ok(a);
}

/* The local check: the chain, the signatures, the state's head and
 * decision sequence.  0, CB_EAUDIT (rep says what), or the file's error. */
static int
adm_verify_local(struct brk *b, const struct cap_keyring *kr, const char *path,
    struct aud_report *rep)
{
	struct aud_head head, *hp = NULL;

	/* Seal what is written so far, so the check covers it all. */
	cb_ignore(aud_checkpoint(b->aud));
	memset(&head, 0, sizeof(head));
	if (st_get_audit_head(b->st, head.log_id, &head.seq, head.hash) == 0)
		hp = &head;
	memset(rep, 0, sizeof(*rep));
	/* the state must hold every decision the log records */
	return aud_verify_state(path, kr, hp, st_dseq(b->st), rep);
}

#define ADM_HEADS_MAX	128	/* heads listed in a verify reply */

/* Verify, and with the cluster's heads (j, or NULL) against them too. */
static void
adm_verify_reply(struct brk *b, struct brk_admin *a, const struct cl_job *j)
{
	struct cap_keyring *kr = NULL;
	struct aud_report rep;
	char path[BRK_STATE_FILE_MAX], cwhat[1024] = "", lhex[ADM_HEADS_MAX][33];
	struct wire_adm_rep rp;
	struct wire_enc e;
	size_t n = 0;
	int r;

	if ((r = st_audit_keyring(b->st, &kr)) != 0) {
		brk_admin_err(a, r, NULL);
		return;
	}
	snprintf(path, sizeof(path), "%s/audit.jsonl", b->state_dir);
	r = adm_verify_local(b, kr, path, &rep);
	/* A broken log is a finding, not a refusal: the report says what. */
	rp = (struct wire_adm_rep){ .cmd = WIRE_ADM_AUDIT_VERIFY, .err = r == CB_EAUDIT ? 0 : r,
	    .intact = r == 0, .problem = aud_problem_name(rep.problem), .line = rep.line,
	    .lines = rep.lines, .checkpoints = rep.checkpoints, .unsealed = rep.unsealed,
	    .what = rep.what, .path = path };
	if (j && (r == 0 || r == CB_EAUDIT)) {
		rp.checked_cluster = true;
		rp.cluster_intact = brk_fleet_check_heads(b, kr, path, rep.log_id, j,
		    &rp.cluster_problem, cwhat, sizeof(cwhat));
		rp.cluster_what = cwhat;
		rp.intact = rp.intact && rp.cluster_intact;
	}
	cap_keyring_free(kr);
	brk_admin_begin(a, &e, &rp);
	for (size_t i = 0; j && i < j->nheads && n < ADM_HEADS_MAX; i++, n++) {
		const struct cl_head *h = &j->heads[i];

		cap_hex(h->log_id, 16, lhex[n]);
		wire_adm_head_put(&e, &(struct wire_adm_head){ .broker = h->broker, .log = lhex[n],
		    .seq = h->seq, .age_ms = h->age_ms, .live = h->live });
	}
	brk_admin_finish(a, &e, &rp);
}

static void
adm_verify_heads(void *arg, const struct cl_job *j)
{
	struct adm_wait *w = arg;
	struct brk_admin *a = adm_wait_end(w);

	if (!a)
		goto out;
	if (j->err) {
		brk_admin_err(a, j->err, j->why[0] ? j->why : "cannot read the cluster's audit heads");
		goto out;
	}
	adm_verify_reply(w->b, a, j);
out:
	free(w);
}

static void
adm_audit_verify(struct brk_admin *a, const struct wire_adm_req *q)
{
	struct cl_job *j;
	struct adm_wait *w;
	int r;

	if (!q->cluster) {
		adm_verify_reply(a->b, a, NULL);
		return;
	}
	if (!brk_fleet_on(a->b)) {
		brk_admin_err(a, CB_EINVAL, "audit verify --cluster: this broker is not in a cluster");
		return;
	}
	if (!(j = calloc(1, sizeof(*j))) || !(w = adm_wait_begin(a))) {
		free(j);
		brk_admin_err(a, CB_ENOMEM, NULL);
		return;
	}
	j->op = CL_GET_HEADS;
	j->done = adm_verify_heads;
	j->arg = w;
	if ((r = brk_fleet_submit(a->b, j)) != 0) {
		adm_wait_end(w);
		free(w);
		brk_admin_err(a, r, "the cluster database has too many requests waiting");
	}
}

/* Admin connections, in all and of one uid, split into those that control
 * a live sandbox (`run --connect`: counted as that sandbox, under
 * BRK_ADMIN_RUN_*) and the rest (idle: under BRK_ADMIN_MAX and
 * BRK_ADMIN_PER_UID).  A walk of the list, so no counter can drift from
 * what the connections are: a few thousand at most, once per accept and
 * per run. */
struct adm_count {
	size_t idle, idle_uid;
	size_t run, run_uid;
};

static void
adm_count(const struct brk *b, uid_t uid, struct adm_count *c)
{
	memset(c, 0, sizeof(*c));
	for (const struct brk_admin *o = b->admins; o; o = o->next) {
		if (o->run) {
			c->run++;
			c->run_uid += o->uid == uid;
		} else {
			c->idle++;
			c->idle_uid += o->uid == uid;
		}
	}
}

/* `capbroker run --connect`: the daemon starts the sandbox and hands the
 * client the agent's stdio; the client relays them and learns the exit
 * status when the sandbox ends.  Closing the connection kills it. */
static void
adm_run_exit(struct brk_sbx *s, void *arg)
{
	struct brk_admin *a = arg;
	struct wire_adm_event ev = { .kind = WIRE_ADM_EV_EXIT, .status = s->exit_code,
		.reason = s->setup_why };
	size_t len;

	if (wire_adm_event_encode(&ev, a->b->sbuf, WIRE_REPLY_MAX, &len) == 0)
		(void)wire_packet_send(a->fd, a->b->sbuf, len, NULL, 0, MSG_DONTWAIT | MSG_NOSIGNAL);
	a->run = NULL;
}

static void
adm_run(struct brk_admin *a, const struct wire_adm_req *q)
{
	struct brk_sbx_spec spec = { .owner = a->uid, .owner_gid = a->gid, .actor = a->actor,
		.id = q->sandbox, .tier = q->tier, .workspace = q->workspace, .ttl = q->ttl,
		.timeout = q->timeout, .grants = q->grants, .ngrants = q->ngrants, .ro_binds = q->ro_binds,
		.nro_binds = q->nro_binds, .chdir = q->chdir, .want_pty = q->pty,
		.serve_workspace = q->serve_workspace,
		.setenv = q->setenv, .nsetenv = q->nsetenv / 2, .unsetenv = q->unsetenv,
		.nunsetenv = q->nunsetenv };
	const char *argv[WIRE_ARGV_MAX + 1];
	char why[1024];
	struct adm_count c;
	struct brk_sbx *s;
	struct wire_enc e;
	struct wire_adm_rep rp = { .cmd = WIRE_ADM_RUN };
	int fds[3], r;

	if (a->run) {
		brk_admin_err(a, CB_EBUSY, "this connection already runs a sandbox");
		return;
	}
	if (q->argc == 0) {
		brk_admin_err(a, CB_EINVAL, "run needs a command");
		return;
	}
	/* Resolved against the client's directory, by the client: ours is
	 * not the client's, and a tree of ours must never be granted for it. */
	if (q->workspace && q->workspace[0] != '/') {
		brk_admin_err(a, CB_EINVAL, "a run's workspace must be an absolute path");
		return;
	}
	memcpy(argv, q->argv, q->argc * sizeof(argv[0]));
	argv[q->argc] = NULL;
	spec.argv = (char *const *)argv;
	/* Names and counts are checked again by the launcher (CB_EINVAL);
	 * the decoder bounded the lists. */
	if (q->nsetenv % 2 != 0) {
		brk_admin_err(a, CB_EINVAL, "setenv takes NAME, VALUE pairs; at most 64 of each");
		return;
	}
	/* From here the connection counts as a sandbox, not as an idle
	 * connection (adm_count): its own bounds, checked before spawning. */
	adm_count(a->b, a->uid, &c);
	if (c.run >= BRK_ADMIN_RUN_MAX || c.run_uid >= BRK_ADMIN_RUN_PER_UID) {
		snprintf(why, sizeof(why), "too many sandboxes run over the admin socket (%zu of %s, "
		    "%zu in all; at most %d and %d)", c.run_uid, a->actor, c.run,
		    BRK_ADMIN_RUN_PER_UID, BRK_ADMIN_RUN_MAX);
		brk_admin_err(a, CB_EBUSY, why);
		return;
	}
	if ((r = brk_sbx_create(a->b, &spec, &s, why, sizeof(why))) != 0) {
		brk_admin_err(a, r, why);
		return;
	}
	s->on_exit = adm_run_exit;
	s->on_exit_arg = a;
	a->run = s;
	fds[0] = s->proc.stdin_fd;
	fds[1] = s->proc.stdout_fd;
	/* With a pty there is no separate stderr: the pty master goes again
	 * in its place (the message always carries three), and "pty" tells
	 * the client to drop that copy. */
	fds[2] = s->proc.stderr_fd >= 0 ? s->proc.stderr_fd : s->proc.stdout_fd;
	rp.sandbox = s->id;
	rp.pty = s->proc.stderr_fd < 0;
	brk_admin_begin(a, &e, &rp);
	wire_adm_rep_end(&e, &rp);
	if (brk_admin_send(a, &e, fds, 3) != 0) {
		brk_sbx_kill(s, "broker");
		brk_admin_drop(a);
		return;
	}
	/* The client relays them now; the broker keeps no copy. */
	close(s->proc.stdin_fd);
	close(s->proc.stdout_fd);
	if (s->proc.stderr_fd >= 0)
		close(s->proc.stderr_fd);
	s->proc.stdin_fd = s->proc.stdout_fd = s->proc.stderr_fd = -1;
}

/* The single list of what an administrator may ask (wire/admin.c says
 * which keys each command takes). */
static void (*const adm_table[WIRE_ADM_COUNT])(struct brk_admin *, const struct wire_adm_req *) = {
	[WIRE_ADM_STATUS] = adm_status,
	[WIRE_ADM_ISSUE] = adm_issue,
	[WIRE_ADM_REVOKE] = adm_revoke,
	[WIRE_ADM_LIST] = adm_list,
	[WIRE_ADM_SANDBOXES] = adm_sandboxes,
	[WIRE_ADM_KILL] = adm_kill,
	[WIRE_ADM_PENDING] = adm_pending,
	[WIRE_ADM_APPROVE] = adm_approve,
	[WIRE_ADM_DENY] = adm_deny,
	[WIRE_ADM_WATCH] = adm_watch,
	[WIRE_ADM_ROTATE_KEY] = adm_rotate,
	[WIRE_ADM_RETIRE_KEY] = adm_retire,
	[WIRE_ADM_AUDIT_VERIFY] = adm_audit_verify,
	[WIRE_ADM_RUN] = adm_run,
};

/* wire/ cannot see sandbox-stub/ or broker/: its bounds on run's lists
 * must be the launcher's and the broker's. */
_Static_assert(WIRE_ADM_ENV_MAX == SBX_ENV_MAX, "run --setenv/--unsetenv bound");
_Static_assert(WIRE_ADM_BINDS_MAX == BRK_RO_BINDS_MAX, "run --ro-bind bound");

/* ---- connections ------------------------------------------------------ */

static void
brk_admin_drop(struct brk_admin *a)
{
	struct brk *b = a->b;

	for (struct brk_admin **p = &b->admins; *p; p = &(*p)->next) {
		if (*p == a) {
			*p = a->next;
			break;
		}
	}
	if (a->wait)	/* its answer, when it comes, has no one to go to */
		a->wait->a = NULL;
	if (a->watch && b->cl) {
		bool any = false;

		for (struct brk_admin *o = b->admins; o && !any; o = o->next)
			any = o->watch;
		if (!any)
			cl_watch(b->cl, false);
	}
	if (a->run) {	/* the task's owner left: its sandbox goes too */
		a->run->on_exit = NULL;
		brk_sbx_kill(a->run, a->actor);
	}
	event_free(a->ev);
	close(a->fd);
	free(a);
}

static void
brk_admin_readable(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_admin *a = arg;
	struct brk *b = a->b;
	struct wire_adm_req q;
	ssize_t n;
	int r;

	(void)ev;
	n = recv(fd, b->rbuf, WIRE_REQ_MAX + 1, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0 || n > WIRE_REQ_MAX) {
		brk_admin_drop(a);
		return;
	}
	r = wire_adm_decode(b->dec, b->rbuf, (size_t)n, &q);
	a->id = q.id;
	if (r != 0) {
		brk_admin_err(a, r, q.why);
		return;
	}
	adm_table[q.cmd](a, &q);
}

/* One line to a peer we will not serve, then hang up: a refusal always
 * reaches the client that asked (it would otherwise wait, or see only a
 * closed socket). */
static void
brk_admin_refuse(struct brk *b, int fd, int err, const char *reason)
{
	struct wire_adm_rep rp = { .id = 0, .cmd = WIRE_ADM_COUNT, .err = err, .reason = reason };
	size_t len;

	if (wire_adm_rep_encode(&rp, b->sbuf, WIRE_REPLY_MAX, &len) == 0)
		(void)send(fd, b->sbuf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	/* A socket closed with unread data resets the connection, and the
	 * peer's kernel then drops our reply with it: read what the client
	 * already sent (its request, unserved) before hanging up. */
	for (int i = 0; i < 8 && recv(fd, b->rbuf, WIRE_REQ_MAX + 1, MSG_DONTWAIT) > 0; i++)
		;
	close(fd);
}

static void
brk_admin_rearm(evutil_socket_t fd, short ev, void *arg)
{
	struct brk *b = arg;

	(void)fd;
	(void)ev;
	event_add(b->ev_admin, NULL);
}

/* accept failed (no descriptors, no memory).  The listener is
 * level-triggered: returning at once would spin on the same pending
 * connection.  Pause it, doubling up to BRK_ACCEPT_BACKOFF_MAX_MS, count
 * the failure, and say it once per episode in the log. */
static void
brk_admin_backoff(struct brk *b, int err)
{
	struct timeval tv;

	b->accept_failures++;
	if (b->admin_backoff_ms == 0) {
		char detail[128];

		snprintf(detail, sizeof(detail), "accept: %s; pausing the admin socket", strerror(err));
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "admin.accept-failed",
		    .actor = "broker", .detail = detail });
	}
	b->admin_backoff_ms = b->admin_backoff_ms ? b->admin_backoff_ms * 2 : 10;
	if (b->admin_backoff_ms > BRK_ACCEPT_BACKOFF_MAX_MS)
		b->admin_backoff_ms = BRK_ACCEPT_BACKOFF_MAX_MS;
	tv.tv_sec = b->admin_backoff_ms / 1000;
	tv.tv_usec = (b->admin_backoff_ms % 1000) * 1000;
	if (!b->ev_admin_retry)
		b->ev_admin_retry = evtimer_new(b->base, brk_admin_rearm, b);
	event_del(b->ev_admin);
	if (!b->ev_admin_retry || evtimer_add(b->ev_admin_retry, &tv) != 0)
		event_add(b->ev_admin, NULL);	/* no timer: better busy than deaf */
}

static void
brk_admin_accept(evutil_socket_t lfd, short ev, void *arg)
{
	struct brk *b = arg;
	struct brk_admin *a;
	struct ucred cr;
	socklen_t l = sizeof(cr);
	char who[32], why[256];
	struct adm_count c;
	int fd, sz = 1 << 20;

	(void)ev;
	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE) && b->spare_fd >= 0) {
		/* Out of descriptors: the spare one lets us take the connection
		 * just to say so, rather than leave the client waiting. */
		int e = errno;

		/* every client waiting in the queue hears it, not one a pause */
		for (int i = 0; i < 64 && b->spare_fd >= 0; i++) {
			close(b->spare_fd);
			fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd >= 0)
				brk_admin_refuse(b, fd, CB_EBUSY, "the broker is out of file descriptors; "
				    "try again later");
			b->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				break;
			b->admin_refused++;
		}
		brk_admin_backoff(b, e);
		return;
	}
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			brk_admin_backoff(b, errno);
		return;
	}
	b->admin_backoff_ms = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) != 0) {
		close(fd);
		return;
	}
	snprintf(who, sizeof(who), "uid:%u", (unsigned)cr.uid);
	if (cr.uid != geteuid() && !pol_admin_uid(b->pol, cr.uid) && !pol_admin_gid(b->pol, cr.gid)) {
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .decision = AUD_DENY,
		    .reason = CB_EPERM, .op = "admin.refused", .actor = who,
		    .detail = "peer is not an administrator" });
		close(fd);
		return;
	}
	/* One administrator's flood must not take every descriptor.  Only
	 * idle connections count here: one that runs a sandbox is counted as
	 * that sandbox (adm_run), so a daemon's sandboxes do not use up the
	 * room its owner needs for capctl or the next `run --connect`. */
	adm_count(b, cr.uid, &c);
	if (c.idle >= BRK_ADMIN_MAX || c.idle_uid >= BRK_ADMIN_PER_UID) {
		b->admin_refused++;
		snprintf(why, sizeof(why), "too many admin connections (%zu idle of %s, %zu in all; at "
		    "most %d and %d; those running a sandbox are not counted)", c.idle_uid, who,
		    c.idle, BRK_ADMIN_PER_UID, BRK_ADMIN_MAX);
		brk_admin_refuse(b, fd, CB_EBUSY, why);
		return;
	}
	if (!(a = calloc(1, sizeof(*a)))) {
		close(fd);
		return;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	a->b = b;
	a->fd = fd;
	a->uid = cr.uid;
	a->gid = cr.gid;
	snprintf(a->actor, sizeof(a->actor), "%s", who);
	if (!(a->ev = event_new(b->base, fd, EV_READ | EV_PERSIST, brk_admin_readable, a))) {
		close(fd);
		free(a);
		return;
	}
	event_add(a->ev, NULL);
	a->next = b->admins;
	b->admins = a;
}

/* Serve the listening socket fd (ours from now on). */
static int
brk_admin_start(struct brk *b, int fd)
{
	b->admin_fd = fd;
	b->ev_admin = event_new(b->base, fd, EV_READ | EV_PERSIST, brk_admin_accept, b);
	if (!b->ev_admin) {
		close(fd);
		b->admin_fd = -1;
		return CB_ENOMEM;
	}
	event_add(b->ev_admin, NULL);
	/* kept so that, out of descriptors, a refusal can still be sent */
	b->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return 0;
}

/*
 * Something is at path already.  A socket nobody listens on (connect says
 * ECONNREFUSED) was left by a broker that exited without removing it: ours
 * to replace.  A socket someone answers is a live broker's (CB_EBUSY), and
 * anything else is not ours to remove (CB_EEXIST).
 */
static int
brk_admin_clear_stale(struct brk *b, const struct sockaddr_un *sa, char *why, size_t whylen)
{
	struct stat st;
	int fd, e;

	if (lstat(sa->sun_path, &st) != 0)
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(why, whylen, "admin socket %s: something that is not a socket is there; "
		    "refusing to replace it", sa->sun_path);
		return CB_EEXIST;
	}
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0) {
		snprintf(why, whylen, "socket: %s", strerror(errno));
		return CB_EIO;
	}
	e = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ? 0 : errno;
	close(fd);
	if (e != ECONNREFUSED) {
		snprintf(why, whylen, "another broker is already serving the admin socket %s; stop "
		    "it first, or give this one another --socket or --state", sa->sun_path);
		return CB_EBUSY;
	}
	if (unlink(sa->sun_path) != 0 && errno != ENOENT) {
		snprintf(why, whylen, "stale admin socket %s: cannot remove it: %s", sa->sun_path,
		    strerror(errno));
		return CB_EIO;
	}
	b->admin_stale = true;
	return 0;
}

int
brk_admin_listen(struct brk *b, const char *path, char *why, size_t whylen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(why, whylen, "admin socket path too long: %s", path);
		return CB_ETOOBIG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	snprintf(b->admin_path, sizeof(b->admin_path), "%s", path);
	if ((r = brk_admin_clear_stale(b, &sa, why, whylen)) != 0)
		return r;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, whylen, "socket: %s", strerror(errno));
		return CB_EIO;
	}
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 64) != 0) {
		umask(old);
		snprintf(why, whylen, "admin socket %s: %s", path, strerror(errno));
		close(fd);
		return CB_EIO;
	}
	umask(old);
	chmod(path, 0600);
	/* Remembered so that we remove it at exit only while it is ours. */
	if (lstat(path, &st) == 0) {
		b->admin_bound = true;
		b->admin_dev = st.st_dev;
		b->admin_ino = st.st_ino;
	}
	return brk_admin_start(b, fd);
}

int
brk_admin_adopt(struct brk *b, int fd, char *why, size_t whylen)
{
	struct sockaddr_un sa;
	socklen_t l = sizeof(sa);

	/* Whoever passed it (systemd) owns the path and removes it. */
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &l) == 0 && sa.sun_path[0])
		snprintf(b->admin_path, sizeof(b->admin_path), "%.*s",
		    (int)sizeof(sa.sun_path), sa.sun_path);
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
		snprintf(why, whylen, "inherited admin socket: %s", strerror(errno));
		return CB_EIO;
	}
	return brk_admin_start(b, fd);
}

void
brk_admin_close(struct brk *b)
{
	/* Shutdown: brk_free has already killed and freed every sandbox, so
	 * a `run --connect` connection's sandbox pointer is stale; dropping
	 * the connection must not touch it. */
	for (struct brk_admin *a = b->admins; a; a = a->next)
		a->run = NULL;
	while (b->admins)
		brk_admin_drop(b->admins);
	if (b->ev_admin)
		event_free(b->ev_admin);
	b->ev_admin = NULL;
	if (b->ev_admin_retry)
		event_free(b->ev_admin_retry);
	b->ev_admin_retry = NULL;
	if (b->spare_fd >= 0)
		close(b->spare_fd);
	b->spare_fd = -1;
	if (b->admin_fd >= 0)
		close(b->admin_fd);
	b->admin_fd = -1;
	/* Leave no stale socket for the next capctl to trip over; but a
	 * socket another broker has bound at the path since is not ours. */
	if (b->admin_bound) {
		struct stat st;

		if (lstat(b->admin_path, &st) == 0 && st.st_dev == b->admin_dev &&
		    st.st_ino == b->admin_ino)
			unlink(b->admin_path);
		b->admin_bound = false;
	}
}

/* A request event to every connection that watches. */
static void
adm_notify(struct brk *b, const struct wire_adm_event *ev)
{
	size_t len;

	if (wire_adm_event_encode(ev, b->sbuf, WIRE_REPLY_MAX, &len) != 0)
		return;
	for (struct brk_admin *a = b->admins, *next; a; a = next) {
		next = a->next;
		if (!a->watch)
			continue;
		if (wire_packet_send(a->fd, b->sbuf, len, NULL, 0, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			brk_admin_drop(a);
	}
}

void
brk_admin_notify(struct brk *b, uint64_t rid)
{
	struct st_request r;
	struct wire_adm_event ev = { .kind = WIRE_ADM_EV_REQUEST };

	if (st_request_get(b->st, rid, &r) != 0)
		return;
	ev.req = adm_elev(b, &r);
	adm_notify(b, &ev);
}

void
brk_admin_notify_cl(struct brk *b, const struct cl_req *r)
{
	adm_notify(b, &(struct wire_adm_event){ .kind = WIRE_ADM_EV_REQUEST,
	    .req = { .rid = r->rid, .sandbox = r->sandbox, .command = r->command, .cap = r->cap,
	    .reason = r->reason, .ttl = r->ttl, .asked = r->asked_at, .expires = r->expires_at,
	    .state = "pending", .broker = r->broker } });
}
