/*
 * state.h - the broker's durable state: signing keys, issued tokens,
 * revocations, use counts, elevation requests and the audit log's last
 * checkpoint, in STATE/state.db (SQLite, WAL mode, synchronous=FULL) and
 * STATE/keys/.  Runs in the broker (trusted); capctl reaches it through the
 * broker's admin socket, or opens it itself (`capctl --state DIR audit
 * verify`) only when no broker holds it.
 *
 * Durability: every function that changes state returns only after its
 * transaction is committed and synced, so a revocation, a spent use or an
 * approval survives kill -9 the moment the call returns.
 *
 * Hot path: st_token_state() and st_is_revoked() read compact in-memory
 * tables (an open-addressing index of 16-byte token ids, each entry with the
 * index of its parent) and never touch SQLite: O(1) per ancestor,
 * independent of how many tokens are issued or revoked.  Revoking marks the
 * root in memory at once; descendants are found revoked by walking their
 * ancestor chain, so revoking a large tree does not stall lookups.
 *
 * Threads: the database functions take an internal lock and may be called
 * from any thread (the audit writer calls st_sign_audit and
 * st_audit_checkpoint_cb).  The in-memory tables have one writer: call
 * st_token_state, st_is_revoked, st_token_add*, st_revoke, st_use and the
 * request approval from the broker's own thread.
 */
#ifndef CB_STATE_H
#define CB_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caps/caps.h"
#include "common/common.h"

#define ST_WHO_MAX	63	/* "uid:1000", "tty", "broker" ... */
#define ST_TEXT_MAX	1024	/* command, reason */
#define ST_CAPS_MAX	(CAP_MAX_CAPS * (CAP_STR_MAX + 1))
#define ST_MAX_DEPTH	16	/* longest chain of derived tokens */
#define ST_UNLIMITED	UINT32_MAX

struct st;

/* Open the state in directory dir (created 0700 if missing; keys/ inside,
 * state.db mode 0600).  Creates a first signing key if there is none (no
 * manual key generation), loads every key and the token index into memory
 * and expires pending requests whose time has passed.
 * Errors: CB_EIO (errno), CB_EINTERNAL (SQLite), CB_EKEY_* (key files),
 * CB_ENOMEM, CB_EBUSY (another process holds the database). */
int st_open(const char *dir, struct st **out) CB_WARN_UNUSED;
/* The same; on failure why gets one line naming the file that failed and
 * how ("key file DIR/keys/ab.key: No such file or directory"). */
int st_open_why(const char *dir, struct st **out, char *why, size_t whylen) CB_WARN_UNUSED;
void st_close(struct st *st);

/* The same for a new state started deliberately beside an existing log
 * (--new-state): every DIR/keys/<kid>.pub is taken in as a public key (the
 * log's checkpoints stay verifiable) and a new signing key is made. */
int st_open_new(const char *dir, struct st **out, char *why, size_t whylen) CB_WARN_UNUSED;

/* An ephemeral state for one `capbroker run` without --state: the same
 * state, with the same guarantees while the process lives, but kept in
 * memory only: SQLite ":memory:", the signing key generated in memory and
 * never written to dir/keys, no state.lock, no sync.  Nothing of it survives
 * the process, which is the point: the sandbox it serves dies with it too
 * (docs/state.md, "Ephemeral state").  dir is only where the audit log that
 * the broker keeps beside it lives (audit.jsonl is still written). */
int st_open_ephemeral(const char *dir, struct st **out, char *why, size_t whylen) CB_WARN_UNUSED;

/* Did st_open create the database (it was missing or empty)? */
bool st_is_new(const struct st *st);

/* ---- decisions ------------------------------------------------------ */

/* An administrative decision (issue, revoke, approve, deny, rotate-key,
 * retire-key) is one transaction that also bumps the decision sequence and
 * keeps the decision's audit record (see docs/state.md): arm it, then call
 * the st_* function that makes the change.  Only a committing transaction
 * consumes it; every st_* mutator disarms on return. */
