/*
 * fleet.c - the broker in a cluster: the changes other brokers made (keys,
 * tokens, revocations) applied to this broker's state as they arrive; the
 * keys and tokens we make, published; and the staleness bound.
 *
 * Trust domain: broker.  The changes come from the cluster's database
 * (cluster/, which checked their sizes); they only ever add keys and tokens
 * to what verifies and revocations to what does not, on the loop's thread,
 * like every other change of the in-memory state.
 *
 * Freshness: the link's thread catches up at least four times per bound;
 * each complete catch-up proves that every change committed before it was
 * sent is applied (cl_sink.batch's fresh_ns).  A broker that has no such
 * proof younger than the bound refuses every token (CB_ECLUSTER) and mints
 * nothing: a revocation it cannot hear about must not leave a token
 * working for longer than the bound.
 */
#include "broker/core.h"
#include "broker/approval.h"
#include "broker/budget.h"
#include "broker/commit.h"
#include "broker/fleet.h"
#include "broker/fs_served.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void brk_fleet_decisions(void *arg, const struct cl_req *r, size_t n);
static void brk_fleet_requests(void *arg, const struct cl_req *r, size_t n);
static void brk_fleet_held(void *arg, bool fatal, const char *why);

bool
brk_fleet_on(const struct brk *b)
{
	return b->cl != NULL;
}

int
brk_fleet_fresh(const struct brk *b)
{
	if (!b->cl)
		return 0;
	return cb_mono_ns() - b->cl_fresh_ns > b->cl_stale_ns ? CB_ECLUSTER : 0;
}

const char *
brk_fleet_why(const struct brk *b)
{
	return b->cl_why[0] ? b->cl_why : "no catch-up with the cluster database yet";
}

int
brk_fleet_mint_ok(const struct brk *b, char *why, size_t whylen)
{
	if (!b->cl)
		return 0;
	if (cl_up(b->cl) && brk_fleet_fresh(b) == 0)
		return 0;
	if (why)
		snprintf(why, whylen, "no new tokens or approvals while the cluster database is "
		    "unreachable (%s)", brk_fleet_why(b));
	return CB_ECLUSTER;
}

/* Arm the timer that notices the bound passing (the file servers' grant
 * snapshots must drop at that moment, not at the next tick). */
static void
brk_fleet_arm(struct brk *b)
{
	uint64_t now = cb_mono_ns(), end = b->cl_fresh_ns + b->cl_stale_ns;
	uint64_t left = end > now ? end - now : 0;
	struct timeval tv = { (time_t)(left / 1000000000u), (suseconds_t)((left % 1000000000u) / 1000u + 1) };

	event_add(b->ev_cl_stale, &tv);
}

static void
brk_fleet_stale(evutil_socket_t fd, short ev, void *arg)
{
	struct brk *b = arg;
	char detail[CL_WHY_MAX + 128];

	(void)fd;
	(void)ev;
	if (brk_fleet_fresh(b) == 0) {
		brk_fleet_arm(b);
		return;
	}
	if (b->cl_stale_noted)
		return;
	b->cl_stale_noted = true;
	snprintf(detail, sizeof(detail), "nothing heard from the cluster database for %llu s: every "
	    "token is refused until it returns (%s)",
	    (unsigned long long)(b->cl_stale_ns / 1000000000u), brk_fleet_why(b));
	brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "cluster.stale", .actor = "broker",
	    .reason = CB_ECLUSTER, .detail = detail });
	brk_fss_refresh_all(b);
}

