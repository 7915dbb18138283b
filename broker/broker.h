/*
 * broker.h - the broker: one event loop that owns every sandbox's
 * socketpair and performs each granted operation after checking a token.
 *
 * Trust domain: the broker (trusted, possibly root).  Everything a sandbox
 * sends is hostile.  The loop never blocks on an agent: DNS runs in worker
 * threads, connects and child processes are events, replies that cannot be
 * sent at once are queued (bounded) rather than waited for.
 *
 * Files: broker.c (set-up, tick, reload, loop, tear-down), sbx.c (the
 * sandbox life cycle), chan.c (a channel: read, rate, reply queue, reply,
 * deny, audit), dispatch.c (the table of what an agent may ask for),
 * work.c (worker threads), approval.c (requests waiting for a human),
 * tokens.c (the per-sandbox token table and the check pipeline), ops_fs.c,
 * ops_net.c, ops_proc.c, ops_tok.c (request/derive/tokens), admin.c (admin
 * socket), commit.c (the commit gate of administrative decisions),
 * hostaddr.c (the host's own addresses, for net.connect), budget.c (what
 * one sandbox's denials may write to the audit log), main.c and service.c
 * (the capbroker program: command line, run, serve).  chan.h, dispatch.h,
 * sbx.h, work.h and approval.h are private to these files.
 */
#ifndef CB_BROKER_H
#define CB_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "caps/caps.h"
#include "common/common.h"
#include "policy/policy.h"
#include "sandbox-stub/sandbox.h"
#include "state/state.h"
#include "wire/wire.h"

#define BRK_HELD_MAX	64	/* tokens one sandbox may hold */
#define BRK_INFLIGHT_MAX 32	/* async requests in flight per sandbox */
#define BRK_OUTQ_MAX	64	/* replies queued while the agent does not read */
#define BRK_HANDLES_MAX	64	/* mediated fds per sandbox */
#define BRK_RATE	20000	/* requests per second per sandbox (sustained) */
#define BRK_BURST	2000	/* ... and burst */
#define BRK_BATCH	32	/* packets read per wakeup, for fairness */
#define BRK_BAD_COST	16	/* a malformed packet costs this many requests of the rate */
#define BRK_SANDBOXES_MAX 4096
#define BRK_MINT_MAX	1024	/* tokens minted for one sandbox in its life: derive,
				 * request (human, session, auto) alike */
#define BRK_SESSION_MAX	16	/* approvals "for this session" one sandbox keeps */
#define BRK_BAD_MAX	4096	/* malformed packets before the channel is closed */
#define BRK_PENDING_MAX	4	/* elevation requests one sandbox may have waiting */
#define BRK_COAL_SLOTS	8	/* recent denials remembered for coalescing (budget.c) */
#define BRK_DISK_RESERVE (128 * 1024)	/* free bytes the state's disk must keep for a new sandbox */
#define BRK_CLOCK_JUMP_S 2	/* a wall-clock jump audited (s) */
#define BRK_NOFILE_MIN	32	/* open-files limit below which serve refuses to start */
#define BRK_NOFILE_MIN_RUN 64	/* ... and run (a sandbox of its own needs more) */
#define BRK_ADMIN_MAX	256	/* admin connections in total */
#define BRK_ADMIN_PER_UID 32	/* ... and per peer uid */
#define BRK_ACCEPT_BACKOFF_MAX_MS 1000	/* longest pause of the listener after a failed accept */
#define BRK_PATH_MAX	4096	/* a path the broker keeps (the kernel's PATH_MAX) */
#define BRK_STATE_FILE_MAX (BRK_PATH_MAX + 104)	/* STATE/name: a file in the state directory */
#define BRK_TIER_NAME_MAX 64	/* a tier's name as a sandbox keeps it */
#define BRK_RO_BINDS_MAX 32	/* --ro-bind options of one run */
#define BRK_SNDBUF_REPLIES 8	/* largest replies a channel's send buffer holds */
#define BRK_DETAIL_MAX	128	/* an audit detail's words around the names it quotes */