#define ST_DEC_TEXT_MAX 2048
struct st_decision {
	uint64_t dseq;			/* set by the commit (st_last_decision) */
	char op[32];
	char sandbox[CAP_AUD_MAX + 1];
	char resource[ST_DEC_TEXT_MAX + 1];
	char actor[ST_WHO_MAX + 1];
	char detail[ST_DEC_TEXT_MAX + 1];
	bool has_token;
	uint8_t token[CAP_ID_LEN];
	int decision;			/* enum aud_decision */
	int reason;			/* CB_E* or 0 */
};
void st_decision_arm(struct st *st, const struct st_decision *d);
void st_decision_disarm(struct st *st);
/* The decision the last committing transaction recorded (its dseq set). */
const struct st_decision *st_decision_committed(const struct st *st);
/* Decisions committed so far (0 for a new state). */
uint64_t st_dseq(const struct st *st);
/* The last committed decision.  CB_ENOENT if none. */
int st_last_decision(struct st *st, struct st_decision *out) CB_WARN_UNUSED;
/* The committed decision dseq, if it is the last one or of the last batch
 * committed together (st_revoke_many).  CB_ENOENT if not kept. */
int st_decision_at(struct st *st, uint64_t dseq, struct st_decision *out) CB_WARN_UNUSED;
/* Set the sequence (a new state started deliberately beside an old log). */
int st_set_dseq(struct st *st, uint64_t dseq) CB_WARN_UNUSED;

/* ---- rebuilding from the audit log (capbroker state rebuild) ----------- */

struct st_rebuild {
	uint64_t dseq;			/* the log's last decision */
	size_t decisions, revoked, retired;
	size_t tokens_unknown;		/* issued in the log, unknown to the state */
	bool has_signer;
	uint8_t signer[CAP_KID_LEN];	/* the last key rotated to */
};
/* Open dir's state (creating an empty database if there is none) without
 * ever making a key: every DIR/keys/<kid>.pub is taken in as a public key. */
int st_open_rebuild(const char *dir, struct st **out, char *why, size_t whylen) CB_WARN_UNUSED;
/* Apply one audit line if it is a decision: revocations and key
 * retirements are written (idempotent); tokens issued in the log but
 * unknown to the state are counted (they stay refused: unknown-token). */
int st_rebuild_line(struct st *st, const char *line, size_t len, struct st_rebuild *rep) CB_WARN_UNUSED;
/* The signing key, the decision sequence; the audit head is cleared (the
 * next start continues the log and records a new one).  CB_EKEY_FORMAT if
 * no key with its secret is left. */
int st_rebuild_finish(struct st *st, struct st_rebuild *rep) CB_WARN_UNUSED;

/* ---- time ------------------------------------------------------------ */

/* The wall clock, never earlier than the persisted high-water mark: set
 * the clock back and tokens do not come back to life.  Use it for every
 * expiry judgement. */
uint64_t st_now(const struct st *st);
uint64_t st_time_hwm(const struct st *st);
/* Raise the high-water mark to now (if later) and store it. */
int st_time_persist(struct st *st, uint64_t now) CB_WARN_UNUSED;

/* ---- keys ---------------------------------------------------------- */

/* The keyring of every key (the signing key signs; retired keys are in
 * it but refuse with CB_ERETIRED).  Borrowed; changes on rotation. */
const struct cap_keyring *st_keyring(const struct st *st);

/* Make a new signing key (STATE/keys/<kidhex>.key, 0600, and .pub); the
 * old ones keep verifying until retired.  kid may be NULL.  This is what
 * `capctl rotate-key` (and `capctl keygen`) should call. */
int st_rotate_key(struct st *st, uint8_t kid[CAP_KID_LEN]) CB_WARN_UNUSED;

/* Retire a key: tokens it signed stop verifying.  CB_EBUSY for the signing
 * key, CB_ENOENT for an unknown one. */
int st_retire_key(struct st *st, const uint8_t kid[CAP_KID_LEN]) CB_WARN_UNUSED;

struct st_key_info {
	uint8_t kid[CAP_KID_LEN];
	uint8_t pk[32];
	uint64_t created_at;
	uint64_t retired_at;	/* 0: active */
	bool signing;
};

/* Every key, oldest first.  *out is malloc'd (free()). */
int st_key_list(struct st *st, struct st_key_info **out, size_t *n) CB_WARN_UNUSED;

/* A keyring of the public keys of every key ever used, retired ones
 * included, for aud_verify (old checkpoints stay verifiable after a key is
 * retired for tokens).  Caller frees with cap_keyring_free. */
int st_audit_keyring(struct st *st, struct cap_keyring **out) CB_WARN_UNUSED;

/* Sign CAP_SIG_DOMAIN_AUDIT || msg under the state lock; matches
 * aud_sign_fn (arg is the struct st).  Give it to aud_open's options so
 * that a rotation never races a checkpoint. */