static void
brk_fleet_apply(struct brk *b, const struct cl_rec *r, bool *changed)
{
	char hex[2 * CAP_ID_LEN + 1], detail[CL_NAME_MAX + 96];
	bool ch = false;
	int e = 0;

	switch (r->kind) {
	case CL_KEY:
		e = st_cl_key(b->st, r->pk, r->retired);
		*changed |= r->retired;
		break;
	case CL_TOKEN:
		e = st_cl_token(b->st, r->id, r->has_parent ? r->parent : NULL, r->limited);
		break;
	case CL_REVOKE:
		e = st_cl_revoke(b->st, r->id, st_now(b->st), &ch);
		*changed |= ch;
		/* Our own revocations are audited as decisions (admin.c). */
		if (ch && strcmp(r->broker, b->cl_name) != 0) {
			cap_hex(r->id, CAP_ID_LEN, hex);
			snprintf(detail, sizeof(detail), "with its descendants, by broker %s of the cluster",
			    r->broker);
			brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "revoke",
			    .resource = hex, .token_id = r->id, .actor = r->actor, .detail = detail });
		}
		break;
	}
	if (e != 0) {
		snprintf(detail, sizeof(detail), "change %llu from broker %s not applied: %s",
		    (unsigned long long)r->seq, r->broker, cb_strerror(e));
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "cluster.refused",
		    .actor = "broker", .reason = e, .detail = detail });
	}
}

/* The revocations of a batch together: the rows of our own tokens among
 * them written in one transaction (one sync), not one each.  false if
 * there is no memory for that (then brk_fleet_apply takes them one by one). */
static bool
brk_fleet_revokes(struct brk *b, const struct cl_rec *r, size_t n, bool *changed)
{
	char hex[2 * CAP_ID_LEN + 1], detail[CL_NAME_MAX + 96];
	uint8_t *ids;
	bool *ch;
	size_t k = 0;
	int e;

	ids = malloc(n * CAP_ID_LEN + 1);
	ch = calloc(n + 1, sizeof(*ch));
	if (!ids || !ch) {
		free(ids);
		free(ch);
		return false;
	}
	for (size_t i = 0; i < n; i++)
		if (r[i].kind == CL_REVOKE)
			memcpy(ids + CAP_ID_LEN * k++, r[i].id, CAP_ID_LEN);
	e = st_cl_revoke_many(b->st, ids, k, st_now(b->st), ch);
	k = 0;
	for (size_t i = 0; i < n; i++) {
		if (r[i].kind != CL_REVOKE || !ch[k++])
			continue;
		*changed = true;
		/* Our own revocations are audited as decisions (admin.c). */
		if (strcmp(r[i].broker, b->cl_name) != 0) {
			cap_hex(r[i].id, CAP_ID_LEN, hex);
			snprintf(detail, sizeof(detail), "with its descendants, by broker %s of the cluster",
			    r[i].broker);
			brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "revoke",
			    .resource = hex, .token_id = r[i].id, .actor = r[i].actor, .detail = detail });
		}
	}
	if (e != 0) {
		snprintf(detail, sizeof(detail), "revocations up to change %llu not written to the "
		    "state (revoked in memory): %s", (unsigned long long)r[n - 1].seq, cb_strerror(e));
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "cluster.refused",
		    .actor = "broker", .reason = e, .detail = detail });
	}
	free(ids);
	free(ch);
	return true;
}

static void
brk_fleet_batch(void *arg, const struct cl_rec *r, size_t n, uint64_t fresh_ns)
{
	struct brk *b = arg;
	bool changed = false, together = n > 1;

	/* Keys and tokens in order, then the revocations together: a
	 * revocation that comes before its token leaves a stub that the
	 * token finds revoked, so the order between them does not matter. */
	for (size_t i = 0; i < n; i++)
		if (!together || r[i].kind != CL_REVOKE)
			brk_fleet_apply(b, &r[i], &changed);
	if (together && !brk_fleet_revokes(b, r, n, &changed))
		for (size_t i = 0; i < n; i++)
			if (r[i].kind == CL_REVOKE)
				brk_fleet_apply(b, &r[i], &changed);
	if (n) {
		b->cl_applied = r[n - 1].seq;
		cl_applied(b->cl, b->cl_applied);
	}
	/* Before the next operation: the file servers' snapshots of live
	 * grants lose what was revoked. */
	if (changed)
		brk_fss_refresh_all(b);
	if (fresh_ns > b->cl_fresh_ns) {
		bool was_stale = brk_fleet_fresh(b) != 0;
		uint8_t lid[16], hash[32];
		uint64_t seq;

		/* The log's head as the state recorded it (durable, signed):
		 * the cluster keeps it for `audit verify --cluster`. */
		if (b->cl_heads_ok && st_get_audit_head(b->st, lid, &seq, hash) == 0)
			cl_set_head(b->cl, lid, seq, hash);

		b->cl_fresh_ns = fresh_ns;
		if (was_stale && brk_fleet_fresh(b) == 0) {
			if (b->cl_stale_noted)
				brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "cluster.fresh",
				    .actor = "broker", .detail = "caught up with the cluster database: "
				    "tokens are honoured again" });
			b->cl_stale_noted = false;
			brk_fss_refresh_all(b);
		}
		brk_fleet_arm(b);
	}
}