struct event_base;
struct event;
struct brk;
struct brk_sbx;

enum brk_approve {
	BRK_APPROVE_ADMIN,	/* wait for capctl approve/deny */
	BRK_APPROVE_TTY,	/* ask at the launching terminal */
	BRK_APPROVE_DENY,	/* refuse every request that needs a human */
};

/* A token a sandbox holds: decoded once, its signature verified once. */
struct brk_held {
	struct cap_token *tok;
	char *text;
	size_t text_len;
	bool sig_ok;
	uint64_t sig_epoch;	/* st_epoch() when verified */
	uint32_t in_ceiling;	/* bit i: caps[i] inside the ceiling (or requestable) */
	bool granted;		/* minted for this sandbox (not presented by it) */
	bool inst_ok;		/* elevated: granted to this very sandbox instance */
};

/* A file the broker keeps open for mediated io. */
struct brk_handle {
	int fd;
	bool used;
	bool write;
	uint8_t tid[CAP_ID_LEN];	/* token re-checked on every io op */
	uint32_t th;
};

/* A recent denial whose identical repeats are counted, not written
 * (budget.c). */
struct brk_coal {
	bool used;
	int reason;
	bool has_tid;
	uint8_t tid[CAP_ID_LEN];
	char *op, *resource, *detail;
	uint64_t count;			/* repeats since its last line */
	uint64_t first_ns, last_ns;	/* wall clock of the first and last of them */
	uint64_t first_mono, seen_mono;
};

struct brk_out;			/* a queued reply */
struct brk_proc;		/* a running proc.exec child */

/* A policy and the sandboxes still using it.  A reload (SIGHUP to `serve`)
 * makes a new one current; new sandboxes start under it, running ones keep
 * the one they started under, which is freed when the last of them ends. */
struct brk_pol {
	struct pol *pol;
	unsigned refs;			/* sandboxes using it */
	uint64_t gen;			/* 1 at start, +1 per reload */
};

struct brk_sbx {
	struct brk *b;
	struct brk_sbx *next;
	char id[CAP_AUD_MAX + 1];
	char *command;			/* argv joined, for people */
	char tier_name[BRK_TIER_NAME_MAX];
	enum sbx_tier stier;
	struct pol_inst *inst;		/* its tier, from pol */
	struct brk_pol *pol;		/* the policy it started under */
	char workspace[BRK_PATH_MAX];
	uint64_t started_at;
	uint64_t wall;			/* its wall-clock limit, seconds */
	uid_t owner;			/* who started it (admin peer or us) */

	int fd;				/* broker end of the socketpair */
	struct event *ev_read;
	struct event *ev_write;
	struct event *ev_rate;		/* re-enables reading after a rate stall */
	struct brk_out *outq, *outq_tail;
	size_t noutq;

	double bucket;			/* rate limiter */
	uint64_t bucket_ns;
	unsigned inflight;
	uint64_t nreq, nbad;

	double aud_bucket;		/* audit budget (budget.c) */
	uint64_t aud_bucket_ns;
	uint64_t throttled_since;	/* mono ns; 0: not throttled */
	uint64_t dry_ns;		/* mono ns: the budget last ran dry */
	uint64_t ndenied;
	struct brk_coal coal[BRK_COAL_SLOTS];

	struct brk_held held[BRK_HELD_MAX];
	size_t nheld;
	struct brk_handle handles[BRK_HANDLES_MAX];
	struct cap *session_caps[BRK_SESSION_MAX];	/* approvals "for this session" */
	uint64_t session_ttl[BRK_SESSION_MAX];
	size_t nsession;

