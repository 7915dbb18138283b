/*
 * state.c - the broker's durable state in SQLite (WAL, synchronous=FULL)
 * plus the key files, with an in-memory token index for the hot path (see
 * state.h).  Trusted (broker).  Values stored here come from administrators
 * (capabilities, reasons) and agents (request reasons, commands); they are
 * only ever bound as SQL parameters, never spliced into SQL text.
 */
#include "state/state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "state/schema.h"
#include "state/state_int.h"

/*
 * libsqlite3 is loaded when a state is first opened (common/dl.c), not
 * linked: it is the largest of the broker's libraries to relocate (1,610
 * symbol relocations, about 60 % of the dynamic loader's work at each
 * start), and a `capbroker run` opens its state only after its sandbox's
 * stub is spawned, so the load runs beside the stub's set-up instead of
 * before it (docs/performance.md).  The calls below keep SQLite's names;
 * each is redirected to the pointer the load filled.
 */
#define ST_SQ_FUNCS(X) \
	X(sqlite3_bind_blob) \
	X(sqlite3_bind_int) \
	X(sqlite3_bind_int64) \
	X(sqlite3_bind_text) \
	X(sqlite3_busy_timeout) \
	X(sqlite3_changes) \
	X(sqlite3_clear_bindings) \
	X(sqlite3_close_v2) \
	X(sqlite3_column_blob) \
	X(sqlite3_column_bytes) \
	X(sqlite3_column_int) \
	X(sqlite3_column_int64) \
	X(sqlite3_column_text) \
	X(sqlite3_column_type) \
	X(sqlite3_deserialize) \
	X(sqlite3_errmsg) \
	X(sqlite3_exec) \
	X(sqlite3_finalize) \
	X(sqlite3_last_insert_rowid) \
	X(sqlite3_malloc64) \
	X(sqlite3_open_v2) \
	X(sqlite3_prepare_v2) \
	X(sqlite3_reset) \
	X(sqlite3_step)
static struct {
#define ST_SQ_FIELD(f) __typeof__(f) *f;
	ST_SQ_FUNCS(ST_SQ_FIELD)
#undef ST_SQ_FIELD
} st_sq;
static char st_sq_why[256];
static int st_sq_err;
static pthread_once_t st_sq_once = PTHREAD_ONCE_INIT;

static void
st_sq_load_once(void)
{
#define ST_SQ_SYM(f) { #f, (void **)&st_sq.f },
	static const struct cb_dl_sym syms[] = { ST_SQ_FUNCS(ST_SQ_SYM) };
#undef ST_SQ_SYM

	/* The soname sqlite3.h belongs to (libsqlite3-0). */
	st_sq_err = cb_dl_load("libsqlite3.so.0", syms, sizeof(syms) / sizeof(syms[0]), st_sq_why,
	    sizeof(st_sq_why));
}

/* 0 once SQLite's functions are there; else CB_EUNSUPPORTED, said in why. */
static int
st_sq_load(char *why, size_t whylen)
{
	pthread_once(&st_sq_once, st_sq_load_once);
	if (st_sq_err != 0 && why != NULL && whylen > 0)
		snprintf(why, whylen, "cannot load SQLite: %s", st_sq_why);
	return st_sq_err;
}

#define sqlite3_bind_blob st_sq.sqlite3_bind_blob
#define sqlite3_bind_int st_sq.sqlite3_bind_int
#define sqlite3_bind_int64 st_sq.sqlite3_bind_int64
#define sqlite3_bind_text st_sq.sqlite3_bind_text
#define sqlite3_busy_timeout st_sq.sqlite3_busy_timeout
#define sqlite3_changes st_sq.sqlite3_changes
#define sqlite3_clear_bindings st_sq.sqlite3_clear_bindings
#define sqlite3_close_v2 st_sq.sqlite3_close_v2
#define sqlite3_column_blob st_sq.sqlite3_column_blob
#define sqlite3_column_bytes st_sq.sqlite3_column_bytes
#define sqlite3_column_int st_sq.sqlite3_column_int
#define sqlite3_column_int64 st_sq.sqlite3_column_int64
#define sqlite3_column_text st_sq.sqlite3_column_text
#define sqlite3_column_type st_sq.sqlite3_column_type
#define sqlite3_deserialize st_sq.sqlite3_deserialize
#define sqlite3_errmsg st_sq.sqlite3_errmsg
#define sqlite3_exec st_sq.sqlite3_exec
#define sqlite3_finalize st_sq.sqlite3_finalize
#define sqlite3_last_insert_rowid st_sq.sqlite3_last_insert_rowid
#define sqlite3_malloc64 st_sq.sqlite3_malloc64
#define sqlite3_open_v2 st_sq.sqlite3_open_v2
#define sqlite3_prepare_v2 st_sq.sqlite3_prepare_v2
#define sqlite3_reset st_sq.sqlite3_reset
#define sqlite3_step st_sq.sqlite3_step

struct st {
	char *dir;
	int lockfd;
	sqlite3 *db;
	pthread_mutex_t mu;	/* the database and the keyring */
	struct cap_keyring *kr;
	struct tokmap tm;	/* one writer: the broker thread */
	atomic_uint_least64_t epoch;
	atomic_int head_err;
	uint64_t dseq;		/* decisions committed (meta 'dseq') */
	bool armed;		/* dec goes into the next committing transaction */
	bool recorded;		/* ... and a transaction has written it */
	struct st_decision dec;
	uint64_t hwm;		/* wall-clock high-water mark (meta 'hwm') */
	char errpath[4200];	/* the key file st_open could not load */
	bool fresh;		/* st_open created the database */
	bool no_keygen;		/* a rebuild: never make a key */
	bool keys_lost;		/* no signing key, but a log with a history */
	bool new_ok;		/* --new-state: a new key beside an old log is wanted */
	bool ephemeral;		/* in memory only: no file, no lock, no sync */
	bool from_image;	/* ... started from the built empty database */
	bool elevated;		/* an elevation row was ever written by this
				 * process (an ephemeral state has no other) */
};

/* ---- SQLite helpers ------------------------------------------------ */

static int
db_err(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return CB_EBUSY;
	case SQLITE_CONSTRAINT:
		return CB_EEXIST;
	case SQLITE_NOMEM:
		return CB_ENOMEM;
	case SQLITE_IOERR:
	case SQLITE_FULL:
	case SQLITE_CANTOPEN:
	case SQLITE_READONLY:
		return CB_EIO;
	default:
		return CB_EINTERNAL;
	}
}

static int
db_exec(struct st *st, const char *sql)
{
	return db_err(sqlite3_exec(st->db, sql, NULL, NULL, NULL));
}

static int
db_prep(struct st *st, const char *sql, sqlite3_stmt **s)
{
	return db_err(sqlite3_prepare_v2(st->db, sql, -1, s, NULL));
}

/* BEGIN IMMEDIATE: take the write lock now, not halfway through. */
static int
db_begin(struct st *st)
{
	return db_exec(st, "BEGIN IMMEDIATE");
}

static int
db_commit(struct st *st)
{
	int rc = db_exec(st, "COMMIT");

	if (rc != 0)
		(void)db_exec(st, "ROLLBACK");
	return rc;
}

static void
db_rollback(struct st *st)
{
	(void)db_exec(st, "ROLLBACK");
}

/* SQLite integers are signed: clamp times so comparisons in SQL hold. */
static sqlite3_int64
i64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)v;
}

static uint64_t
u64col(sqlite3_stmt *s, int c)
{
	sqlite3_int64 v = sqlite3_column_int64(s, c);

	return v < 0 ? 0 : (uint64_t)v;
}

static void
textcol(sqlite3_stmt *s, int c, char *buf, size_t size)
{
	const unsigned char *t = sqlite3_column_text(s, c);

	snprintf(buf, size, "%s", t != NULL ? (const char *)t : "");
}

static bool
blobcol(sqlite3_stmt *s, int c, uint8_t *b, size_t n)
{
	const void *p = sqlite3_column_blob(s, c);

	if (p == NULL || (size_t)sqlite3_column_bytes(s, c) != n)
		return false;
	memcpy(b, p, n);
	return true;
}

/* A NUL-terminated string of at most max bytes. */
static bool
str_ok(const char *s, size_t max)
{
	return s != NULL && strnlen(s, max + 1) <= max;
}

/* ---- decisions ----------------------------------------------------- */

static int
meta_set_locked(struct st *st, const char *k, uint64_t v)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if ((rc = db_prep(st, "INSERT INTO meta(k, v) VALUES(?1, ?2)"
	    " ON CONFLICT(k) DO UPDATE SET v = excluded.v", &s)) != 0)
		return rc;
	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, i64(v));
	rc = db_err(sqlite3_step(s));
	sqlite3_finalize(s);
	return rc;
}

static int
meta_get_locked(struct st *st, const char *k, uint64_t *v)
{
	sqlite3_stmt *s = NULL;
	int rc, step;

	*v = 0;
	if ((rc = db_prep(st, "SELECT v FROM meta WHERE k = ?1", &s)) != 0)
		return rc;
	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	step = sqlite3_step(s);
	if (step == SQLITE_ROW)
		*v = u64col(s, 0);
	else
		rc = db_err(step);
	sqlite3_finalize(s);
	return rc;
}

static void
bind_opt_text(sqlite3_stmt *s, int i, const char *t)
{
	if (t[0] != '\0')
		sqlite3_bind_text(s, i, t, -1, SQLITE_STATIC);
}

/* Inside the caller's transaction: when a decision is armed, bump the
 * decision sequence and keep the decision's audit record beside it, so
 * that the state and the log can be compared, and a record lost to a crash
 * between the commit and the log's sync can be written at the next start. */