/* The first check of our log against the cluster's record, before we
 * record any head of ours: a host restarted on an older copy of its state
 * and log (consistent, so it starts) would otherwise record its new,
 * forked heads over the evidence once they pass the old ones. */
static void
brk_fleet_heads_checked(void *arg, const struct cl_job *j)
{
	struct brk *b = arg;
	struct cap_keyring *kr = NULL;
	char path[BRK_STATE_FILE_MAX], what[1024];
	const char *problem = "";
	uint8_t lid[16];

	b->cl_heads_asked = false;
	if (j->err || !b->aud || st_audit_keyring(b->st, &kr) != 0)
		return;		/* asked again at the next link up */
	snprintf(path, sizeof(path), "%s/audit.jsonl", b->state_dir);
	aud_log_id(b->aud, lid);
	if (brk_fleet_check_heads(b, kr, path, lid, j, &problem, what, sizeof(what))) {
		b->cl_heads_ok = true;
	} else {
		char detail[sizeof(what) + 128];

		/* Evidence: never overwritten by this broker's heads.  Said in
		 * the log, on stderr and by `capctl audit verify --cluster`. */
		snprintf(detail, sizeof(detail), "audit log NOT INTACT against the cluster's record (%s): "
		    "%s; this broker records no audit heads in the cluster", problem, what);
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "cluster.audit",
		    .actor = "broker", .reason = CB_EAUDIT, .detail = detail });
		fprintf(stderr, "capbroker: %s\n", detail);
	}
	cap_keyring_free(kr);
}

static void
brk_fleet_check_log(struct brk *b)
{
	struct cl_job *j;

	if (b->cl_heads_ok || b->cl_heads_asked || !(j = calloc(1, sizeof(*j))))
		return;
	j->op = CL_GET_HEADS;
	j->done = brk_fleet_heads_checked;
	j->arg = b;
	if (cl_submit(b->cl, j) == 0)
		b->cl_heads_asked = true;
}

static void
brk_fleet_link(void *arg, bool up, const char *why)
{
	struct brk *b = arg;
	char detail[CL_WHY_MAX + 64];

	if (!up)
		snprintf(b->cl_why, sizeof(b->cl_why), "%s", why);
	else
		b->cl_why[0] = '\0';
	snprintf(detail, sizeof(detail), "%s%s", up ? "connected" : "lost: ", up ? "" : why);
	brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "cluster.link", .actor = "broker",
	    .reason = up ? 0 : CB_ECLUSTER, .detail = detail });
	if (up)
		brk_fleet_check_log(b);
}

static void
brk_fleet_readable(evutil_socket_t fd, short ev, void *arg)
{
	struct brk *b = arg;

	(void)fd;
	(void)ev;
	cl_dispatch(b->cl);
	/* what this delivery committed, decided here together */
	brk_revoke_flush(b);
}

int
brk_fleet_submit(struct brk *b, struct cl_job *j)
{
	if (!b->cl) {
		cl_job_free(j);
		return CB_ECLUSTER;
	}
	return cl_submit(b->cl, j);
}