	struct sbx_proc proc;		/* the agent's sandbox, if we spawned it */
	bool spawned;
	struct event *ev_status, *ev_exit;
	bool exited;
	int exit_code;
	void (*on_exit)(struct brk_sbx *, void *);
	void *on_exit_arg;
	struct brk_proc *procs;		/* its running proc.exec children */
	uint64_t instance;		/* st_instance_begin: its approved elevations
					 * are recorded against it in the state */
	unsigned minted;		/* tokens minted for it (BRK_MINT_MAX) */
	int refs;			/* async operations holding this struct */
	bool dead;			/* channel closed; freed when refs drop to 0 */
};

struct brk_opts {
	const char *state_dir;
	const char *policy_path;	/* NULL: built-in default */
	const char *admin_path;		/* NULL: STATE/admin.sock */
	enum brk_approve approve;
	bool quiet;
	bool new_audit_log;		/* start a new log although the state remembers another */
	bool has_admin_fd;		/* admin_fd: a listening socket to adopt (systemd) */
	int admin_fd;
	bool new_state;			/* start a new state database beside an existing log */
};

struct brk {
	struct event_base *base;
	struct pol *pol;		/* the current policy: cur->pol */
	struct brk_pol *cur;
	struct st *st;
	struct aud_log *aud;
	struct wire_dec *dec;
	uint8_t *rbuf;			/* one receive buffer, WIRE_REQ_MAX + 1 */
	uint8_t *sbuf;			/* one send buffer, WIRE_REPLY_MAX */
	struct brk_sbx *sbx;		/* live sandboxes */
	size_t nsbx;
	struct brk_opts opts;
	char state_dir[BRK_PATH_MAX];
	char state_real[BRK_PATH_MAX];		/* its canonical path: never served */
	char capcall_path[BRK_PATH_MAX];
	char pylib_dir[BRK_PATH_MAX];
	int admin_fd;
	struct event *ev_admin;
	char admin_path[BRK_PATH_MAX];		/* the admin socket's path */
	bool admin_bound;		/* we bound it (not inherited): we remove it */
	dev_t admin_dev;		/* ... if it is still ours at exit */
	ino_t admin_ino;
	bool admin_stale;		/* a stale socket was removed at start */
	int lock_fd;			/* STATE/broker.lock, flock'd for our life */
	struct event *ev_admin_retry;	/* re-arms the listener after a failed accept */
	unsigned admin_backoff_ms;	/* current backoff (0: none) */
	uint64_t accept_failures;	/* failed accepts, counted (capctl status) */
	uint64_t admin_refused;		/* connections refused over the caps */
	size_t nadmins;
	int spare_fd;			/* kept open so a refusal can still be sent */
	struct event *ev_tick;
	int wake_pipe[2];		/* worker threads -> loop */
	struct event *ev_wake;
	struct brk_admin *admins;	/* admin connections */
	struct brk_pending *pending;	/* elevation requests awaiting a human */
	int tty_fd;			/* --approve tty */
	struct event *ev_tty;
	struct brk_pending *tty_current;
	struct brk_hostaddr *hostaddr;	/* the host's own addresses (hostaddr.c) */
	/* A channel had to close (chan.c cannot call up into sbx.c):
	 * brk_sbx_close_channel. */
	void (*chan_closed)(struct brk_sbx *s, const char *why);
	void (*prompt_hook)(void *arg, bool open);	/* a tty prompt opens/closes */
	void *prompt_arg;
	bool stopping;
	int exit_code;
	char dec_why[BRK_PATH_MAX + 512];		/* why the last brk_decide failed */
	uint64_t clock_wall, clock_mono;	/* the clocks at the last tick */
};

/* Set up the broker: policy, state (locked: one broker per state directory,
 * CB_EBUSY naming the live one otherwise), audit log, admin socket (a stale
 * one is removed, a live one is CB_EBUSY).  On error a one-line reason is in
 * why. */
int brk_new(const struct brk_opts *o, struct brk **out, char *why, size_t whylen) CB_WARN_UNUSED;