/* Keep d (its dseq set) as the last decision, or in batch_decisions. */
static int
dec_keep_locked(struct st *st, const struct st_decision *d, bool batch)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if ((rc = db_prep(st, batch ? "INSERT OR REPLACE INTO batch_decisions(dseq, op, sandbox,"
	    " resource, tid, actor, detail, decision, reason) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)" :
	    "INSERT OR REPLACE INTO last_decision(one, dseq, op, sandbox, resource,"
	    " tid, actor, detail, decision, reason) VALUES(1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	    &s)) != 0)
		return rc;
	sqlite3_bind_int64(s, 1, i64(d->dseq));
	sqlite3_bind_text(s, 2, d->op, -1, SQLITE_STATIC);
	bind_opt_text(s, 3, d->sandbox);
	bind_opt_text(s, 4, d->resource);
	if (d->has_token)
		sqlite3_bind_blob(s, 5, d->token, CAP_ID_LEN, SQLITE_STATIC);
	bind_opt_text(s, 6, d->actor);
	bind_opt_text(s, 7, d->detail);
	sqlite3_bind_int(s, 8, d->decision);
	sqlite3_bind_int(s, 9, d->reason);
	rc = db_err(sqlite3_step(s));
	sqlite3_finalize(s);
	return rc;
}

static int
dec_record_locked(struct st *st)
{
	struct st_decision *d = &st->dec;
	int rc;

	if (!st->armed)
		return 0;
	d->dseq = st->dseq + 1;
	st->recorded = true;
	if ((rc = meta_set_locked(st, "dseq", d->dseq)) != 0)
		return rc;
	return dec_keep_locked(st, d, false);
}

/* After the transaction: the sequence moves only with a commit. */
static void
dec_done(struct st *st, int rc)
{
	/* Only a transaction that wrote the record moves the sequence: a
	 * change with nothing to do (revoking a revoked token) commits none. */
	if (st->armed && rc == 0 && st->recorded)
		st->dseq = st->dec.dseq;
	st->armed = false;
	st->recorded = false;
}

void
st_decision_arm(struct st *st, const struct st_decision *d)
{
	st->dec = *d;
	st->dec.op[sizeof(st->dec.op) - 1] = '\0';
	st->dec.sandbox[sizeof(st->dec.sandbox) - 1] = '\0';
	st->dec.resource[sizeof(st->dec.resource) - 1] = '\0';
	st->dec.actor[sizeof(st->dec.actor) - 1] = '\0';
	st->dec.detail[sizeof(st->dec.detail) - 1] = '\0';
	st->dec.dseq = 0;
	st->armed = true;
	st->recorded = false;
}

void
st_decision_disarm(struct st *st)
{
	st->armed = false;
}

const struct st_decision *
st_decision_committed(const struct st *st)
{
	return &st->dec;
}

uint64_t
st_dseq(const struct st *st)
{
	return st->dseq;
}

static void
dec_textcol(sqlite3_stmt *s, int c, char *buf, size_t size)
{
	textcol(s, c, buf, size);
}

/* The columns of a kept decision, as decision_row reads them (last_decision
 * and batch_decisions have the same). */
#define DECISION_COLS "dseq, op, sandbox, resource, tid, actor, detail, decision, reason"

static void
decision_row(sqlite3_stmt *s, struct st_decision *out)
{
	out->dseq = u64col(s, 0);
	dec_textcol(s, 1, out->op, sizeof(out->op));
	dec_textcol(s, 2, out->sandbox, sizeof(out->sandbox));
	dec_textcol(s, 3, out->resource, sizeof(out->resource));
	out->has_token = blobcol(s, 4, out->token, CAP_ID_LEN);
	dec_textcol(s, 5, out->actor, sizeof(out->actor));
	dec_textcol(s, 6, out->detail, sizeof(out->detail));
	out->decision = sqlite3_column_int(s, 7);
	out->reason = sqlite3_column_int(s, 8);
}

/* One kept decision's row from sql (dseq bound as ?1 when given). */
static int
decision_one(struct st *st, const char *sql, const uint64_t *dseq, struct st_decision *out)
{
	sqlite3_stmt *s = NULL;
	int rc, step;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, sql, &s)) != 0)
		goto out;
	if (dseq)
		sqlite3_bind_int64(s, 1, i64(*dseq));
	step = sqlite3_step(s);
	if (step == SQLITE_ROW)
		decision_row(s, out);
	else
		rc = step == SQLITE_DONE ? CB_ENOENT : db_err(step);
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_last_decision(struct st *st, struct st_decision *out)
{
	return decision_one(st, "SELECT " DECISION_COLS " FROM last_decision WHERE one = 1", NULL, out);
}

int
st_decision_at(struct st *st, uint64_t dseq, struct st_decision *out)
{
	int rc;

	if ((rc = st_last_decision(st, out)) != CB_ENOENT && rc != 0)
		return rc;
	if (rc == 0 && out->dseq == dseq)
		return 0;
	return decision_one(st, "SELECT " DECISION_COLS " FROM batch_decisions WHERE dseq = ?1", &dseq,
	    out);
}

int
st_set_dseq(struct st *st, uint64_t dseq)
{
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = meta_set_locked(st, "dseq", dseq);
	if (rc == 0)
		st->dseq = dseq;
	pthread_mutex_unlock(&st->mu);
	return rc;
}

bool
st_is_new(const struct st *st)
{
	return st->fresh;
}

uint64_t
st_now(const struct st *st)
{
	uint64_t now = cb_now();

	return now > st->hwm ? now : st->hwm;
}

uint64_t
st_time_hwm(const struct st *st)
{
	return st->hwm;
}

int
st_time_persist(struct st *st, uint64_t now)
{
	int rc = 0;

	pthread_mutex_lock(&st->mu);
	if (now > st->hwm) {
		rc = meta_set_locked(st, "hwm", now);
		if (rc == 0)
			st->hwm = now;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* ---- keys ---------------------------------------------------------- */

static void
key_path(const struct st *st, const uint8_t kid[CAP_KID_LEN], const char *ext, char *buf,
    size_t size)
{
	char hex[2 * CAP_KID_LEN + 1];

	cap_hex(kid, CAP_KID_LEN, hex);
	snprintf(buf, size, "%s/keys/%s.%s", st->dir, hex, ext);
}

/* The public key as one hex line, for people and other tools. */
static int
write_pub(const char *path, const uint8_t pk[32])
{
	char hex[65];
	int fd, rc = CB_EIO;

	cap_hex(pk, 32, hex);
	hex[64] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return CB_EIO;
	if (write(fd, hex, 65) == 65 && fsync(fd) == 0)
		rc = 0;
	close(fd);
	return rc;
}

/* Create a key, store it, make it the signing key.  Called with mu held. */
static int
rotate_locked(struct st *st, uint8_t kid_out[CAP_KID_LEN])
{
	struct cap_key *k = NULL;
	sqlite3_stmt *s = NULL;
	uint8_t kid[CAP_KID_LEN], pk[32];
	char path[4096], pub[4096];
	int rc;

	if ((rc = cap_key_generate(&k)) != 0)
		goto out;
	cap_key_id(k, kid);
	cap_key_public(k, pk);
	/* The .pub first: the directory sync that cap_key_save does after the
	 * .key then makes both names durable (a power cut could otherwise
	 * lose the .pub of an acknowledged rotation). */
	key_path(st, kid, "pub", pub, sizeof(pub));
	if (!st->ephemeral && (rc = write_pub(pub, pk)) != 0)
		goto out;
	key_path(st, kid, "key", path, sizeof(path));
	/* An ephemeral state's keys live and die with its process. */
	if (!st->ephemeral && (rc = cap_key_save(k, path)) != 0) {
		unlink(pub);
		goto out;
	}
	/* a rotation's record names the new key */
	if (st->armed && st->dec.resource[0] == '\0')
		cap_hex(kid, CAP_KID_LEN, st->dec.resource);
	if ((rc = db_begin(st)) != 0)
		goto out;
	if ((rc = db_exec(st, "UPDATE keys SET signing = 0 WHERE signing = 1")) != 0 ||
	    (rc = db_prep(st, "INSERT INTO keys(kid, pk, created_at, signing) VALUES(?1, ?2, ?3, 1)",
	    &s)) != 0) {
		db_rollback(st);
		goto out;
	}
	sqlite3_bind_blob(s, 1, kid, CAP_KID_LEN, SQLITE_STATIC);
	sqlite3_bind_blob(s, 2, pk, 32, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, i64(cb_now()));
	if ((rc = db_err(sqlite3_step(s))) != 0 || (rc = dec_record_locked(st)) != 0) {
		db_rollback(st);
		goto out;
	}
	if ((rc = db_commit(st)) != 0)
		goto out;
	/* on disk: only now does the keyring sign with it */
	rc = cap_keyring_add(st->kr, k, true);
	k = NULL;
	if (rc == 0 && kid_out != NULL)
		memcpy(kid_out, kid, CAP_KID_LEN);
out:
	sqlite3_finalize(s);
	cap_key_free(k);
	return rc;
}

static int
load_key_row(struct st *st, sqlite3_stmt *s, bool *have_signer)
{
	uint8_t kid[CAP_KID_LEN], pk[32], got[CAP_KID_LEN];
	bool signing = sqlite3_column_int(s, 2) != 0;
	bool retired = sqlite3_column_type(s, 3) != SQLITE_NULL;
	int rc;

	if (!blobcol(s, 0, kid, CAP_KID_LEN) || !blobcol(s, 1, pk, 32))
		return CB_EKEY_FORMAT;
	cap_kid_of(pk, got);
	if (memcmp(got, kid, CAP_KID_LEN) != 0)
		return CB_EKEY_FORMAT;
	if (signing && !retired) {
		struct cap_key *k = NULL;
		char path[4096];

		/* only the signing key's secret is loaded into memory */
		key_path(st, kid, "key", path, sizeof(path));
		if ((rc = cap_key_load(path, &k)) != 0) {
			snprintf(st->errpath, sizeof(st->errpath), "%s", path);
			return rc;
		}
		cap_key_id(k, got);
		if (memcmp(got, kid, CAP_KID_LEN) != 0) {
			cap_key_free(k);
			return CB_EKEY_FORMAT;
		}
		if ((rc = cap_keyring_add(st->kr, k, true)) != 0)
			return rc;
		*have_signer = true;
		return 0;
	}
	if ((rc = cap_keyring_add_public(st->kr, pk)) != 0)
		return rc;
	return retired ? cap_keyring_retire(st->kr, kid) : 0;
}

/* Every key of the table into the keyring (the signing key's secret from
 * its file); none signing: a new one.  An ephemeral state was made empty
 * by this very open: nothing to read (see st_open_flags). */
static int
load_keys(struct st *st)
{
	sqlite3_stmt *s = NULL;
	bool have_signer = false;
	int rc = 0, step = SQLITE_DONE;

	if (!st->ephemeral) {
		if ((rc = db_prep(st, "SELECT kid, pk, signing, retired_at FROM keys "
		    "ORDER BY created_at, rowid", &s)) != 0)
			return rc;
		while ((step = sqlite3_step(s)) == SQLITE_ROW) {
			if ((rc = load_key_row(st, s, &have_signer)) != 0)
				goto out;
		}
	}
	rc = db_err(step);
	if (rc == 0 && !have_signer && !st->no_keygen && !st->new_ok) {
		char lp[4200];
		struct stat sb;

		/* A state whose log has a history lost its keys: a new key now
		 * would sign over a past it does not have.  Refuse; a rebuild
		 * takes the keys back from keys/. */
		snprintf(lp, sizeof(lp), "%s/audit.jsonl", st->dir);
		if (stat(lp, &sb) == 0 && sb.st_size > 0) {
			snprintf(st->errpath, sizeof(st->errpath), "%s/state.db", st->dir);
			rc = CB_ENOENT;
			st->keys_lost = true;
		} else {
			rc = rotate_locked(st, NULL);
		}
	} else if (rc == 0 && !have_signer && !st->no_keygen) {
		rc = rotate_locked(st, NULL);
	}
out:
	sqlite3_finalize(s);
	return rc;
}

const struct cap_keyring *
st_keyring(const struct st *st)
{
	return st->kr;
}

int
st_rotate_key(struct st *st, uint8_t kid[CAP_KID_LEN])
{
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = rotate_locked(st, kid);
	dec_done(st, rc);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_retire_key(struct st *st, const uint8_t kid[CAP_KID_LEN])
{
	sqlite3_stmt *s = NULL;
	bool in_txn = false;
	int rc, step;

	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, "SELECT signing, retired_at FROM keys WHERE kid = ?1", &s)) != 0)
		goto out;
	sqlite3_bind_blob(s, 1, kid, CAP_KID_LEN, SQLITE_STATIC);
	if ((step = sqlite3_step(s)) != SQLITE_ROW) {
		rc = step == SQLITE_DONE ? CB_ENOENT : db_err(step);
		goto out;
	}
	if (sqlite3_column_int(s, 0) != 0) {
		rc = CB_EBUSY;
		goto out;
	}
	if (sqlite3_column_type(s, 1) != SQLITE_NULL)
		goto out;	/* already retired */
	sqlite3_finalize(s);
	s = NULL;
	if ((rc = db_begin(st)) != 0)
		goto out;
	in_txn = true;
	if ((rc = db_prep(st, "UPDATE keys SET retired_at = ?2 WHERE kid = ?1", &s)) != 0)
		goto out;
	sqlite3_bind_blob(s, 1, kid, CAP_KID_LEN, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, i64(cb_now()));
	if ((rc = db_err(sqlite3_step(s))) != 0 || (rc = dec_record_locked(st)) != 0)
		goto out;
	in_txn = false;
	if ((rc = db_commit(st)) != 0)
		goto out;
	/* on disk: only now do its tokens stop verifying */
	rc = cap_keyring_retire(st->kr, kid);
	atomic_fetch_add(&st->epoch, 1);
out:
	if (in_txn)
		db_rollback(st);
	sqlite3_finalize(s);
	dec_done(st, rc);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_key_list(struct st *st, struct st_key_info **out, size_t *n)
{
	sqlite3_stmt *s = NULL;
	struct st_key_info *v = NULL, *nv;
	size_t cnt = 0;
	int rc, step;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, "SELECT kid, pk, created_at, retired_at, signing FROM keys "
	    "ORDER BY created_at, rowid", &s)) != 0)
		goto out;
	while ((step = sqlite3_step(s)) == SQLITE_ROW) {
		if ((nv = realloc(v, (cnt + 1) * sizeof(*v))) == NULL) {
			rc = CB_ENOMEM;
			goto out;
		}
		v = nv;
		memset(&v[cnt], 0, sizeof(v[cnt]));
		(void)blobcol(s, 0, v[cnt].kid, CAP_KID_LEN);
		(void)blobcol(s, 1, v[cnt].pk, 32);
		v[cnt].created_at = u64col(s, 2);
		v[cnt].retired_at = u64col(s, 3);
		v[cnt].signing = sqlite3_column_int(s, 4) != 0;
		cnt++;
	}
	if ((rc = db_err(step)) != 0)
		goto out;
	*out = v;
	*n = cnt;
	v = NULL;
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	free(v);
	return rc;
}