int st_sign_audit(void *st, const uint8_t *msg, size_t len, uint8_t sig[64],
    uint8_t kid[CAP_KID_LEN]) CB_WARN_UNUSED;

/* ---- tokens -------------------------------------------------------- */

struct st_token {
	uint8_t id[CAP_ID_LEN];
	bool has_parent;
	uint8_t parent[CAP_ID_LEN];
	char sandbox[CAP_AUD_MAX + 1];	/* audience */
	char *caps;		/* capabilities, one per line; st_token_add reads it,
				 * st_token_get and st_token_list allocate it */
	uint64_t nbf, exp;
	uint32_t uses_left;	/* ST_UNLIMITED: no limit */
	bool elevated;
	uint64_t issued_at;
	char issued_by[ST_WHO_MAX + 1];
	uint64_t revoked_at;	/* when it, or the ancestor that revoked it, was
				 * revoked; 0: not revoked (ignored by st_token_add) */
	uint64_t instance;	/* elevated: the sandbox instance it was granted to
				 * (st_instance_begin), recorded with the row by
				 * st_token_add and st_request_approve; 0: none.
				 * Not read back by st_token_get/list. */
};

/* Free what st_token_get/list allocated (caps); the struct itself is the
 * caller's. */
void st_token_clear(struct st_token *t);

/* Record an issued token.  A derived token's parent must be known
 * (CB_ENOENT), not revoked (CB_EREVOKED) and at most ST_MAX_DEPTH deep
 * (CB_ETOOBIG).  CB_EEXIST for a duplicate id, CB_ETOOBIG for a field
 * too long.  Durable on return. */
int st_token_add(struct st *st, const struct st_token *t) CB_WARN_UNUSED;

/* The same for n tokens in one transaction (bulk issue, benchmarks):
 * all or none. */
int st_token_add_batch(struct st *st, const struct st_token *t, size_t n) CB_WARN_UNUSED;

/* Read one token.  CB_ENOENT if unknown.  st_token_clear(out) after. */
int st_token_get(struct st *st, const uint8_t id[CAP_ID_LEN], struct st_token *out) CB_WARN_UNUSED;

/* Call fn for each token (of sandbox, or all if NULL), oldest first; the
 * struct is valid during the call only.  A non-zero return from fn stops
 * the walk and is returned.  fn runs under the state lock: it must not
 * call st_* functions. */
typedef int st_token_fn(void *arg, const struct st_token *t);
int st_token_list(struct st *st, const char *sandbox, st_token_fn *fn, void *arg) CB_WARN_UNUSED;

/* Revoke a token and every token derived from it.  On disk first: the
 * root's row, committed with synchronous=FULL; then in memory (the root is
 * flagged; descendants are revoked through their ancestor chain), before
 * returning.  Descendants need no rows of their own: their parent links
 * are durable, so they are just as revoked after a restart, and revoking a
 * tree of any size costs one small transaction.  *count (NULL to skip; it
 * scans the in-memory index, O(tokens)) gets how many tokens were newly
 * revoked.  Revoking a revoked token is fine (count 0).  CB_ENOENT if
 * unknown.  If the disk write fails nothing changes, in memory either,
 * and the error is returned: a retry writes again. */
int st_revoke(struct st *st, const uint8_t id[CAP_ID_LEN], uint64_t now, size_t *count) CB_WARN_UNUSED;

/* One of st_revoke_many's revocations. */
struct st_revoke_item {
	uint8_t id[CAP_ID_LEN];
	struct st_decision dec;		/* in: its record; out: dseq, when recorded (0: nothing changed) */
	int rc;				/* out: 0, or CB_ENOENT (unknown) */
	size_t count;			/* out: tokens newly revoked */
	uint32_t ent;			/* the module's */
};
/* Revoke several tokens in one transaction, one sync for them all, each
 * its own decision with its own record (as st_revoke with an armed
 * decision; st_decision_at finds each for brk_reconcile).  A token
 * already revoked, or twice in it, changes nothing (count 0, dseq 0).  0
 * (each item's rc says), or the transaction's error: nothing changed, in
 * memory either. */
int st_revoke_many(struct st *st, struct st_revoke_item *it, size_t n, uint64_t now) CB_WARN_UNUSED;

/* Hot path.  Is the token or any ancestor revoked?  false for an unknown
 * id (use st_token_state to refuse those). */
bool st_is_revoked(const struct st *st, const uint8_t id[CAP_ID_LEN]);

/* Hot path.  0 if the token is known, not revoked (nor any ancestor) and
 * not spent; else CB_ENOENT (never issued here), CB_EREVOKED, CB_ESPENT. */
