/*
 * cluster.c - the link to the cluster's PostgreSQL database, on a thread of
 * its own (libpq's calls block; the broker's event loop never does).
 *
 * Trust domain: broker.  The database is the administrators' (like the
 * state directory); every statement's SQL is a constant of this file, and
 * every value it carries (names, ids, capabilities, reasons, actors,
 * numbers) is a parameter (cl_add, PQsendQueryParams in pipeline mode: many
 * statements, one round trip), so nothing an agent or an administrator
 * wrote is parsed as SQL; what comes back is checked for length before
 * use.
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
#include <sys/random.h>
#include <unistd.h>

#include <libpq-fe.h>

#define CL_QUERY_MS	3000	/* longest wait for one round trip */
#define CL_RETRY_MS	250	/* between connection attempts */
#define CL_ACK_POLL_MS	20	/* re-check of waiting revocations without a NOTIFY */
#define CL_ACK_MARGIN_MS 200	/* beyond the bound: a revoke waits that much longer for a silent broker */
#define CL_PRUNE_EVERY_S 60	/* between two prunings of cb_requests by one broker */
#define CL_TXN_JOBS	256	/* jobs written in one transaction */
#define CL_TXN_BYTES	(1u << 20)
#define CL_NPARAM	12	/* parameters of one statement at most */
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
	X(PQenterPipelineMode) \
	X(PQexitPipelineMode) \
	X(PQfinish) \
	X(PQflush) \
	X(PQfreemem) \
	X(PQgetResult) \
	X(PQgetisnull) \
	X(PQgetvalue) \
	X(PQisBusy) \
	X(PQnfields) \
	X(PQnotifies) \
	X(PQpipelineSync) \
	X(PQntuples) \
	X(PQresultErrorMessage) \
	X(PQresultStatus) \
	X(PQsendQuery) \
	X(PQsendQueryParams) \
	X(PQsetNoticeProcessor) \
	X(PQsetnonblocking) \
	X(PQsocket) \
	X(PQstatus) \
	X(PQtransactionStatus)
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

enum cl_msg_type { CL_MSG_BATCH, CL_MSG_LINK, CL_MSG_JOB, CL_MSG_DECISIONS, CL_MSG_REQUESTS, CL_MSG_HELD };

struct cl_msg {
	enum cl_msg_type type;
	struct cl_rec *recs;
	struct cl_req *reqs;		/* CL_MSG_DECISIONS, CL_MSG_REQUESTS (n of them) */
	size_t n;
	uint64_t fresh_ns;
	bool up;
	bool fatal;			/* CL_MSG_HELD: the broker must stop */
	char why[CL_WHY_MAX];
	struct cl_job *job;
	struct cl_msg *next;
};

/* An audit head of ours, to record in cb_checkpoints. */
struct cl_mark {
	bool set;
	uint64_t seq;
	uint8_t log_id[16], hash[32];
};

static bool
cl_mark_eq(const struct cl_mark *a, const struct cl_mark *b)
{
	return a->set == b->set && a->seq == b->seq && memcmp(a->log_id, b->log_id, 16) == 0 &&
	    memcmp(a->hash, b->hash, 32) == 0;
}

struct cl_key {
	uint8_t pk[32];
	bool signing, retired;
};

/* A request told to the watchers already. */
struct cl_seen {
	uint64_t rid, expires_at;
};
#define CL_SEEN_MAX 4096

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
	atomic_uint_least64_t num;		/* this broker's number (CL_RID_SPAN) */
	struct cl_sbx *sbx_next;		/* loop -> thread: the latest set of sandboxes */
	size_t nsbx_next;
	atomic_bool sbx_dirty;
	atomic_bool watch;			/* loop -> thread: someone watches for requests */
	struct cl_mark head;		/* the audit head to record (under mu) */
	struct cl_mark head_sent;	/* the thread's own: the last recorded */
	uint8_t instance[CL_INSTANCE_LEN];	/* this process's, random */
	char instance_hex[2 * CL_INSTANCE_LEN + 1];
	/* the thread's own */
	PGconn *pg;
	uint64_t cursor;		/* changes read up to */
	uint64_t applied_sent;		/* the applied number last written */
	struct cl_job *retry, *retry_tail;	/* kept while the database is away */
	struct cl_job *waiters;		/* revocations waiting for the others */
	struct cl_job *dwaiters;	/* decisions waiting for the holding broker */
	struct cl_sbx *sbx_cur;		/* our sandboxes, as the thread last took them */
	size_t nsbx_cur;
	bool sbx_sent;			/* ... and they are in cb_sandboxes */
	bool want_decisions;
	bool watching, want_requests;	/* other brokers' requests, for watchers */
	struct cl_seen *seen;		/* ... those told already (until they expire) */
	size_t nseen;
	struct cl_key *keys;		/* ours: published again on every connect */
	size_t nkeys;
	uint64_t next_beat, next_ack;
	uint64_t next_prune;		/* 0: at the first heartbeat */
	int was_up;			/* -1 unknown, 0 down, 1 up */
	bool want_catchup, want_acks;
	bool claimed;			/* this process held its name once */
	uint64_t held_since;		/* another live broker holds our name since (0: no) */
	bool held_told;
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

/* The second step of the schema (issue 17, elevation across the cluster
 * and the views of every broker's sandboxes): who decided a request where,
 * what applying it did on its broker, and one number per broker name for
 * cluster-wide request ids.  Idempotent, under the same lock. */
static const char cl_schema_requests[] =
	"BEGIN;"
	"SELECT pg_advisory_xact_lock(" CL_LOCK_KEY ");"
	"ALTER TABLE cb_requests ADD COLUMN IF NOT EXISTS command text NOT NULL DEFAULT '',"
	" ADD COLUMN IF NOT EXISTS session boolean NOT NULL DEFAULT false,"
	" ADD COLUMN IF NOT EXISTS decision_reason text, ADD COLUMN IF NOT EXISTS decided_on text,"
	" ADD COLUMN IF NOT EXISTS applied_at bigint, ADD COLUMN IF NOT EXISTS outcome integer;"
	"CREATE UNIQUE INDEX IF NOT EXISTS cb_requests_id ON cb_requests(id);"
	"CREATE TABLE IF NOT EXISTS cb_broker_ids(name text PRIMARY KEY, num serial UNIQUE);"
	"CREATE TABLE IF NOT EXISTS cb_sandboxes(broker text NOT NULL, id text NOT NULL,"
	" tier text NOT NULL, command text NOT NULL, workspace text NOT NULL, started bigint NOT NULL,"
	" pid bigint NOT NULL, owner bigint NOT NULL, PRIMARY KEY(broker, id));"
	"COMMIT;";

/* The third step: each broker process's instance token, so that two
 * processes under one name (cloned hosts with the same hostname and state
 * directory) are told apart ("One name, one broker" in docs/cluster.md).
 * Idempotent, under the same lock. */
static const char cl_schema_instance[] =
	"BEGIN;"
	"SELECT pg_advisory_xact_lock(" CL_LOCK_KEY ");"
	"ALTER TABLE cb_brokers ADD COLUMN IF NOT EXISTS instance bytea;"
	"COMMIT;";

/* The fourth: the counts of each sandbox's tokens and pending requests,
 * published with it, so that every broker's --cluster views show them
 * (NULL: a broker of an earlier version did not publish them). */
static const char cl_schema_counts[] =
	"BEGIN;"
	"SELECT pg_advisory_xact_lock(" CL_LOCK_KEY ");"
	"ALTER TABLE cb_sandboxes ADD COLUMN IF NOT EXISTS tokens bigint,"
	" ADD COLUMN IF NOT EXISTS requests bigint;"
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
	free(j->req);
	free(j->reqs);
	for (size_t i = 0; j->toks && i < j->nrows; i++)
		free(j->toks[i].caps);
	free(j->toks);
	free(j->sbxs);
	free(j->heads);
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
	PGresult **r;		/* malloc'd */
	size_t n, cap;
};

static void
cl_res_clear(struct cl_res *res)
{
	for (size_t i = 0; i < res->n; i++)
		cl_pq.PQclear(res->r[i]);
	free(res->r);
	res->r = NULL;
	res->n = res->cap = 0;
}

/* Keep one more result; false (and r cleared) when out of room. */
static bool
cl_res_add(struct cl_res *res, PGresult *r)
{
	if (res->n == res->cap) {
		size_t nc = res->cap ? res->cap * 2 : 8;
		PGresult **nr = realloc(res->r, nc * sizeof(*nr));

		if (!nr) {
			cl_pq.PQclear(r);
			return false;
		}
		res->r = nr;
		res->cap = nc;
	}
	res->r[res->n++] = r;
	return true;
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
	/* Decisions recorded, waiting for their broker: the decision stands
	 * and is applied there when that broker reads it. */
	while ((w = c->dwaiters)) {
		c->dwaiters = w->next;
		w->err = CB_ETIMEDOUT;
		snprintf(w->why, sizeof(w->why), "recorded in the cluster, but the database link "
		    "failed before broker %.60s applied it (%.80s)", w->req->broker, c->down_why);
		cl_job_done(c, w);
	}
	c->sbx_sent = false;
	cl_link(c, false, c->down_why);
}