int
st_audit_keyring(struct st *st, struct cap_keyring **out)
{
	struct st_key_info *keys = NULL;
	struct cap_keyring *kr = NULL;
	size_t n = 0, i;
	int rc;

	*out = NULL;
	if ((rc = st_key_list(st, &keys, &n)) != 0 || (rc = cap_keyring_new(&kr)) != 0)
		goto out;
	for (i = 0; i < n; i++)
		if ((rc = cap_keyring_add_public(kr, keys[i].pk)) != 0)
			goto out;
	*out = kr;
	kr = NULL;
out:
	cap_keyring_free(kr);
	free(keys);
	return rc;
}

int
st_sign_audit(void *arg, const uint8_t *msg, size_t len, uint8_t sig[64], uint8_t kid[CAP_KID_LEN])
{
	struct st *st = arg;
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = cap_sign(st->kr, CAP_SIG_DOMAIN_AUDIT, msg, len, sig, kid);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* ---- tokens -------------------------------------------------------- */

static int
token_fields_ok(const struct st_token *t)
{
	if (!str_ok(t->sandbox, CAP_AUD_MAX) || t->sandbox[0] == '\0' ||
	    !str_ok(t->issued_by, ST_WHO_MAX) || !str_ok(t->caps, ST_CAPS_MAX))
		return t->caps == NULL || t->sandbox[0] == '\0' ? CB_EINVAL : CB_ETOOBIG;
	return 0;
}

/* Enter t into the in-memory index (before the commit, so that a parent
 * earlier in the same batch is found).  Checks the parent. */
static int
token_mem_add(struct st *st, const struct st_token *t)
{
	uint32_t e, pe = TM_NONE;
	int rc;

	e = tm_find(&st->tm, t->id);
	if (e != TM_NONE && !(st->tm.ents[e].flags & TM_STUB))
		return CB_EEXIST;
	if (t->has_parent) {
		pe = tm_find(&st->tm, t->parent);
		if (pe == TM_NONE || (st->tm.ents[pe].flags & TM_STUB))
			return CB_ENOENT;
		if (tm_revoked(&st->tm, pe))
			return CB_EREVOKED;
		if (tm_depth(&st->tm, pe) + 1 > ST_MAX_DEPTH)
			return CB_ETOOBIG;
	}
	if ((rc = tm_get_or_add(&st->tm, t->id, &e)) != 0)
		return rc;
	st->tm.ents[e].parent = pe;
	st->tm.ents[e].flags = 0;
	if (t->uses_left != ST_UNLIMITED)
		st->tm.ents[e].flags |= TM_LIMITED | (t->uses_left == 0 ? TM_SPENT : 0);
	return 0;
}

/* Undo token_mem_add after a failed commit: the entry becomes a stub
 * (unknown), which is what it is on disk. */
static void
token_mem_undo(struct st *st, const struct st_token *t)
{
	uint32_t e = tm_find(&st->tm, t->id);

	if (e != TM_NONE) {
		st->tm.ents[e].flags = TM_STUB;
		st->tm.ents[e].parent = TM_NONE;
	}
}

static const char token_insert_sql[] =
	"INSERT INTO tokens(id, parent, sandbox, caps, nbf, exp, uses_left, elevated,"
	" issued_at, issued_by) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

static int
token_insert(sqlite3_stmt *s, const struct st_token *t)
{
	int rc;

	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	sqlite3_bind_blob(s, 1, t->id, CAP_ID_LEN, SQLITE_STATIC);
	if (t->has_parent)
		sqlite3_bind_blob(s, 2, t->parent, CAP_ID_LEN, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, t->sandbox, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, t->caps, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 5, i64(t->nbf));
	sqlite3_bind_int64(s, 6, i64(t->exp));
	if (t->uses_left != ST_UNLIMITED)
		sqlite3_bind_int64(s, 7, t->uses_left);
	sqlite3_bind_int(s, 8, t->elevated);
	sqlite3_bind_int64(s, 9, i64(t->issued_at));
	sqlite3_bind_text(s, 10, t->issued_by, -1, SQLITE_STATIC);
	rc = db_err(sqlite3_step(s));
	return rc;
}

/* An elevated token's instance, in the same transaction as its row. */
static int
elevation_insert(struct st *st, const struct st_token *t)
{
	sqlite3_stmt *s = NULL;
	int rc;

	st->elevated = true;	/* even if rolled back: only makes ending slower */
	if ((rc = db_prep(st, "INSERT INTO elevations(token, instance) VALUES(?1, ?2)", &s)) != 0)
		return rc;
	sqlite3_bind_blob(s, 1, t->id, CAP_ID_LEN, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, i64(t->instance));
	rc = db_err(sqlite3_step(s));
	sqlite3_finalize(s);
	return rc;
}

/* Insert n tokens inside the caller's transaction (mu held). */
static int
tokens_insert_locked(struct st *st, const struct st_token *t, size_t n, size_t *done)
{
	sqlite3_stmt *s = NULL;
	size_t i;
	int rc;

	*done = 0;
	for (i = 0; i < n; i++)
		if ((rc = token_fields_ok(&t[i])) != 0)
			return rc;
	if ((rc = db_prep(st, token_insert_sql, &s)) != 0)
		return rc;
	for (i = 0; i < n; i++) {
		if ((rc = token_mem_add(st, &t[i])) != 0)
			break;
		*done = i + 1;
		if ((rc = token_insert(s, &t[i])) != 0)
			break;
		if (t[i].elevated && t[i].instance && (rc = elevation_insert(st, &t[i])) != 0)
			break;
	}
	sqlite3_finalize(s);
	return rc;
}

int
st_token_add_batch(struct st *st, const struct st_token *t, size_t n)
{
	size_t done = 0, i;
	int rc;

	pthread_mutex_lock(&st->mu);
	if ((rc = db_begin(st)) != 0)
		goto out;
	if ((rc = tokens_insert_locked(st, t, n, &done)) != 0 ||
	    (rc = dec_record_locked(st)) != 0) {
		db_rollback(st);
		goto undo;
	}
	if ((rc = db_commit(st)) == 0)
		goto out;
undo:
	for (i = 0; i < done; i++)
		token_mem_undo(st, &t[i]);
out:
	dec_done(st, rc);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_token_add(struct st *st, const struct st_token *t)
{
	return st_token_add_batch(st, t, 1);
}

void
st_token_clear(struct st_token *t)
{
	if (t == NULL)
		return;
	free(t->caps);
	t->caps = NULL;
}

static const char token_cols[] =
	"id, parent, sandbox, caps, nbf, exp, uses_left, elevated, issued_at, issued_by, revoked_at";

/* When was the token revoked through an ancestor?  0 if it was not.
 * Called with mu held. */
static uint64_t
inherited_revoked_at(struct st *st, const uint8_t id[CAP_ID_LEN])
{
	sqlite3_stmt *s = NULL;
	uint32_t e = tm_find(&st->tm, id);
	uint64_t at = 0;
	int steps;

	for (steps = 0; e != TM_NONE && steps <= ST_MAX_DEPTH; steps++) {
		if (st->tm.ents[e].flags & TM_REVOKED)
			break;
		e = st->tm.ents[e].parent;
	}
	if (e == TM_NONE || steps > ST_MAX_DEPTH)
		return 0;
	if (db_prep(st, "SELECT revoked_at FROM tokens WHERE id = ?1", &s) == 0) {
		sqlite3_bind_blob(s, 1, st->tm.ents[e].id, CAP_ID_LEN, SQLITE_STATIC);
		if (sqlite3_step(s) == SQLITE_ROW)
			at = u64col(s, 0);
	}
	sqlite3_finalize(s);
	return at != 0 ? at : 1;
}

/* Fill t from a row of token_cols; t->caps is malloc'd. */
static int
token_row(struct st *st, sqlite3_stmt *s, struct st_token *t)
{
	const unsigned char *caps;

	memset(t, 0, sizeof(*t));
	(void)blobcol(s, 0, t->id, CAP_ID_LEN);
	t->has_parent = blobcol(s, 1, t->parent, CAP_ID_LEN);
	textcol(s, 2, t->sandbox, sizeof(t->sandbox));
	caps = sqlite3_column_text(s, 3);
	if ((t->caps = strdup(caps != NULL ? (const char *)caps : "")) == NULL)
		return CB_ENOMEM;
	t->nbf = u64col(s, 4);
	t->exp = u64col(s, 5);
	t->uses_left = sqlite3_column_type(s, 6) == SQLITE_NULL ? ST_UNLIMITED :
	    (uint32_t)u64col(s, 6);
	t->elevated = sqlite3_column_int(s, 7) != 0;
	t->issued_at = u64col(s, 8);
	textcol(s, 9, t->issued_by, sizeof(t->issued_by));
	t->revoked_at = u64col(s, 10);
	if (t->revoked_at == 0)
		t->revoked_at = inherited_revoked_at(st, t->id);
	return 0;
}

int
st_token_get(struct st *st, const uint8_t id[CAP_ID_LEN], struct st_token *out)
{
	sqlite3_stmt *s = NULL;
	char sql[256];
	int rc, step;

	memset(out, 0, sizeof(*out));
	snprintf(sql, sizeof(sql), "SELECT %s FROM tokens WHERE id = ?1", token_cols);
	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, sql, &s)) != 0)
		goto out;
	sqlite3_bind_blob(s, 1, id, CAP_ID_LEN, SQLITE_STATIC);
	step = sqlite3_step(s);
	if (step == SQLITE_ROW)
		rc = token_row(st, s, out);
	else
		rc = step == SQLITE_DONE ? CB_ENOENT : db_err(step);
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_token_list(struct st *st, const char *sandbox, st_token_fn *fn, void *arg)
{
	sqlite3_stmt *s = NULL;
	struct st_token t;
	char sql[256];
	int rc, step;

	snprintf(sql, sizeof(sql), "SELECT %s FROM tokens WHERE ?1 IS NULL OR sandbox = ?1 ORDER BY seq",
	    token_cols);
	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, sql, &s)) != 0)
		goto out;
	if (sandbox != NULL)
		sqlite3_bind_text(s, 1, sandbox, -1, SQLITE_STATIC);
	while ((step = sqlite3_step(s)) == SQLITE_ROW) {
		if ((rc = token_row(st, s, &t)) == 0)
			rc = fn(arg, &t);
		st_token_clear(&t);
		if (rc != 0)
			goto out;
	}
	rc = db_err(step);
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_revoke_many(struct st *st, struct st_revoke_item *it, size_t n, uint64_t now)
{
	sqlite3_stmt *s = NULL;
	uint64_t dseq;
	bool in_txn = false;
	int rc;

	pthread_mutex_lock(&st->mu);
	dseq = st->dseq;
	for (size_t i = 0; i < n; i++) {
		uint32_t e = tm_find(&st->tm, it[i].id);

		it[i].rc = 0;
		it[i].count = 0;
		it[i].dec.dseq = 0;
		it[i].ent = TM_NONE;
		if (e == TM_NONE || (st->tm.ents[e].flags & TM_STUB))
			it[i].rc = CB_ENOENT;
		else if (!tm_revoked(&st->tm, e)) {
			bool dup = false;

			/* twice in the batch: the first revokes it */
			for (size_t k = 0; k < i && !dup; k++)
				dup = it[k].ent == e;
			if (!dup) {
				it[i].ent = e;	/* to revoke */
				it[i].count = tm_count_subtree(&st->tm, e);
			}
		}
	}
	/* One transaction, one sync, for them all: each revocation is its own
	 * decision (its own dseq and record), as st_revoke makes it, and
	 * memory follows the commit. */
	if ((rc = db_begin(st)) != 0)
		goto out;
	in_txn = true;
	if ((rc = db_exec(st, "DELETE FROM batch_decisions")) != 0 ||
	    (rc = db_prep(st, "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
	    &s)) != 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (it[i].ent == TM_NONE)
			continue;	/* unknown, or it or an ancestor already is */
		sqlite3_reset(s);
		sqlite3_bind_blob(s, 1, it[i].id, CAP_ID_LEN, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, i64(now));
		/* A token minted by another broker has no row here (no
		 * change): the decision and memory are what revoke it, as in
		 * st_revoke. */
		if ((rc = db_err(sqlite3_step(s))) != 0)
			goto out;
		it[i].dec.dseq = ++dseq;
		if ((rc = dec_keep_locked(st, &it[i].dec, true)) != 0)
			goto out;
	}
	if (dseq != st->dseq) {
		/* the last one is also the last decision, as for one alone */
		for (size_t i = n; i-- > 0;) {
			if (it[i].dec.dseq == dseq) {
				rc = dec_keep_locked(st, &it[i].dec, false);
				break;
			}
		}
		if (rc != 0 || (rc = meta_set_locked(st, "dseq", dseq)) != 0)
			goto out;
	}
	in_txn = false;
	if ((rc = db_commit(st)) != 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (it[i].ent != TM_NONE)
			st->tm.ents[it[i].ent].flags |= TM_REVOKED;
	}
	st->dseq = dseq;
	atomic_fetch_add(&st->epoch, 1);
out:
	if (in_txn)
		db_rollback(st);
	if (rc != 0) {
		for (size_t i = 0; i < n; i++) {
			it[i].dec.dseq = 0;
			it[i].count = 0;
		}
	}
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_revoke(struct st *st, const uint8_t id[CAP_ID_LEN], uint64_t now, size_t *count)
{
	sqlite3_stmt *s = NULL;
	uint32_t e = tm_find(&st->tm, id);
	int rc;

	bool in_txn = false;
	size_t n = 0;

	if (count != NULL)
		*count = 0;
	pthread_mutex_lock(&st->mu);
	if (e == TM_NONE || (st->tm.ents[e].flags & TM_STUB)) {
		rc = CB_ENOENT;
		goto out;
	}
	rc = 0;
	if (tm_revoked(&st->tm, e))
		goto out;	/* it or an ancestor already is, on disk too: nothing changes */
	if (count != NULL)
		n = tm_count_subtree(&st->tm, e);

	/* On disk first: only the root's row changes, descendants are revoked
	 * by their (durable) parent links, on reload as in memory.  So revoking
	 * a tree of any size is one small transaction, synced at its commit
	 * (synchronous=FULL), not a stall proportional to the tree.  Memory
	 * follows the commit: a failed write leaves the token as the disk
	 * has it, so a retry writes again rather than finding it "already
	 * revoked" in memory only (and active after a restart). */
	if ((rc = db_begin(st)) != 0)
		goto out;
	in_txn = true;
	if ((rc = db_prep(st, "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
	    &s)) != 0)
		goto out;
	sqlite3_bind_blob(s, 1, id, CAP_ID_LEN, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, i64(now));
	if ((rc = db_err(sqlite3_step(s))) != 0 || (rc = dec_record_locked(st)) != 0)
		goto out;
	in_txn = false;
	if ((rc = db_commit(st)) != 0)
		goto out;
	st->tm.ents[e].flags |= TM_REVOKED;
	atomic_fetch_add(&st->epoch, 1);
	if (count != NULL)
		*count = n;
out:
	if (in_txn)
		db_rollback(st);
	sqlite3_finalize(s);
	dec_done(st, rc);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

bool
st_is_revoked(const struct st *st, const uint8_t id[CAP_ID_LEN])
{
	uint32_t e = tm_find(&st->tm, id);

	return e != TM_NONE && tm_revoked(&st->tm, e);
}

int
st_token_state(const struct st *st, const uint8_t id[CAP_ID_LEN])
{
	uint32_t e = tm_find(&st->tm, id);

	if (e == TM_NONE || (st->tm.ents[e].flags & TM_STUB))
		return CB_ENOENT;
	if (tm_revoked(&st->tm, e))
		return CB_EREVOKED;
	/* A spent ancestor leaves nothing for its descendants either. */
	for (uint32_t d = 0; e != TM_NONE && d <= ST_MAX_DEPTH; e = st->tm.ents[e].parent, d++)
		if (st->tm.ents[e].flags & TM_SPENT)
			return CB_ESPENT;
	return 0;
}

int
st_use(struct st *st, const uint8_t id[CAP_ID_LEN], uint32_t *left)
{
	sqlite3_stmt *s = NULL;
	uint32_t chain[ST_MAX_DEPTH + 1], nchain = 0, e;
	int rc, step;

	if (left != NULL)
		*left = ST_UNLIMITED;
	if ((rc = st_token_state(st, id)) != 0)
		return rc;
	/* A derived token shares its limited ancestors' budgets: a use of it
	 * is a use of each of them, so a child can never multiply its
	 * parent's uses.  Collect the limited ones on the way up. */
	for (e = tm_find(&st->tm, id); e != TM_NONE && nchain <= ST_MAX_DEPTH;
	     e = st->tm.ents[e].parent)
		if (st->tm.ents[e].flags & TM_LIMITED)
			chain[nchain++] = e;
	if (nchain == 0)
		return 0;
	/* Another broker's use-limited token: its uses are counted where it
	 * was minted, not here (docs/cluster.md), so it is not honoured here. */
	for (uint32_t i = 0; i < nchain; i++)
		if (st->tm.ents[chain[i]].flags & TM_FOREIGN)
			return CB_EUNSUPPORTED;
	pthread_mutex_lock(&st->mu);
	/* the decrements are committed (and synced) before the operation
	 * runs: a crash may waste a use, never grant one twice */
	if ((rc = db_begin(st)) != 0)
		goto out;
	if ((rc = db_prep(st, "UPDATE tokens SET uses_left = uses_left - 1 "
	    "WHERE id = ?1 AND uses_left > 0 RETURNING uses_left", &s)) != 0) {
		db_rollback(st);
		goto out;
	}
	for (uint32_t i = 0; i < nchain; i++) {
		struct tm_ent *t = &st->tm.ents[chain[i]];

		sqlite3_reset(s);
		sqlite3_bind_blob(s, 1, t->id, CAP_ID_LEN, SQLITE_STATIC);
		step = sqlite3_step(s);
		if (step == SQLITE_ROW) {
			uint64_t l = u64col(s, 0);

			if (i == 0 && left != NULL && chain[0] == tm_find(&st->tm, id))
				*left = (uint32_t)l;
			step = sqlite3_step(s);
			if ((rc = db_err(step)) != 0)
				break;
		} else if (step == SQLITE_DONE) {
			t->flags |= TM_SPENT;	/* none left: true whatever we decide */
			rc = CB_ESPENT;
			break;
		} else {
			rc = db_err(step);
			break;
		}
	}
	sqlite3_finalize(s);
	s = NULL;
	if (rc != 0) {
		db_rollback(st);
		goto out;
	}
	if ((rc = db_commit(st)) != 0)
		goto out;
	/* Only now, with the decrements on disk, mark what reached zero. */
	{
		sqlite3_stmt *q = NULL;

		if (db_prep(st, "SELECT uses_left FROM tokens WHERE id = ?1", &q) == 0) {
			for (uint32_t i = 0; i < nchain; i++) {
				struct tm_ent *t = &st->tm.ents[chain[i]];

				sqlite3_reset(q);
				sqlite3_bind_blob(q, 1, t->id, CAP_ID_LEN, SQLITE_STATIC);
				if (sqlite3_step(q) == SQLITE_ROW && u64col(q, 0) == 0)
					t->flags |= TM_SPENT;
			}
			sqlite3_finalize(q);
		}
	}
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

uint64_t
st_epoch(const struct st *st)
{
	return atomic_load(&((struct st *)st)->epoch);
}

static int
load_tokens(struct st *st)
{
	sqlite3_stmt *s = NULL;
	int rc, step;

	if ((rc = db_prep(st, "SELECT id, parent, revoked_at, uses_left FROM tokens", &s)) != 0)
		return rc;
	while ((step = sqlite3_step(s)) == SQLITE_ROW) {
		uint8_t id[CAP_ID_LEN], parent[CAP_ID_LEN];
		uint32_t e, pe = TM_NONE, flags = 0;

		if (!blobcol(s, 0, id, CAP_ID_LEN)) {
			rc = CB_EINTERNAL;
			goto out;
		}
		/* rows come in any order: a parent seen first as a stub is
		 * filled in when its own row arrives */
		if (blobcol(s, 1, parent, CAP_ID_LEN) &&
		    (rc = tm_get_or_add(&st->tm, parent, &pe)) != 0)
			goto out;
		if ((rc = tm_get_or_add(&st->tm, id, &e)) != 0)
			goto out;
		if (sqlite3_column_type(s, 2) != SQLITE_NULL)
			flags |= TM_REVOKED;
		if (sqlite3_column_type(s, 3) != SQLITE_NULL) {
			flags |= TM_LIMITED;
			if (sqlite3_column_int64(s, 3) <= 0)
				flags |= TM_SPENT;
		}
		st->tm.ents[e].parent = pe;
		st->tm.ents[e].flags = flags;
	}
	rc = db_err(step);
out:
	sqlite3_finalize(s);
	return rc;
}

/* ---- requests ------------------------------------------------------ */

const char *
st_req_state_name(enum st_req_state s)
{
	switch (s) {
	case ST_REQ_PENDING: return "pending";
	case ST_REQ_APPROVED: return "approved";
	case ST_REQ_DENIED: return "denied";
	case ST_REQ_EXPIRED: return "expired";
	}
	return "unknown";
}

int
st_request_add(struct st *st, struct st_request *r)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if (!str_ok(r->sandbox, CAP_AUD_MAX) || !str_ok(r->command, ST_TEXT_MAX) ||
	    !str_ok(r->capability, CAP_STR_MAX) || !str_ok(r->reason, ST_TEXT_MAX))
		return CB_ETOOBIG;
	if (r->sandbox[0] == '\0' || r->capability[0] == '\0')
		return CB_EINVAL;
	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, "INSERT INTO requests(sandbox, command, capability, reason, ttl,"
	    " asked_at, expires_at, state) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)", &s)) != 0)
		goto out;
	sqlite3_bind_text(s, 1, r->sandbox, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, r->command, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, r->capability, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, r->reason, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 5, i64(r->ttl));
	sqlite3_bind_int64(s, 6, i64(r->asked_at));
	sqlite3_bind_int64(s, 7, i64(r->expires_at));
	if ((rc = db_err(sqlite3_step(s))) != 0)
		goto out;
	r->id = (uint64_t)sqlite3_last_insert_rowid(st->db);
	r->state = ST_REQ_PENDING;
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