int st_token_state(const struct st *st, const uint8_t id[CAP_ID_LEN]) CB_WARN_UNUSED;

/* Spend one use.  Unlimited tokens return 0 from memory at once; limited
 * ones decrement on disk (synced) before returning, so a spent use stays
 * spent after a crash.  *left (may be NULL) gets the uses left after this
 * one (ST_UNLIMITED if unlimited).  CB_ESPENT if none were left,
 * CB_EREVOKED, CB_ENOENT. */
int st_use(struct st *st, const uint8_t id[CAP_ID_LEN], uint32_t *left) CB_WARN_UNUSED;

/* Bumped by every revocation and key retirement, so the broker can drop
 * cached verifications cheaply. */
uint64_t st_epoch(const struct st *st);

/* ---- elevation requests -------------------------------------------- */

enum st_req_state {
	ST_REQ_PENDING,
	ST_REQ_APPROVED,
	ST_REQ_DENIED,
	ST_REQ_EXPIRED,
};

enum st_scope {
	ST_SCOPE_ONCE,		/* the token for this request only */
	ST_SCOPE_SESSION,	/* remembered for the rest of the sandbox's life */
};

struct st_request {
	uint64_t id;			/* assigned by st_request_add, never reused */
	char sandbox[CAP_AUD_MAX + 1];
	char command[ST_TEXT_MAX + 1];	/* the sandbox's command line */
	char capability[CAP_STR_MAX + 1];
	char reason[ST_TEXT_MAX + 1];	/* the agent's reason */
	uint64_t ttl;			/* seconds asked */
	uint64_t asked_at, expires_at;	/* expires_at: when an undecided request lapses */
	enum st_req_state state;
	char decided_by[ST_WHO_MAX + 1];
	char decision_reason[ST_TEXT_MAX + 1];	/* a denial's reason */
	uint64_t decided_at;
	uint64_t approved_ttl;
	enum st_scope scope;
	bool has_token;
	uint8_t token_id[CAP_ID_LEN];
};

const char *st_req_state_name(enum st_req_state s);

/* Record a pending request (fields from sandbox to expires_at); r->id and
 * r->state are set.  CB_ETOOBIG, CB_EINVAL.  Durable on return. */
int st_request_add(struct st *st, struct st_request *r) CB_WARN_UNUSED;

int st_request_get(struct st *st, uint64_t id, struct st_request *out) CB_WARN_UNUSED;

/* Call fn for each request, oldest first; state < 0 for all states.  fn
 * runs under the state lock: it must not call st_* functions. */
typedef int st_request_fn(void *arg, const struct st_request *r);
int st_request_list(struct st *st, int state, st_request_fn *fn, void *arg) CB_WARN_UNUSED;

/* An approval of a pending request: who approved request id when, for how
 * long and for what scope, and the token minted for it (required). */
struct st_approval {
	uint64_t id;
	const char *by;
	uint64_t now;
	uint64_t ttl;			/* the approved ttl */
	enum st_scope scope;
	const struct st_token *tok;
};

/* Approve a pending request and record the token minted for it, in one
 * transaction, durable before returning (acknowledge only after).
 * CB_EINVAL without a token, CB_ENOENT unknown, CB_EEXPIREDREQ if it
 * lapsed (it is marked expired), CB_EEXIST if already decided, and
 * st_token_add's errors. */
int st_request_approve(struct st *st, const struct st_approval *a) CB_WARN_UNUSED;

/* Deny a pending request.  Same errors (no token). */
int st_request_deny(struct st *st, uint64_t id, const char *by, uint64_t now,
    const char *reason) CB_WARN_UNUSED;

/* Mark every pending request with expires_at <= now expired.  *n (may be
 * NULL) gets how many.  st_open does this once; the broker calls it on a
 * timer. */
int st_request_expire(struct st *st, uint64_t now, size_t *n) CB_WARN_UNUSED;

/* ---- sandbox instances ------------------------------------------- */

/* A sandbox instance is one run of a sandbox (ids may be reused by later
 * runs; instances never are).  Approved elevations belong to the instance
 * a human saw, recorded in the state with the token (st_token.instance),
 * so every one of them ends with that instance, however many there are,
 * and after a broker restart too. */

/* Record a new instance of sandbox; *id gets its number (> 0).  Durable. */
int st_instance_begin(struct st *st, const char *sandbox, uint64_t now, uint64_t *id) CB_WARN_UNUSED;

