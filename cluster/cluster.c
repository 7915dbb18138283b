/*
 * cluster.c - the link to the cluster's PostgreSQL database, on a thread of
 * its own (libpq's calls block; the broker's event loop never does).
 *
 * Trust domain: broker.  The database is the administrators' (like the
 * state directory); the text we put into SQL is either ours (hex ids,
 * numbers) or escaped by libpq (PQescapeLiteral: names, capabilities,
 * actors), and what comes back is checked for length before use.
 *
 * The hand-off: the loop appends jobs to `in` and writes efd_in; the
 * thread appends messages (batches of changes, link changes, finished
 * jobs) to `out` and writes efd_out, which the loop watches.  Each list is
 * under the one mutex; neither side calls the other's callbacks.
 *
 * Every query is sent without blocking and waited for with a deadline
 * (CL_QUERY_MS): a cut network stalls a query, never the thread, and the
 * link is dropped and made again.
 */
#include "cluster/cluster.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <libpq-fe.h>

#define CL_QUERY_MS	3000	/* longest wait for one round trip */
#define CL_RETRY_MS	250	/* between connection attempts */
#define CL_ACK_POLL_MS	20	/* re-check of waiting revocations without a NOTIFY */
#define CL_TXN_JOBS	256	/* jobs written in one transaction */
#define CL_TXN_BYTES	(1u << 20)
#define CL_RESULTS_MAX	(CL_TXN_JOBS + 8)
/* The advisory lock every writer of the stream holds from its sequence
 * number to its commit ("cbseq"). */
#define CL_LOCK_KEY	"1667396465"

/* libpq is loaded by cl_open (dlopen), not linked: every `capbroker run`
 * paid for it and the twenty libraries it brings (Kerberos, LDAP, GnuTLS...)
 * at each start, and only a broker with a cluster uses it
 * (docs/performance.md).  These are the calls we make, with the header's
 * prototypes; cl_pq_load() sets them all before the link's thread runs. */
#define CL_PQ_FUNCS(X) \
	X(PQclear) \
	X(PQconnectdbParams) \
	X(PQconsumeInput) \
	X(PQerrorMessage) \
	X(PQescapeLiteral) \
	X(PQfinish) \
	X(PQflush) \
	X(PQfreemem) \
	X(PQgetResult) \
	X(PQgetisnull) \
	X(PQgetvalue) \
	X(PQisBusy) \
	X(PQnfields) \
	X(PQnotifies) \
	X(PQntuples) \
	X(PQresultErrorMessage) \
	X(PQresultStatus) \
	X(PQsendQuery) \
	X(PQsetNoticeProcessor) \
	X(PQsetnonblocking) \
	X(PQsocket) \
	X(PQstatus)
static struct {
#define CL_PQ_FIELD(f) __typeof__(f) *f;
	CL_PQ_FUNCS(CL_PQ_FIELD)
#undef CL_PQ_FIELD
} cl_pq;
static char cl_pq_why[256];
static int cl_pq_err;
static pthread_once_t cl_pq_once = PTHREAD_ONCE_INIT;

static void
cl_pq_load_once(void)
{
#define CL_PQ_SYM(f) { #f, (void **)&cl_pq.f },
	static const struct cb_dl_sym syms[] = { CL_PQ_FUNCS(CL_PQ_SYM) };
#undef CL_PQ_SYM

	/* The soname libpq-fe.h belongs to (libpq5). */
	cl_pq_err = cb_dl_load("libpq.so.5", syms, sizeof(syms) / sizeof(syms[0]), cl_pq_why,
	    sizeof(cl_pq_why));
}

enum cl_msg_type { CL_MSG_BATCH, CL_MSG_LINK, CL_MSG_JOB };

struct cl_msg {
	enum cl_msg_type type;
	struct cl_rec *recs;
	size_t n;
	uint64_t fresh_ns;
	bool up;
	char why[CL_WHY_MAX];
	struct cl_job *job;
	struct cl_msg *next;
};

struct cl_key {
	uint8_t pk[32];
	bool signing, retired;
};

struct cl {
	char *conninfo, *name;
	uint64_t stale_ns, beat_ns;
	struct cl_sink sink;
	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	struct cl_job *in, *in_tail;	/* loop -> thread */
	size_t nin;
	struct cl_msg *out, *out_tail;	/* thread -> loop */
	int efd_in, efd_out;
	atomic_bool stop;
	atomic_bool up;
	atomic_uint_least64_t applied;
	/* the thread's own */
	PGconn *pg;
	char *name_lit;			/* PQescapeLiteral(name) for this connection */
	uint64_t cursor;		/* changes read up to */
	uint64_t applied_sent;		/* the applied number last written */
	struct cl_job *retry, *retry_tail;	/* kept while the database is away */
	struct cl_job *waiters;		/* revocations waiting for the others */
	struct cl_key *keys;		/* ours: published again on every connect */
	size_t nkeys;
	uint64_t next_beat, next_ack;
	int was_up;			/* -1 unknown, 0 down, 1 up */
	bool want_catchup, want_acks;
	char down_why[CL_WHY_MAX];
};

