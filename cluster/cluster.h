/*
 * cluster.h - many brokers, one record: the broker's link to a PostgreSQL
 * database (`serve --cluster CONNINFO`) through which brokers on many hosts
 * share public keys, issued tokens and revocations (docs/cluster.md).
 *
 * Trust domain: broker.  The database is trusted like the state directory
 * (only administrators can write it), but what it returns is still checked
 * field by field (lengths of ids and keys) before it reaches the state.
 *
 * Threads: libpq runs on one thread of this module's own, never on the
 * broker's event loop.  The loop hands work over with cl_submit() and
 * takes results with cl_dispatch() when cl_fd() is readable; every
 * callback runs on the loop's thread, inside cl_dispatch().
 *
 * Order: every write to the shared change stream (keys, tokens,
 * revocations) takes one transaction-scoped advisory lock before it draws
 * its sequence number and holds it to its commit, so sequence order is
 * commit order: a reader that has seen number N has seen everything below
 * N, and catching up from the last number seen misses nothing, whatever
 * NOTIFYs were lost.
 */
#ifndef CB_CLUSTER_H
#define CB_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caps/caps.h"
#include "common/common.h"

#define CL_NAME_MAX	255	/* a broker's name in the cluster */
#define CL_WHY_MAX	256	/* a sentence on what failed */
#define CL_PAGE		1000	/* changes read per catch-up query */
#define CL_JOBS_MAX	4096	/* writes waiting for the database (then CB_EBUSY) */
#define CL_TEXT_MAX	1024	/* a request's command line and reason (the state's ST_TEXT_MAX) */
#define CL_WHO_MAX	63	/* an actor: "uid:1000", "tty", "broker" */
#define CL_TIER_MAX	64
#define CL_PATH_MAX	4096
#define CL_ROWS_MAX	200	/* rows one read of a view returns (then "more") */
/* An elevation request's id in the cluster: its broker's number (one per
 * broker name, drawn once from the database) times CL_RID_SPAN, plus the
 * id the broker's own state gave it.  Ids never collide between brokers,
 * and the broker that holds a request can be read off its id. */
#define CL_RID_SPAN	1000000000ull
#define CL_HEADS_MAX	1024	/* audit heads read back at most (every broker, every log) */
#define CL_INSTANCE_LEN	16	/* a broker process's random token in cb_brokers */
/* How long a request stays in cb_requests after its expiry (decided,
 * applied, lapsed or never heard of again): a day, for `capctl pending`'s
 * "already approved by ..." and for an administrator's SQL. */
#define CL_REQ_KEEP_S	86400

struct cl;

/* One change of the cluster's stream, as read back. */
enum cl_kind {
	CL_KEY,		/* a public key (pk), retired or not */
	CL_TOKEN,	/* a token's id, its parent and whether it is use-limited */
	CL_REVOKE,	/* a token id revoked (with its descendants) */
};

struct cl_rec {
	uint64_t seq;
	enum cl_kind kind;
	uint8_t id[CAP_ID_LEN];		/* CL_TOKEN, CL_REVOKE */
	bool has_parent;
	uint8_t parent[CAP_ID_LEN];
	bool limited;
	uint8_t pk[32];			/* CL_KEY */
	bool retired;
	char broker[CL_NAME_MAX + 1];	/* the broker that wrote it */
	char actor[64];			/* CL_REVOKE: who revoked */
};

/* An elevation request as the cluster records it (cb_requests). */
enum cl_req_state { CL_REQ_PENDING, CL_REQ_APPROVED, CL_REQ_DENIED, CL_REQ_EXPIRED };

struct cl_req {
	uint64_t rid;			/* cluster-wide (CL_RID_SPAN) */
	char broker[CL_NAME_MAX + 1];	/* the broker holding its sandbox */
	char sandbox[CAP_AUD_MAX + 1];
	char command[CL_TEXT_MAX + 1];
	char cap[CAP_STR_MAX + 1];
	char reason[CL_TEXT_MAX + 1];	/* the agent's */
	uint64_t ttl, asked_at, expires_at;
	/* the decision */
	enum cl_req_state state;
	char by[CL_WHO_MAX + 1];	/* who decided */
	char on[CL_NAME_MAX + 1];	/* on which broker */
	char why[CL_TEXT_MAX + 1];	/* a denial's reason */
	uint64_t approved_ttl;		/* 0: as asked */
	bool session;
	/* CL_PUT_APPLIED: what applying it did on the holding broker (0 or a
	 * CB_E* code); reopen: it could not be applied and is pending again */
	int outcome;
	bool reopen;
};