/* Load the policy file again and make it current for new sandboxes; running
 * sandboxes keep theirs.  Audited (policy.reload, with actor), both ways.
 * No policy file, or an invalid one: the policy in force stays, CB_EINVAL
 * or the loader's code, and why says why (the loader's messages). */
int brk_reload(struct brk *b, const char *actor, char *why, size_t whylen) CB_WARN_UNUSED;
void brk_free(struct brk *b);
int brk_loop(struct brk *b);
void brk_stop(struct brk *b, int code);

/* ---- sandboxes (sbx.c) ---- */

/* A tier's limits as the sandbox takes them: wall is the wall clock to use
 * (already at most the tier's); open files are clamped to what the sandbox
 * allows (stricter, never weaker). */
void brk_sbx_limits(const struct pol_limits *l, uint64_t wall, struct sbx_limits *out);

struct brk_sbx_spec {
	const char *id;			/* NULL: generated */
	const char *tier;		/* NULL: policy default */
	const char *workspace;		/* NULL: current directory */
	char *const *argv;
	const char *const *grants;
	size_t ngrants;
	uint64_t ttl;			/* grant lifetime; 0: policy default */
	uint64_t timeout;		/* wall clock; 0: tier's */
	const char *const *ro_binds;	/* SRC[:DST] */
	size_t nro_binds;
	uid_t owner;
	const char *actor;		/* audit actor: "uid:N" */
	bool want_pty;			/* the agent's stdio: a pty of its own */
	const char *chdir;		/* where the agent starts (inside); NULL: /tmp */
	const char *const *setenv;	/* NAME, VALUE pairs for the agent's environment */
	size_t nsetenv;
	const char *const *unsetenv;	/* NAMEs removed from it */
	size_t nunsetenv;
};

/* Create a sandbox: validate, mint grant tokens (each inside the ceiling),
 * spawn it.  The stdio fds of the agent are in (*out)->proc.  On error a
 * one-line reason in why and CB_EPOLICY (a grant beyond the ceiling),
 * CB_EINVAL or a spawn error. */
int brk_sbx_create(struct brk *b, const struct brk_sbx_spec *spec, struct brk_sbx **out,
    char *why, size_t whylen) CB_WARN_UNUSED;
struct brk_sbx *brk_sbx_find(struct brk *b, const char *id);
/* The sentence for "WHAT exceeds the ceiling of tier T", listing what the
 * tier's ceiling does allow (cut with "..." when it does not fit). */
void brk_ceiling_refusal(const struct brk_sbx *s, const char *what, char *why, size_t whylen);
void brk_sbx_kill(struct brk_sbx *s, const char *actor);
void brk_sbx_hold(struct brk_sbx *s);
void brk_sbx_release(struct brk_sbx *s);

/* Send a reply (with an optional fd, which is consumed). */
void brk_reply(struct brk_sbx *s, const struct wire_reply *r, int fd);
/* Reply with an error and audit the denial. */
void brk_deny(struct brk_sbx *s, const struct wire_req *q, int err, const char *resource,
    const uint8_t *tid, const char *detail);

/* ---- the audit budget (budget.c) ---- */
enum brk_budget {
	BRK_BUDGET_OK,		/* read on */
	BRK_BUDGET_WAIT,	/* throttled: read again after *wait */
	BRK_BUDGET_STOP,	/* throttled too long: close the channel, saying why */
};
/* Audit a denial for s: written, or counted when it repeats a recent one;
 * either way charged to the sandbox's audit budget. */
void brk_budget_deny(struct brk_sbx *s, int reason, const char *op, const char *resource,
    const uint8_t *tid, const char *detail);
/* Before reading a request: may s be served now? */
enum brk_budget brk_budget_check(struct brk_sbx *s, struct timeval *wait, char *why,
    size_t whylen);