static const char cl_schema[] =
	"BEGIN;"
	"SELECT pg_advisory_xact_lock(" CL_LOCK_KEY ");"
	"CREATE SEQUENCE IF NOT EXISTS cb_seq;"
	"CREATE TABLE IF NOT EXISTS cb_brokers(name text PRIMARY KEY, applied bigint NOT NULL DEFAULT 0,"
	" seen_at timestamptz NOT NULL DEFAULT now(), started_at timestamptz NOT NULL DEFAULT now());"
	"CREATE TABLE IF NOT EXISTS cb_keys(kid bytea PRIMARY KEY, pk bytea NOT NULL, broker text NOT NULL,"
	" signing boolean NOT NULL, retired_at bigint, seq bigint NOT NULL UNIQUE);"
	"CREATE TABLE IF NOT EXISTS cb_tokens(id bytea PRIMARY KEY, parent bytea, sandbox text NOT NULL,"
	" caps text NOT NULL, nbf bigint NOT NULL, exp bigint NOT NULL, limited boolean NOT NULL,"
	" elevated boolean NOT NULL, issued_at bigint NOT NULL, issued_by text NOT NULL,"
	" broker text NOT NULL, seq bigint NOT NULL UNIQUE);"
	"CREATE TABLE IF NOT EXISTS cb_revocations(seq bigint PRIMARY KEY, token bytea NOT NULL,"
	" at bigint NOT NULL, actor text NOT NULL, broker text NOT NULL);"
	/* Elevation requests and decisions, and each broker's audit checkpoint
	 * heads: the schema of docs/cluster.md, filled by later steps. */
	"CREATE TABLE IF NOT EXISTS cb_requests(broker text NOT NULL, id bigint NOT NULL,"
	" sandbox text NOT NULL, capability text NOT NULL, reason text NOT NULL, ttl bigint NOT NULL,"
	" asked_at bigint NOT NULL, expires_at bigint NOT NULL, state text NOT NULL DEFAULT 'pending',"
	" decided_by text, decided_at bigint, approved_ttl bigint, PRIMARY KEY(broker, id));"
	"CREATE TABLE IF NOT EXISTS cb_checkpoints(broker text NOT NULL, log_id bytea NOT NULL,"
	" seq bigint NOT NULL, hash bytea NOT NULL, at timestamptz NOT NULL DEFAULT now(),"
	" PRIMARY KEY(broker, log_id));"
	"COMMIT;";

/* ---- the queues ------------------------------------------------------- */

static void
cl_kick(int fd)
{
	uint64_t one = 1;

	/* An eventfd counter only saturates; a failed write means the other
	 * side is already awake. */
	if (write(fd, &one, sizeof(one)) != sizeof(one))
		return;
}

static void
cl_post(struct cl *c, struct cl_msg *m)
{
	m->next = NULL;
	pthread_mutex_lock(&c->mu);
	if (c->out_tail)
		c->out_tail->next = m;
	else
		c->out = m;
	c->out_tail = m;
	pthread_mutex_unlock(&c->mu);
	cl_kick(c->efd_out);
}

void
cl_job_free(struct cl_job *j)
{
	if (!j)
		return;
	free(j->caps);
	free(j);
}

static void
cl_job_done(struct cl *c, struct cl_job *j)
{
	struct cl_msg *m = calloc(1, sizeof(*m));

	if (!m) {	/* nobody can be told: the job is dropped */
		cl_job_free(j);
		return;
	}
	m->type = CL_MSG_JOB;
	m->job = j;
	cl_post(c, m);
}

static void
cl_job_fail(struct cl *c, struct cl_job *j, int err, const char *why)
{
	j->err = err;
	snprintf(j->why, sizeof(j->why), "%s", why);
	cl_job_done(c, j);
}

static void
cl_link(struct cl *c, bool up, const char *why)
{
	struct cl_msg *m;

	atomic_store(&c->up, up);
	if (c->was_up == (int)up)
		return;
	c->was_up = up;
	if (!(m = calloc(1, sizeof(*m))))
		return;
	m->type = CL_MSG_LINK;
	m->up = up;
	snprintf(m->why, sizeof(m->why), "%s", why ? why : "");
	cl_post(c, m);
}

/* ---- one round trip, with a deadline --------------------------------- */

struct cl_res {
	PGresult *r[CL_RESULTS_MAX];
	size_t n;
};

static void
cl_res_clear(struct cl_res *res)
{
	for (size_t i = 0; i < res->n; i++)
		cl_pq.PQclear(res->r[i]);
	res->n = 0;
}

static void
cl_down(struct cl *c, const char *what)
{
	struct cl_job *w;
	char w0[CL_WHY_MAX];

	/* what may be down_why itself (a statement's error, kept) */
	snprintf(w0, sizeof(w0), "%s", what);
	if (c->pg && cl_pq.PQstatus(c->pg) == CONNECTION_BAD)
		snprintf(c->down_why, sizeof(c->down_why), "%.120s: %.130s", w0, cl_pq.PQerrorMessage(c->pg));
	else
		snprintf(c->down_why, sizeof(c->down_why), "%s", w0);
	/* libpq's messages end with a newline */
	c->down_why[strcspn(c->down_why, "\n")] = '\0';
	if (c->pg)
		cl_pq.PQfinish(c->pg);
	c->pg = NULL;
	cl_pq.PQfreemem(c->name_lit);
	c->name_lit = NULL;
	/* Committed revocations waiting for the others' confirmation: the
	 * commit stands; whoever did not apply it fails closed at its
	 * staleness bound. */
	while ((w = c->waiters)) {
		c->waiters = w->next;
		w->unconfirmed = 1;
		snprintf(w->why, sizeof(w->why), "committed; the confirmation of the other brokers "
		    "was cut by the database link (%.150s)", c->down_why);
		cl_job_done(c, w);
	}
	cl_link(c, false, c->down_why);
}

