/*
 * audit.h - the append-only, hash-chained, checkpoint-signed audit log
 * (STATE/audit.jsonl).
 *
 * Runs in the broker (trusted).  Record contents come from agents (paths,
 * sandbox ids) and administrators (reasons), so everything written is
 * escaped as JSON strings; nothing an agent sends can end a line or forge a
 * field.  Verification (aud_verify) runs in capctl or the broker and treats
 * the file as hostile.
 *
 * Line format.  One JSON object per line; every line starts with the same
 * fixed prefix so that the chain can be checked without a JSON parser:
 *
 *   {"prev":"<64 hex>","seq":N,"ts":"2026-11-22T13:46:20.123Z","ev":"...",...}
 *
 * prev is BLAKE2b-256 of the previous line's bytes (without its '\n'); the
 * first line (seq 0) has 64 zeros and is the genesis record carrying a
 * random 128-bit log id.  seq counts lines from 0.  ev is one of
 *   genesis     {"log":"<32 hex>","version":1}
 *   checkpoint  {"log":"<32 hex>","kid":"<16 hex>","sig":"<128 hex>"}
 *               Ed25519 (cap_sign, CAP_SIG_DOMAIN_AUDIT) over
 *               log id (16) || seq (8, big endian) || prev (32): it seals
 *               every line before it.  Line 1 is always a checkpoint, so a
 *               log forged without the key never verifies.
 *   open / recover / close   the broker (re)opened, repaired or closed it
 *   op          an operation's decision: sandbox, op, resource, token,
 *               decision ("allow"/"deny"), reason, actor, detail; a
 *               coalesced line adds count, first and last (repeats of the
 *               same decision that were not written one by one)
 *   admin       an administrative action (issue, revoke, request, approve,
 *               deny, expire, kill, sandbox.start, sandbox.stop,
 *               no-landlock ...), same fields
 *
 * Threads.  aud_append() is the hot path: it copies the record into a
 * mutex-protected byte ring (no allocation, no formatting, no system call
 * beyond reading the vDSO clock) and returns.  A writer thread formats the
 * lines, chains the hashes, writes them in batches, fsyncs according to the
 * policy and writes the checkpoints.  A reserver thread keeps disk space
 * allocated ahead of the queue (aud_opts.reserve_bytes), whatever the
 * writer's fsync takes.  Every function here may be called from any
 * thread.
 *
 * Failure is closed and never hangs: once a write or fsync fails, the log
 * is unhealthy for good, aud_append() and aud_flush() return CB_EAUDIT and
 * the broker must deny.  If the ring is full (the disk is slower than the
 * agents), aud_append() waits at most opts.full_wait_ms for the writer and
 * then returns CB_EAUDIT for that record (back-pressure, bounded).
 */
#ifndef CB_AUDIT_H
#define CB_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caps/caps.h"
#include "common/common.h"

#define AUD_LOG_ID_LEN	16
#define AUD_HASH_LEN	32
#define AUD_FIELD_MAX	2048	/* longest JSON form of a string field: a longer one is cut,
				 * ends in "...[cut: N bytes]" and the line says "cut":true */
#define AUD_LINE_MAX	65536	/* longest line aud_verify and aud_open accept */

enum aud_fsync {
	AUD_FSYNC_BATCH,	/* default: fdatasync after each batch the writer writes */
	AUD_FSYNC_ALWAYS,	/* wake the writer for every record and sync it at once */
	AUD_FSYNC_NEVER,	/* leave it to the kernel (aud_flush, checkpoints and close still sync) */
};

/* Called by the writer thread after a checkpoint is on disk, so the broker
 * can record it in the state database (st_set_audit_head) for the
 * truncation check.  Must not call back into this log. */
typedef void aud_checkpoint_fn(void *arg, const uint8_t log_id[AUD_LOG_ID_LEN],
    uint64_t seq, const uint8_t hash[AUD_HASH_LEN]);

/* Signs a checkpoint (CAP_SIG_DOMAIN_AUDIT || msg).  The writer thread
 * calls it, so it must be safe against the broker changing its keyring
 * (st_sign does that under the state lock).  Returns 0 or CB_E*. */
typedef int aud_sign_fn(void *arg, const uint8_t *msg, size_t len, uint8_t sig[64],
    uint8_t kid[CAP_KID_LEN]);

/* What the state database remembers about the log: its id and the last
 * checkpoint (seq of the checkpoint line and the chain hash it sealed,
 * i.e. that line's prev). */
struct aud_head {
	uint8_t log_id[AUD_LOG_ID_LEN];
	uint64_t seq;
	uint8_t hash[AUD_HASH_LEN];
};