/* Once a second: write the counts that waited a second or more. */
void brk_budget_tick(struct brk_sbx *s);
/* The sandbox ends: write every count, forget every denial. */
void brk_budget_end(struct brk_sbx *s);

/* ---- tokens (tokens.c) ---- */

/* Add a token to the sandbox's table (decode; dedupe by text).  *th gets its
 * handle.  Full verification except coverage happens in brk_tok_check. */
int brk_held_add(struct brk_sbx *s, const char *text, size_t len, bool granted, uint32_t *th) CB_WARN_UNUSED;
void brk_held_clear(struct brk_sbx *s);

/* The check pipeline, cheapest first: time, audience, revocation and uses,
 * coverage, ceiling, signature.  r may be NULL (no coverage check).  On
 * success *capi is the index of the covering capability. */
int brk_tok_check(struct brk_sbx *s, struct brk_held *h, const struct cap_req *r, size_t *capi) CB_WARN_UNUSED;

/* The one mint budget of a sandbox, charged by every path that mints a
 * token for it (derive, and request: human, session and auto): CB_EBUSY
 * once BRK_MINT_MAX tokens were minted in its life, else 0 (and counted). */
int brk_mint_charge(struct brk_sbx *s) CB_WARN_UNUSED;

/* Is h an elevated token whose operation r a never rule of the sandbox's
 * tier names?  Such an operation is refused (CB_EPOLICY) whatever the
 * approval said: never rules win (docs/policy.md). */
bool brk_tok_never(const struct brk_sbx *s, const struct brk_held *h, const struct cap_req *r);

/* Present token text: add it to the table and check it (coverage of r if
 * given).  A token that fails as a forgery or another sandbox's is dropped
 * again.  *out is NULL on such a failure. */
int brk_held_present(struct brk_sbx *s, const char *text, const struct cap_req *r,
    struct brk_held **out, size_t *capi) CB_WARN_UNUSED;

/* Pick the token for request q needing r: the one presented (tok / th) or
 * the first held token that passes.  On failure the most telling reason. */
int brk_tok_select(struct brk_sbx *s, const struct wire_req *q, const struct cap_req *r,
    struct brk_held **out, size_t *capi) CB_WARN_UNUSED;

/* The commit gate of an operation done for an agent, passed last before
 * acting: the audit log has room for the record (CB_EAUDIT), then a use of
 * h is spent if it is limited (durable; CB_ESPENT and the state's errors).
 * h NULL: only the log. */
int brk_tok_commit(struct brk_sbx *s, struct brk_held *h) CB_WARN_UNUSED;

/* What a new token says (brk_tok_sign, brk_tok_mint). */
struct brk_mint {
	const char *aud;		/* the sandbox it is for */
	struct cap *const *caps;	/* 1..CAP_MAX_CAPS, copied */
	size_t ncaps;
	uint64_t nbf, exp;
	bool has_uses;
	uint32_t uses;
	const uint8_t *parent;		/* CAP_ID_LEN bytes; NULL: none */
	bool elevated;
	const char *by;			/* who issued it (audit actor); NULL: "broker" */
};

/* Sign a token and fill its state record (rec->caps malloc'd) without
 * recording it. */
int brk_tok_sign(struct brk *b, const struct brk_mint *m, char **text, struct st_token *rec)
    CB_WARN_UNUSED;

/* brk_dec.apply for a token record (arg: struct st_token). */
int brk_tok_apply_add(struct brk *b, void *arg) CB_WARN_UNUSED;

/* Mint and record a token (through brk_decide: durable in the state and
 * the log when it returns); text malloc'd, id its id. */
int brk_tok_mint(struct brk *b, const struct brk_mint *m, char **text, uint8_t id[CAP_ID_LEN])
    CB_WARN_UNUSED;

/* ---- the host's own addresses (hostaddr.c) ---- */
struct brk_hostaddr;
/* Start watching the host's addresses on the loop (b->base must exist).
 * CB_ENOMEM; a netlink socket that cannot be opened is not an error (the
 * list is then read for every judgment). */