/* Send sql (one or more statements) and collect every result, waiting at
 * most CL_QUERY_MS.  0, or CB_ECLUSTER after dropping the connection.  A
 * statement's own error (a result with PGRES_FATAL_ERROR) is in res. */
static int
cl_query(struct cl *c, const char *sql, struct cl_res *res)
{
	uint64_t deadline = cb_mono_ns() + (uint64_t)CL_QUERY_MS * 1000000u;
	PGresult *r;

	res->n = 0;
	if (!c->pg || !cl_pq.PQsendQuery(c->pg, sql))
		goto fail;
	for (;;) {
		int f = cl_pq.PQflush(c->pg);

		if (f < 0)
			goto fail;
		while (f == 0 && !cl_pq.PQisBusy(c->pg)) {
			if (!(r = cl_pq.PQgetResult(c->pg)))
				return 0;
			if (res->n < CL_RESULTS_MAX)
				res->r[res->n++] = r;
			else
				cl_pq.PQclear(r);
		}
		{
			struct pollfd p = { .fd = cl_pq.PQsocket(c->pg), .events = POLLIN | (f ? POLLOUT : 0) };
			uint64_t now = cb_mono_ns();
			int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000u) + 1;

			if (left == 0 || poll(&p, 1, left) == 0) {
				cl_res_clear(res);
				cl_down(c, "the database did not answer in time");
				return CB_ECLUSTER;
			}
			if (!cl_pq.PQconsumeInput(c->pg))
				goto fail;
		}
	}
fail:
	cl_res_clear(res);
	cl_down(c, "the database link failed");
	return CB_ECLUSTER;
}

/* A query whose every statement must succeed. */
static int
cl_exec(struct cl *c, const char *sql, const char *what)
{
	struct cl_res res;
	int r;

	if ((r = cl_query(c, sql, &res)) != 0)
		return r;
	for (size_t i = 0; i < res.n; i++) {
		ExecStatusType s = cl_pq.PQresultStatus(res.r[i]);

		if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
			snprintf(c->down_why, sizeof(c->down_why), "%s: %s", what,
			    cl_pq.PQresultErrorMessage(res.r[i]));
			r = CB_ECLUSTER;
			break;
		}
	}
	cl_res_clear(&res);
	return r;
}

/* ---- hex ---------------------------------------------------------------- */