static const char req_cols[] =
	"id, sandbox, command, capability, reason, ttl, asked_at, expires_at, state,"
	" decided_by, decision_reason, decided_at, approved_ttl, scope, token_id";

static void
req_row(sqlite3_stmt *s, struct st_request *r)
{
	memset(r, 0, sizeof(*r));
	r->id = u64col(s, 0);
	textcol(s, 1, r->sandbox, sizeof(r->sandbox));
	textcol(s, 2, r->command, sizeof(r->command));
	textcol(s, 3, r->capability, sizeof(r->capability));
	textcol(s, 4, r->reason, sizeof(r->reason));
	r->ttl = u64col(s, 5);
	r->asked_at = u64col(s, 6);
	r->expires_at = u64col(s, 7);
	r->state = (enum st_req_state)sqlite3_column_int(s, 8);
	textcol(s, 9, r->decided_by, sizeof(r->decided_by));
	textcol(s, 10, r->decision_reason, sizeof(r->decision_reason));
	r->decided_at = u64col(s, 11);
	r->approved_ttl = u64col(s, 12);
	r->scope = sqlite3_column_int(s, 13) == ST_SCOPE_SESSION ? ST_SCOPE_SESSION : ST_SCOPE_ONCE;
	r->has_token = blobcol(s, 14, r->token_id, CAP_ID_LEN);
}