/* A sandbox of some broker (cb_sandboxes). */
struct cl_sbx {
	char broker[CL_NAME_MAX + 1];
	char id[CAP_AUD_MAX + 1];
	char tier[CL_TIER_MAX];
	char command[CL_TEXT_MAX + 1];
	char workspace[CL_PATH_MAX];
	uint64_t started, pid, owner;
	/* the tokens it holds and its pending requests, as its broker last
	 * published them (at most a second or so old) */
	uint64_t tokens, requests;
};

/* A token of some broker (cb_tokens). */
struct cl_tok {
	uint8_t id[CAP_ID_LEN];
	bool has_parent;
	uint8_t parent[CAP_ID_LEN];
	char sandbox[CAP_AUD_MAX + 1];
	char *caps;			/* malloc'd, one per line; freed with the job */
	uint64_t nbf, exp;
	bool limited, elevated;
	char by[CL_WHO_MAX + 1];
	char broker[CL_NAME_MAX + 1];
};

/* A broker's audit log as the cluster recorded it: the last checkpoint
 * head (docs/audit.md) it reported for one log of its. */
struct cl_head {
	char broker[CL_NAME_MAX + 1];
	uint8_t log_id[16];
	uint64_t seq;			/* the checkpoint line's seq */
	uint8_t hash[32];		/* the hash of that line: it seals the chain before it */
	uint64_t age_ms;		/* since the database recorded it */
	bool live;			/* the broker reported within the staleness bound */
};

/* What the loop is told. */
struct cl_sink {
	/* Changes in sequence order.  fresh_ns (monotonic) is set on the last
	 * page of a catch-up: every change committed before that instant is
	 * in this call or an earlier one; 0 when more pages follow. */
	void (*batch)(void *arg, const struct cl_rec *r, size_t n, uint64_t fresh_ns);
	/* The link came up or went down (why says what failed). */
	void (*link)(void *arg, bool up, const char *why);
	/* Decisions on requests this broker holds, not yet applied here
	 * (each is applied once: the holder answers with CL_PUT_APPLIED; one
	 * delivered again before that is found decided in the state). */
	void (*decisions)(void *arg, const struct cl_req *r, size_t n);
	/* Requests other brokers recorded since the last call, while
	 * cl_watch() is on (for `capctl watch`): each told once. */
	void (*requests)(void *arg, const struct cl_req *r, size_t n);
	/* Another live broker process holds this broker's name (a host
	 * cloned with its state): the link writes nothing under it and stays
	 * down, so the broker fails closed at the bound.  fatal: this process
	 * never held the name, and it was still held after the bound and a
	 * second (not a crashed predecessor's row): the broker must stop. */
	void (*held)(void *arg, bool fatal, const char *why);
	void *arg;
};

struct cl_opts {
	const char *conninfo;		/* a libpq connection string or URI */
	const char *name;		/* this broker's name in the cluster */
	uint64_t stale_ms;		/* the staleness bound (heartbeats are a quarter of it) */
	struct cl_sink sink;
};

/* A write for the database. */
enum cl_op {
	CL_PUT_KEY,	/* publish a public key of ours (upsert; kept and re-published on every connect) */
	CL_PUT_TOKEN,	/* publish a token we minted */
	CL_PUT_REVOKE,	/* record a revocation; done when every live broker applied it */
	CL_PUT_RETIRE,	/* retire a key cluster-wide (not a broker's signing key: CB_EBUSY) */
	/* Elevation requests (docs/cluster.md, "Elevation across the
	 * cluster"); each in a transaction of its own, outside the stream. */
	CL_PUT_REQUEST,	/* record a request of ours (req) */
	CL_PUT_CLOSED,	/* a request of ours lapsed or was denied here (req: state, by, why) */
	CL_DECIDE,	/* decide a request (req: rid, state, by, approved_ttl, session, why):
			 * done when its broker applied it (see err) */
	CL_PUT_APPLIED,	/* a decision on a request of ours was applied (req: rid, outcome, reopen) */
	/* Views (reads; nothing is kept) */
	CL_GET_REQUESTS,	/* pending requests of every broker, from offset (reqs) */
	CL_GET_TOKENS,	/* tokens of every broker, from offset (toks), of sandbox if set */
	CL_GET_SANDBOXES,	/* sandboxes of every live broker (sbxs) */
	CL_GET_HEADS,	/* read every broker's recorded audit heads (heads, nheads) */
};