int
brk_fleet_token(struct brk *b, const struct st_token *rec,
    void (*done)(void *arg, const struct cl_job *j), void *arg)
{
	struct cl_job *j;

	if (!b->cl)
		return 0;
	if (!(j = calloc(1, sizeof(*j))) || !(j->caps = strdup(rec->caps ? rec->caps : ""))) {
		free(j);
		return CB_ENOMEM;
	}
	j->op = CL_PUT_TOKEN;
	j->retry = done == NULL;
	memcpy(j->id, rec->id, CAP_ID_LEN);
	j->has_parent = rec->has_parent;
	memcpy(j->parent, rec->parent, CAP_ID_LEN);
	snprintf(j->sandbox, sizeof(j->sandbox), "%s", rec->sandbox);
	j->nbf = rec->nbf;
	j->exp = rec->exp;
	j->issued_at = rec->issued_at;
	j->limited = rec->uses_left != ST_UNLIMITED;
	j->elevated = rec->elevated;
	snprintf(j->by, sizeof(j->by), "%s", rec->issued_by);
	j->done = done;
	j->arg = arg;
	return cl_submit(b->cl, j);
}

void
brk_fleet_keys(struct brk *b)
{
	struct st_key_info *k = NULL;
	size_t n = 0;

	if (!b->cl || st_key_list(b->st, &k, &n) != 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct cl_job *j = calloc(1, sizeof(*j));

		if (!j)
			break;
		j->op = CL_PUT_KEY;
		j->retry = true;
		memcpy(j->pk, k[i].pk, 32);
		j->signing = k[i].signing;
		j->retired = k[i].retired_at != 0;
		cb_ignore(cl_submit(b->cl, j));
	}
	free(k);
}

bool
brk_fleet_check_heads(struct brk *b, const struct cap_keyring *kr, const char *path,
    const uint8_t log_id[16], const struct cl_job *j, const char **problem, char *buf, size_t len)
{
	char lhex[33], mine[33];
	const struct cl_head *cur = NULL;
	struct aud_report rep;
	struct aud_head h;

	*problem = "";
	cap_hex(log_id, 16, mine);
	for (size_t i = 0; i < j->nheads; i++) {
		const struct cl_head *x = &j->heads[i];

		if (strcmp(x->broker, b->cl_name) != 0)
			continue;
		if (memcmp(x->log_id, log_id, 16) == 0) {
			cur = x;
			continue;
		}
		cap_hex(x->log_id, 16, lhex);
		*problem = "replaced";
		snprintf(buf, len, "the cluster recorded another audit log for broker %.300s: log %s, "
		    "sealed up to line %llu (recorded %llu s ago); this log is %s: it was replaced "
		    "(if it was restarted on purpose, delete that log's row from cb_checkpoints)",
		    b->cl_name, lhex, (unsigned long long)x->seq + 1,
		    (unsigned long long)(x->age_ms / 1000u), mine);
		return false;
	}
	if (!cur) {
		snprintf(buf, len, "the cluster has recorded no head for broker %.300s yet (it records "
		    "one with its next report after a checkpoint)", b->cl_name);
		return true;
	}
	memcpy(h.log_id, cur->log_id, 16);
	h.seq = cur->seq;
	memcpy(h.hash, cur->hash, 32);
	memset(&rep, 0, sizeof(rep));
	if (aud_verify(path, kr, &h, &rep) != 0) {
		*problem = rep.problem ? aud_problem_name(rep.problem) : "unreadable";
		snprintf(buf, len, "against the head the cluster recorded for broker %.300s (line %llu, "
		    "recorded %llu s ago): %s", b->cl_name, (unsigned long long)cur->seq + 1,
		    (unsigned long long)(cur->age_ms / 1000u), rep.what[0] ? rep.what : "cannot read it");
		return false;
	}
	snprintf(buf, len, "holds the head the cluster recorded for broker %.300s (line %llu, recorded "
	    "%llu s ago)", b->cl_name, (unsigned long long)cur->seq + 1,
	    (unsigned long long)(cur->age_ms / 1000u));
	return true;
}