static int
req_get_locked(struct st *st, uint64_t id, struct st_request *out)
{
	sqlite3_stmt *s = NULL;
	char sql[512];
	int rc, step;

	snprintf(sql, sizeof(sql), "SELECT %s FROM requests WHERE id = ?1", req_cols);
	if ((rc = db_prep(st, sql, &s)) != 0)
		return rc;
	sqlite3_bind_int64(s, 1, i64(id));
	step = sqlite3_step(s);
	if (step == SQLITE_ROW)
		req_row(s, out);
	else
		rc = step == SQLITE_DONE ? CB_ENOENT : db_err(step);
	sqlite3_finalize(s);
	return rc;
}

int
st_request_get(struct st *st, uint64_t id, struct st_request *out)
{
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = req_get_locked(st, id, out);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_request_list(struct st *st, int state, st_request_fn *fn, void *arg)
{
	sqlite3_stmt *s = NULL;
	struct st_request *r = NULL;
	char sql[512];
	int rc, step;

	if ((r = malloc(sizeof(*r))) == NULL)
		return CB_ENOMEM;
	snprintf(sql, sizeof(sql), "SELECT %s FROM requests WHERE ?1 < 0 OR state = ?1 ORDER BY id",
	    req_cols);
	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, sql, &s)) != 0)
		goto out;
	sqlite3_bind_int(s, 1, state);
	while ((step = sqlite3_step(s)) == SQLITE_ROW) {
		req_row(s, r);
		if ((rc = fn(arg, r)) != 0)
			goto out;
	}
	rc = db_err(step);
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	free(r);
	return rc;
}

static int
expire_locked(struct st *st, uint64_t now, size_t *n)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if (n != NULL)
		*n = 0;
	if ((rc = db_prep(st, "UPDATE requests SET state = 3, decided_at = ?1, decided_by = 'broker'"
	    " WHERE state = 0 AND expires_at <= ?1", &s)) != 0)
		return rc;
	sqlite3_bind_int64(s, 1, i64(now));
	rc = db_err(sqlite3_step(s));
	if (rc == 0 && n != NULL)
		*n = (size_t)sqlite3_changes(st->db);
	sqlite3_finalize(s);
	return rc;
}

int
st_request_expire(struct st *st, uint64_t now, size_t *n)
{
	int rc;

	pthread_mutex_lock(&st->mu);
	rc = expire_locked(st, now, n);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* A decision on a pending request: approve (tok != NULL) or deny. */
struct st_req_verdict {
	uint64_t id;
	const char *by;
	uint64_t now;
	uint64_t ttl;			/* approve: the approved ttl */
	enum st_scope scope;		/* approve */
	const struct st_token *tok;	/* approve: the token minted for it */
	const char *reason;		/* deny: why, or NULL */
};

static int
decide(struct st *st, const struct st_req_verdict *d)
{
	uint64_t id = d->id, now = d->now, ttl = d->ttl;
	const char *by = d->by, *reason = d->reason;
	enum st_scope scope = d->scope;
	const struct st_token *tok = d->tok;
	struct st_request *r = NULL;
	sqlite3_stmt *s = NULL;
	size_t done = 0;
	bool in_txn = false;
	int rc;

	if (by == NULL || !str_ok(by, ST_WHO_MAX) || (reason != NULL && !str_ok(reason, ST_TEXT_MAX)))
		return CB_ETOOBIG;
	if ((r = malloc(sizeof(*r))) == NULL)
		return CB_ENOMEM;
	pthread_mutex_lock(&st->mu);
	if ((rc = db_begin(st)) != 0)
		goto out;
	in_txn = true;
	if ((rc = req_get_locked(st, id, r)) != 0)
		goto out;
	if (r->state != ST_REQ_PENDING) {
		rc = r->state == ST_REQ_EXPIRED ? CB_EEXPIREDREQ : CB_EEXIST;
		goto out;
	}
	if (r->expires_at <= now) {
		/* too late: the request lapsed; record that, refuse the decision */
		if ((rc = expire_locked(st, now, NULL)) != 0)
			goto out;
		rc = db_commit(st);
		in_txn = false;
		if (rc == 0)
			rc = CB_EEXPIREDREQ;
		goto out;
	}
	if (tok != NULL && (rc = tokens_insert_locked(st, tok, 1, &done)) != 0)
		goto out;
	if ((rc = db_prep(st, "UPDATE requests SET state = ?2, decided_by = ?3, decided_at = ?4,"
	    " approved_ttl = ?5, scope = ?6, token_id = ?7, decision_reason = ?8 WHERE id = ?1", &s)) != 0)
		goto out;
	sqlite3_bind_int64(s, 1, i64(id));
	sqlite3_bind_int(s, 2, tok != NULL ? ST_REQ_APPROVED : ST_REQ_DENIED);
	sqlite3_bind_text(s, 3, by, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, i64(now));
	if (tok != NULL) {
		sqlite3_bind_int64(s, 5, i64(ttl));
		sqlite3_bind_int(s, 6, scope);
		sqlite3_bind_blob(s, 7, tok->id, CAP_ID_LEN, SQLITE_STATIC);
	}
	if (reason != NULL)
		sqlite3_bind_text(s, 8, reason, -1, SQLITE_STATIC);
	if ((rc = db_err(sqlite3_step(s))) != 0 || (rc = dec_record_locked(st)) != 0)
		goto out;
	rc = db_commit(st);
	in_txn = false;
out:
	if (in_txn)
		db_rollback(st);
	if (rc != 0 && done > 0)
		token_mem_undo(st, tok);
	sqlite3_finalize(s);
	dec_done(st, rc);
	pthread_mutex_unlock(&st->mu);
	free(r);
	return rc;
}

int
st_request_approve(struct st *st, const struct st_approval *a)
{
	if (a->tok == NULL)
		return CB_EINVAL;
	return decide(st, &(struct st_req_verdict){ .id = a->id, .by = a->by, .now = a->now,
	    .ttl = a->ttl, .scope = a->scope, .tok = a->tok });
}

int
st_request_deny(struct st *st, uint64_t id, const char *by, uint64_t now, const char *reason)
{
	return decide(st, &(struct st_req_verdict){ .id = id, .by = by, .now = now,
	    .scope = ST_SCOPE_ONCE, .reason = reason });
}

/* ---- audit head ---------------------------------------------------- */

/* ---- sandbox instances and their elevations ------------------------ */

int
st_instance_begin(struct st *st, const char *sandbox, uint64_t now, uint64_t *id)
{
	sqlite3_stmt *s = NULL;
	int rc;

	*id = 0;
	if (!str_ok(sandbox, CAP_AUD_MAX) || sandbox[0] == '\0')
		return CB_EINVAL;
	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, "INSERT INTO instances(sandbox, started_at) VALUES(?1, ?2)", &s)) != 0)
		goto out;
	sqlite3_bind_text(s, 1, sandbox, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, i64(now));
	if ((rc = db_err(sqlite3_step(s))) == 0)
		*id = (uint64_t)sqlite3_last_insert_rowid(st->db);
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_token_instance(struct st *st, const uint8_t id[CAP_ID_LEN], uint64_t *inst)
{
	sqlite3_stmt *s = NULL;
	int rc, step;

	*inst = 0;
	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, "SELECT instance FROM elevations WHERE token = ?1", &s)) != 0)
		goto out;
	sqlite3_bind_blob(s, 1, id, CAP_ID_LEN, SQLITE_STATIC);
	step = sqlite3_step(s);
	if (step == SQLITE_ROW)
		*inst = u64col(s, 0);
	else
		rc = step == SQLITE_DONE ? CB_ENOENT : db_err(step);
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* Which instances end, and when: sel selects their elevation tokens, mark
 * marks them ended (?1 now; ?2 inst where both take it, 0: all). */