/* Collect the results of what was sent, waiting at most until deadline:
 * a query's (until libpq's NULL), or a pipeline's (until its sync's; each
 * statement's result is followed by a NULL there).  0, or CB_ECLUSTER
 * after dropping the connection. */
static int
cl_collect(struct cl *c, bool pipe, uint64_t deadline, struct cl_res *res)
{
	PGresult *r;

	for (;;) {
		int f = cl_pq.PQflush(c->pg);

		if (f < 0)
			goto fail;
		while (f == 0 && !cl_pq.PQisBusy(c->pg)) {
			if (!(r = cl_pq.PQgetResult(c->pg))) {
				if (!pipe)
					return 0;
				continue;	/* the next statement's */
			}
			if (pipe && cl_pq.PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
				cl_pq.PQclear(r);
				return 0;
			}
			if (!cl_res_add(res, r)) {
				cl_res_clear(res);
				cl_down(c, "out of memory for the database's answer");
				return CB_ECLUSTER;
			}
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

/* Send sql and collect every result, waiting at most CL_QUERY_MS.  sql is
 * always a constant of this file (the schema, LISTEN, ROLLBACK): it carries
 * no value, and may hold several statements.  Whatever carries a value goes
 * through cl_pipe, as a parameter.  0, or CB_ECLUSTER after dropping the
 * connection.  A statement's own error (a result with PGRES_FATAL_ERROR)
 * is in res. */
static int
cl_query(struct cl *c, const char *sql, struct cl_res *res)
{
	*res = (struct cl_res){ 0 };
	if (!c->pg || !cl_pq.PQsendQuery(c->pg, sql)) {
		cl_down(c, "the database link failed");
		return CB_ECLUSTER;
	}
	return cl_collect(c, false, cb_mono_ns() + (uint64_t)CL_QUERY_MS * 1000000u, res);
}

/* ---- statements with parameters ------------------------------------- */

/* One statement: its SQL is a constant of this file, and every value it
 * carries (names, ids, an agent's reason, an administrator's actor,
 * numbers) travels apart from it as a parameter, in libpq's text format:
 * nothing an agent or an administrator wrote is ever parsed as SQL. */
struct cl_stmt {
	const char *sql;
	int n;
	char *v[CL_NPARAM];	/* malloc'd; NULL is SQL's NULL */
};

/* Statements sent together (one round trip, libpq's pipeline mode), each
 * with its own result, in order. */
struct cl_batch {
	struct cl_stmt *st;
	size_t n, cap;
	bool oom;		/* or text the database cannot hold */
};

static void
cl_batch_free(struct cl_batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		for (int k = 0; k < b->st[i].n; k++)
			free(b->st[i].v[k]);
	free(b->st);
	*b = (struct cl_batch){ 0 };
}

static char *
cl_hexdup(const uint8_t *p, size_t len)
{
	static const char d[] = "0123456789abcdef";
	char *v = malloc(2 * len + 3);

	if (!v)
		return NULL;
	/* bytea's text form: \x and two hex digits a byte */
	v[0] = '\\';
	v[1] = 'x';
	for (size_t i = 0; i < len; i++) {
		v[2 + 2 * i] = d[p[i] >> 4];
		v[3 + 2 * i] = d[p[i] & 15];
	}
	v[2 + 2 * len] = '\0';
	return v;
}

/*
 * Add a statement: sql (a constant) and its parameters $1..$N, one per
 * character of fmt:
 *   s  const char *: our own text (this broker's name), as it is
 *   t  const char *: text an agent or an administrator wrote; made UTF-8
 *      (the database takes nothing else: a reason that is not would keep
 *      its request out of cb_requests, unseen by every other broker)
 *   u  uint64_t     i  int     b  bool (passed as int)
 *   x  const uint8_t *, size_t: bytes (bytea); a NULL pointer is NULL
 * A failure (out of memory) marks the batch; cl_pipe refuses it then.
 */
static void
cl_vadd(struct cl_batch *b, const char *sql, const char *fmt, va_list ap)
{
	struct cl_stmt *st;

	if (b->oom)
		return;
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 8;
		struct cl_stmt *ns = realloc(b->st, nc * sizeof(*ns));

		if (!ns) {
			b->oom = true;
			return;
		}
		b->st = ns;
		b->cap = nc;
	}
	st = &b->st[b->n++];
	*st = (struct cl_stmt){ .sql = sql };
	for (; *fmt && st->n < CL_NPARAM; fmt++) {
		char num[24], *v = NULL;
		bool null = false;

		switch (*fmt) {
		case 's': {
			const char *t = va_arg(ap, const char *);

			null = !t;
			v = t ? strdup(t) : NULL;
			break;
		}
		case 't': {
			const char *t = va_arg(ap, const char *);

			v = cb_text_utf8(t ? t : "");
			break;
		}
		case 'u':
			snprintf(num, sizeof(num), "%" PRIu64, va_arg(ap, uint64_t));
			v = strdup(num);
			break;
		case 'i':
			snprintf(num, sizeof(num), "%d", va_arg(ap, int));
			v = strdup(num);
			break;
		case 'b':
			v = strdup(va_arg(ap, int) ? "true" : "false");
			break;
		case 'x': {
			const uint8_t *p = va_arg(ap, const uint8_t *);
			size_t len = va_arg(ap, size_t);

			null = !p;
			v = p ? cl_hexdup(p, len) : NULL;
			break;
		}
		default:
			b->oom = true;	/* a mistake of ours: never sent */
			break;
		}
		st->v[st->n++] = v;
		if (!v && !null)
			b->oom = true;
	}
	if (*fmt)
		b->oom = true;
}

static void
cl_add(struct cl_batch *b, const char *sql, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cl_vadd(b, sql, fmt, ap);
	va_end(ap);
}

/*
 * Send a batch in one round trip (pipeline mode) and collect one result
 * per statement, waiting at most CL_QUERY_MS.  Without BEGIN in it the
 * batch is one implicit transaction (up to its sync), as a string of
 * statements was; with BEGIN, a statement that failed leaves the
 * transaction aborted, and it is rolled back here.  0 with the results in
 * res (the caller clears; a statement's own error is in its result),
 * CB_ECLUSTER after dropping the connection.  The batch is freed.
 */
static int
cl_pipe(struct cl *c, struct cl_batch *b, struct cl_res *res)
{
	uint64_t deadline = cb_mono_ns() + (uint64_t)CL_QUERY_MS * 1000000u;
	int r;

	*res = (struct cl_res){ 0 };
	if (!c->pg || !cl_pq.PQenterPipelineMode(c->pg))
		goto fail;
	for (size_t i = 0; i < b->n; i++)
		if (!cl_pq.PQsendQueryParams(c->pg, b->st[i].sql, b->st[i].n, NULL,
		    (const char *const *)b->st[i].v, NULL, NULL, 0))
			goto fail;
	if (!cl_pq.PQpipelineSync(c->pg))
		goto fail;
	cl_batch_free(b);
	if ((r = cl_collect(c, true, deadline, res)) != 0)
		return r;
	if (!cl_pq.PQexitPipelineMode(c->pg)) {
		cl_res_clear(res);
		cl_down(c, "the database link failed");
		return CB_ECLUSTER;
	}
	if (cl_pq.PQtransactionStatus(c->pg) == PQTRANS_INERROR) {
		struct cl_res rb;

		if (cl_query(c, "ROLLBACK", &rb) != 0) {
			cl_res_clear(res);
			return CB_ECLUSTER;
		}
		cl_res_clear(&rb);
	}
	return 0;
fail:
	cl_batch_free(b);
	cl_down(c, "the database link failed");
	return CB_ECLUSTER;
}

/* Send b and check that every statement succeeded; 0 with the results in
 * res (the caller clears), CB_ECLUSTER (link down: res empty; or a
 * statement failed: why says which), CB_ENOMEM.  b is freed. */
static int
cl_run(struct cl *c, struct cl_batch *b, struct cl_res *res, char *why, size_t whylen)
{
	int r;

	*res = (struct cl_res){ 0 };
	if (b->oom) {
		cl_batch_free(b);
		snprintf(why, whylen, "out of memory, or text the database cannot hold");
		return CB_ENOMEM;
	}
	if ((r = cl_pipe(c, b, res)) != 0) {
		snprintf(why, whylen, "the link to the cluster database failed (%.200s)", c->down_why);
		return r;
	}
	for (size_t i = 0; i < res->n; i++) {
		ExecStatusType st = cl_pq.PQresultStatus(res->r[i]);

		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
			snprintf(why, whylen, "the database refused it: %s", cl_pq.PQresultErrorMessage(res->r[i]));
			why[strcspn(why, "\n")] = '\0';
			cl_res_clear(res);
			return CB_ECLUSTER;
		}
	}
	return 0;
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

/* One statement (sql, a constant; its parameters as cl_add takes them) in
 * a round trip of its own: 0 with its result in res (the caller clears and
 * checks its status), CB_ECLUSTER (the link failed: cl_down was called),
 * CB_ENOMEM. */
static int
cl_read1(struct cl *c, struct cl_res *res, const char *sql, const char *fmt, ...)
{
	struct cl_batch q = { 0 };
	va_list ap;

	*res = (struct cl_res){ 0 };
	va_start(ap, fmt);
	cl_vadd(&q, sql, fmt, ap);
	va_end(ap);
	if (q.oom) {
		cl_batch_free(&q);
		return CB_ENOMEM;
	}
	return cl_pipe(c, &q, res);
}

/* ---- hex ---------------------------------------------------------------- */

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

/* The stream's writes: the SQL is constant, the values are parameters. */
static const char cl_sql_key[] =
	"INSERT INTO cb_keys(kid, pk, broker, signing, retired_at, seq) VALUES($1, $2, $3, $4::boolean,"
	" CASE WHEN $5::boolean THEN extract(epoch from now())::bigint END, nextval('cb_seq'))"
	" ON CONFLICT (kid) DO UPDATE SET signing = EXCLUDED.signing,"
	" retired_at = coalesce(cb_keys.retired_at, EXCLUDED.retired_at), seq = EXCLUDED.seq"
	" WHERE cb_keys.signing <> EXCLUDED.signing OR (cb_keys.retired_at IS NULL AND"
	" EXCLUDED.retired_at IS NOT NULL) RETURNING seq";
static const char cl_sql_token[] =
	"INSERT INTO cb_tokens(id, parent, sandbox, caps, nbf, exp, limited, elevated, issued_at,"
	" issued_by, broker, seq) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, nextval('cb_seq'))"
	" ON CONFLICT (id) DO NOTHING RETURNING seq";
/* Only a token the cluster knows: an id nobody issued is refused (as a
 * single broker refuses it). */
static const char cl_sql_revoke[] =
	"INSERT INTO cb_revocations(seq, token, at, actor, broker)"
	" SELECT nextval('cb_seq'), $1::bytea, extract(epoch from now())::bigint, $2::text, $3::text"
	" WHERE EXISTS (SELECT 1 FROM cb_tokens WHERE id = $1::bytea) RETURNING seq";
static const char cl_sql_retire[] =
	"UPDATE cb_keys SET retired_at = coalesce(retired_at, extract(epoch from now())::bigint),"
	" seq = nextval('cb_seq') WHERE kid = $1 AND NOT signing RETURNING seq";

static bool
cl_job_sql(struct cl *c, struct cl_batch *q, const struct cl_job *j)
{
	switch (j->op) {
	case CL_PUT_KEY: {
		uint8_t k[CAP_KID_LEN];

		cap_kid_of(j->pk, k);
		cl_add(q, cl_sql_key, "xxsbb", k, (size_t)CAP_KID_LEN, j->pk, (size_t)32, c->name,
		    (int)j->signing, (int)j->retired);
		break;
	}
	case CL_PUT_TOKEN:
		cl_add(q, cl_sql_token, "xxttuubbuts", j->id, (size_t)CAP_ID_LEN,
		    j->has_parent ? j->parent : NULL, (size_t)CAP_ID_LEN, j->sandbox, j->caps,
		    j->nbf, j->exp, (int)j->limited, (int)j->elevated, j->issued_at, j->by, c->name);
		break;
	case CL_PUT_REVOKE:
		cl_add(q, cl_sql_revoke, "xts", j->id, (size_t)CAP_ID_LEN, j->by, c->name);
		break;
	case CL_PUT_RETIRE:
		cl_add(q, cl_sql_retire, "x", j->kid, (size_t)CAP_KID_LEN);
		break;
	default:	/* not the stream's (cl_request_jobs), or CL_GET_HEADS (read apart) */
		return false;
	}
	return !q->oom;
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
	struct cl_batch q = { 0 };
	struct cl_job *j, *next;
	struct cl_res res;
	size_t njobs = 0, i;
	int r;

	cl_add(&q, "BEGIN", "");
	cl_add(&q, "SELECT pg_advisory_xact_lock(" CL_LOCK_KEY ")", "");
	for (j = list; j; j = j->next) {
		if (!cl_job_sql(c, &q, j))
			break;
		njobs++;
	}
	cl_add(&q, "NOTIFY cb_change", "");
	cl_add(&q, "COMMIT", "");
	if (q.oom || j) {
		cl_batch_free(&q);
		for (j = list; j; j = next) {
			next = j->next;
			cl_job_fail(c, j, CB_ENOMEM, "out of memory, or text the database cannot hold");
		}
		return;
	}
	r = cl_pipe(c, &q, &res);
	if (r == 0) {
		/* BEGIN, the lock, one per job, NOTIFY, COMMIT: all must be there
		 * and fine, or the transaction did not commit (cl_pipe rolled
		 * it back). */
		const char *bad = res.n == njobs + 4 ? NULL : "no result";

		for (i = 0; !bad && i < res.n; i++) {
			ExecStatusType s = cl_pq.PQresultStatus(res.r[i]);

			if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
				bad = cl_pq.PQresultErrorMessage(res.r[i]);
		}
		if (bad) {
			char why[CL_WHY_MAX];

			snprintf(why, sizeof(why), "the database refused the write: %s", bad);
			why[strcspn(why, "\n")] = '\0';
			cl_res_clear(&res);
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
			j->deadline_ns = cb_mono_ns() + c->stale_ns + CL_ACK_MARGIN_MS * 1000000u;
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
static const char cl_sql_catchup[] =
	"SELECT seq, 'k', encode(kid,'hex'), NULL::text, encode(pk,'hex'), retired_at IS NOT NULL,"
	" false, broker, ''::text FROM cb_keys WHERE seq > $1"
	" UNION ALL SELECT seq, 't', encode(id,'hex'), encode(parent,'hex'), NULL::text, false,"
	" limited, broker, issued_by FROM cb_tokens WHERE seq > $1"
	" UNION ALL SELECT seq, 'r', encode(token,'hex'), NULL::text, NULL::text, false, false,"
	" broker, actor FROM cb_revocations WHERE seq > $1"
	" ORDER BY 1 LIMIT $2";

static int
cl_catchup(struct cl *c)
{
	for (;;) {
		uint64_t sent = cb_mono_ns();
		struct cl_batch q = { 0 };
		struct cl_msg *m;
		struct cl_res res;
		PGresult *pr;
		int n, r;

		cl_add(&q, cl_sql_catchup, "ui", c->cursor, CL_PAGE);
		if (q.oom) {
			cl_batch_free(&q);
			return CB_ENOMEM;
		}
		if ((r = cl_pipe(c, &q, &res)) != 0)
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

/* Another live process holds our name: we write nothing under it and
 * serve nothing in the cluster's name (the link is down: after the bound
 * we fail closed).  A process that never held it (a start) may be a
 * restart after a crash, whose predecessor's row ages out within the
 * bound: it tries again, and only a name still held after the bound and
 * a second (the other keeps reporting: a clone) is refused for good
 * (CL_MSG_HELD, fatal: the broker stops).  A process that held it before
 * lost it while it was away longer than the bound: said once, and tried
 * again until the other stops.  CB_EEXIST, with the link dropped. */
static int
cl_held(struct cl *c)
{
	uint64_t now = cb_mono_ns();
	struct cl_res res;
	char who[80] = "";	/* what the format below can fill, no more */
	struct cl_msg *m;
	bool fatal;

	if (cl_read1(c, &res, "SELECT encode(instance, 'hex'), (extract(epoch from now() - seen_at)"
	    " * 1000)::bigint, (extract(epoch from now() - started_at))::bigint FROM cb_brokers"
	    " WHERE name = $1", "s", c->name) == 0) {
		if (res.n == 1 && cl_pq.PQresultStatus(res.r[0]) == PGRES_TUPLES_OK &&
		    cl_pq.PQntuples(res.r[0]) == 1)
			snprintf(who, sizeof(who), " (instance %.8s, started %.12s s ago, reported %.12s ms ago)",
			    cl_pq.PQgetvalue(res.r[0], 0, 0), cl_pq.PQgetvalue(res.r[0], 0, 2),
			    cl_pq.PQgetvalue(res.r[0], 0, 1));
		cl_res_clear(&res);
	}
	if (!c->held_since)
		c->held_since = now;
	fatal = !c->claimed && now - c->held_since >= c->stale_ns + 1000000000u;
	snprintf(c->down_why, sizeof(c->down_why), "another live broker holds this broker's name in "
	    "the cluster%s: a host with the same hostname and state directory (cloned?); this "
	    "instance is %.8s", who, c->instance_hex);
	if ((fatal || (c->claimed && !c->held_told)) && (m = calloc(1, sizeof(*m)))) {
		c->held_told = true;
		m->type = CL_MSG_HELD;
		m->fatal = fatal;
		snprintf(m->why, sizeof(m->why), "%s", c->down_why);
		cl_post(c, m);
	}
	if (c->pg)
		cl_down(c, c->down_why);
	return CB_EEXIST;
}

/* Tell the others where we are (heartbeat and applied number). */
/* ... and claim our name: the row is ours when it carries our instance,
 * or none (a broker of an earlier version), or when whoever wrote it is
 * not live (it stopped without leaving: a crash, or a host cut off for
 * longer than the bound).  A name another live process holds is left as
 * it is, and no row comes back. */
static const char cl_sql_seen[] =
	"INSERT INTO cb_brokers(name, applied, seen_at, instance) VALUES($1, $2, now(), $3)"
	" ON CONFLICT (name) DO UPDATE SET applied = EXCLUDED.applied, seen_at = now(),"
	" started_at = CASE WHEN cb_brokers.instance IS NOT DISTINCT FROM EXCLUDED.instance"
	" THEN cb_brokers.started_at ELSE now() END, instance = EXCLUDED.instance"
	" WHERE cb_brokers.instance IS NULL OR cb_brokers.instance = EXCLUDED.instance"
	" OR cb_brokers.seen_at <= now() - $4::bigint * interval '1 millisecond' RETURNING 1";
/* Never back: a head lower than the one recorded (a log and state rolled
 * back together) leaves the record as it was, and `audit verify --cluster`
 * finds the log short of it. */
static const char cl_sql_head[] =
	"INSERT INTO cb_checkpoints(broker, log_id, seq, hash, at) SELECT $1, $2, $3, $4, now()"
	" WHERE EXISTS (SELECT 1 FROM cb_brokers WHERE name = $1 AND instance = $5)"	/* held */
	" ON CONFLICT (broker, log_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash,"
	" at = now() WHERE cb_checkpoints.seq < EXCLUDED.seq";

static int
cl_report(struct cl *c)
{
	uint64_t applied = atomic_load(&c->applied);
	bool moved = applied != c->applied_sent, head;
	struct cl_batch q = { 0 };
	struct cl_res res;
	struct cl_mark h;
	char why[CL_WHY_MAX];
	int r;

	pthread_mutex_lock(&c->mu);
	h = c->head;
	pthread_mutex_unlock(&c->mu);
	head = h.set && !cl_mark_eq(&h, &c->head_sent);
	/* A report need not survive a crash of the database (the next one
	 * replaces it), so its commit does not wait for a disk flush: one
	 * report per batch applied, on every broker, would otherwise cost a
	 * flush each. */
	cl_add(&q, "BEGIN", "");
	cl_add(&q, "SET LOCAL synchronous_commit TO off", "");
	cl_add(&q, cl_sql_seen, "suxu", c->name, applied, c->instance, (size_t)CL_INSTANCE_LEN,
	    c->stale_ns / 1000000u + CL_ACK_MARGIN_MS);
	if (head)
		cl_add(&q, cl_sql_head, "sxuxx", c->name, h.log_id, (size_t)16, h.seq, h.hash, (size_t)32,
		    c->instance, (size_t)CL_INSTANCE_LEN);
	if (moved)
		cl_add(&q, "NOTIFY cb_applied", "");
	cl_add(&q, "COMMIT", "");
	if ((r = cl_run(c, &q, &res, why, sizeof(why))) != 0) {
		snprintf(c->down_why, sizeof(c->down_why), "reporting to the cluster: %.200s", why);
		return r;
	}
	/* BEGIN, SET, the claim: its row, or none when the name is held */
	if (res.n < 3 || cl_pq.PQntuples(res.r[2]) != 1) {
		cl_res_clear(&res);
		return cl_held(c);
	}
	cl_res_clear(&res);
	c->claimed = true;
	c->held_since = 0;
	c->held_told = false;
	c->applied_sent = applied;
	if (head)
		c->head_sent = h;
	return 0;
}

/* How long ago w was committed (its deadline is the bound and 200 ms
 * after that). */
static uint64_t
cl_waited_ms(const struct cl *c, const struct cl_job *w, uint64_t now)
{
	uint64_t start = w->deadline_ns - c->stale_ns - CL_ACK_MARGIN_MS * 1000000u;

	return now > start ? (now - start) / 1000000u : 0;
}

/* Which brokers, live when w was committed, have not applied it yet:
 * still live at its deadline, or gone stale meanwhile (failing closed),
 * an administrator must know which host to look at (`capctl revoke`).
 * *n gets how many. */
static void
cl_unconfirmed(struct cl *c, struct cl_job *w, uint64_t now)
{
	struct cl_res res;

	w->unconfirmed = 0;
	snprintf(w->unconfirmed_by, sizeof(w->unconfirmed_by), "(unknown)");
	if (cl_read1(c, &res, "SELECT count(*), string_agg(name, ', ' ORDER BY name) FROM cb_brokers"
	    " WHERE name <> $1 AND seen_at > now() - $2::bigint * interval '1 millisecond'"
	    " AND applied < $3", "suu", c->name, c->stale_ns / 1000000u + cl_waited_ms(c, w, now),
	    w->seq) != 0)
		return;
	if (res.n == 1 && cl_pq.PQresultStatus(res.r[0]) == PGRES_TUPLES_OK &&
	    cl_pq.PQntuples(res.r[0]) == 1 && !cl_pq.PQgetisnull(res.r[0], 0, 1)) {
		const char *names = cl_pq.PQgetvalue(res.r[0], 0, 1);

		w->unconfirmed = (unsigned)strtoul(cl_pq.PQgetvalue(res.r[0], 0, 0), NULL, 10);
		if (strlen(names) >= sizeof(w->unconfirmed_by))
			snprintf(w->unconfirmed_by, sizeof(w->unconfirmed_by), "%.*s...",
			    (int)sizeof(w->unconfirmed_by) - 4, names);
		else
			snprintf(w->unconfirmed_by, sizeof(w->unconfirmed_by), "%s", names);
	}
	cl_res_clear(&res);
}

/* Revocations waiting for the other live brokers to apply them.  One
 * query serves them all: the least change applied by the brokers live
 * now, and by those live at any moment since the oldest waiter was
 * committed (a broker that went stale meanwhile without applying it is
 * named too, though the revocation need not wait for it). */
static int
cl_check_waiters(struct cl *c)
{
	struct cl_res res;
	struct cl_job **pp, *w;
	uint64_t now = cb_mono_ns(), min = UINT64_MAX, wmin = UINT64_MAX, waited = 0;
	bool any = false;
	int r;

	for (w = c->waiters; w; w = w->next)
		if (cl_waited_ms(c, w, now) > waited)
			waited = cl_waited_ms(c, w, now);
	/* Live: reported within the bound plus the margin.  A broker's last
	 * report precedes its last catch-up, so it turns stale (and refuses
	 * tokens) a little after its report ages out: waiting for it that
	 * much longer means an acknowledged revoke is never honoured there,
	 * not even for that moment. */
	if ((r = cl_read1(c, &res, "SELECT min(applied) FILTER (WHERE seen_at > now() - $1::bigint *"
	    " interval '1 millisecond'), min(applied) FROM cb_brokers WHERE name <> $2"
	    " AND seen_at > now() - $3::bigint * interval '1 millisecond'", "usu",
	    c->stale_ns / 1000000u + CL_ACK_MARGIN_MS, c->name,
	    c->stale_ns / 1000000u + CL_ACK_MARGIN_MS + waited + 50)) != 0)
		return r;
	if (res.n == 1 && cl_pq.PQresultStatus(res.r[0]) == PGRES_TUPLES_OK && cl_pq.PQntuples(res.r[0]) == 1) {
		any = !cl_pq.PQgetisnull(res.r[0], 0, 0);
		if (any)
			min = strtoull(cl_pq.PQgetvalue(res.r[0], 0, 0), NULL, 10);
		if (!cl_pq.PQgetisnull(res.r[0], 0, 1))
			wmin = strtoull(cl_pq.PQgetvalue(res.r[0], 0, 1), NULL, 10);
	}
	cl_res_clear(&res);
	for (pp = &c->waiters; (w = *pp);) {
		if (!any || w->seq <= min || now >= w->deadline_ns) {
			*pp = w->next;
			if (w->seq > wmin) {
				cl_unconfirmed(c, w, now);
				if (w->unconfirmed)
					snprintf(w->why, sizeof(w->why), "committed; broker %.150s did not confirm "
					    "it within the staleness bound (it fails closed)", w->unconfirmed_by);
			}
			cl_job_done(c, w);
			/* the names' query failed: cl_down has finished the rest */
			if (!c->pg)
				return CB_ECLUSTER;
			continue;
		}
		pp = &w->next;
	}
	c->next_ack = now + (uint64_t)CL_ACK_POLL_MS * 1000000u;
	return 0;
}

/* ---- elevation requests across the cluster ---------------------------- */

static void cl_fail_jobs(struct cl *c, struct cl_job *list);

static const char *const cl_req_states[] = {
	[CL_REQ_PENDING] = "pending", [CL_REQ_APPROVED] = "approved",
	[CL_REQ_DENIED] = "denied", [CL_REQ_EXPIRED] = "expired",
};

#define CL_NOW_SQL "extract(epoch from now())::bigint"

/* Text of a row into a fixed buffer (cut, never overrun: the database is
 * trusted like the state, but its text still has our bounds). */
static void
cl_col(PGresult *pr, int i, int f, char *out, size_t len)
{
	snprintf(out, len, "%s", cl_pq.PQgetisnull(pr, i, f) ? "" : cl_pq.PQgetvalue(pr, i, f));
}

static uint64_t
cl_u64col(PGresult *pr, int i, int f)
{
	return cl_pq.PQgetisnull(pr, i, f) ? 0 : strtoull(cl_pq.PQgetvalue(pr, i, f), NULL, 10);
}

/* The live brokers: seen within the staleness bound (a subquery whose
 * parameter, the bound in milliseconds, is $N). */
#define CL_LIVE(N) "(SELECT name FROM cb_brokers WHERE seen_at > now() - " N "::bigint *" \
	" interval '1 millisecond')"

/* CL_PUT_REQUEST, CL_PUT_CLOSED, CL_PUT_APPLIED: a request of ours. */
static int
cl_req_sql(struct cl *c, struct cl_batch *q, const struct cl_job *j)
{
	const struct cl_req *r = j->req;

	switch (j->op) {
	case CL_PUT_REQUEST:
		cl_add(q, "INSERT INTO cb_requests(broker, id, sandbox, command, capability, reason, ttl,"
		    " asked_at, expires_at) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
		    "suttttuuu", c->name, r->rid, r->sandbox, r->command, r->cap, r->reason, r->ttl,
		    r->asked_at, r->expires_at);
		cl_add(q, "NOTIFY cb_request", "");
		break;
	case CL_PUT_CLOSED:
		/* Only while nobody decided it in the database: a decision
		 * that won there is still read and applied (and finds the
		 * request closed here: its outcome says so). */
		cl_add(q, "UPDATE cb_requests SET state = $1, decided_by = $2, decided_on = $3,"
		    " decided_at = " CL_NOW_SQL ", decision_reason = $4, applied_at = " CL_NOW_SQL
		    ", outcome = 0 WHERE id = $5 AND broker = $3 AND state = 'pending'", "ststu",
		    cl_req_states[r->state], r->by, c->name, r->why, r->rid);
		break;
	case CL_PUT_APPLIED:
		if (r->reopen)	/* not applied: open for another decision */
			cl_add(q, "UPDATE cb_requests SET state = 'pending', outcome = $1 WHERE id = $2"
			    " AND broker = $3 AND applied_at IS NULL AND state <> 'pending'", "ius",
			    r->outcome, r->rid, c->name);
		else
			cl_add(q, "UPDATE cb_requests SET applied_at = " CL_NOW_SQL ", outcome = $1"
			    " WHERE id = $2 AND broker = $3 AND applied_at IS NULL", "ius", r->outcome,
			    r->rid, c->name);
		cl_add(q, "NOTIFY cb_applied", "");
		break;
	default:
		return CB_EINVAL;
	}
	return q->oom ? CB_ENOMEM : 0;
}

/*
 * CL_DECIDE.  Exactly one decision wins: the UPDATE changes the row only
 * while it is pending (PostgreSQL re-reads a row another transaction
 * changed meanwhile before it updates it, so of two brokers deciding at
 * the same instant the second finds it decided), unexpired and held by a
 * live broker.  The second statement, a snapshot of its own, sees what
 * won.  1: won (now waiting for the holder), 0: done (j->err says).
 */
static int
cl_decide(struct cl *c, struct cl_job *j)
{
	struct cl_req *r = j->req;
	struct cl_batch q = { 0 };
	struct cl_res res;
	PGresult *p2;
	bool won;
	int e;

	cl_add(&q, "WITH u AS (UPDATE cb_requests SET state = $1, decided_by = $2, decided_on = $3,"
	    " decided_at = " CL_NOW_SQL ", approved_ttl = $4, session = $5, decision_reason = $6,"
	    " outcome = NULL, applied_at = NULL WHERE id = $7 AND state = 'pending' AND expires_at > "
	    CL_NOW_SQL " AND broker IN " CL_LIVE("$8") " RETURNING 1) SELECT count(*) FROM u",
	    "stsubtuu", cl_req_states[r->state], r->by, c->name, r->approved_ttl, (int)r->session,
	    r->why, r->rid, c->stale_ns / 1000000u);
	cl_add(&q, "SELECT state, broker, sandbox, capability, coalesce(decided_by, ''),"
	    " coalesce(decided_on, ''), expires_at <= " CL_NOW_SQL ", broker IN " CL_LIVE("$2")
	    " FROM cb_requests WHERE id = $1", "uu", r->rid, c->stale_ns / 1000000u);
	cl_add(&q, "NOTIFY cb_decision", "");
	if ((e = cl_run(c, &q, &res, j->why, sizeof(j->why))) != 0) {
		j->err = e == CB_ENOMEM ? CB_ENOMEM : CB_ECLUSTER;
		return 0;
	}
	if (res.n != 3 || cl_pq.PQntuples(res.r[0]) != 1) {
		cl_res_clear(&res);
		j->err = CB_ECLUSTER;
		snprintf(j->why, sizeof(j->why), "the database answered the decision oddly");
		return 0;
	}
	won = strcmp(cl_pq.PQgetvalue(res.r[0], 0, 0), "1") == 0;
	p2 = res.r[1];
	if (cl_pq.PQntuples(p2) != 1) {
		cl_res_clear(&res);
		j->err = CB_ENOENT;
		snprintf(j->why, sizeof(j->why), "no broker of the cluster holds request %" PRIu64, r->rid);
		return 0;
	}
	cl_col(p2, 0, 1, r->broker, sizeof(r->broker));
	cl_col(p2, 0, 2, r->sandbox, sizeof(r->sandbox));
	cl_col(p2, 0, 3, r->cap, sizeof(r->cap));
	if (won) {
		cl_res_clear(&res);
		return 1;
	}
	{
		const char *state = cl_pq.PQgetvalue(p2, 0, 0), *who = cl_pq.PQgetvalue(p2, 0, 4);
		const char *where = cl_pq.PQgetvalue(p2, 0, 5);
		bool expired = cl_pq.PQgetvalue(p2, 0, 6)[0] == 't', live = cl_pq.PQgetvalue(p2, 0, 7)[0] == 't';

		if (strcmp(state, "approved") == 0 || strcmp(state, "denied") == 0) {
			j->err = CB_EEXIST;
			snprintf(j->why, sizeof(j->why), "that request was already %.10s by %.40s on broker "
			    "%.120s", state, who, where);
		} else if (strcmp(state, "expired") == 0 || expired) {
			j->err = CB_EEXPIREDREQ;
			snprintf(j->why, sizeof(j->why), "that request expired undecided (expiry means deny)");
		} else if (!live) {
			j->err = CB_ECLUSTER;
			snprintf(j->why, sizeof(j->why), "broker %.150s, which holds that request, has not "
			    "been heard from within the staleness bound: it lapses there", r->broker);
		} else {
			j->err = CB_EEXIST;
			snprintf(j->why, sizeof(j->why), "that request is no longer pending");
		}
	}
	cl_res_clear(&res);
	return 0;
}

/* Decisions waiting for their broker's outcome (set by CL_PUT_APPLIED). */
static int
cl_check_dwaiters(struct cl *c)
{
	struct cl_job **pp, *w;
	uint64_t now = cb_mono_ns();

	for (pp = &c->dwaiters; (w = *pp);) {
		struct cl_res res;
		bool done = false;

		if (cl_read1(c, &res, "SELECT outcome FROM cb_requests WHERE id = $1 AND outcome IS NOT NULL",
		    "u", w->req->rid) != 0)
			return CB_ECLUSTER;	/* cl_down finished them (or out of memory: next time) */
		if (res.n == 1 && cl_pq.PQresultStatus(res.r[0]) == PGRES_TUPLES_OK && cl_pq.PQntuples(res.r[0]) == 1) {
			w->err = (int)strtol(cl_pq.PQgetvalue(res.r[0], 0, 0), NULL, 10);
			if (w->err > 0 || w->err < -1000)	/* not one of ours */
				w->err = CB_EINTERNAL;
			if (w->err)
				snprintf(w->why, sizeof(w->why), "recorded in the cluster, but broker %.100s "
				    "could not apply it: %s", w->req->broker,
				    w->err == CB_ENOENT ? "its sandbox is gone" :
				    w->err == CB_EEXPIREDREQ ? "the request expired there undecided" :
				    w->err == CB_EEXIST ? "the request was closed there already" :
				    w->err == CB_EINVAL ? "its request under that id is not the one shown "
				    "here (ids used again by a new state there)" :
				    cb_strerror(w->err));
			done = true;
		} else if (now >= w->deadline_ns) {
			w->err = CB_ETIMEDOUT;
			snprintf(w->why, sizeof(w->why), "recorded in the cluster, but broker %.100s did not "
			    "apply it within the bound (it applies it when it reads it; if it is down, the "
			    "request lapses there)", w->req->broker);
			done = true;
		}
		cl_res_clear(&res);
		if (done) {
			*pp = w->next;
			cl_job_done(c, w);
			continue;
		}
		pp = &w->next;
	}
	c->next_ack = now + (uint64_t)CL_ACK_POLL_MS * 1000000u;
	return 0;
}

static bool
cl_req_row(PGresult *pr, int i, struct cl_req *r)
{
	memset(r, 0, sizeof(*r));
	r->rid = cl_u64col(pr, i, 0);
	cl_col(pr, i, 1, r->broker, sizeof(r->broker));
	cl_col(pr, i, 2, r->sandbox, sizeof(r->sandbox));
	cl_col(pr, i, 3, r->command, sizeof(r->command));
	cl_col(pr, i, 4, r->cap, sizeof(r->cap));
	cl_col(pr, i, 5, r->reason, sizeof(r->reason));
	r->ttl = cl_u64col(pr, i, 6);
	r->asked_at = cl_u64col(pr, i, 7);
	r->expires_at = cl_u64col(pr, i, 8);
	{
		const char *st = cl_pq.PQgetvalue(pr, i, 9);

		r->state = strcmp(st, "approved") == 0 ? CL_REQ_APPROVED : strcmp(st, "denied") == 0 ?
		    CL_REQ_DENIED : strcmp(st, "expired") == 0 ? CL_REQ_EXPIRED : CL_REQ_PENDING;
	}
	cl_col(pr, i, 10, r->by, sizeof(r->by));
	cl_col(pr, i, 11, r->on, sizeof(r->on));
	cl_col(pr, i, 12, r->why, sizeof(r->why));
	r->approved_ttl = cl_u64col(pr, i, 13);
	r->session = cl_pq.PQgetvalue(pr, i, 14)[0] == 't';
	return r->rid != 0 && r->sandbox[0] && r->cap[0];
}

#define CL_REQ_COLS "id, broker, sandbox, command, capability, reason, ttl, asked_at, expires_at," \
	" state, coalesce(decided_by, ''), coalesce(decided_on, ''), coalesce(decision_reason, '')," \
	" coalesce(approved_ttl, 0), session"
#define CL_REQ_NCOLS 15

/* Rows of a read into reqs (malloc'd; NULL when none). */
static int
cl_req_rows(PGresult *pr, struct cl_req **out, size_t *n)
{
	int rows = cl_pq.PQntuples(pr);

	*out = NULL;
	*n = 0;
	if (cl_pq.PQnfields(pr) != CL_REQ_NCOLS)
		return CB_ECLUSTER;
	if (rows == 0)
		return 0;
	if (!(*out = calloc((size_t)rows, sizeof(**out))))
		return CB_ENOMEM;
	for (int i = 0; i < rows; i++)
		if (cl_req_row(pr, i, &(*out)[*n]))
			(*n)++;
	return 0;
}

/* Decisions on our requests that nobody applied yet: to the loop. */
static int
cl_decisions(struct cl *c)
{
	struct cl_res res;
	struct cl_msg *m;
	int r;

	if ((r = cl_read1(c, &res, "SELECT " CL_REQ_COLS " FROM cb_requests WHERE broker = $1 AND"
	    " state IN ('approved', 'denied') AND applied_at IS NULL ORDER BY id LIMIT $2", "si",
	    c->name, CL_ROWS_MAX)) != 0)
		return r;
	if (res.n != 1 || cl_pq.PQresultStatus(res.r[0]) != PGRES_TUPLES_OK || cl_pq.PQntuples(res.r[0]) == 0) {
		cl_res_clear(&res);
		return 0;
	}
	if (!(m = calloc(1, sizeof(*m))) || cl_req_rows(res.r[0], &m->reqs, &m->n) != 0 || !m->n) {
		if (m)
			free(m->reqs);
		free(m);
		cl_res_clear(&res);
		return 0;
	}
	cl_res_clear(&res);
	m->type = CL_MSG_DECISIONS;
	cl_post(c, m);
	return 0;
}

/* CL_GET_*: a page of a view. */
static void
cl_view(struct cl *c, struct cl_job *j)
{
	struct cl_batch q = { 0 };
	struct cl_res res;
	PGresult *pr;
	int e, rows;

	switch (j->op) {
	case CL_GET_REQUESTS:
		/* Pending, unexpired, and held by a live broker: a request whose
		 * broker is down lapses there, undecided. */
		cl_add(&q, "SELECT " CL_REQ_COLS " FROM cb_requests WHERE state = 'pending' AND"
		    " expires_at > " CL_NOW_SQL " AND broker IN " CL_LIVE("$1")
		    " ORDER BY asked_at, id OFFSET $2 LIMIT $3", "uui", c->stale_ns / 1000000u, j->offset,
		    CL_ROWS_MAX + 1);
		break;
	case CL_GET_SANDBOXES:
		cl_add(&q, "SELECT broker, id, tier, command, workspace, started, pid, owner,"
		    " tokens, requests FROM cb_sandboxes WHERE broker IN " CL_LIVE("$1")
		    " ORDER BY broker, started, id OFFSET $2 LIMIT $3", "uui", c->stale_ns / 1000000u,
		    j->offset, CL_ROWS_MAX + 1);
		break;
	case CL_GET_TOKENS:
		/* every sandbox's, or one's */
		cl_add(&q, "SELECT encode(id, 'hex'), encode(parent, 'hex'), sandbox, caps, nbf, exp,"
		    " limited, elevated, issued_by, broker FROM cb_tokens WHERE $1 = '' OR sandbox = $1"
		    " ORDER BY seq OFFSET $2 LIMIT $3", "tui", j->sandbox, j->offset, CL_ROWS_MAX + 1);
		break;
	default:
		break;
	}
	if ((e = cl_run(c, &q, &res, j->why, sizeof(j->why))) != 0) {
		j->err = e;
		return;
	}
	pr = res.r[res.n - 1];
	rows = cl_pq.PQntuples(pr);
	j->more = rows > CL_ROWS_MAX;
	if (j->more)
		rows = CL_ROWS_MAX;
	e = 0;
	if (j->op == CL_GET_REQUESTS) {
		e = cl_req_rows(pr, &j->reqs, &j->nrows);
		if (j->more && j->nrows > CL_ROWS_MAX)
			j->nrows = CL_ROWS_MAX;
	} else if (rows && j->op == CL_GET_SANDBOXES) {
		if (!(j->sbxs = calloc((size_t)rows, sizeof(*j->sbxs))))
			e = CB_ENOMEM;
		for (int i = 0; !e && i < rows; i++) {
			struct cl_sbx *s = &j->sbxs[j->nrows++];

			cl_col(pr, i, 0, s->broker, sizeof(s->broker));
			cl_col(pr, i, 1, s->id, sizeof(s->id));
			cl_col(pr, i, 2, s->tier, sizeof(s->tier));
			cl_col(pr, i, 3, s->command, sizeof(s->command));
			cl_col(pr, i, 4, s->workspace, sizeof(s->workspace));
			s->started = cl_u64col(pr, i, 5);
			s->pid = cl_u64col(pr, i, 6);
			s->owner = cl_u64col(pr, i, 7);
			/* a broker of an earlier version published none: its own
			 * view shows them (UINT64_MAX: not known here) */
			s->tokens = cl_pq.PQgetisnull(pr, i, 8) ? UINT64_MAX : cl_u64col(pr, i, 8);
			s->requests = cl_pq.PQgetisnull(pr, i, 9) ? UINT64_MAX : cl_u64col(pr, i, 9);
		}
	} else if (rows && j->op == CL_GET_TOKENS) {
		if (!(j->toks = calloc((size_t)rows, sizeof(*j->toks))))
			e = CB_ENOMEM;
		for (int i = 0; !e && i < rows; i++) {
			struct cl_tok *t = &j->toks[j->nrows];

			if (!cl_unhex(cl_pq.PQgetvalue(pr, i, 0), t->id, CAP_ID_LEN))
				continue;	/* malformed: not shown */
			t->has_parent = !cl_pq.PQgetisnull(pr, i, 1) &&
			    cl_unhex(cl_pq.PQgetvalue(pr, i, 1), t->parent, CAP_ID_LEN);
			cl_col(pr, i, 2, t->sandbox, sizeof(t->sandbox));
			if (!(t->caps = strdup(cl_pq.PQgetvalue(pr, i, 3)))) {
				e = CB_ENOMEM;
				break;
			}
			t->nbf = cl_u64col(pr, i, 4);
			t->exp = cl_u64col(pr, i, 5);
			t->limited = cl_pq.PQgetvalue(pr, i, 6)[0] == 't';
			t->elevated = cl_pq.PQgetvalue(pr, i, 7)[0] == 't';
			cl_col(pr, i, 8, t->by, sizeof(t->by));
			cl_col(pr, i, 9, t->broker, sizeof(t->broker));
			j->nrows++;
		}
	}
	cl_res_clear(&res);
	if (e) {
		j->err = e;
		snprintf(j->why, sizeof(j->why), "reading the cluster's view: %s", cb_strerror(e));
	}
}

static bool
cl_is_request_job(const struct cl_job *j)
{
	/* Named one by one, not as a range: an operation added later stays
	 * the stream's until it is named here (a range once took in
	 * CL_GET_HEADS, which is read with the stream's writes). */
	switch (j->op) {
	case CL_PUT_REQUEST:
	case CL_PUT_CLOSED:
	case CL_DECIDE:
	case CL_PUT_APPLIED:
	case CL_GET_REQUESTS:
	case CL_GET_TOKENS:
	case CL_GET_SANDBOXES:
		return true;
	case CL_PUT_KEY:
	case CL_PUT_TOKEN:
	case CL_PUT_REVOKE:
	case CL_PUT_RETIRE:
	case CL_GET_HEADS:
		return false;
	}
	return false;
}

/* One request or view job, in a transaction of its own (none of them is
 * part of the stream, so none takes the stream's lock). */
static void
cl_request_job(struct cl *c, struct cl_job *j)
{
	struct cl_batch q = { 0 };
	struct cl_res res;
	int e;

	switch (j->op) {
	case CL_DECIDE:
		if (cl_decide(c, j) == 1) {
			/* The holder may be us: read our decisions at once. */
			c->want_decisions = true;
			j->deadline_ns = cb_mono_ns() + c->stale_ns + 1000000000u;
			j->next = c->dwaiters;
			c->dwaiters = j;
			c->next_ack = 0;
			return;
		}
		break;
	case CL_GET_REQUESTS:
	case CL_GET_TOKENS:
	case CL_GET_SANDBOXES:
		cl_view(c, j);
		break;
	default:
		if ((e = cl_req_sql(c, &q, j)) != 0) {
			cl_batch_free(&q);
			cl_job_fail(c, j, e, "out of memory, or text the database cannot hold");
			return;
		}
		if ((e = cl_run(c, &q, &res, j->why, sizeof(j->why))) == CB_ECLUSTER && !c->pg &&
		    j->retry) {
			cl_requeue(c, j);
			return;
		}
		cl_res_clear(&res);
		j->err = e;
		break;
	}
	cl_job_done(c, j);
}

/* Take the request and view jobs out of list (each runs on its own);
 * the rest, the stream's writes, are returned in order. */
static struct cl_job *
cl_request_jobs(struct cl *c, struct cl_job *list)
{
	struct cl_job *keep = NULL, **tail = &keep, *next;

	for (; list; list = next) {
		next = list->next;
		list->next = NULL;
		if (!cl_is_request_job(list)) {
			*tail = list;
			tail = &list->next;
		} else if (!c->pg) {
			cl_fail_jobs(c, list);
		} else {
			cl_request_job(c, list);
		}
	}
	return keep;
}

static bool
cl_seen_has(const struct cl *c, uint64_t rid)
{
	for (size_t i = 0; i < c->nseen; i++)
		if (c->seen[i].rid == rid)
			return true;
	return false;
}

/* Other brokers' pending requests not told yet, for `capctl watch`: each
 * once (when watching starts, those pending then too: capctl watch lists
 * what is pending as well and queues a request once). */
static void
cl_watch_requests(struct cl *c)
{
	bool on = atomic_load(&c->watch);
	char why[CL_WHY_MAX];
	struct cl_batch q = { 0 };
	struct cl_res res;
	struct cl_req *rows = NULL;
	struct cl_msg *m;
	size_t n = 0, k = 0;

	if (on != c->watching) {
		c->watching = on;
		c->want_requests = on;
		free(c->seen);
		c->seen = NULL;
		c->nseen = 0;
	}
	if (!on || !c->want_requests)
		return;
	c->want_requests = false;
	cl_add(&q, "SELECT " CL_REQ_COLS " FROM cb_requests WHERE state = 'pending' AND broker <> $1"
	    " AND expires_at > " CL_NOW_SQL " AND broker IN " CL_LIVE("$2")
	    " ORDER BY asked_at, id LIMIT $3", "sui", c->name, c->stale_ns / 1000000u, CL_ROWS_MAX);
	if (cl_run(c, &q, &res, why, sizeof(why)) != 0)
		return;
	if (res.n == 1)
		cb_ignore(cl_req_rows(res.r[0], &rows, &n));
	cl_res_clear(&res);
	/* Forget what expired; then remember the new ones (the oldest
	 * forgotten first when full: at worst one is told again). */
	{
		uint64_t now = cb_now();
		size_t j = 0;

		for (size_t i = 0; i < c->nseen; i++)
			if (c->seen[i].expires_at > now)
				c->seen[j++] = c->seen[i];
		c->nseen = j;
	}
	for (size_t i = 0; i < n; i++) {
		if (cl_seen_has(c, rows[i].rid))
			continue;
		if (!c->seen && !(c->seen = calloc(CL_SEEN_MAX, sizeof(*c->seen))))
			break;
		if (c->nseen == CL_SEEN_MAX)
			memmove(c->seen, c->seen + 1, --c->nseen * sizeof(*c->seen));
		c->seen[c->nseen++] = (struct cl_seen){ rows[i].rid, rows[i].expires_at };
		rows[k++] = rows[i];
	}
	if (k == 0 || !(m = calloc(1, sizeof(*m)))) {
		free(rows);
		return;
	}
	m->type = CL_MSG_REQUESTS;
	m->reqs = rows;
	m->n = k;
	cl_post(c, m);
}

/* Our sandboxes into cb_sandboxes: this broker's rows replaced at once. */
static void
cl_put_sandboxes(struct cl *c)
{
	struct cl_batch q = { 0 };
	struct cl_res res;
	char why[CL_WHY_MAX];

	pthread_mutex_lock(&c->mu);
	if (c->sbx_dirty) {
		free(c->sbx_cur);
		c->sbx_cur = c->sbx_next;
		c->nsbx_cur = c->nsbx_next;
		c->sbx_next = NULL;
		c->nsbx_next = 0;
		c->sbx_dirty = false;
		c->sbx_sent = false;
	}
	pthread_mutex_unlock(&c->mu);
	if (c->sbx_sent || !c->pg)
		return;
	cl_add(&q, "BEGIN", "");
	cl_add(&q, "DELETE FROM cb_sandboxes WHERE broker = $1", "s", c->name);
	for (size_t i = 0; i < c->nsbx_cur; i++) {
		const struct cl_sbx *s = &c->sbx_cur[i];

		cl_add(&q, "INSERT INTO cb_sandboxes(broker, id, tier, command, workspace, started, pid,"
		    " owner, tokens, requests) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
		    " ON CONFLICT DO NOTHING", "sttttuuuuu", c->name, s->id, s->tier, s->command,
		    s->workspace, s->started, s->pid, s->owner, s->tokens, s->requests);
	}
	cl_add(&q, "COMMIT", "");
	/* A failed write is tried again at the next turn (or connect); one
	 * that failed in the database was rolled back (cl_pipe). */
	if (cl_run(c, &q, &res, why, sizeof(why)) == 0)
		c->sbx_sent = true;
	cl_res_clear(&res);
}

/* ---- the connection --------------------------------------------------- */

static void
cl_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* This broker's number, drawn once per name and kept in cb_broker_ids. */
static int
cl_draw_num(struct cl *c)
{
	struct cl_batch q = { 0 };
	struct cl_res res;
	int r;

	cl_add(&q, "INSERT INTO cb_broker_ids(name) VALUES($1) ON CONFLICT DO NOTHING", "s", c->name);
	cl_add(&q, "SELECT num FROM cb_broker_ids WHERE name = $1", "s", c->name);
	if (q.oom) {
		cl_batch_free(&q);
		return CB_ENOMEM;
	}
	if ((r = cl_pipe(c, &q, &res)) != 0)
		return r;
	if (res.n == 2 && cl_pq.PQresultStatus(res.r[1]) == PGRES_TUPLES_OK && cl_pq.PQntuples(res.r[1]) == 1)
		atomic_store(&c->num, strtoull(cl_pq.PQgetvalue(res.r[1], 0, 0), NULL, 10));
	else
		r = CB_ECLUSTER;
	cl_res_clear(&res);
	if (r)
		snprintf(c->down_why, sizeof(c->down_why), "drawing this broker's number in the cluster");
	return r;
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
	if (cl_pq.PQsetnonblocking(c->pg, 1) != 0) {
		cl_down(c, "cannot use the connection");
		return CB_ECLUSTER;
	}
	if ((r = cl_exec(c, cl_schema, "creating the cluster's tables")) != 0 ||
	    (r = cl_exec(c, cl_schema_requests, "creating the cluster's request tables")) != 0 ||
	    (r = cl_exec(c, cl_schema_instance, "adding the brokers' instances")) != 0 ||
	    (r = cl_exec(c, cl_schema_counts, "adding the sandboxes' counts")) != 0 ||
	    (r = cl_exec(c, "LISTEN cb_change;LISTEN cb_applied;LISTEN cb_decision;LISTEN cb_request;", "listening")) != 0) {
		if (c->pg)
			cl_down(c, c->down_why);
		return CB_ECLUSTER;
	}
	/* Our name first: nothing is written under a name another live
	 * process holds (cl_held). */
	c->applied_sent = UINT64_MAX;	/* report at once */
	if ((r = cl_report(c)) != 0 || (r = cl_draw_num(c)) != 0) {
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
	if ((r = cl_catchup(c)) != 0) {
		if (c->pg)
			cl_down(c, c->down_why);
		return CB_ECLUSTER;
	}
	cl_link(c, true, NULL);
	c->next_beat = cb_mono_ns() + c->beat_ns;
	c->want_decisions = true;
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

/* Every broker's recorded audit heads, each broker's latest log first. */
static void
cl_read_heads(struct cl *c, struct cl_job *j)
{
	struct cl_res res;
	PGresult *pr;
	int n;

	if (cl_read1(c, &res, "SELECT h.broker, encode(h.log_id,'hex'), h.seq, encode(h.hash,'hex'),"
	    " (extract(epoch from now() - h.at) * 1000)::bigint, coalesce(b.seen_at > now() -"
	    " $1::bigint * interval '1 millisecond', false) FROM cb_checkpoints h LEFT JOIN cb_brokers b"
	    " ON b.name = h.broker ORDER BY h.broker, h.at DESC LIMIT $2", "ui", c->stale_ns / 1000000u,
	    CL_HEADS_MAX) != 0) {
		cl_job_fail(c, j, CB_ECLUSTER, c->down_why);
		return;
	}
	if (res.n != 1 || cl_pq.PQresultStatus(res.r[0]) != PGRES_TUPLES_OK || cl_pq.PQnfields(res.r[0]) != 6) {
		snprintf(j->why, sizeof(j->why), "reading the cluster's audit heads: %s",
		    res.n ? cl_pq.PQresultErrorMessage(res.r[0]) : "no result");
		j->why[strcspn(j->why, "\n")] = '\0';
		j->err = CB_ECLUSTER;
		cl_res_clear(&res);
		cl_job_done(c, j);
		return;
	}
	pr = res.r[0];
	n = cl_pq.PQntuples(pr);
	if (n && !(j->heads = calloc((size_t)n, sizeof(*j->heads)))) {
		cl_res_clear(&res);
		cl_job_fail(c, j, CB_ENOMEM, "out of memory");
		return;
	}
	for (int i = 0; i < n; i++) {
		struct cl_head *h = &j->heads[j->nheads];

		/* a row we cannot read is left out, not guessed at */
		if (strlen(cl_pq.PQgetvalue(pr, i, 0)) > CL_NAME_MAX ||
		    !cl_unhex(cl_pq.PQgetvalue(pr, i, 1), h->log_id, 16) ||
		    !cl_unhex(cl_pq.PQgetvalue(pr, i, 3), h->hash, 32))
			continue;
		snprintf(h->broker, sizeof(h->broker), "%s", cl_pq.PQgetvalue(pr, i, 0));
		h->seq = strtoull(cl_pq.PQgetvalue(pr, i, 2), NULL, 10);
		h->age_ms = strtoull(cl_pq.PQgetvalue(pr, i, 4), NULL, 10);
		h->live = cl_pq.PQgetvalue(pr, i, 5)[0] == 't';
		j->nheads++;
	}
	cl_res_clear(&res);
	j->err = 0;
	cl_job_done(c, j);
}

static void
cl_write_all(struct cl *c, struct cl_job *list)
{
	struct cl_job **pp = &list, *rd;

	list = cl_request_jobs(c, list);
	/* Reads first, each on its own (no lock, no transaction). */
	while ((rd = *pp)) {
		if (rd->op != CL_GET_HEADS) {
			pp = &rd->next;
			continue;
		}
		*pp = rd->next;
		rd->next = NULL;
		if (c->pg)
			cl_read_heads(c, rd);
		else
			cl_job_fail(c, rd, CB_ECLUSTER, c->down_why);
	}
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

/*
 * Finished requests leave cb_requests CL_REQ_KEEP_S after their expiry,
 * whoever held them (a broker that never comes back leaves its rows too).
 * Past its expiry a row can no longer be decided (CL_DECIDE wants
 * expires_at ahead) nor listed, and its holder has closed the request in
 * its own state, at the latest at that expiry on its clock: a decision it
 * still finds unapplied there is refused (expired, or its sandbox gone).
 * So only the answers about it change: "already approved by ..." becomes
 * "no broker of the cluster holds request N".  Every broker prunes, once a
 * minute and at its first heartbeat; the statement is the same for all,
 * so two at once delete each row once.  A failure waits for the next turn.
 */
static void
cl_prune(struct cl *c)
{
	struct cl_res res;

	if (cl_read1(c, &res, "DELETE FROM cb_requests WHERE expires_at < extract(epoch from now())::bigint"
	    " - $1::bigint", "u", (uint64_t)CL_REQ_KEEP_S) == 0)
		cl_res_clear(&res);
}

static void
cl_notifies(struct cl *c)
{
	PGnotify *nt;

	while (c->pg && (nt = cl_pq.PQnotifies(c->pg))) {
		if (strcmp(nt->relname, "cb_change") == 0)
			c->want_catchup = true;
		else if (strcmp(nt->relname, "cb_decision") == 0)
			c->want_decisions = true;
		else if (strcmp(nt->relname, "cb_request") == 0)
			c->want_requests = true;
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
			/* our name held elsewhere: asked again with each heartbeat */
			cl_wait_in(c, c->held_since ? (int)(c->beat_ns / 1000000u) : CL_RETRY_MS);
			continue;
		}
		/* a NOTIFY read during a query waits in libpq, not on the socket */
		cl_notifies(c);
		now = cb_mono_ns();
		timeout = cl_ms_until(c->next_beat, now);
		if ((c->waiters || c->dwaiters) && cl_ms_until(c->next_ack, now) < timeout)
			timeout = cl_ms_until(c->next_ack, now);
		if (c->want_catchup || c->want_acks || c->want_decisions || atomic_load(&c->sbx_dirty) ||
		    (c->want_requests && atomic_load(&c->watch)) ||
		    atomic_load(&c->applied) != c->applied_sent)
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
			c->want_decisions = true;
			c->want_requests = true;
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
		if (c->pg && c->dwaiters && (c->want_acks || now >= c->next_ack))
			cb_ignore(cl_check_dwaiters(c));
		c->want_acks = false;
		/* Decisions for us: on their NOTIFY, and with every heartbeat's
		 * catch-up (a lost NOTIFY delays one, never loses it). */
		if (c->pg && c->want_decisions) {
			c->want_decisions = false;
			cb_ignore(cl_decisions(c));
		}
		if (c->pg && now >= c->next_prune) {
			c->next_prune = now + (uint64_t)CL_PRUNE_EVERY_S * 1000000000u;
			cl_prune(c);
		}
		if (c->pg)
			cl_put_sandboxes(c);
		if (c->pg)
			cl_watch_requests(c);
	}
	/* Leaving: the others need not wait for us any more. */
	if (c->pg) {
		struct cl_batch q = { 0 };
		struct cl_res res;
		char why[CL_WHY_MAX];

		/* Only our own row, and our sandboxes only when no other
		 * process holds the name (one that was refused it leaves the
		 * holder's alone). */
		cl_add(&q, "DELETE FROM cb_brokers WHERE name = $1 AND instance = $2", "sx", c->name,
		    c->instance, (size_t)CL_INSTANCE_LEN);
		cl_add(&q, "DELETE FROM cb_sandboxes WHERE broker = $1 AND NOT EXISTS (SELECT 1 FROM"
		    " cb_brokers WHERE name = $1)", "s", c->name);
		if (cl_run(c, &q, &res, why, sizeof(why)) == 0)
			cl_res_clear(&res);
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
	/* This process's token in cb_brokers: random, so that a clone of the
	 * host (same name, same state) never draws the same one. */
	if (getrandom(c->instance, sizeof(c->instance), 0) != (ssize_t)sizeof(c->instance)) {
		r = CB_EINTERNAL;
		goto out;
	}
	for (size_t i = 0; i < sizeof(c->instance); i++)
		snprintf(c->instance_hex + 2 * i, 3, "%02x", c->instance[i]);
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
	cl_free_list(c->in);
	cl_free_list(c->retry);
	cl_free_list(c->waiters);
	cl_free_list(c->dwaiters);
	free(c->sbx_next);
	free(c->sbx_cur);
	free(c->seen);
	for (m = c->out; m; m = next) {
		next = m->next;
		free(m->recs);
		free(m->reqs);
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
		case CL_MSG_DECISIONS:
			if (c->sink.decisions)
				c->sink.decisions(c->sink.arg, m->reqs, m->n);
			break;
		case CL_MSG_REQUESTS:
			if (c->sink.requests)
				c->sink.requests(c->sink.arg, m->reqs, m->n);
			break;
		case CL_MSG_HELD:
			if (c->sink.held)
				c->sink.held(c->sink.arg, m->fatal, m->why);
			break;
		case CL_MSG_JOB:
			if (m->job->done)
				m->job->done(m->job->arg, m->job);
			cl_job_free(m->job);
			break;
		}
		free(m->recs);
		free(m->reqs);
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

uint64_t
cl_num(const struct cl *c)
{
	return atomic_load(&c->num);
}

int
cl_set_sandboxes(struct cl *c, const struct cl_sbx *s, size_t n)
{
	struct cl_sbx *copy = NULL;

	if (n && !(copy = malloc(n * sizeof(*copy))))
		return CB_ENOMEM;
	if (n)
		memcpy(copy, s, n * sizeof(*copy));
	pthread_mutex_lock(&c->mu);
	free(c->sbx_next);
	c->sbx_next = copy;
	c->nsbx_next = n;
	c->sbx_dirty = true;
	pthread_mutex_unlock(&c->mu);
	cl_kick(c->efd_in);
	return 0;
}

void
cl_watch(struct cl *c, bool on)
{
	if (atomic_exchange(&c->watch, on) != on)
		cl_kick(c->efd_in);
}

void
cl_set_head(struct cl *c, const uint8_t log_id[16], uint64_t seq, const uint8_t hash[32])
{
	pthread_mutex_lock(&c->mu);
	c->head.set = true;
	c->head.seq = seq;
	memcpy(c->head.log_id, log_id, 16);
	memcpy(c->head.hash, hash, 32);
	pthread_mutex_unlock(&c->mu);
}