int brk_hostaddr_open(struct brk *b) CB_WARN_UNUSED;
void brk_hostaddr_close(struct brk *b);
/* The addresses of every interface of the broker's network namespace, as
 * of now (re-read when the kernel said they changed).  The array belongs
 * to b and lives until the next call.  CB_EIO/CB_ENOMEM: unknown; the
 * caller must refuse what it was about to judge. */
int brk_hostaddr_get(struct brk *b, const struct cap_addr **a, size_t *n) CB_WARN_UNUSED;

/* ---- the commit gate (commit.c) ---- */

/* One administrative decision.  apply makes the durable state change (an
 * st_* call, which brk_decide arms with the record); after runs once the
 * record is durable too (an effect outside the state, such as a kill). */
struct brk_dec {
	const char *op, *sandbox, *resource, *actor, *detail;
	const uint8_t *tid;
	enum aud_decision decision;
	int reason;
	int (*apply)(struct brk *b, void *arg);
	void (*after)(struct brk *b, void *arg);
	void *arg;
};

/* Room, state, log, effect, in that order (see commit.c).  0 when all of it
 * is durable; apply's error with nothing changed; CB_EAUDIT when the log
 * had no room (nothing changed) or could not seal the record (the state
 * change stands): brk_decide_why says which, in a sentence. */
int brk_decide(struct brk *b, const struct brk_dec *d) CB_WARN_UNUSED;
const char *brk_decide_why(const struct brk *b, int err);
/* Revoke a token (and its descendants) through brk_decide; *count (may
 * be NULL) gets how many were newly revoked.  admin.c. */
int brk_revoke(struct brk *b, const uint8_t id[CAP_ID_LEN], const char *sandbox, const char *actor,
    const char *detail, size_t *count) CB_WARN_UNUSED;
/* At start: write a record the log lacks, refuse a state behind the log. */
int brk_reconcile(struct brk *b, char *why, size_t whylen) CB_WARN_UNUSED;

/* ---- audit helper (chan.c) ---- */
/* Append r to the audit log (if open).  A failure is not reported here:
 * whoever is about to act checks the log's room first (brk_tok_commit,
 * brk_decide). */
void brk_audit(struct brk *b, const struct aud_rec *r);

/* Is path the broker's state directory or inside it (or, with
 * `or_ancestor`, a directory that contains it)?  Such paths are never
 * served, whatever a token says: the state holds the signing keys. */
bool brk_path_is_state(const struct brk *b, const char *path, bool or_ancestor);

/* ---- operations (ops_*.c; the handlers are in ops.h) ---- */
/* Kill the sandbox's running proc.exec children (its channel closed). */
void brk_proc_kill_all(struct brk_sbx *s);

/* ---- worker threads (work.c): fn runs off the loop, done on it ---- */
int brk_work(struct brk *b, void (*fn)(void *), void (*done)(void *), void *arg) CB_WARN_UNUSED;

/* ---- elevation (approval.c) and admin (admin.c) ---- */
struct brk_pending;
int brk_admin_listen(struct brk *b, const char *path, char *why, size_t whylen) CB_WARN_UNUSED;
/* Serve an inherited listening socket (socket activation) instead. */
int brk_admin_adopt(struct brk *b, int fd, char *why, size_t whylen) CB_WARN_UNUSED;
void brk_admin_close(struct brk *b);
void brk_pending_tick(struct brk *b);
int brk_pending_decide(struct brk *b, uint64_t rid, bool approve, uint64_t ttl, bool session,
    const char *by, const char *reason) CB_WARN_UNUSED;
void brk_pending_drop_sbx(struct brk *b, struct brk_sbx *s);
void brk_admin_notify(struct brk *b, const char *event, uint64_t rid);
void brk_tty_prompt_next(struct brk *b);

#endif