struct st_inst_end {
	const char *sel;
	const char *mark;
	uint64_t inst;
	uint64_t now;
};

/* Collect into *ids the tokens of the instances `x->sel` selects that are
 * not revoked yet, revoke them in memory at once (as st_revoke does), and
 * on disk with the instances marked ended, in one transaction (mu held). */
static int
instances_end_locked(struct st *st, const struct st_inst_end *x, uint8_t (**ids)[CAP_ID_LEN],
    size_t *n)
{
	sqlite3_stmt *s = NULL, *u = NULL;
	size_t cap = 0;
	int rc, step;

	if ((rc = db_begin(st)) != 0)
		return rc;
	if ((rc = db_prep(st, x->sel, &s)) != 0 ||
	    (rc = db_prep(st, "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
	    &u)) != 0)
		goto out;
	if (x->inst)
		sqlite3_bind_int64(s, 1, i64(x->inst));
	while ((step = sqlite3_step(s)) == SQLITE_ROW) {
		const void *b = sqlite3_column_blob(s, 0);
		uint32_t e;

		if (sqlite3_column_bytes(s, 0) != CAP_ID_LEN || !b)
			continue;
		e = tm_find(&st->tm, b);
		if (e == TM_NONE || (st->tm.ents[e].flags & TM_STUB) || tm_revoked(&st->tm, e))
			continue;
		st->tm.ents[e].flags |= TM_REVOKED;
		atomic_fetch_add(&st->epoch, 1);
		if (*n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			void *p = reallocarray(*ids, nc, CAP_ID_LEN);

			if (!p) {
				rc = CB_ENOMEM;
				goto out;
			}
			*ids = p;
			cap = nc;
		}
		memcpy((*ids)[(*n)++], b, CAP_ID_LEN);
		sqlite3_reset(u);
		sqlite3_bind_blob(u, 1, b, CAP_ID_LEN, SQLITE_TRANSIENT);
		sqlite3_bind_int64(u, 2, i64(x->now));
		if ((rc = db_err(sqlite3_step(u))) != 0)
			goto out;
	}
	if ((rc = db_err(step)) != 0)
		goto out;
	sqlite3_finalize(u);
	u = NULL;
	if ((rc = db_prep(st, x->mark, &u)) != 0)
		goto out;
	sqlite3_bind_int64(u, 1, i64(x->now));
	if (x->inst)
		sqlite3_bind_int64(u, 2, i64(x->inst));
	if ((rc = db_err(sqlite3_step(u))) != 0)
		goto out;
	sqlite3_finalize(s);
	sqlite3_finalize(u);
	return db_commit(st);
out:
	sqlite3_finalize(s);
	sqlite3_finalize(u);
	db_rollback(st);
	return rc;
}

static int
instance_mark_ended(struct st *st, uint64_t inst, uint64_t now)
{
	sqlite3_stmt *u = NULL;
	int rc;

	if ((rc = db_prep(st, "UPDATE instances SET ended_at = ?1 WHERE id = ?2 AND ended_at IS NULL",
	    &u)) != 0)
		return rc;
	sqlite3_bind_int64(u, 1, i64(now));
	sqlite3_bind_int64(u, 2, i64(inst));
	rc = db_err(sqlite3_step(u));
	sqlite3_finalize(u);
	return rc;
}

int
st_instance_end(struct st *st, uint64_t inst, uint64_t now, uint8_t (**ids)[CAP_ID_LEN], size_t *n)
{
	int rc;

	*ids = NULL;
	*n = 0;
	if (inst == 0)
		return CB_EINVAL;
	pthread_mutex_lock(&st->mu);
	/* An ephemeral state holds only what this process wrote: without an
	 * elevation ever written there is none to look for or revoke, and the
	 * one statement left needs no transaction of its own. */
	if (st->ephemeral && !st->elevated)
		rc = instance_mark_ended(st, inst, now);
	else
		rc = instances_end_locked(st, &(struct st_inst_end){
		    .sel = "SELECT token FROM elevations WHERE instance = ?1",
		    .mark = "UPDATE instances SET ended_at = ?1 WHERE id = ?2 AND ended_at IS NULL",
		    .inst = inst, .now = now }, ids, n);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_instance_end_all(struct st *st, uint64_t now, uint8_t (**ids)[CAP_ID_LEN], size_t *n)
{
	int rc;

	*ids = NULL;
	*n = 0;
	pthread_mutex_lock(&st->mu);
	rc = instances_end_locked(st, &(struct st_inst_end){
	    .sel = "SELECT e.token FROM elevations e JOIN instances i"
	    " ON i.id = e.instance WHERE i.ended_at IS NULL",
	    .mark = "UPDATE instances SET ended_at = ?1 WHERE ended_at IS NULL",
	    .now = now }, ids, n);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_set_audit_head(struct st *st, const uint8_t log_id[16], uint64_t seq, const uint8_t hash[32])
{
	sqlite3_stmt *s = NULL;
	int rc;

	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, "INSERT OR REPLACE INTO audit_head(one, log_id, seq, hash)"
	    " VALUES(1, ?1, ?2, ?3)", &s)) != 0)
		goto out;
	sqlite3_bind_blob(s, 1, log_id, 16, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, i64(seq));
	sqlite3_bind_blob(s, 3, hash, 32, SQLITE_STATIC);
	rc = db_err(sqlite3_step(s));
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_get_audit_head(struct st *st, uint8_t log_id[16], uint64_t *seq, uint8_t hash[32])
{
	sqlite3_stmt *s = NULL;
	int rc, step;

	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, "SELECT log_id, seq, hash FROM audit_head WHERE one = 1", &s)) != 0)
		goto out;
	step = sqlite3_step(s);
	if (step == SQLITE_ROW) {
		if (!blobcol(s, 0, log_id, 16) || !blobcol(s, 2, hash, 32))
			rc = CB_EINTERNAL;
		*seq = u64col(s, 1);
	} else
		rc = step == SQLITE_DONE ? CB_ENOENT : db_err(step);
out:
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

void
st_audit_checkpoint_cb(void *arg, const uint8_t log_id[16], uint64_t seq, const uint8_t hash[32])
{
	struct st *st = arg;
	int rc = st_set_audit_head(st, log_id, seq, hash);

	if (rc != 0)
		atomic_store(&st->head_err, rc);
}

int
st_audit_head_error(const struct st *st)
{
	return atomic_load(&((struct st *)st)->head_err);
}

/* ---- open / close -------------------------------------------------- */

/* ---- the cluster's changes -------------------------------------------- */