/* The instance an elevated token was granted to: CB_ENOENT when the state
 * records none (then it belongs to no running sandbox). */
int st_token_instance(struct st *st, const uint8_t id[CAP_ID_LEN], uint64_t *inst) CB_WARN_UNUSED;

/* End instance inst: every elevated token granted to it (and so what was
 * derived from it) is revoked, in memory at once and on disk with the
 * instance marked ended, in one transaction.  *ids (malloc'd, free()) and
 * *n get the tokens newly revoked, for the audit log.  If the disk write
 * fails the tokens stay revoked in memory and the error is returned; the
 * instance stays open on disk, so the next start ends it. */
int st_instance_end(struct st *st, uint64_t inst, uint64_t now, uint8_t (**ids)[CAP_ID_LEN],
    size_t *n) CB_WARN_UNUSED;

/* The same for every instance not ended yet: what a broker calls when it
 * starts (no sandbox of a previous run is still served). */
int st_instance_end_all(struct st *st, uint64_t now, uint8_t (**ids)[CAP_ID_LEN], size_t *n) CB_WARN_UNUSED;

/* ---- the audit log's last checkpoint ------------------------------- */

/* Remember the audit log's id and its last checkpoint (the seq of the
 * checkpoint line and the chain hash it sealed). */
int st_set_audit_head(struct st *st, const uint8_t log_id[16], uint64_t seq,
    const uint8_t hash[32]) CB_WARN_UNUSED;

/* CB_ENOENT if no log has been recorded yet. */
int st_get_audit_head(struct st *st, uint8_t log_id[16], uint64_t *seq, uint8_t hash[32]) CB_WARN_UNUSED;

/* st_set_audit_head as an aud_checkpoint_fn (arg is the struct st); a
 * failure is kept and returned by st_audit_head_error(). */
void st_audit_checkpoint_cb(void *st, const uint8_t log_id[16], uint64_t seq, const uint8_t hash[32]);
int st_audit_head_error(const struct st *st);

/* ---- the cluster's changes (docs/cluster.md) ------------------------ */

/* What other brokers of a cluster decided, applied in memory only: the
 * broker reads the whole stream again from the database at every start,
 * so nothing here needs to be on disk (a revocation of a token of our own
 * is the exception: it is written to its row, so that it stays revoked
 * even if this state is later served without the cluster).  Broker thread
 * only, like st_revoke. */

/* Take in another broker's public key (verify-only; retired: its tokens
 * stop verifying).  Our own keys are left as they are. */
int st_cl_key(struct st *st, const uint8_t pk[32], bool retired) CB_WARN_UNUSED;
/* Take in a token another broker minted: its id, its parent (NULL: none)
 * and whether it is use-limited.  A token we know already is left alone;
 * a revocation that arrived first stays. */
int st_cl_token(struct st *st, const uint8_t id[CAP_ID_LEN], const uint8_t *parent, bool limited)
    CB_WARN_UNUSED;
/* Apply a revocation made anywhere in the cluster: the token (a stub if it
 * is not known yet, so that it arrives revoked) and so its descendants.
 * *changed (may be NULL): it was not revoked before. */
int st_cl_revoke(struct st *st, const uint8_t id[CAP_ID_LEN], uint64_t now, bool *changed)
    CB_WARN_UNUSED;
/* The same for n ids (n * CAP_ID_LEN bytes), our own tokens' rows written
 * in one transaction (one sync for them all); changed[i] for each.  An
 * error is the first write's that failed (memory is revoked anyway). */
int st_cl_revoke_many(struct st *st, const uint8_t *ids, size_t n, uint64_t now, bool *changed)
    CB_WARN_UNUSED;
/* How many tokens revoking id would newly revoke (it and its descendants
 * known here; 0 if it is revoked already or unknown).  O(tokens). */
size_t st_revoke_count(const struct st *st, const uint8_t id[CAP_ID_LEN]);
/* Was the token minted by another broker of the cluster (no row here)? */
bool st_is_foreign(const struct st *st, const uint8_t id[CAP_ID_LEN]);
/* Is the token known here at all, minted here or elsewhere? */
bool st_token_known(const struct st *st, const uint8_t id[CAP_ID_LEN]);

/* ---- measurement --------------------------------------------------- */

struct st_mem {
	size_t tokens;		/* entries in the in-memory index */
	size_t bytes;		/* bytes its tables occupy */
};
void st_mem_usage(const struct st *st, struct st_mem *m);

#endif