int
brk_fleet_open(struct brk *b, char *why, size_t whylen)
{
	const char *conninfo = b->opts.cluster ? b->opts.cluster : pol_cluster(b->pol);
	char host[128];
	uint64_t stale = pol_cluster_stale(b->pol);
	int r;

	if (!conninfo)
		return 0;
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	/* One name per host and state directory: unique in the cluster,
	 * and what an administrator recognises in `capctl` and the log. */
	if ((size_t)snprintf(b->cl_name, sizeof(b->cl_name), "%s:%s", host, b->state_real) >=
	    sizeof(b->cl_name)) {
		snprintf(why, whylen, "cluster: the broker's name %s:%s is too long", host, b->state_real);
		return CB_EINVAL;
	}
	b->cl_stale_ns = (stale ? stale : 1) * 1000000000u;
	/* Stale until the first catch-up (fail closed), but that is start-up,
	 * not news: the log hears of the link (cluster.link) instead. */
	b->cl_stale_noted = true;
	if (!(b->ev_cl_stale = evtimer_new(b->base, brk_fleet_stale, b)))
		return CB_ENOMEM;
	r = cl_open(&(struct cl_opts){ .conninfo = conninfo, .name = b->cl_name,
	    .stale_ms = b->cl_stale_ns / 1000000u,
	    .sink = { .batch = brk_fleet_batch, .link = brk_fleet_link,
	    .decisions = brk_fleet_decisions, .requests = brk_fleet_requests,
	    .held = brk_fleet_held, .arg = b } }, &b->cl);
	if (r == CB_EUNSUPPORTED) {
		snprintf(why, whylen, "cluster: cannot load libpq: %s", cl_lib_why());
		return r;
	}
	if (r != 0) {
		snprintf(why, whylen, "cluster: cannot start the link to the database: %s", cb_strerror(r));
		return r;
	}
	if (!(b->ev_cl = event_new(b->base, cl_fd(b->cl), EV_READ | EV_PERSIST, brk_fleet_readable, b)))
		return CB_ENOMEM;
	event_add(b->ev_cl, NULL);
	brk_fleet_arm(b);
	brk_fleet_keys(b);
	return 0;
}

void
brk_fleet_close(struct brk *b)
{
	if (b->ev_cl)
		event_free(b->ev_cl);
	b->ev_cl = NULL;
	if (b->ev_cl_stale)
		event_free(b->ev_cl_stale);
	b->ev_cl_stale = NULL;
	cl_close(b->cl);
	b->cl = NULL;
	brk_revoke_flush(b);
}

/* ---- elevation requests across the cluster (docs/cluster.md) ---------- */

uint64_t
brk_fleet_rid(const struct brk *b, uint64_t local)
{
	uint64_t num;

	if (!b->cl)
		return local;
	num = cl_num(b->cl);
	/* no number yet, or a state that outgrew its span: no cluster id */
	if (num == 0 || local == 0 || local >= CL_RID_SPAN || num > UINT64_MAX / CL_RID_SPAN - 1)
		return 0;
	return num * CL_RID_SPAN + local;
}

static struct cl_job *
brk_fleet_req_job(enum cl_op op, uint64_t rid)
{
	struct cl_job *j = calloc(1, sizeof(*j));

	if (j && !(j->req = calloc(1, sizeof(*j->req)))) {
		free(j);
		return NULL;
	}
	if (j) {
		j->op = op;
		j->req->rid = rid;
	}
	return j;
}

void
brk_fleet_request(struct brk *b, const struct st_request *rq)
{
	uint64_t rid = brk_fleet_rid(b, rq->id);
	struct cl_job *j;

	if (!b->cl || !rid || !(j = brk_fleet_req_job(CL_PUT_REQUEST, rid)))
		return;
	/* Kept and retried while the database is away: meanwhile only this
	 * broker lists it, and only this broker's administrators (or its
	 * expiry) can close it, once the database answers again. */
	j->retry = true;
	snprintf(j->req->sandbox, sizeof(j->req->sandbox), "%s", rq->sandbox);
	snprintf(j->req->command, sizeof(j->req->command), "%s", rq->command);
	snprintf(j->req->cap, sizeof(j->req->cap), "%s", rq->capability);
	snprintf(j->req->reason, sizeof(j->req->reason), "%s", rq->reason);
	j->req->ttl = rq->ttl;
	j->req->asked_at = rq->asked_at;
	j->req->expires_at = rq->expires_at;
	cb_ignore(cl_submit(b->cl, j));
}