int
st_cl_key(struct st *st, const uint8_t pk[32], bool retired)
{
	uint8_t kid[CAP_KID_LEN], have[32], signer[CAP_KID_LEN];
	int rc = 0, known;

	cap_kid_of(pk, kid);
	pthread_mutex_lock(&st->mu);
	known = cap_keyring_public(st->kr, kid, have);
	if (known == CB_EUNKNOWNKEY)
		rc = cap_keyring_add_public(st->kr, pk);
	else if (known == 0 && memcmp(have, pk, 32) != 0)
		rc = CB_EKEY_FORMAT;	/* the same id for another key: refuse it */
	/* Our signing key is never retired from outside: the database refuses
	 * that too (only a broker's former keys can be retired). */
	if (rc == 0 && retired && known != CB_ERETIRED &&
	    !(cap_keyring_signer(st->kr, signer) == 0 && memcmp(signer, kid, CAP_KID_LEN) == 0)) {
		rc = cap_keyring_retire(st->kr, kid);
		atomic_fetch_add(&st->epoch, 1);
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int
st_cl_token(struct st *st, const uint8_t id[CAP_ID_LEN], const uint8_t *parent, bool limited)
{
	uint32_t e = tm_find(&st->tm, id), pe = TM_NONE, keep;
	int rc;

	if (e != TM_NONE && !(st->tm.ents[e].flags & TM_STUB))
		return 0;	/* ours, or taken in already */
	if (parent && (rc = tm_get_or_add(&st->tm, parent, &pe)) != 0)
		return rc;
	if ((rc = tm_get_or_add(&st->tm, id, &e)) != 0)
		return rc;
	if (e == pe)
		return CB_EINVAL;	/* its own parent */
	keep = st->tm.ents[e].flags & TM_REVOKED;
	st->tm.ents[e].parent = pe;
	st->tm.ents[e].flags = keep | TM_FOREIGN | (limited ? TM_LIMITED : 0);
	return 0;
}

int
st_cl_revoke(struct st *st, const uint8_t id[CAP_ID_LEN], uint64_t now, bool *changed)
{
	sqlite3_stmt *s = NULL;
	uint32_t e = tm_find(&st->tm, id);
	int rc = 0;

	if (changed)
		*changed = false;
	if (e != TM_NONE && (st->tm.ents[e].flags & TM_REVOKED))
		return 0;
	if (e != TM_NONE && !(st->tm.ents[e].flags & (TM_STUB | TM_FOREIGN))) {
		/* Ours: its row says so too, as st_revoke would write it. */
		pthread_mutex_lock(&st->mu);
		if ((rc = db_prep(st, "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND "
		    "revoked_at IS NULL", &s)) == 0) {
			sqlite3_bind_blob(s, 1, id, CAP_ID_LEN, SQLITE_STATIC);
			sqlite3_bind_int64(s, 2, i64(now));
			rc = db_err(sqlite3_step(s));
		}
		sqlite3_finalize(s);
		pthread_mutex_unlock(&st->mu);
		/* A failed write still revokes in memory: the stream is read
		 * again at the next start.  Fail closed now. */
	} else if (e == TM_NONE && (rc = tm_get_or_add(&st->tm, id, &e)) != 0) {
		return rc;
	}
	st->tm.ents[e].flags |= TM_REVOKED;
	atomic_fetch_add(&st->epoch, 1);
	if (changed)
		*changed = true;
	return rc;
}

int
st_cl_revoke_many(struct st *st, const uint8_t *ids, size_t n, uint64_t now, bool *changed)
{
	sqlite3_stmt *s = NULL;
	bool in_txn = false;
	int rc = 0, r2;

	pthread_mutex_lock(&st->mu);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *id = ids + i * CAP_ID_LEN;
		uint32_t e = tm_find(&st->tm, id);

		changed[i] = false;
		if (e != TM_NONE && (st->tm.ents[e].flags & TM_REVOKED))
			continue;
		if (e != TM_NONE && !(st->tm.ents[e].flags & (TM_STUB | TM_FOREIGN))) {
			/* Ours: its row says so too, all of them in one
			 * transaction (one sync for the batch).  A failed write
			 * still revokes in memory, as st_cl_revoke does. */
			if (rc == 0 && !in_txn && (rc = db_begin(st)) == 0)
				in_txn = true;
			if (rc == 0 && !s)
				rc = db_prep(st, "UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND "
				    "revoked_at IS NULL", &s);
			if (rc == 0) {
				sqlite3_reset(s);
				sqlite3_bind_blob(s, 1, id, CAP_ID_LEN, SQLITE_STATIC);
				sqlite3_bind_int64(s, 2, i64(now));
				rc = db_err(sqlite3_step(s));
			}
		} else if (e == TM_NONE && (r2 = tm_get_or_add(&st->tm, id, &e)) != 0) {
			if (rc == 0)
				rc = r2;
			continue;
		}
		st->tm.ents[e].flags |= TM_REVOKED;
		atomic_fetch_add(&st->epoch, 1);
		changed[i] = true;
	}
	sqlite3_finalize(s);
	if (in_txn) {
		if (rc == 0)
			rc = db_commit(st);
		else
			db_rollback(st);
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

size_t
st_revoke_count(const struct st *st, const uint8_t id[CAP_ID_LEN])
{
	uint32_t e = tm_find(&st->tm, id);

	if (e == TM_NONE || (st->tm.ents[e].flags & TM_STUB))
		return 0;
	return tm_count_subtree(&st->tm, e);
}

bool
st_is_foreign(const struct st *st, const uint8_t id[CAP_ID_LEN])
{
	uint32_t e = tm_find(&st->tm, id);

	return e != TM_NONE && (st->tm.ents[e].flags & TM_FOREIGN);
}

bool
st_token_known(const struct st *st, const uint8_t id[CAP_ID_LEN])
{
	uint32_t e = tm_find(&st->tm, id);

	return e != TM_NONE && !(st->tm.ents[e].flags & TM_STUB);
}

void
st_mem_usage(const struct st *st, struct st_mem *m)
{
	m->tokens = st->tm.n;
	m->bytes = tm_bytes(&st->tm);
}

static int
make_dir(const char *path)
{
	struct stat sb;

	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return CB_EIO;
	if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		errno = ENOTDIR;
		return CB_EIO;
	}
	return 0;
}

/* ---- rebuilding from the audit log ------------------------------- */

enum { ST_MODE_OPEN, ST_MODE_REBUILD, ST_MODE_NEW, ST_MODE_EPHEMERAL };
static int st_open_flags(const char *dir, int mode, struct st **out, char *why, size_t whylen);

/* Read DIR/keys/<kid>.pub (one hex line) into pk; false if absent or bad. */
static bool
read_pub(const char *path, const uint8_t kid[CAP_KID_LEN], uint8_t pk[32])
{
	char hex[80];
	uint8_t got[CAP_KID_LEN];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return false;
	n = read(fd, hex, sizeof(hex) - 1);
	close(fd);
	if (n < 64)
		return false;
	hex[64] = '\0';
	if (cap_unhex(hex, pk, 32) != 0)
		return false;
	cap_kid_of(pk, got);
	return memcmp(got, kid, CAP_KID_LEN) == 0;
}

/* Every DIR/keys/<kid>.pub the table lacks, as a public key (mu held). */
static int
rebuild_keys_locked(struct st *st)
{
	char path[4200];
	DIR *d;
	struct dirent *de;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/keys", st->dir);
	if ((d = opendir(path)) == NULL)
		return CB_EIO;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		uint8_t kid[CAP_KID_LEN], pk[32];
		size_t l = strlen(de->d_name);
		char hex[2 * CAP_KID_LEN + 1];
		sqlite3_stmt *s = NULL;
		struct stat sb;

		if (l != 2 * CAP_KID_LEN + 4 || strcmp(de->d_name + 2 * CAP_KID_LEN, ".pub") != 0)
			continue;
		memcpy(hex, de->d_name, 2 * CAP_KID_LEN);
		hex[2 * CAP_KID_LEN] = '\0';
		if (cap_unhex(hex, kid, CAP_KID_LEN) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/keys/%s", st->dir, de->d_name);
		if (!read_pub(path, kid, pk) || stat(path, &sb) != 0)
			continue;
		if ((rc = db_prep(st, "INSERT OR IGNORE INTO keys(kid, pk, created_at, signing)"
		    " VALUES(?1, ?2, ?3, 0)", &s)) != 0)
			break;
		sqlite3_bind_blob(s, 1, kid, CAP_KID_LEN, SQLITE_STATIC);
		sqlite3_bind_blob(s, 2, pk, 32, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, (sqlite3_int64)sb.st_mtime);
		rc = db_err(sqlite3_step(s));
		sqlite3_finalize(s);
	}
	closedir(d);
	return rc;
}

int
st_open_rebuild(const char *dir, struct st **out, char *why, size_t whylen)
{
	return st_open_flags(dir, ST_MODE_REBUILD, out, why, whylen);
}

int
st_open_new(const char *dir, struct st **out, char *why, size_t whylen)
{
	return st_open_flags(dir, ST_MODE_NEW, out, why, whylen);
}

int
st_open_ephemeral(const char *dir, struct st **out, char *why, size_t whylen)
{
	return st_open_flags(dir, ST_MODE_EPHEMERAL, out, why, whylen);
}

/* One audit line; only decisions (lines with a dseq) change anything.
 * The line is read with SQLite's JSON functions, never by hand. */
int
st_rebuild_line(struct st *st, const char *line, size_t len, struct st_rebuild *rep)
{
	sqlite3_stmt *s = NULL, *u = NULL;
	const char *op, *res, *tok;
	uint8_t id[CAP_ID_LEN];
	int rc;

	pthread_mutex_lock(&st->mu);
	if ((rc = db_prep(st, "SELECT json_extract(?1, '$.op'), json_extract(?1, '$.resource'),"
	    " json_extract(?1, '$.token'), json_extract(?1, '$.dseq')"
	    " WHERE json_valid(?1) AND json_extract(?1, '$.ev') = 'admin'", &s)) != 0)
		goto out;
	sqlite3_bind_text(s, 1, line, (int)len, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_ROW || sqlite3_column_type(s, 3) != SQLITE_INTEGER)
		goto out;
	op = (const char *)sqlite3_column_text(s, 0);
	res = (const char *)sqlite3_column_text(s, 1);
	tok = (const char *)sqlite3_column_text(s, 2);
	if (op == NULL)
		goto out;
	rep->decisions++;
	if (u64col(s, 3) > rep->dseq)
		rep->dseq = u64col(s, 3);
	if (strcmp(op, "revoke") == 0 && tok != NULL && cap_unhex(tok, id, CAP_ID_LEN) == 0) {
		if ((rc = db_prep(st, "UPDATE tokens SET revoked_at = strftime('%s', 'now')"
		    " WHERE id = ?1 AND revoked_at IS NULL", &u)) != 0)
			goto out;
		sqlite3_bind_blob(u, 1, id, CAP_ID_LEN, SQLITE_STATIC);
		if ((rc = db_err(sqlite3_step(u))) == 0)
			rep->revoked += (size_t)sqlite3_changes(st->db);
	} else if (strcmp(op, "retire-key") == 0 && res != NULL &&
	    cap_unhex(res, id, CAP_KID_LEN) == 0) {
		if ((rc = db_prep(st, "UPDATE keys SET retired_at = strftime('%s', 'now'), signing = 0"
		    " WHERE kid = ?1 AND retired_at IS NULL", &u)) != 0)
			goto out;
		sqlite3_bind_blob(u, 1, id, CAP_KID_LEN, SQLITE_STATIC);
		if ((rc = db_err(sqlite3_step(u))) == 0)
			rep->retired += (size_t)sqlite3_changes(st->db);
	} else if (strcmp(op, "rotate-key") == 0 && res != NULL &&
	    cap_unhex(res, rep->signer, CAP_KID_LEN) == 0) {
		rep->has_signer = true;
	} else if ((strcmp(op, "issue") == 0 || strcmp(op, "approve") == 0) && tok != NULL &&
	    cap_unhex(tok, id, CAP_ID_LEN) == 0 && tm_find(&st->tm, id) == TM_NONE) {
		rep->tokens_unknown++;
	}
out:
	sqlite3_finalize(u);
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* The signing key (the last one rotated to whose secret is here, else the
 * newest secret), the sequence, and a fresh start for the audit head. */
int
st_rebuild_finish(struct st *st, struct st_rebuild *rep)
{
	sqlite3_stmt *s = NULL;
	char path[4200];
	bool in_txn = false;
	int rc;

	pthread_mutex_lock(&st->mu);
	if (rep->has_signer) {
		key_path(st, rep->signer, "key", path, sizeof(path));
		if (access(path, R_OK) != 0)
			rep->has_signer = false;
	}
	if (!rep->has_signer && (rc = db_prep(st, "SELECT kid FROM keys WHERE retired_at IS NULL"
	    " ORDER BY created_at DESC, rowid DESC", &s)) == 0) {
		while (!rep->has_signer && sqlite3_step(s) == SQLITE_ROW) {
			uint8_t kid[CAP_KID_LEN];

			if (!blobcol(s, 0, kid, CAP_KID_LEN))
				continue;
			key_path(st, kid, "key", path, sizeof(path));
			if (access(path, R_OK) == 0) {
				memcpy(rep->signer, kid, CAP_KID_LEN);
				rep->has_signer = true;
			}
		}
		sqlite3_finalize(s);
		s = NULL;
	}
	if (!rep->has_signer) {
		rc = CB_EKEY_FORMAT;
		goto out;
	}
	if ((rc = db_begin(st)) != 0)
		goto out;
	in_txn = true;
	if ((rc = db_exec(st, "UPDATE keys SET signing = 0")) != 0 ||
	    (rc = db_prep(st, "UPDATE keys SET signing = 1, retired_at = NULL WHERE kid = ?1", &s)) != 0)
		goto out;
	sqlite3_bind_blob(s, 1, rep->signer, CAP_KID_LEN, SQLITE_STATIC);
	if ((rc = db_err(sqlite3_step(s))) != 0 ||
	    (rc = meta_set_locked(st, "dseq", rep->dseq)) != 0 ||
	    (rc = db_exec(st, "DELETE FROM audit_head; DELETE FROM last_decision")) != 0)
		goto out;
	in_txn = false;
	if ((rc = db_commit(st)) == 0)
		st->dseq = rep->dseq;
out:
	if (in_txn)
		db_rollback(st);
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* Say what failed and on which file: "keys/ab12.key: No such file". */
static void
open_why(char *why, size_t whylen, const char *what, const char *path, const char *detail)
{
	if (why != NULL && whylen > 0 && why[0] == '\0')
		snprintf(why, whylen, "%s %s: %s", what, path, detail);
}

int
st_open_why(const char *dir, struct st **out, char *why, size_t whylen)
{
	return st_open_flags(dir, ST_MODE_OPEN, out, why, whylen);
}

/* The database on disk: created 0600 before SQLite does (it copies the mode
 * to the -wal and -shm files), WAL, every commit synced. */
static int
open_db_file(struct st *st, const char *dir, char *why, size_t whylen)
{
	char path[4096];
	struct stat sb;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/state.db", dir);
	st->fresh = lstat(path, &sb) != 0 || sb.st_size == 0;
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0) {
		open_why(why, whylen, "database", path, strerror(errno));
		return CB_EIO;
	}
	close(fd);
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX |
	    SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
		open_why(why, whylen, "database", path, st->db ? sqlite3_errmsg(st->db) : "cannot open");
		return CB_EINTERNAL;
	}
	sqlite3_busy_timeout(st->db, 5000);
	if ((rc = db_exec(st, "PRAGMA journal_mode = WAL")) != 0 ||
	    (rc = db_exec(st, "PRAGMA synchronous = FULL")) != 0)
		open_why(why, whylen, "database", path, sqlite3_errmsg(st->db));
	return rc;
}

/* Start the in-memory database from the empty one st-mkimage built with
 * st_schema (state/mkimage.c): running the schema costs every `run` about
 * 0.45 ms of SQL parsing and page writes; loading the image does not (the
 * schema is parsed once, when the first statement needs it).  0, or the
 * SQLite error (the caller runs the schema instead).  Without the image
 * (a build that did not make it, such as the fuzz build) it does nothing. */
static int
load_db_image(struct st *st)
{
#if __has_include("schema_image.h")
#include "schema_image.h"
	unsigned char *p = sqlite3_malloc64(sizeof(st_schema_image));

	if (!p)
		return SQLITE_NOMEM;
	memcpy(p, st_schema_image, sizeof(st_schema_image));
	/* FREEONCLOSE: SQLite owns p from here, even on failure. */
	return sqlite3_deserialize(st->db, "main", p, sizeof(st_schema_image),
	    sizeof(st_schema_image), SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE);
#else
	(void)st;
	return SQLITE_NOTFOUND;
#endif
}

/* An ephemeral state: SQLite in memory (":memory:", private to this
 * connection), so no file, no lock, no journal on disk and no sync. */
static int
open_db_memory(struct st *st, char *why, size_t whylen)
{
	int rc;

	st->fresh = true;
	if (sqlite3_open_v2(":memory:", &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		open_why(why, whylen, "database", ":memory:",
		    st->db ? sqlite3_errmsg(st->db) : "cannot open");
		return CB_EINTERNAL;
	}
	st->from_image = load_db_image(st) == SQLITE_OK;
	if ((rc = db_exec(st, "PRAGMA synchronous = OFF")) != 0)
		open_why(why, whylen, "database", ":memory:", sqlite3_errmsg(st->db));
	return rc;
}

/* Creates DIR and DIR/keys if need be and takes the exclusive lock on
 * DIR/state.lock (kept in ST->lockfd, which st_close() releases). */
static int
lock_dir(struct st *st, const char *dir, char *why, size_t whylen)
{
	char path[4096];
	int rc;

	if ((rc = make_dir(dir)) != 0) {
		open_why(why, whylen, "directory", dir, strerror(errno));
		return rc;
	}
	snprintf(path, sizeof(path), "%s/keys", dir);
	if ((rc = make_dir(path)) != 0) {
		open_why(why, whylen, "directory", path, strerror(errno));
		return rc;
	}
	/* the in-memory index is only right if we are the only writer */
	snprintf(path, sizeof(path), "%s/state.lock", dir);
	if ((st->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0) {
		rc = CB_EIO;
		open_why(why, whylen, "lock file", path, strerror(errno));
		return rc;
	}
	if (flock(st->lockfd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK ? CB_EBUSY : CB_EIO;
		open_why(why, whylen, "lock file", path, rc == CB_EBUSY ?
		    "held by another process (is a broker already running on it?)" : strerror(errno));
		return rc;
	}
	return 0;
}

static int
st_open_flags(const char *dir, int mode, struct st **out, char *why, size_t whylen)
{
	bool rebuild = mode == ST_MODE_REBUILD;
	struct st *st = NULL;
	char path[4096];
	int rc = CB_ENOMEM;

	*out = NULL;
	if (why != NULL && whylen > 0)
		why[0] = '\0';
	if (dir == NULL || strlen(dir) > 3000)
		return CB_EINVAL;
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return CB_ENOMEM;
	st->lockfd = -1;
	st->no_keygen = rebuild;
	st->new_ok = mode == ST_MODE_NEW;
	st->ephemeral = mode == ST_MODE_EPHEMERAL;
	pthread_mutex_init(&st->mu, NULL);
	if ((st->dir = strdup(dir)) == NULL)
		goto out;
	if ((rc = tm_init(&st->tm)) != 0 || (rc = cap_keyring_new(&st->kr)) != 0)
		goto out;
	snprintf(path, sizeof(path), "%s/state.db", dir);
	if ((rc = st_sq_load(why, whylen)) != 0)
		goto out;
	if (st->ephemeral)
		rc = open_db_memory(st, why, whylen);
	else if ((rc = lock_dir(st, dir, why, whylen)) == 0)
		rc = open_db_file(st, dir, why, whylen);
	if (rc != 0)
		goto out;
	/* An image is st_schema already run (the build made it from this very
	 * text): running it again would only parse it. */
	if ((rc = db_exec(st, "PRAGMA foreign_keys = ON")) != 0 ||
	    (!st->from_image && (rc = db_exec(st, st_schema)) != 0)) {
		open_why(why, whylen, "database", path, sqlite3_errmsg(st->db));
		goto out;
	}
	pthread_mutex_lock(&st->mu);
	errno = 0;
	/* a rebuild first takes in every key the directory holds (the log's
	 * checkpoints name them), and loads only public keys */
	if ((mode == ST_MODE_REBUILD || mode == ST_MODE_NEW) && (rc = rebuild_keys_locked(st)) != 0) {
		pthread_mutex_unlock(&st->mu);
		open_why(why, whylen, "keys in", dir, cb_strerror(rc));
		goto out;
	}
	rc = rebuild ? 0 : load_keys(st);
	if (rc != 0 && st->keys_lost)
		open_why(why, whylen, "database", st->errpath, "has no signing key although the audit "
		    "log records a history: it lost decisions (capbroker state rebuild)");
	else if (rc != 0 && st->errpath[0] != '\0')
		open_why(why, whylen, "key file", st->errpath, rc == CB_EIO || rc == CB_ENOENT ?
		    strerror(errno ? errno : ENOENT) : cb_strerror(rc));
	else if (rc != 0)
		open_why(why, whylen, "keys in", path, rc == CB_EINTERNAL || rc == CB_EIO ?
		    sqlite3_errmsg(st->db) : cb_strerror(rc));
	/* An ephemeral database was made empty a moment ago (from the image or
	 * the schema) and nobody else can reach it: no token, no sequence, no
	 * request to read back.  Skipping the reads skips preparing their
	 * statements, most of an ephemeral open's SQL (docs/state.md). */
	if (rc == 0 && !st->ephemeral && (rc = load_tokens(st)) != 0)
		open_why(why, whylen, "tokens in", path, sqlite3_errmsg(st->db));
	if (rc == 0 && !st->ephemeral && ((rc = meta_get_locked(st, "dseq", &st->dseq)) != 0 ||
	    (rc = meta_get_locked(st, "hwm", &st->hwm)) != 0))
		open_why(why, whylen, "database", path, sqlite3_errmsg(st->db));
	if (rc == 0 && !st->ephemeral && (rc = expire_locked(st, st_now(st), NULL)) != 0)
		open_why(why, whylen, "database", path, sqlite3_errmsg(st->db));
	pthread_mutex_unlock(&st->mu);
	if (rc != 0)
		goto out;
	*out = st;
	st = NULL;
out:
	st_close(st);
	return rc;
}

int
st_open(const char *dir, struct st **out)
{
	return st_open_why(dir, out, NULL, 0);
}

void
st_close(struct st *st)
{
	if (st == NULL)
		return;
	if (st->db != NULL)
		sqlite3_close_v2(st->db);
	if (st->lockfd >= 0)
		close(st->lockfd);
	cap_keyring_free(st->kr);
	tm_free(&st->tm);
	pthread_mutex_destroy(&st->mu);
	free(st->dir);
	free(st);
}