struct aud_opts {
	enum aud_fsync fsync;
	unsigned batch_ms;		/* writer wakes at least this often (default 5) */
	unsigned checkpoint_lines;	/* checkpoint after this many lines (default 1000) */
	unsigned checkpoint_ms;		/* ... or this long after the last one (default 10000) */
	size_t ring_bytes;		/* size of the ring (default 4 MiB, min 64 KiB) */
	unsigned full_wait_ms;		/* how long aud_append waits on a full ring (default 200) */
	unsigned flush_wait_ms;		/* how long aud_flush waits (default 5000) */
	size_t reserve_bytes;		/* disk space kept allocated ahead of the records
					 * (default 256 KiB, at least twice the room an
					 * operation needs: 127 KiB) */
	aud_checkpoint_fn *on_checkpoint;
	void *on_checkpoint_arg;
	aud_sign_fn *sign;		/* NULL: cap_sign() on the keyring given to aud_open,
					 * which must then not change while the log is open */
	void *sign_arg;
	uint64_t dseq_base;		/* a new log starts at this decision sequence (the
					 * state's), so its first checkpoint carries it */
	const struct aud_head *expect;	/* the state's memory of the log (st_get_audit_head):
					 * aud_open refuses (CB_EAUDIT) a missing file, one with
					 * another log id, or one that ends before expect->seq,
					 * rather than start a new log over the evidence;
					 * read by aud_open only */
};

/* Zero-filled options mean the defaults above. */
void aud_opts_default(struct aud_opts *o);

enum aud_kind {
	AUD_OP,			/* an agent's operation and its decision */
	AUD_ADMIN,		/* an administrative or lifecycle event */
};

enum aud_decision {
	AUD_NONE,		/* no decision (most admin events) */
	AUD_ALLOW,
	AUD_DENY,
};

/* One record.  Every pointer may be NULL (field omitted); strings are
 * copied during aud_append, so they need live only for the call.  A string
 * whose JSON form is longer than AUD_FIELD_MAX is cut to a prefix ending in
 * "...[cut: N bytes]" (N its whole length; the line then says "cut":true). */
struct aud_rec {
	enum aud_kind kind;
	enum aud_decision decision;
	int reason;			/* CB_E* code written by name; 0: none */
	const char *sandbox;
	const char *op;			/* "fs.read", "issue", "revoke", "approve" ... */
	const char *resource;
	const uint8_t *token_id;	/* CAP_ID_LEN bytes, written as hex; never the token text */
	const char *actor;		/* "uid:1000", "tty", "agent", "broker" */
	const char *detail;		/* free text */
	uint64_t ts_ns;			/* wall clock in ns since the epoch; 0: now */
	/* A coalesced line (docs/audit.md): count > 0 says the line stands
	 * for count identical decisions that were not written one by one,
	 * the first at first_ns and the last at last_ns (wall clock). */
	uint64_t count;
	uint64_t first_ns, last_ns;
	uint64_t dseq;			/* an administrative decision's sequence in the
					 * state (st_dseq); 0: not a decision */
};

struct aud_log;

/* Open (creating if needed, mode 0600) the log at path and start the writer.
 * A new log gets a genesis record and a signed checkpoint, fsynced before
 * this returns.  An existing log's chain head is recovered from its last
 * complete line; a torn last line (a crash mid-write) is cut off and a
 * "recover" record says how many bytes were dropped.  The keyring (or
 * opts->sign) signs the checkpoints; it is borrowed and must outlive the
 * log.  Each checkpoint names its key id, so the key may rotate.
 * Errors: CB_EIO (errno), CB_EAUDIT (existing file is not a log we can
 * continue: first or last line malformed, or not the log opts->expect
 * describes), CB_EBUSY (another process holds
 * the log: it is locked with flock), CB_ENOMEM, CB_EINVAL, or what signing
 * the first checkpoint returned. */
int aud_open(const char *path, const struct cap_keyring *kr, const struct aud_opts *opts,
    struct aud_log **out) CB_WARN_UNUSED;

/* Queue one record.  Hot path: a bounded copy under a mutex.
 * CB_EAUDIT when the log has failed or the ring stayed full for
 * full_wait_ms; CB_EINVAL on a NULL log or record. */
int aud_append(struct aud_log *log, const struct aud_rec *r) CB_WARN_UNUSED;

/* The bytes r's line takes in the log, at most (its strings cut as
 * aud_append cuts them; the sequence number counted at its widest): what
 * the broker charges to the audit budget of the sandbox that caused it. */
size_t aud_rec_cost(const struct aud_rec *r);

/* Convenience for administrative events: kind AUD_ADMIN, no decision. */
int aud_admin(struct aud_log *log, const char *op, const char *sandbox, const char *actor,
    const uint8_t *token_id, const char *detail) CB_WARN_UNUSED;

/* Block until every record appended before the call is written and
 * fsynced.  Call before acknowledging a revocation or an approval.
 * CB_EAUDIT if the log failed, CB_ETIMEDOUT after flush_wait_ms. */
int aud_flush(struct aud_log *log) CB_WARN_UNUSED;

/* Write a checkpoint now (after everything appended so far) and wait for it
 * to be on disk.  Same errors as aud_flush. */
int aud_checkpoint(struct aud_log *log) CB_WARN_UNUSED;

/* false once the log cannot be written; the broker denies from then on. */
bool aud_healthy(const struct aud_log *log);