void
brk_fleet_closed(struct brk *b, uint64_t local, bool expired, const char *by, const char *why)
{
	uint64_t rid = brk_fleet_rid(b, local);
	struct cl_job *j;

	if (!b->cl || !rid || !(j = brk_fleet_req_job(CL_PUT_CLOSED, rid)))
		return;
	j->retry = true;
	j->req->state = expired ? CL_REQ_EXPIRED : CL_REQ_DENIED;
	snprintf(j->req->by, sizeof(j->req->by), "%s", by ? by : "broker");
	snprintf(j->req->why, sizeof(j->req->why), "%s", why ? why : "");
	cb_ignore(cl_submit(b->cl, j));
}

int
brk_fleet_decide(struct brk *b, const struct brk_verdict *v,
    void (*done)(void *arg, const struct cl_job *j), void *arg)
{
	struct cl_job *j;

	if (!b->cl)
		return CB_ECLUSTER;
	if (!(j = brk_fleet_req_job(CL_DECIDE, v->rid)))
		return CB_ENOMEM;
	j->req->state = v->approve ? CL_REQ_APPROVED : CL_REQ_DENIED;
	snprintf(j->req->by, sizeof(j->req->by), "%s", v->by);
	snprintf(j->req->why, sizeof(j->req->why), "%s", v->reason ? v->reason : "");
	j->req->approved_ttl = v->approve ? v->ttl : 0;
	j->req->session = v->approve && v->session;
	j->done = done;
	j->arg = arg;
	return cl_submit(b->cl, j);
}

/*
 * Whether the row r, decided in the database, is the request this broker
 * holds under the local id: the same sandbox, capability and time of
 * asking.  An administrator decides a row by its id after reading its
 * capability there; the id alone must never carry that decision to another
 * request.  Ids are reused when this state is not the one that wrote the
 * row (--new-state, `state rebuild`, a restored copy: its requests number
 * from 1 again under the same broker name), and then the INSERT of the new
 * request leaves the old row in place (ON CONFLICT DO NOTHING): pending, it
 * would be listed with the old capability while an approval applied the
 * new one; approved and not yet applied, it would approve the new one
 * unasked.  A mismatch is refused and audited.
 */
static bool
brk_fleet_same_request(struct brk *b, const struct cl_req *r, uint64_t local)
{
	struct st_request rq;
	char detail[512];

	if (st_request_get(b->st, local, &rq) != 0)
		return true;	/* nothing to confuse it with: deciding says ENOENT */
	if (strcmp(rq.sandbox, r->sandbox) == 0 && strcmp(rq.capability, r->cap) == 0 &&
	    rq.asked_at == r->asked_at)
		return true;
	snprintf(detail, sizeof(detail), "request %llu: the cluster's row (sandbox %.64s, asked at %llu)"
	    " is not the request held here under that id (asked at %llu): decision not applied",
	    (unsigned long long)r->rid, r->sandbox, (unsigned long long)r->asked_at,
	    (unsigned long long)rq.asked_at);
	brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "cluster.refused",
	    .sandbox = rq.sandbox, .resource = r->cap, .actor = "broker", .reason = CB_EINVAL,
	    .detail = detail });
	return false;
}

/* A decision on a request this broker holds, made on any broker: applied
 * here through the same path as a local one (approve mints the token and
 * answers the agent), then its outcome goes back to the database, where
 * the deciding broker waits for it.  Applying twice is harmless: the
 * state has the request decided by then, and the second outcome, written
 * after the first, is ignored there (applied_at is set once). */