struct cl_job {
	enum cl_op op;
	/* Kept in memory while the database is unreachable and written when
	 * it returns; without it the job fails at once (CB_ECLUSTER). */
	bool retry;
	/* CL_PUT_KEY */
	uint8_t pk[32];
	bool signing, retired;
	/* CL_PUT_TOKEN, CL_PUT_REVOKE (id) */
	uint8_t id[CAP_ID_LEN];
	bool has_parent;
	uint8_t parent[CAP_ID_LEN];
	char sandbox[CAP_AUD_MAX + 1];
	char *caps;			/* malloc'd, one per line; freed with the job */
	uint64_t nbf, exp, issued_at;
	bool limited, elevated;
	char by[64];			/* issued by / revoked by */
	/* CL_PUT_RETIRE */
	uint8_t kid[CAP_KID_LEN];
	/* CL_PUT_REQUEST, CL_PUT_CLOSED, CL_DECIDE, CL_PUT_APPLIED: malloc'd,
	 * freed with the job; CL_DECIDE's is filled in from the database
	 * (broker, sandbox, cap; the holder's outcome) */
	struct cl_req *req;
	/* CL_GET_*: the page asked for, and the rows read (freed with the job) */
	uint64_t offset;
	bool more;
	struct cl_req *reqs;
	struct cl_tok *toks;
	struct cl_sbx *sbxs;
	size_t nrows;
	/* Called on the loop (in cl_dispatch) when the job is done; the job
	 * is freed after it returns. */
	void (*done)(void *arg, const struct cl_job *j);
	void *arg;
	/* results */
	/* 0, CB_ECLUSTER (unreachable), CB_ENOENT, CB_EBUSY; CL_DECIDE: CB_ENOENT
	 * (no such request), CB_EEXIST (decided already), CB_EEXPIREDREQ, the
	 * holder's outcome, or CB_ETIMEDOUT (recorded, but its broker did not
	 * apply it within the bound) */
	int err;
	uint64_t seq;			/* its number in the stream */
	unsigned unconfirmed;		/* CL_PUT_REVOKE: live brokers that did not confirm in time */
	char unconfirmed_by[CL_WHY_MAX];	/* ... their names, comma-separated (cut with "...") */
	char why[CL_WHY_MAX];
	struct cl_head *heads;		/* CL_GET_HEADS: malloc'd, freed with the job; */
	size_t nheads;			/* by broker, each broker's latest log first */
	/* the module's */
	uint64_t deadline_ns;
	struct cl_job *next;
};

/* Start the link: its thread connects (and keeps reconnecting), creates
 * the schema if missing, registers this broker, listens and catches up from
 * sequence 0.  Does not wait for the database: until the first catch-up
 * the broker is stale.  The first call loads libpq (dlopen; it is not
 * linked).  CB_ENOMEM, CB_EINTERNAL (thread, eventfd), CB_EINVAL (no
 * conninfo or name), CB_EUNSUPPORTED (libpq cannot be loaded: cl_lib_why()
 * says why). */
int cl_open(const struct cl_opts *o, struct cl **out) CB_WARN_UNUSED;

/* Why libpq could not be loaded (static text), after cl_open said
 * CB_EUNSUPPORTED. */
const char *cl_lib_why(void);
/* Stop the thread, deregister, disconnect; every job not delivered yet
 * has its done callback run here (finished ones with their result, the
 * rest with CB_ECLUSTER).  On the loop's thread.  NULL is fine. */
void cl_close(struct cl *c);

/* Readable when cl_dispatch has something to deliver. */
int cl_fd(const struct cl *c);
/* Deliver batches, link changes and finished jobs, in the order the
 * thread produced them (on the loop's thread). */
void cl_dispatch(struct cl *c);

/* Hand a job (malloc'd, with caps malloc'd or NULL) to the thread; it
 * owns it from now on, even on error.  CB_EBUSY when CL_JOBS_MAX wait. */
int cl_submit(struct cl *c, struct cl_job *j) CB_WARN_UNUSED;
/* Free a job that was never submitted. */
void cl_job_free(struct cl_job *j);

/* The loop applied the stream up to seq: reported to the database so that
 * a revocation elsewhere is acknowledged only once this broker has it. */
void cl_applied(struct cl *c, uint64_t seq);

/* The audit log's last checkpoint head (durable here: the state recorded
 * it): written to cb_checkpoints with the next report to the database (at
 * most a heartbeat later), so that the cluster remembers how far this
 * broker's log reached.  A head is never moved back there. */
void cl_set_head(struct cl *c, const uint8_t log_id[16], uint64_t seq, const uint8_t hash[32]);

/* Is the link up (last round trip succeeded)? */
bool cl_up(const struct cl *c);

/* Does anyone here watch for requests (capctl watch)?  While on, the
 * link reads other brokers' new requests (on their NOTIFY, and with every
 * heartbeat) and hands them to sink.requests. */
void cl_watch(struct cl *c, bool on);

/* This broker's number in the cluster (CL_RID_SPAN), 0 until the first
 * connection drew it. */
uint64_t cl_num(const struct cl *c);

/* The sandboxes this broker runs now (copied): the link replaces this
 * broker's rows of cb_sandboxes with them, at once or when the database
 * returns; only the latest set waits.  CB_ENOMEM. */
int cl_set_sandboxes(struct cl *c, const struct cl_sbx *s, size_t n) CB_WARN_UNUSED;

#endif