/* Healthy and with room reserved for more records: an operation may act
 * (its record will fit).  See aud_opts.reserve_bytes. */
bool aud_room(const struct aud_log *log);
/* aud_room, waiting up to wait_ms (not full_wait_ms) for the reserver to
 * make room: for threads that are not the broker's loop, which may be slow
 * rather than refuse when the disk is only busy. */
bool aud_room_wait(const struct aud_log *log, unsigned wait_ms);

/* The last decision sequence the log held when it was opened (the dseq
 * of its last line that carries one; 0 if none): the broker compares it
 * with the state's at start. */
uint64_t aud_open_dseq(const struct aud_log *log);

/* errno of the failure that made the log unhealthy (0 if healthy). */
int aud_errno(const struct aud_log *log);

/* The log id (from its genesis record). */
void aud_log_id(const struct aud_log *log, uint8_t id[AUD_LOG_ID_LEN]);

/* Records appended, records written, lines in the file. */
struct aud_stats {
	uint64_t appended;
	uint64_t written;
	uint64_t dropped;	/* appends refused (ring full or failed) */
	uint64_t lines;		/* next seq */
	uint64_t checkpoints;
};
void aud_stats(const struct aud_log *log, struct aud_stats *st);

/* Write the remaining records and a final "close" record and checkpoint,
 * stop the writer and free.  Returns the first error the log met (0 if it
 * stayed healthy); the log is freed in every case.  NULL is fine. */
int aud_close(struct aud_log *log);

/* ---- verification -------------------------------------------------- */

enum aud_problem {
	AUD_P_NONE,
	AUD_P_MALFORMED,	/* a line lacks the fixed prefix or is too long */
	AUD_P_EDITED,		/* a line's bytes changed (next line's prev does not match) */
	AUD_P_REMOVED,		/* lines missing (a gap in seq) */
	AUD_P_INSERTED,		/* extra lines (chain resumes after them) */
	AUD_P_REORDERED,	/* lines out of order */
	AUD_P_BADSIG,		/* checkpoint signature fails or its key is unknown */
	AUD_P_NOSEAL,		/* line 1 is not a valid checkpoint: forged or replaced */
	AUD_P_REPLACED,		/* log id differs from the one the state remembers */
	AUD_P_TRUNCATED,	/* file ends before the last remembered checkpoint */
	AUD_P_MISMATCH,		/* remembered checkpoint not found at its seq */
	AUD_P_TORN,		/* last line incomplete (crash); not tampering by itself */
	AUD_P_BEHIND,		/* the state lacks decisions the log records (rolled back) */
};

struct aud_report {
	enum aud_problem problem;
	uint64_t line;		/* 1-based line where the problem shows (0: whole file) */
	uint64_t lines;		/* complete lines read */
	uint64_t checkpoints;	/* valid checkpoints seen */
	uint64_t last_checkpoint; /* seq of the last valid checkpoint */
	uint64_t unsealed;	/* lines after the last valid checkpoint */
	uint8_t log_id[AUD_LOG_ID_LEN];
	char what[256];		/* one sentence: what and where */
};

/* Verify the log at path: the chain, the sequence numbers, every
 * checkpoint signature (with kr), the genesis seal, and, with expect
 * (from st_get_audit_head; NULL to skip), the log id and that the
 * remembered checkpoint is still there.  Stops at the first problem.
 * Returns 0 if intact, CB_EAUDIT if not (report says what and where),
 * CB_EIO/CB_ENOENT if the file cannot be read.  report may be NULL. */
int aud_verify(const char *path, const struct cap_keyring *kr, const struct aud_head *expect,
    struct aud_report *report) CB_WARN_UNUSED;

/* The same, and also check that the log records no decision beyond
 * state_dseq, the state's decision sequence (st_dseq): AUD_P_BEHIND names
 * the line of the first decision the state lacks. */
int aud_verify_state(const char *path, const struct cap_keyring *kr, const struct aud_head *expect,
    uint64_t state_dseq, struct aud_report *report) CB_WARN_UNUSED;

const char *aud_problem_name(enum aud_problem p);

/* ---- following ----------------------------------------------------- */

/* Tail a log for `capctl audit --follow`: complete lines only, in order,
 * as they are written by another process.  aud_follow_fd() is an inotify
 * descriptor readable when the file changed, for an event loop; or just
 * call aud_follow_next() with a timeout. */
struct aud_follow;

/* from_start: every line from the beginning; otherwise only new ones. */
int aud_follow_open(const char *path, bool from_start, struct aud_follow **out) CB_WARN_UNUSED;
/* Next line (without '\n'), valid until the next call.  CB_ETIMEDOUT if none
 * arrived within timeout_ms (-1: wait forever), CB_EIO on error. */
int aud_follow_next(struct aud_follow *f, int timeout_ms, const char **line, size_t *len) CB_WARN_UNUSED;
int aud_follow_fd(const struct aud_follow *f);
void aud_follow_free(struct aud_follow *f);

#endif