static void
brk_fleet_apply_decision(struct brk *b, const struct cl_req *r)
{
	uint64_t num = cl_num(b->cl), local;
	bool approve = r->state == CL_REQ_APPROVED, reopen = false;
	struct st_request rq;
	struct cl_job *j;
	int e;

	if (num == 0 || r->rid / CL_RID_SPAN != num)
		return;
	local = r->rid % CL_RID_SPAN;
	if (!brk_fleet_same_request(b, r, local)) {
		e = CB_EINVAL;	/* what was decided is not what is asked here */
		goto put;
	}
	e = brk_pending_decide(b, &(struct brk_verdict){ .rid = local, .approve = approve,
	    .ttl = r->approved_ttl, .session = r->session, .by = r->by,
	    .reason = r->why[0] ? r->why : NULL, .where = r->on });
	if (e == CB_EEXIST && st_request_get(b->st, local, &rq) == 0 &&
	    rq.state == (approve ? ST_REQ_APPROVED : ST_REQ_DENIED))
		e = 0;	/* applied before: this is the same decision read again */
	else if (e != 0 && e != CB_ENOENT && e != CB_EEXIST && e != CB_EEXPIREDREQ)
		reopen = true;	/* no room, or the gate failed: still pending here */
put:
	if (!(j = brk_fleet_req_job(CL_PUT_APPLIED, r->rid)))
		return;
	j->retry = true;
	j->req->outcome = e;
	j->req->reopen = reopen;
	cb_ignore(cl_submit(b->cl, j));
}

static void
brk_fleet_requests(void *arg, const struct cl_req *r, size_t n)
{
	struct brk *b = arg;

	for (size_t i = 0; i < n && b->cl_request_arrived; i++)
		b->cl_request_arrived(b, &r[i]);
}

/* Another live broker process holds our name (docs/cluster.md, "One name,
 * one broker").  At start it is refused: the broker stops with the exit
 * status of a broker that could not be set up (125, as `run` says it), and
 * says why; later (this process held the name, then was away longer than
 * the bound while a clone took it) it stays in the cluster's log and on
 * stderr, and the link stays down: the broker fails closed. */
static void
brk_fleet_held(void *arg, bool fatal, const char *why)
{
	struct brk *b = arg;
	char detail[CL_WHY_MAX + 96];

	snprintf(detail, sizeof(detail), "%s%s", why, fatal ? "; refusing to start" :
	    "; failing closed until it stops");
	brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "cluster.conflict", .actor = "broker",
	    .reason = CB_EEXIST, .detail = detail });
	fprintf(stderr, "capbroker: cluster: broker %s: %s\n", b->cl_name, detail);
	if (fatal)
		brk_stop(b, BRK_EXIT_NAME_HELD);
}

static void
brk_fleet_decisions(void *arg, const struct cl_req *r, size_t n)
{
	struct brk *b = arg;

	for (size_t i = 0; i < n; i++)
		brk_fleet_apply_decision(b, &r[i]);
}

void
brk_fleet_sandboxes(struct brk *b)
{
	struct cl_sbx *v = NULL;
	size_t n = 0, k = 0;
	uint64_t sig = 1469598103934665603ull;

	if (!b->cl)
		return;
	/* Published when the set changed (a hash of ids, start times and
	 * counts). */
	for (struct brk_sbx *s = b->sbx; s; s = s->next) {
		if (s->dead)
			continue;
		n++;
		for (const char *p = s->id; *p; p++)
			sig = (sig ^ (uint8_t)*p) * 1099511628211ull;
		sig = (sig ^ s->started_at) * 1099511628211ull;
		/* the counts too: other brokers' views show them */
		sig = (sig ^ s->nheld) * 1099511628211ull;
		sig = (sig ^ s->nreq) * 1099511628211ull;
	}
	if (sig == b->cl_sbx_sig)
		return;
	if (n && !(v = calloc(n, sizeof(*v))))
		return;
	for (struct brk_sbx *s = b->sbx; s && k < n; s = s->next) {
		if (s->dead)
			continue;
		snprintf(v[k].id, sizeof(v[k].id), "%s", s->id);
		snprintf(v[k].tier, sizeof(v[k].tier), "%s", s->tier_name);
		snprintf(v[k].command, sizeof(v[k].command), "%s", s->command ? s->command : "");
		snprintf(v[k].workspace, sizeof(v[k].workspace), "%s", s->workspace ? s->workspace : "");
		v[k].started = s->started_at;
		v[k].pid = (uint64_t)(s->spawned ? s->proc.pid : 0);
		v[k].owner = s->owner;
		v[k].tokens = s->nheld;
		v[k].requests = s->nreq;
		k++;
	}
	if (cl_set_sandboxes(b->cl, v, k) == 0)
		b->cl_sbx_sig = sig;
	free(v);
}