static void
cl_hex(const uint8_t *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int
cl_nib(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* Exactly n bytes of lowercase hex (what encode(..., 'hex') gives). */
static bool
cl_unhex(const char *s, uint8_t *b, size_t n)
{
	if (strlen(s) != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		int hi = cl_nib(s[2 * i]), lo = cl_nib(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

/* ---- writes ------------------------------------------------------------ */

struct cl_sql {
	char *s;
	size_t len, cap;
	bool oom;
};

static void
cl_sql_add(struct cl_sql *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
cl_sql_add(struct cl_sql *q, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (q->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(q->s ? q->s + q->len : NULL, q->s ? q->cap - q->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			q->oom = true;
			return;
		}
		if (q->s && q->len + (size_t)n < q->cap) {
			q->len += (size_t)n;
			return;
		}
		{
			size_t nc = (q->cap ? q->cap * 2 : 4096) + (size_t)n;
			char *ns = realloc(q->s, nc);

			if (!ns) {
				q->oom = true;
				return;
			}
			q->s = ns;
			q->cap = nc;
		}
	}
}

/* Text for SQL: escaped by libpq, freed by the caller (PQfreemem); NULL on
 * failure (out of memory, or text the server's encoding refuses). */
static char *
cl_lit(struct cl *c, const char *s)
{
	return cl_pq.PQescapeLiteral(c->pg, s ? s : "", strlen(s ? s : ""));
}

static bool
cl_job_sql(struct cl *c, struct cl_sql *q, const struct cl_job *j)
{
	char id[2 * CAP_ID_LEN + 1], par[2 * CAP_ID_LEN + 1], pk[65], kid[2 * CAP_KID_LEN + 1];
	char *l1 = NULL, *l2 = NULL, *l3 = NULL;
	bool ok = false;

	cl_hex(j->id, CAP_ID_LEN, id);
	switch (j->op) {
	case CL_PUT_KEY:
		cl_hex(j->pk, 32, pk);
		{
			uint8_t k[CAP_KID_LEN];

			cap_kid_of(j->pk, k);
			cl_hex(k, CAP_KID_LEN, kid);
		}
		cl_sql_add(q, "INSERT INTO cb_keys(kid, pk, broker, signing, retired_at, seq) VALUES("
		    "decode('%s','hex'), decode('%s','hex'), %s, %s, %s, nextval('cb_seq'))"
		    " ON CONFLICT (kid) DO UPDATE SET signing = EXCLUDED.signing,"
		    " retired_at = coalesce(cb_keys.retired_at, EXCLUDED.retired_at), seq = EXCLUDED.seq"
		    " WHERE cb_keys.signing <> EXCLUDED.signing OR (cb_keys.retired_at IS NULL AND"
		    " EXCLUDED.retired_at IS NOT NULL) RETURNING seq;", kid, pk, c->name_lit,
		    j->signing ? "true" : "false",
		    j->retired ? "extract(epoch from now())::bigint" : "NULL");
		ok = true;
		break;
	case CL_PUT_TOKEN:
		if (!(l1 = cl_lit(c, j->sandbox)) || !(l2 = cl_lit(c, j->caps)) || !(l3 = cl_lit(c, j->by)))
			break;
		if (j->has_parent)
			cl_hex(j->parent, CAP_ID_LEN, par);
		cl_sql_add(q, "INSERT INTO cb_tokens(id, parent, sandbox, caps, nbf, exp, limited, elevated,"
		    " issued_at, issued_by, broker, seq) VALUES(decode('%s','hex'), %s%s%s, %s, %s, %" PRIu64
		    ", %" PRIu64 ", %s, %s, %" PRIu64 ", %s, %s, nextval('cb_seq'))"
		    " ON CONFLICT (id) DO NOTHING RETURNING seq;", id,
		    j->has_parent ? "decode('" : "NULL", j->has_parent ? par : "",
		    j->has_parent ? "','hex')" : "", l1, l2, j->nbf, j->exp,
		    j->limited ? "true" : "false", j->elevated ? "true" : "false", j->issued_at, l3,
		    c->name_lit);
		ok = true;
		break;
	case CL_PUT_REVOKE:
		if (!(l1 = cl_lit(c, j->by)))
			break;
		/* Only a token the cluster knows: an id nobody issued is refused
		 * (as a single broker refuses it). */
		cl_sql_add(q, "INSERT INTO cb_revocations(seq, token, at, actor, broker)"
		    " SELECT nextval('cb_seq'), decode('%s','hex'), extract(epoch from now())::bigint, %s, %s"
		    " WHERE EXISTS (SELECT 1 FROM cb_tokens WHERE id = decode('%s','hex')) RETURNING seq;",
		    id, l1, c->name_lit, id);
		ok = true;
		break;
	case CL_PUT_RETIRE:
		cl_hex(j->kid, CAP_KID_LEN, kid);
		cl_sql_add(q, "UPDATE cb_keys SET retired_at = coalesce(retired_at,"
		    " extract(epoch from now())::bigint), seq = nextval('cb_seq')"
		    " WHERE kid = decode('%s','hex') AND NOT signing RETURNING seq;", kid);
		ok = true;
		break;
	}
	cl_pq.PQfreemem(l1);
	cl_pq.PQfreemem(l2);
	cl_pq.PQfreemem(l3);
	return ok && !q->oom;
}

static void
cl_remember_key(struct cl *c, const struct cl_job *j)
{
	struct cl_key *k;

	for (size_t i = 0; i < c->nkeys; i++) {
		if (memcmp(c->keys[i].pk, j->pk, 32) == 0) {
			c->keys[i].signing = j->signing;
			c->keys[i].retired = c->keys[i].retired || j->retired;
			return;
		}
	}
	if (!(k = realloc(c->keys, (c->nkeys + 1) * sizeof(*k))))
		return;
	c->keys = k;
	memcpy(k[c->nkeys].pk, j->pk, 32);
	k[c->nkeys].signing = j->signing;
	k[c->nkeys].retired = j->retired;
	c->nkeys++;
}

static void
cl_requeue(struct cl *c, struct cl_job *j)
{
	j->next = NULL;
	if (c->retry_tail)
		c->retry_tail->next = j;
	else
		c->retry = j;
	c->retry_tail = j;
}

/* Write jobs (a list, at most CL_TXN_JOBS) in one transaction.  Each gets
 * its result; a failed link fails or keeps them (retry). */
static void
cl_write(struct cl *c, struct cl_job *list)
{
	struct cl_sql q = { 0 };
	struct cl_job *j, *next;
	struct cl_res res;
	size_t njobs = 0, i;
	int r;

	cl_sql_add(&q, "BEGIN;SELECT pg_advisory_xact_lock(" CL_LOCK_KEY ");");
	for (j = list; j; j = j->next) {
		if (!cl_job_sql(c, &q, j))
			break;
		njobs++;
	}
	cl_sql_add(&q, "NOTIFY cb_change;COMMIT;");
	if (q.oom || j) {
		free(q.s);
		for (j = list; j; j = next) {
			next = j->next;
			cl_job_fail(c, j, CB_ENOMEM, "out of memory, or text the database cannot hold");
		}
		return;
	}
	r = cl_query(c, q.s, &res);
	free(q.s);
	if (r == 0) {
		/* BEGIN, the lock, one per job, NOTIFY, COMMIT: all must be there
		 * and fine, or the transaction did not commit. */
		bool ok = res.n == njobs + 4;

		for (i = 0; ok && i < res.n; i++) {
			ExecStatusType s = cl_pq.PQresultStatus(res.r[i]);

			ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
		}
		if (!ok) {
			char why[CL_WHY_MAX];

			snprintf(why, sizeof(why), "the database refused the write: %s",
			    res.n ? cl_pq.PQresultErrorMessage(res.r[res.n - 1]) : "no result");
			why[strcspn(why, "\n")] = '\0';
			cl_res_clear(&res);
			cb_ignore(cl_exec(c, "ROLLBACK;", "rollback"));
			for (j = list; j; j = next) {
				next = j->next;
				cl_job_fail(c, j, CB_ECLUSTER, why);
			}
			return;
		}
	}
	for (j = list, i = 0; j; j = next, i++) {
		next = j->next;
		if (r != 0) {
			if (j->retry) {
				cl_requeue(c, j);
				continue;
			}
			cl_job_fail(c, j, CB_ECLUSTER, "not acknowledged: the link to the cluster "
			    "database failed during the write (it may have been recorded; a revoke may "
			    "safely be repeated)");
			continue;
		}
		{
			PGresult *pr = res.r[2 + i];

			j->err = 0;
			if (cl_pq.PQntuples(pr) == 1)
				j->seq = strtoull(cl_pq.PQgetvalue(pr, 0, 0), NULL, 10);
			else if (j->op == CL_PUT_REVOKE) {
				j->err = CB_ENOENT;
				snprintf(j->why, sizeof(j->why), "no broker of the cluster issued that token id");
			} else if (j->op == CL_PUT_RETIRE) {
				j->err = CB_ENOENT;
				snprintf(j->why, sizeof(j->why), "the cluster has no such key, or it is a "
				    "broker's signing key (rotate that broker's key first)");
			}
		}
		if (j->op == CL_PUT_REVOKE && j->err == 0) {
			/* Done when every live broker has it. */
			j->deadline_ns = cb_mono_ns() + c->stale_ns + 200000000u;
			j->next = c->waiters;
			c->waiters = j;
			c->next_ack = 0;
			continue;
		}
		cl_job_done(c, j);
	}
	cl_res_clear(&res);
}

/* ---- reading the stream --------------------------------------------- */

static bool
cl_row(PGresult *pr, int i, struct cl_rec *rec)
{
	const char *kind = cl_pq.PQgetvalue(pr, i, 1);

	memset(rec, 0, sizeof(*rec));
	rec->seq = strtoull(cl_pq.PQgetvalue(pr, i, 0), NULL, 10);
	snprintf(rec->broker, sizeof(rec->broker), "%s", cl_pq.PQgetvalue(pr, i, 7));
	snprintf(rec->actor, sizeof(rec->actor), "%s", cl_pq.PQgetvalue(pr, i, 8));
	switch (kind[0]) {
	case 'k':
		rec->kind = CL_KEY;
		rec->retired = cl_pq.PQgetvalue(pr, i, 5)[0] == 't';
		return cl_unhex(cl_pq.PQgetvalue(pr, i, 4), rec->pk, 32);
	case 't':
		rec->kind = CL_TOKEN;
		rec->limited = cl_pq.PQgetvalue(pr, i, 6)[0] == 't';
		if (!cl_pq.PQgetisnull(pr, i, 3)) {
			rec->has_parent = true;
			if (!cl_unhex(cl_pq.PQgetvalue(pr, i, 3), rec->parent, CAP_ID_LEN))
				return false;
		}
		return cl_unhex(cl_pq.PQgetvalue(pr, i, 2), rec->id, CAP_ID_LEN);
	case 'r':
		rec->kind = CL_REVOKE;
		return cl_unhex(cl_pq.PQgetvalue(pr, i, 2), rec->id, CAP_ID_LEN);
	default:
		return false;
	}
}

/* Read every change after the cursor, a page at a time, and pass them on.
 * The last page's send time is the freshness it proves. */
static int
cl_catchup(struct cl *c)
{
	char sql[1400];

	for (;;) {
		uint64_t sent = cb_mono_ns();
		struct cl_msg *m;
		struct cl_res res;
		PGresult *pr;
		int n, r;

		snprintf(sql, sizeof(sql),
		    "SELECT seq, 'k', encode(kid,'hex'), NULL::text, encode(pk,'hex'), retired_at IS NOT NULL,"
		    " false, broker, ''::text FROM cb_keys WHERE seq > %" PRIu64
		    " UNION ALL SELECT seq, 't', encode(id,'hex'), encode(parent,'hex'), NULL::text, false,"
		    " limited, broker, issued_by FROM cb_tokens WHERE seq > %" PRIu64
		    " UNION ALL SELECT seq, 'r', encode(token,'hex'), NULL::text, NULL::text, false, false,"
		    " broker, actor FROM cb_revocations WHERE seq > %" PRIu64
		    " ORDER BY 1 LIMIT %d", c->cursor, c->cursor, c->cursor, CL_PAGE);
		if ((r = cl_query(c, sql, &res)) != 0)
			return r;
		if (res.n != 1 || cl_pq.PQresultStatus(res.r[0]) != PGRES_TUPLES_OK ||
		    cl_pq.PQnfields(res.r[0]) != 9) {
			snprintf(c->down_why, sizeof(c->down_why), "reading the cluster's changes: %s",
			    res.n ? cl_pq.PQresultErrorMessage(res.r[0]) : "no result");
			cl_res_clear(&res);
			return CB_ECLUSTER;
		}
		pr = res.r[0];
		n = cl_pq.PQntuples(pr);
		if (!(m = calloc(1, sizeof(*m))) || (n && !(m->recs = calloc((size_t)n, sizeof(*m->recs))))) {
			free(m);
			cl_res_clear(&res);
			return CB_ENOMEM;
		}
		m->type = CL_MSG_BATCH;
		for (int i = 0; i < n; i++) {
			struct cl_rec *rec = &m->recs[m->n];

			/* A malformed row is skipped (it cannot be applied), but the
			 * cursor passes it: the stream must not stall on it. */
			if (cl_row(pr, i, rec))
				m->n++;
			c->cursor = strtoull(cl_pq.PQgetvalue(pr, i, 0), NULL, 10);
		}
		cl_res_clear(&res);
		m->fresh_ns = n < CL_PAGE ? sent : 0;
		if (m->n || m->fresh_ns)
			cl_post(c, m);
		else {
			free(m->recs);
			free(m);
		}
		if (n < CL_PAGE)
			return 0;
	}
}

/* Tell the others where we are (heartbeat and applied number). */
static int
cl_report(struct cl *c)
{
	uint64_t applied = atomic_load(&c->applied);
	char sql[CL_NAME_MAX * 2 + 300];
	bool moved = applied != c->applied_sent;
	int r;

	/* A report need not survive a crash of the database (the next one
	 * replaces it), so its commit does not wait for a disk flush: one
	 * report per batch applied, on every broker, would otherwise cost a
	 * flush each. */
	snprintf(sql, sizeof(sql), "BEGIN;SET LOCAL synchronous_commit TO off;"
	    "INSERT INTO cb_brokers(name, applied, seen_at) VALUES(%s, %" PRIu64
	    ", now()) ON CONFLICT (name) DO UPDATE SET applied = EXCLUDED.applied, seen_at = now();%s"
	    "COMMIT;", c->name_lit, applied, moved ? "NOTIFY cb_applied;" : "");
	if ((r = cl_exec(c, sql, "reporting to the cluster")) == 0)
		c->applied_sent = applied;
	return r;
}

/* Revocations waiting for the other live brokers to apply them. */
static int
cl_check_waiters(struct cl *c)
{
	char sql[CL_NAME_MAX * 2 + 300];
	struct cl_res res;
	struct cl_job **pp, *w;
	uint64_t now = cb_mono_ns(), min = UINT64_MAX;
	bool any = false;
	int r;

	snprintf(sql, sizeof(sql), "SELECT min(applied), count(*) FROM cb_brokers WHERE name <> %s"
	    " AND seen_at > now() - interval '%" PRIu64 " milliseconds'", c->name_lit,
	    c->stale_ns / 1000000u);
	if ((r = cl_query(c, sql, &res)) != 0)
		return r;
	if (res.n == 1 && cl_pq.PQresultStatus(res.r[0]) == PGRES_TUPLES_OK && cl_pq.PQntuples(res.r[0]) == 1) {
		any = !cl_pq.PQgetisnull(res.r[0], 0, 0);
		if (any)
			min = strtoull(cl_pq.PQgetvalue(res.r[0], 0, 0), NULL, 10);
	}
	cl_res_clear(&res);
	for (pp = &c->waiters; (w = *pp);) {
		if (!any || w->seq <= min || now >= w->deadline_ns) {
			*pp = w->next;
			if (any && w->seq > min) {
				w->unconfirmed = 1;
				snprintf(w->why, sizeof(w->why), "committed; a broker did not confirm it "
				    "within the staleness bound (it fails closed)");
			}
			cl_job_done(c, w);
			continue;
		}
		pp = &w->next;
	}
	c->next_ack = now + (uint64_t)CL_ACK_POLL_MS * 1000000u;
	return 0;
}

/* ---- the connection --------------------------------------------------- */

static void
cl_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

static int
cl_connect(struct cl *c)
{
	const char *kw[] = { "connect_timeout", "application_name", "dbname", NULL };
	const char *val[] = { "3", "capbroker", c->conninfo, NULL };
	int r;

	c->pg = cl_pq.PQconnectdbParams(kw, val, 1);
	if (!c->pg || cl_pq.PQstatus(c->pg) != CONNECTION_OK) {
		cl_down(c, "cannot connect to the cluster database");
		return CB_ECLUSTER;
	}
	/* The server's notices ("already exists, skipping") are not ours to
	 * print: the broker's stderr is its log. */
	cl_pq.PQsetNoticeProcessor(c->pg, cl_notice, NULL);
	if (cl_pq.PQsetnonblocking(c->pg, 1) != 0 ||
	    !(c->name_lit = cl_pq.PQescapeLiteral(c->pg, c->name, strlen(c->name)))) {
		cl_down(c, "cannot use the connection");
		return CB_ECLUSTER;
	}
	if ((r = cl_exec(c, cl_schema, "creating the cluster's tables")) != 0 ||
	    (r = cl_exec(c, "LISTEN cb_change;LISTEN cb_applied;", "listening")) != 0) {
		if (c->pg)
			cl_down(c, c->down_why);
		return CB_ECLUSTER;
	}
	/* A database restored from an older backup numbers its changes from
	 * below what we read: read everything again (applying a change twice
	 * changes nothing), or its new changes would be skipped. */
	{
		struct cl_res res;

		if (cl_query(c, "SELECT last_value FROM cb_seq", &res) != 0)
			return CB_ECLUSTER;
		if (res.n == 1 && cl_pq.PQresultStatus(res.r[0]) == PGRES_TUPLES_OK && cl_pq.PQntuples(res.r[0]) == 1 &&
		    strtoull(cl_pq.PQgetvalue(res.r[0], 0, 0), NULL, 10) < c->cursor)
			c->cursor = 0;
		cl_res_clear(&res);
	}
	/* Our keys again: a rotation made while the database was away, or a
	 * database restored from an older backup, learns them now. */
	for (size_t i = 0; i < c->nkeys; i++) {
		struct cl_job *j = calloc(1, sizeof(*j));

		if (!j)
			break;
		j->op = CL_PUT_KEY;
		memcpy(j->pk, c->keys[i].pk, 32);
		j->signing = c->keys[i].signing;
		j->retired = c->keys[i].retired;
		cl_write(c, j);
		/* the job's done message is only for jobs the loop sent */
	}
	if (!c->pg)
		return CB_ECLUSTER;
	c->applied_sent = UINT64_MAX;	/* report at once */
	if ((r = cl_report(c)) != 0 || (r = cl_catchup(c)) != 0) {
		if (c->pg)
			cl_down(c, c->down_why);
		return CB_ECLUSTER;
	}
	cl_link(c, true, NULL);
	c->next_beat = cb_mono_ns() + c->beat_ns;
	return 0;
}

static void
cl_wait_in(struct cl *c, int ms)
{
	struct pollfd p = { .fd = c->efd_in, .events = POLLIN };
	uint64_t v;

	if (poll(&p, 1, ms) > 0 && read(c->efd_in, &v, sizeof(v)) < 0)
		return;
}

/* Take what the loop queued (and what waited for the database). */
static struct cl_job *
cl_take(struct cl *c)
{
	struct cl_job *list, *j;

	pthread_mutex_lock(&c->mu);
	list = c->in;
	c->in = c->in_tail = NULL;
	c->nin = 0;
	pthread_mutex_unlock(&c->mu);
	if (c->retry) {
		c->retry_tail->next = list;
		list = c->retry;
		c->retry = c->retry_tail = NULL;
	}
	for (j = list; j; j = j->next)
		if (j->op == CL_PUT_KEY)
			cl_remember_key(c, j);
	return list;
}

/* The database is away: jobs that may wait are kept, the rest fail. */
static void
cl_fail_jobs(struct cl *c, struct cl_job *list)
{
	struct cl_job *next;

	for (; list; list = next) {
		next = list->next;
		if (list->retry)
			cl_requeue(c, list);
		else
			cl_job_fail(c, list, CB_ECLUSTER, c->down_why);
	}
}

static void
cl_write_all(struct cl *c, struct cl_job *list)
{
	while (list && c->pg) {
		struct cl_job *chunk = list, *j = list;
		size_t n = 1;

		while (j->next && n < CL_TXN_JOBS) {
			j = j->next;
			n++;
		}
		list = j->next;
		j->next = NULL;
		cl_write(c, chunk);
	}
	if (list)
		cl_fail_jobs(c, list);
}

static void
cl_notifies(struct cl *c)
{
	PGnotify *nt;

	while (c->pg && (nt = cl_pq.PQnotifies(c->pg))) {
		if (strcmp(nt->relname, "cb_change") == 0)
			c->want_catchup = true;
		else
			c->want_acks = true;
		cl_pq.PQfreemem(nt);
	}
}

static int
cl_ms_until(uint64_t when, uint64_t now)
{
	return when > now ? (int)((when - now) / 1000000u) + 1 : 0;
}

static void *
cl_main(void *arg)
{
	struct cl *c = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!atomic_load(&c->stop)) {
		struct pollfd p[2];
		uint64_t now, v;
		int timeout;

		if (!c->pg && cl_connect(c) != 0) {
			cl_fail_jobs(c, cl_take(c));
			cl_wait_in(c, CL_RETRY_MS);
			continue;
		}
		/* a NOTIFY read during a query waits in libpq, not on the socket */
		cl_notifies(c);
		now = cb_mono_ns();
		timeout = cl_ms_until(c->next_beat, now);
		if (c->waiters && cl_ms_until(c->next_ack, now) < timeout)
			timeout = cl_ms_until(c->next_ack, now);
		if (c->want_catchup || c->want_acks || atomic_load(&c->applied) != c->applied_sent)
			timeout = 0;
		p[0] = (struct pollfd){ .fd = c->efd_in, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = cl_pq.PQsocket(c->pg), .events = POLLIN };
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			continue;
		if ((p[0].revents & POLLIN) && read(c->efd_in, &v, sizeof(v)) < 0)
			v = 0;
		if (atomic_load(&c->stop))
			break;
		cl_write_all(c, cl_take(c));
		if (!c->pg)
			continue;
		if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !cl_pq.PQconsumeInput(c->pg)) {
			cl_down(c, "the database link failed");
			continue;
		}
		cl_notifies(c);
		now = cb_mono_ns();
		if (now >= c->next_beat) {
			c->want_catchup = true;
			c->next_beat = now + c->beat_ns;
			if (cl_report(c) != 0)
				continue;
		} else if (atomic_load(&c->applied) != c->applied_sent && cl_report(c) != 0) {
			continue;
		}
		if (c->want_catchup) {
			c->want_catchup = false;
			if (cl_catchup(c) != 0) {
				if (c->pg)
					cl_down(c, c->down_why);
				continue;
			}
		}
		if (c->waiters && (c->want_acks || now >= c->next_ack))
			cb_ignore(cl_check_waiters(c));
		c->want_acks = false;
	}
	/* Leaving: the others need not wait for us any more. */
	if (c->pg) {
		char sql[CL_NAME_MAX * 2 + 64];

		snprintf(sql, sizeof(sql), "DELETE FROM cb_brokers WHERE name = %s;", c->name_lit);
		cb_ignore(cl_exec(c, sql, "leaving"));
	}
	return NULL;
}

/* ---- the loop's side ------------------------------------------------ */

const char *
cl_lib_why(void)
{
	return cl_pq_why[0] ? cl_pq_why : "libpq.so.5 not loaded";
}

int
cl_open(const struct cl_opts *o, struct cl **out)
{
	struct cl *c = NULL;
	int r = CB_ENOMEM;

	*out = NULL;
	if (!o->conninfo || !o->conninfo[0] || !o->name || !o->name[0] ||
	    strlen(o->name) > CL_NAME_MAX || !o->stale_ms)
		return CB_EINVAL;
	if (pthread_once(&cl_pq_once, cl_pq_load_once) != 0)
		return CB_EINTERNAL;
	if (cl_pq_err != 0)
		return cl_pq_err;
	if (!(c = calloc(1, sizeof(*c))))
		return CB_ENOMEM;
	c->efd_in = c->efd_out = -1;
	c->was_up = -1;
	pthread_mutex_init(&c->mu, NULL);
	if (!(c->conninfo = strdup(o->conninfo)) || !(c->name = strdup(o->name)))
		goto out;
	c->stale_ns = o->stale_ms * 1000000u;
	/* Four heartbeats per bound: one lost round trip does not make a
	 * broker stale; at most one a second keeps an idle cluster quiet. */
	c->beat_ns = c->stale_ns / 4;
	if (c->beat_ns > 1000000000u)
		c->beat_ns = 1000000000u;
	c->sink = o->sink;
	r = CB_EINTERNAL;
	if ((c->efd_in = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (c->efd_out = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		goto out;
	{
		pthread_attr_t at;

		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, 512 * 1024);
		if (pthread_create(&c->th, &at, cl_main, c) != 0) {
			pthread_attr_destroy(&at);
			goto out;
		}
		pthread_attr_destroy(&at);
	}
	c->started = true;
	*out = c;
	c = NULL;
	r = 0;
out:
	cl_close(c);
	return r;
}

/* Jobs never finished: each caller hears of it (on the caller's thread). */
static void
cl_free_list(struct cl_job *j)
{
	struct cl_job *next;

	for (; j; j = next) {
		next = j->next;
		if (j->done) {
			j->err = CB_ECLUSTER;
			snprintf(j->why, sizeof(j->why), "the broker is stopping");
			j->done(j->arg, j);
		}
		cl_job_free(j);
	}
}

void
cl_close(struct cl *c)
{
	struct cl_msg *m, *next;

	if (!c)
		return;
	if (c->started) {
		atomic_store(&c->stop, true);
		cl_kick(c->efd_in);
		pthread_join(c->th, NULL);
	}
	/* Both NULL when cl_open failed before libpq was loaded. */
	if (c->pg)
		cl_pq.PQfinish(c->pg);
	if (c->name_lit)
		cl_pq.PQfreemem(c->name_lit);
	cl_free_list(c->in);
	cl_free_list(c->retry);
	cl_free_list(c->waiters);
	for (m = c->out; m; m = next) {
		next = m->next;
		free(m->recs);
		if (m->job && m->job->done)
			m->job->done(m->job->arg, m->job);	/* finished: its result stands */
		cl_job_free(m->job);
		free(m);
	}
	if (c->efd_in >= 0)
		close(c->efd_in);
	if (c->efd_out >= 0)
		close(c->efd_out);
	pthread_mutex_destroy(&c->mu);
	free(c->keys);
	free(c->conninfo);
	free(c->name);
	free(c);
}

int
cl_fd(const struct cl *c)
{
	return c->efd_out;
}

void
cl_dispatch(struct cl *c)
{
	struct cl_msg *m, *next;
	uint64_t v;

	if (read(c->efd_out, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&c->mu);
	m = c->out;
	c->out = c->out_tail = NULL;
	pthread_mutex_unlock(&c->mu);
	for (; m; m = next) {
		next = m->next;
		switch (m->type) {
		case CL_MSG_BATCH:
			if (c->sink.batch)
				c->sink.batch(c->sink.arg, m->recs, m->n, m->fresh_ns);
			break;
		case CL_MSG_LINK:
			if (c->sink.link)
				c->sink.link(c->sink.arg, m->up, m->why);
			break;
		case CL_MSG_JOB:
			if (m->job->done)
				m->job->done(m->job->arg, m->job);
			cl_job_free(m->job);
			break;
		}
		free(m->recs);
		free(m);
	}
}

int
cl_submit(struct cl *c, struct cl_job *j)
{
	j->next = NULL;
	j->err = 0;
	j->why[0] = '\0';
	pthread_mutex_lock(&c->mu);
	if (c->nin >= CL_JOBS_MAX) {
		pthread_mutex_unlock(&c->mu);
		cl_job_free(j);
		return CB_EBUSY;
	}
	if (c->in_tail)
		c->in_tail->next = j;
	else
		c->in = j;
	c->in_tail = j;
	c->nin++;
	pthread_mutex_unlock(&c->mu);
	cl_kick(c->efd_in);
	return 0;
}

void
cl_applied(struct cl *c, uint64_t seq)
{
	/* Not a maximum: after a database restored from a backup the stream
	 * is read again from its start, and what we report must follow. */
	if (atomic_exchange(&c->applied, seq) != seq)
		cl_kick(c->efd_in);
}

bool
cl_up(const struct cl *c)
{
	return atomic_load(&c->up);
}
