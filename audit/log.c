/*
 * log.c - the audit log writer: a byte ring filled by aud_append() on the
 * broker's hot path and drained by one writer thread that formats JSON
 * lines, chains BLAKE2b hashes, writes in batches, fsyncs and signs
 * checkpoints.  Trusted (broker).  Strings in records come from agents and
 * administrators; they are escaped here and can never end a line.
 *
 * Locking: one mutex guards the ring indices, counters and flags.  A
 * producer copies its record under the mutex (a few hundred bytes); the
 * writer only holds it to take a snapshot of [tail, head) and to publish
 * its progress, and formats and writes without it, so producers never wait
 * for the disk unless the ring is full.  A second thread, the reserver,
 * keeps disk space allocated ahead of the queue (the reserve): it too
 * calls fallocate without the mutex, so neither thread waits for the
 * other's system calls (the writer may wait seconds in fdatasync).
 */
#include "audit/audit.h"
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "audit/audit_int.h"

/* Record kinds in the ring beyond the public ones. */
enum {
	K_OP = AUD_OP,
	K_ADMIN = AUD_ADMIN,
	K_OPEN = 10,		/* the broker opened an existing log */
	K_RECOVER,		/* a torn line was cut (detail says how much) */
	K_CLOSE,		/* the broker closed the log */
	K_CHECKPOINT,		/* request: a checkpoint after what precedes */
};

#define NSTR 5			/* sandbox, op, resource, actor, detail */
/* A record's line beyond its strings (prefix, token, decision, reason,
 * sequence, count): also the most a checkpoint line takes. */
#define AUD_REC_FIXED	512
/* The longest line of a record: each string's JSON form is cut to
 * AUD_FIELD_MAX (field_plan), 10,752 bytes in all. */
#define AUD_REC_MAX	(AUD_REC_FIXED + NSTR * AUD_FIELD_MAX)
/* The room an operation needs before it may act (aud_room).  Checking it
 * takes nothing: an operation's line is appended after it acted, so the
 * room must hold the lines of every operation that checked and has not
 * appended yet (the loop's, and those of each served tree's thread,
 * queued for the loop) and a checkpoint.  Six worst-case lines, about a
 * hundred ordinary ones (each counts AUD_REC_FIXED and its strings, some
 * 600 bytes for a served open).  It once read 2 x 512 + 6 x 5 x 2048 and
 * was called one worst-case record: the 6 was the JSON escape of every
 * byte, from before a field was cut by its JSON form. */
#define AUD_ROOM_LINES	6
#define AUD_ROOM_MIN	(AUD_REC_FIXED + AUD_ROOM_LINES * AUD_REC_MAX)
#define RING_ALIGN 8
#define JSON_ESC_MAX 16		/* one escape (a surrogate pair: 12) and a NUL */
#define OUTBUF_FLUSH (256 * 1024)

/* One record in the ring, followed by its strings (not NUL-terminated). */
struct slot {
	uint32_t size;		/* whole slot, aligned; 0: wrap to the ring start */
	uint8_t kind;
	uint8_t decision;
	uint8_t has_token;
	uint8_t cut;
	int32_t reason;
	uint32_t est;		/* upper bound of its formatted line (the reserve) */
	uint64_t ts_ns;
	uint64_t count;		/* coalesced repeats (0: an ordinary line) */
	uint64_t first_ns, last_ns;
	uint64_t dseq;
	uint8_t token[CAP_ID_LEN];
	uint16_t len[NSTR];
	uint16_t present;	/* bit i: string i was given */
	uint32_t pad2;
};

struct aud_log {
	int fd;
	const struct cap_keyring *kr;
	struct aud_opts o;
	uint8_t log_id[AUD_LOG_ID_LEN];

	pthread_mutex_t mu;
	pthread_cond_t work;	/* writer waits: records, flush, stop */
	pthread_cond_t space;	/* producers wait: room in the ring */
	pthread_cond_t done;	/* flushers wait: durable progress */
	pthread_cond_t grow;	/* the reserver waits: the reserve is short, stop */
	pthread_t thread;
	bool thread_started;
	pthread_t reserver;
	bool reserver_started;

	uint8_t *ring;
	size_t cap;
	uint64_t head, tail;	/* byte positions, only grow */
	uint64_t appended;	/* entries queued (records and markers) */
	uint64_t processed;	/* entries the writer has written */
	uint64_t durable;	/* entries written and fsynced */
	uint64_t flush_want;	/* a flusher waits for durable >= this */
	uint64_t dropped;
	uint64_t pub_seq, pub_checkpoints;	/* the writer's counters, published */
	/* The reserve: space allocated ahead (fallocate, KEEP_SIZE) so that a
	 * record accepted is a record written, whatever else fills the disk. */
	bool reserving;		/* fallocate works here */
	bool disk_full;		/* the last extension got nothing */
	bool reserver_idle;	/* the reserver waits for a short reserve */
	bool reserver_stop;	/* aud_close: the reserver ends */
	uint64_t alloc_end;	/* file offset allocated up to */
	uint64_t pub_size;	/* bytes in the file (published by the writer) */
	uint64_t est_pushed, est_done;	/* estimates of records queued / written */
	bool writer_idle;	/* writer waits with an empty ring */
	bool stopping;
	atomic_bool failed;
	int err;		/* errno of the failure */

	/* writer-thread state (no lock needed) */
	uint8_t chain[AUD_HASH_LEN];	/* hash of the last line written */
	uint64_t seq;		/* seq of the next line */
	uint64_t since_cp;	/* lines since the last checkpoint */
	uint64_t cp_mono;	/* when the last checkpoint was written */
	uint64_t dseq;		/* last decision sequence written */
	uint64_t open_dseq;	/* ... when the log was opened */
	uint64_t checkpoints;
	uint64_t cp_seq;	/* last checkpoint, for the callback */
	uint8_t cp_hash[AUD_HASH_LEN];
	bool cp_pending;	/* a checkpoint awaits fsync and callback */
	uint64_t size;		/* bytes in the file */
	char *out;		/* output buffer */
	size_t out_len, out_cap;
	char *line;		/* one line being built */
	size_t line_len;
};

void
aud_opts_default(struct aud_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->fsync = AUD_FSYNC_BATCH;
	o->batch_ms = 5;
	o->checkpoint_lines = 1000;
	o->checkpoint_ms = 10000;
	o->ring_bytes = 4u << 20;
	o->full_wait_ms = 200;
	o->flush_wait_ms = 5000;
	o->reserve_bytes = 256 * 1024;
}

static void
fill_opts(struct aud_opts *o, const struct aud_opts *in)
{
	struct aud_opts d;

	aud_opts_default(&d);
	if (in == NULL) {
		*o = d;
		return;
	}
	*o = *in;
	if (o->batch_ms == 0)
		o->batch_ms = d.batch_ms;
	if (o->checkpoint_lines == 0)
		o->checkpoint_lines = d.checkpoint_lines;
	if (o->checkpoint_ms == 0)
		o->checkpoint_ms = d.checkpoint_ms;
	if (o->ring_bytes == 0)
		o->ring_bytes = d.ring_bytes;
	if (o->ring_bytes < 64 * 1024)
		o->ring_bytes = 64 * 1024;
	o->ring_bytes &= ~(size_t)(RING_ALIGN - 1);
	if (o->full_wait_ms == 0)
		o->full_wait_ms = d.full_wait_ms;
	if (o->flush_wait_ms == 0)
		o->flush_wait_ms = d.flush_wait_ms;
	if (o->reserve_bytes == 0)
		o->reserve_bytes = d.reserve_bytes;
	if (o->reserve_bytes < 2 * AUD_ROOM_MIN)
		o->reserve_bytes = 2 * AUD_ROOM_MIN;
}

static uint64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Absolute CLOCK_MONOTONIC deadline ms from now (the conds use it). */
static struct timespec
deadline_ms(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static struct timespec
mono_to_ts(uint64_t ns)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	return ts;
}

static void
set_failed(struct aud_log *l, int e)
{
	/* called with mu held */
	if (!atomic_load(&l->failed)) {
		l->err = e ? e : EIO;
		atomic_store(&l->failed, true);
	}
	pthread_cond_broadcast(&l->done);
	pthread_cond_broadcast(&l->space);
}

/* ---- the reserve --------------------------------------------------- */

/* Bytes allocated ahead and not yet promised to a queued record (mu held). */
static uint64_t
reserve_left(const struct aud_log *l)
{
	uint64_t used = l->pub_size + (l->est_pushed - l->est_done);

	return l->alloc_end > used ? l->alloc_end - used : 0;
}

/* Where and how much to extend the reserve (mu held), false if it need
 * not grow: opts.reserve_bytes beyond what is written and queued, or as
 * much again as the queue when producers are in a burst (so they seldom
 * wait for an extension); asked for once less than half of it is left.
 * After the disk said no, anything short of a whole reserve is asked for
 * (the retries twice a second), and a reserve whole again (the records
 * written took less than their estimates) ends the disk-full state. */
static bool
reserve_want(struct aud_log *l, uint64_t *fromp, uint64_t *lenp)
{
	uint64_t queued = l->est_pushed - l->est_done, used = l->pub_size + queued;
	uint64_t want = used + (queued > l->o.reserve_bytes ? queued : l->o.reserve_bytes);
	uint64_t from = l->alloc_end > l->pub_size ? l->alloc_end : l->pub_size;

	if (!l->reserving)
		return false;
	if (l->disk_full && from >= want) {
		l->disk_full = false;
		pthread_cond_broadcast(&l->space);
		return false;
	}
	if (from >= want - (l->disk_full ? 0 : l->o.reserve_bytes / 2))
		return false;
	*fromp = from;
	*lenp = want - from < 4096 ? 4096 : want - from;
	return true;
}

/* Allocate [from, from + len) ahead with fallocate, KEEP_SIZE (the file's
 * size does not change, the blocks are ours); called without the mutex.
 * When the disk cannot give it all, take what it can in halves; when it
 * gives nothing, the reserve shrinks as records use it and aud_room()
 * turns false: operations are refused before they act.  Ranges that
 * overlap one another or what the writer wrote meanwhile are harmless
 * (alloc_end takes the larger end). */
static void
reserve_extend(struct aud_log *l, uint64_t from, uint64_t len)
{
	for (; len >= 4096; len /= 2) {
		if (fallocate(l->fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)len) == 0) {
			pthread_mutex_lock(&l->mu);
			if (from + len > l->alloc_end)
				l->alloc_end = from + len;
			l->disk_full = false;
			pthread_cond_broadcast(&l->space);
			pthread_mutex_unlock(&l->mu);
			return;
		}
		if (errno == EOPNOTSUPP || errno == ENOSYS) {
			/* a file system without fallocate: no reserve, and say so
			 * in the docs; the log still fails closed on ENOSPC */
			pthread_mutex_lock(&l->mu);
			l->reserving = false;
			pthread_cond_broadcast(&l->space);
			pthread_mutex_unlock(&l->mu);
			return;
		}
	}
	pthread_mutex_lock(&l->mu);
	l->disk_full = true;
	pthread_cond_broadcast(&l->space);
	pthread_mutex_unlock(&l->mu);
}

/* The reserver thread.  The reserve used to be extended by the writer
 * between its writes, and the writer waits in fdatasync, seconds on a
 * busy disk: a burst used the reserve up meanwhile and operations were
 * refused on a disk with plenty of room.  This thread is woken when less
 * than half of the reserve is left (push, aud_room_wait, ring_room) and
 * extends it whatever the writer is doing; after the disk said no it
 * looks again twice a second, so operations resume by themselves when
 * space returns. */
static void *
reserver_main(void *arg)
{
	struct aud_log *l = arg;
	uint64_t from = 0, len = 0;
	bool due = true;	/* a retry on a full disk is due */

	pthread_mutex_lock(&l->mu);
	while (!l->reserver_stop && l->reserving) {
		struct timespec dl;

		if ((due || !l->disk_full) && reserve_want(l, &from, &len)) {
			pthread_mutex_unlock(&l->mu);
			reserve_extend(l, from, len);
			pthread_mutex_lock(&l->mu);
			due = false;
			continue;
		}
		l->reserver_idle = true;
		if (l->disk_full) {
			dl = deadline_ms(500);
			due = pthread_cond_timedwait(&l->grow, &l->mu, &dl) == ETIMEDOUT;
		} else {
			pthread_cond_wait(&l->grow, &l->mu);
		}
		l->reserver_idle = false;
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* Wake the reserver if the reserve is short and the disk has not said no
 * (mu held).  Cheap when it need not: producers call it for every record. */
static void
reserve_poke(struct aud_log *l)
{
	if (l->reserver_idle && !l->disk_full && reserve_left(l) < l->o.reserve_bytes / 2)
		pthread_cond_signal(&l->grow);
}

/* ---- producers ----------------------------------------------------- */

static size_t utf8_seq(const unsigned char *s, size_t n);
static uint32_t utf8_cp(const unsigned char *s, size_t k);
static size_t json_piece(const unsigned char *u, size_t n, size_t i, char esc[JSON_ESC_MAX],
    const char **out, size_t *in);

/* The longest prefix of s (n bytes) whose JSON form takes at most max
 * bytes, never ending inside a character or an escape: its length in
 * bytes, and the length of its JSON form in *jlen. */
static size_t
json_fit(const char *s, size_t n, size_t max, size_t *jlen)
{
	const unsigned char *u = (const unsigned char *)s;
	char esc[JSON_ESC_MAX];
	const char *out;
	size_t i = 0, j = 0, in, k;

	while (i < n) {
		k = json_piece(u, n, i, esc, &out, &in);
		if (j + k > max) {
			if (out != esc) {
				/* a plain run: as much of it as fits */
				i += max - j;
				j = max;
			}
			break;
		}
		j += k;
		i += in;
	}
	*jlen = j;
	return i;
}

/* What of string s is kept in a line: a string whose JSON form would take
 * more than AUD_FIELD_MAX bytes is cut to a prefix that ends in a marker
 * saying how long it was ("...[cut: 5000 bytes]"), and the line then says
 * "cut":true.  So however long the paths or texts an agent sends, one
 * line stays below AUD_REC_FIXED + NSTR x AUD_FIELD_MAX bytes. */
struct aud_field {
	size_t keep;		/* bytes of s kept */
	size_t json;		/* bytes of the kept prefix's JSON form */
	size_t mlen;		/* bytes of the marker after it (0: not cut) */
	char mark[48];
};

static void
field_plan(const char *s, struct aud_field *f)
{
	size_t n;

	memset(f, 0, sizeof(*f));
	if (s == NULL)
		return;
	n = strlen(s);
	f->keep = json_fit(s, n, AUD_FIELD_MAX, &f->json);
	if (f->keep == n)
		return;
	f->mlen = (size_t)snprintf(f->mark, sizeof(f->mark), "...[cut: %zu bytes]", n);
	f->keep = json_fit(s, f->keep, AUD_FIELD_MAX - f->mlen, &f->json);
}

/* Decimal digits of v. */
static size_t
digits(uint64_t v)
{
	size_t n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

size_t
aud_rec_cost(const struct aud_rec *r)
{
	static const char *const names[NSTR] = { "sandbox", "op", "resource", "actor", "detail" };
	const char *strs[NSTR];
	struct aud_field f;
	size_t n;
	bool cut = false;

	if (r == NULL)
		return 0;
	strs[0] = r->sandbox;
	strs[1] = r->op;
	strs[2] = r->resource;
	strs[3] = r->actor;
	strs[4] = r->detail;
	/* {"prev":"<64 hex>","seq":<at most 20 digits>,"ts":"<24>","ev":"admin"} and a newline */
	n = sizeof("{\"prev\":\"\",\"seq\":,\"ts\":\"\",\"ev\":\"admin\"}\n") - 1 +
	    2 * AUD_HASH_LEN + 20 + AUD_TS_LEN;
	for (size_t i = 0; i < NSTR; i++) {
		if (strs[i] == NULL)
			continue;
		field_plan(strs[i], &f);
		cut |= f.mlen != 0;
		n += sizeof(",\"\":\"\"") - 1 + strlen(names[i]) + f.json + f.mlen;
	}
	if (r->token_id != NULL)
		n += sizeof(",\"token\":\"\"") - 1 + 2 * CAP_ID_LEN;
	if (r->decision != AUD_NONE)
		n += sizeof(",\"decision\":\"allow\"") - 1;
	if (r->reason != 0)
		n += sizeof(",\"reason\":\"\"") - 1 + strlen(cb_errname(r->reason));
	if (r->count != 0)
		n += sizeof(",\"count\":,\"first\":\"\",\"last\":\"\"") - 1 + digits(r->count) +
		    2 * AUD_TS_LEN;
	if (r->dseq != 0)
		n += sizeof(",\"dseq\":") - 1 + digits(r->dseq);
	if (cut)
		n += sizeof(",\"cut\":true") - 1;
	return n;
}

/* Fill slot s for record r (kind, fixed fields, string lengths) and plan
 * each string's kept prefix in f; returns the slot's size in the ring. */
static size_t
slot_plan(int kind, const struct aud_rec *r, const char *strs[NSTR], struct aud_field f[NSTR],
    size_t lens[NSTR], struct slot *s)
{
	size_t need, i;
	bool cut = false;

	memset(s, 0, sizeof(*s));
	if (r != NULL) {
		strs[0] = r->sandbox;
		strs[1] = r->op;
		strs[2] = r->resource;
		strs[3] = r->actor;
		strs[4] = r->detail;
		s->decision = (uint8_t)r->decision;
		s->reason = r->reason;
		s->ts_ns = r->ts_ns;
		s->count = r->count;
		s->first_ns = r->first_ns;
		s->last_ns = r->last_ns;
		s->dseq = r->dseq;
		if (r->token_id != NULL) {
			s->has_token = 1;
			memcpy(s->token, r->token_id, CAP_ID_LEN);
		}
	}
	if (s->ts_ns == 0)
		s->ts_ns = wall_ns();
	s->kind = (uint8_t)kind;
	need = sizeof(*s);
	/* an upper bound of the line: the JSON form of each string (at most
	 * AUD_FIELD_MAX, field_plan); the fixed fields, a token, a reason and
	 * a sequence fit in the rest */
	s->est = AUD_REC_FIXED;
	for (i = 0; i < NSTR; i++) {
		field_plan(strs[i], &f[i]);
		lens[i] = f[i].keep + f[i].mlen;
		cut |= f[i].mlen != 0;
		if (strs[i] != NULL)
			s->present |= (uint16_t)(1u << i);
		s->len[i] = (uint16_t)lens[i];
		need += lens[i];
		s->est += (uint32_t)(f[i].json + f[i].mlen);
	}
	s->cut = cut;
	need = (need + RING_ALIGN - 1) & ~(size_t)(RING_ALIGN - 1);
	s->size = (uint32_t)need;
	return need;
}

/* Wait, bounded and under l->mu, until the ring has need bytes for a slot
 * whose line is at most est bytes; on success *offp is where the slot goes
 * and *room_endp how much of the ring is left after it (no wrap yet). */
static int
ring_room(struct aud_log *l, uint32_t est, size_t need, size_t *offp, size_t *room_endp)
{
	size_t off, room_end;
	bool waited = false;
	struct timespec dl;

	for (;;) {
		size_t used, extra;

		if (atomic_load(&l->failed) || l->stopping)
			return CB_EAUDIT;
		/* no room reserved for it: refused now rather than lost later
		 * to ENOSPC (the operations that need it checked aud_room).  While
		 * the disk has room the reserver extends the reserve: wait for it,
		 * bounded; once the disk said no, refuse at once (the hot path
		 * must not stall on every denial of a full disk). */
		if (l->reserving && reserve_left(l) < est) {
			if (waited || l->disk_full)
				return CB_EAUDIT;
			reserve_poke(l);
			dl = deadline_ms(l->o.full_wait_ms);
			while (pthread_cond_timedwait(&l->space, &l->mu, &dl) == 0)
				if (atomic_load(&l->failed) || l->disk_full || !l->reserving ||
				    reserve_left(l) >= est)
					break;
			waited = true;
			continue;
		}
		off = (size_t)(l->head % l->cap);
		room_end = l->cap - off;
		/* a slot never wraps: skip the rest of the ring if it does not fit */
		extra = room_end < need ? room_end : 0;
		used = (size_t)(l->head - l->tail);
		if (l->cap - used >= need + extra)
			break;
		if (waited)
			return CB_EAUDIT;
		/* Back-pressure: the disk is behind.  Wake the writer and wait,
		 * bounded, then give up on this record (the caller denies). */
		pthread_cond_signal(&l->work);
		dl = deadline_ms(l->o.full_wait_ms);
		while (pthread_cond_timedwait(&l->space, &l->mu, &dl) == 0) {
			if (atomic_load(&l->failed) ||
			    l->cap - (size_t)(l->head - l->tail) >= need + extra)
				break;
		}
		waited = true;
	}
	*offp = off;
	*room_endp = room_end;
	return 0;
}

/* Queue one entry.  The copy happens under the mutex; see the file comment. */
static int
push(struct aud_log *l, int kind, const struct aud_rec *r)
{
	const char *strs[NSTR] = { NULL };
	size_t lens[NSTR] = { 0 };
	struct aud_field f[NSTR];
	struct slot s;
	size_t need, off = 0, room_end = 0, i;
	int rc;
	uint8_t *p;

	need = slot_plan(kind, r, strs, f, lens, &s);

	pthread_mutex_lock(&l->mu);
	if ((rc = ring_room(l, s.est, need, &off, &room_end)) != 0)
		goto out;
	if (room_end < need) {
		/* wrap marker: size 0 tells the writer to skip to the start */
		if (room_end >= sizeof(uint32_t))
			memset(l->ring + off, 0, sizeof(uint32_t));
		l->head += room_end;
		off = 0;
	}
	p = l->ring + off;
	memcpy(p, &s, sizeof(s));
	p += sizeof(s);
	for (i = 0; i < NSTR; i++) {
		if (f[i].keep > 0)
			memcpy(p, strs[i], f[i].keep);
		if (f[i].mlen > 0)
			memcpy(p + f[i].keep, f[i].mark, f[i].mlen);
		p += lens[i];
	}
	l->head += need;
	l->appended++;
	l->est_pushed += s.est;
	/* Wake the writer only when it sleeps on an empty ring (at most once a
	 * batch), when every record must be synced, or when the ring fills;
	 * the reserver when less than half of the reserve is left. */
	if (l->writer_idle || l->o.fsync == AUD_FSYNC_ALWAYS ||
	    (size_t)(l->head - l->tail) > l->cap / 2 || kind == K_CHECKPOINT)
		pthread_cond_signal(&l->work);
	if (l->reserving)
		reserve_poke(l);
out:
	if (rc != 0)
		l->dropped++;
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int
aud_append(struct aud_log *log, const struct aud_rec *r)
{
	if (log == NULL || r == NULL)
		return CB_EINVAL;
	/* fail closed without taking the lock once the log is broken */
	if (atomic_load_explicit(&log->failed, memory_order_relaxed))
		return CB_EAUDIT;
	return push(log, r->kind == AUD_ADMIN ? K_ADMIN : K_OP, r);
}

int
aud_admin(struct aud_log *log, const char *op, const char *sandbox, const char *actor,
    const uint8_t *token_id, const char *detail)
{
	struct aud_rec r;

	memset(&r, 0, sizeof(r));
	r.kind = AUD_ADMIN;
	r.op = op;
	r.sandbox = sandbox;
	r.actor = actor;
	r.token_id = token_id;
	r.detail = detail;
	return aud_append(log, &r);
}

/* Wait until every entry queued so far is durable. */
static int
wait_durable(struct aud_log *l)
{
	struct timespec dl = deadline_ms(l->o.flush_wait_ms);
	uint64_t target;
	int rc = 0;

	pthread_mutex_lock(&l->mu);
	target = l->appended;
	if (target > l->flush_want)
		l->flush_want = target;
	pthread_cond_signal(&l->work);
	while (l->durable < target && !atomic_load(&l->failed)) {
		if (pthread_cond_timedwait(&l->done, &l->mu, &dl) == ETIMEDOUT) {
			rc = CB_ETIMEDOUT;
			break;
		}
	}
	if (rc == 0 && l->durable < target)
		rc = CB_EAUDIT;
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int
aud_flush(struct aud_log *log)
{
	if (log == NULL)
		return CB_EINVAL;
	if (atomic_load(&log->failed))
		return CB_EAUDIT;
	return wait_durable(log);
}

int
aud_checkpoint(struct aud_log *log)
{
	int rc;

	if (log == NULL)
		return CB_EINVAL;
	if ((rc = push(log, K_CHECKPOINT, NULL)) != 0)
		return rc;
	return wait_durable(log);
}

bool
aud_healthy(const struct aud_log *log)
{
	return log != NULL && !atomic_load(&log->failed);
}

bool
aud_room(const struct aud_log *log)
{
	return log != NULL && aud_room_wait(log, log->o.full_wait_ms);
}

bool
aud_room_wait(const struct aud_log *log, unsigned wait_ms)
{
	struct aud_log *l = (struct aud_log *)log;	/* the mutex, not the data */
	bool ok;

	if (!aud_healthy(log))
		return false;
	/* Once the disk refused to extend the reserve, no new operation until
	 * it extends again: what remains is for the records of what was
	 * already done (and the denials), and an operation allowed between two
	 * denials would only make a full disk harder to see. */
	pthread_mutex_lock(&l->mu);
	ok = !l->reserving || (!l->disk_full && reserve_left(l) >= AUD_ROOM_MIN);
	if (!ok && !l->disk_full && !atomic_load(&l->failed)) {
		/* Short only because producers outran the reserver (a burst
		 * from many sandboxes), not because the disk said no: wake it
		 * and wait for it, bounded, as aud_append does, rather than
		 * refuse an operation on a disk with room. */
		struct timespec dl = deadline_ms(wait_ms);

		reserve_poke(l);
		while (l->reserving && reserve_left(l) < AUD_ROOM_MIN && !l->disk_full &&
		    !atomic_load(&l->failed) && pthread_cond_timedwait(&l->space, &l->mu, &dl) == 0)
			;
		ok = (!l->reserving || (reserve_left(l) >= AUD_ROOM_MIN && !l->disk_full)) &&
		    !atomic_load(&l->failed);
	}
	pthread_mutex_unlock(&l->mu);
	return ok;
}

uint64_t
aud_open_dseq(const struct aud_log *log)
{
	return log->open_dseq;
}

int
aud_errno(const struct aud_log *log)
{
	return atomic_load(&log->failed) ? log->err : 0;
}

void
aud_log_id(const struct aud_log *log, uint8_t id[AUD_LOG_ID_LEN])
{
	memcpy(id, log->log_id, AUD_LOG_ID_LEN);
}

void
aud_stats(const struct aud_log *log, struct aud_stats *st)
{
	struct aud_log *l = (struct aud_log *)log;	/* the mutex, not the data */

	pthread_mutex_lock(&l->mu);
	st->appended = l->appended;
	st->written = l->processed;
	st->dropped = l->dropped;
	st->lines = l->pub_seq;
	st->checkpoints = l->pub_checkpoints;
	pthread_mutex_unlock(&l->mu);
}

/* ---- formatting (writer thread) ------------------------------------ */

static void
lput(struct aud_log *l, const char *s, size_t n)
{
	/* the line buffer is sized for the longest possible line */
	memcpy(l->line + l->line_len, s, n);
	l->line_len += n;
}

static void
lputs(struct aud_log *l, const char *s)
{
	lput(l, s, strlen(s));
}

/* Length of a valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t
utf8_seq(const unsigned char *s, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
	} else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and beyond U+10FFFF are invalid */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* The code point of the valid UTF-8 sequence s of k bytes. */
static uint32_t
utf8_cp(const unsigned char *s, size_t k)
{
	uint32_t cp = k == 2 ? s[0] & 0x1fu : k == 3 ? s[0] & 0x0fu : s[0] & 0x07u;

	for (size_t i = 1; i < k; i++)
		cp = cp << 6 | (s[i] & 0x3fu);
	return cp;
}

/* One piece of the JSON form of s (n bytes) at i: a run of characters
 * that need nothing (returned in place) or one escape (written to esc).
 * *in gets the input bytes the piece stands for; returns its length.
 * Quotes, backslashes and control characters are escaped; a byte that is
 * not valid UTF-8 becomes \udcXX (Python's surrogateescape), so a hostile
 * path is kept exactly yet the line stays valid, single-line JSON.  Every
 * code point the one escaper for people (cb_text_invisible: C1, bidi
 * controls, zero-width and other invisible format characters, tags) is
 * written as a \u escape, above U+FFFF as a surrogate pair: the text is
 * the same to a JSON reader, and a person reading the log with cat or grep
 * sees it rather than being misled.  The one walk behind json_str,
 * json_fit and so the line bound (AUD_FIELD_MAX) and its cost. */
static size_t
json_piece(const unsigned char *u, size_t n, size_t i, char esc[JSON_ESC_MAX],
    const char **out, size_t *in)
{
	unsigned char c = u[i];
	size_t run = i, k;

	/* A run of characters that need nothing, at once. */
	while (run < n && u[run] >= 0x20 && u[run] < 0x7f && u[run] != '"' && u[run] != '\\')
		run++;
	if (run > i) {
		*out = (const char *)u + i;
		*in = run - i;
		return run - i;
	}
	*out = esc;
	*in = 1;
	if (c == '"' || c == '\\') {
		esc[0] = '\\';
		esc[1] = (char)c;
		return 2;
	}
	if (c < 0x20 || c == 0x7f)
		return (size_t)snprintf(esc, JSON_ESC_MAX, "\\u%04x", c);
	if ((k = utf8_seq(u + i, n - i)) > 0) {
		uint32_t cp = k == 1 ? u[i] : utf8_cp(u + i, k);

		*in = k;
		if (cb_text_invisible(cp) || (cp >= 0x80 && cp <= 0x9f) ||
		    (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) {
			if (cp > 0xffff) {
				cp -= 0x10000;
				return (size_t)snprintf(esc, JSON_ESC_MAX, "\\u%04x\\u%04x",
				    0xd800u + (unsigned)(cp >> 10), 0xdc00u + (unsigned)(cp & 0x3ffu));
			}
			return (size_t)snprintf(esc, JSON_ESC_MAX, "\\u%04x", (unsigned)cp);
		}
		*out = (const char *)u + i;
		return k;
	}
	return (size_t)snprintf(esc, JSON_ESC_MAX, "\\udc%02x", c);
}

/* Write s as a JSON string (json_piece says how). */
static void
json_str(struct aud_log *l, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	char esc[JSON_ESC_MAX];
	const char *out;
	size_t i = 0, in, k;

	lput(l, "\"", 1);
	while (i < n) {
		k = json_piece(u, n, i, esc, &out, &in);
		lput(l, out, k);
		i += in;
	}
	lput(l, "\"", 1);
}

/* Longest possible line: every string byte escaped to 6 bytes, plus the
 * fixed fields. */
#define LINE_CAP (6 * NSTR * AUD_FIELD_MAX + 1024)

/* Decimal digits of v into buf (no terminator); returns the length. */
static size_t
fmt_u64(char *buf, uint64_t v)
{
	char tmp[20];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

/* Lowercase hex of public bytes (the chain, token ids): a table, since
 * nothing here is secret and this runs for every line. */
static void
fmt_hex(char *out, const uint8_t *b, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/* The writer formats lines in bursts within the same second: the date and
 * time are formatted once per second (gmtime_r and snprintf are the costly
 * part), only the milliseconds per line.  Per thread: each log has its own
 * writer. */
static void
fmt_ts(char out[AUD_TS_LEN + 1], uint64_t ns)
{
	static _Thread_local time_t cached = (time_t)-1;
	static _Thread_local char prefix[AUD_TS_LEN + 1];	/* "YYYY-MM-DDTHH:MM:SS." */
	time_t t = (time_t)(ns / 1000000000u);
	unsigned ms = (unsigned)((ns / 1000000u) % 1000);

	if (t != cached) {
		struct tm tm;
		char tmp[96];

		/* the verifier expects exactly AUD_TS_LEN bytes; years stay 4 digits */
		gmtime_r(&t, &tm);
		snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.",
		    (tm.tm_year + 1900) % 10000, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		    tm.tm_min, tm.tm_sec);
		memcpy(prefix, tmp, AUD_TS_LEN - 4);
		cached = t;
	}
	memcpy(out, prefix, AUD_TS_LEN - 4);
	out[AUD_TS_LEN - 4] = (char)('0' + ms / 100);
	out[AUD_TS_LEN - 3] = (char)('0' + ms / 10 % 10);
	out[AUD_TS_LEN - 2] = (char)('0' + ms % 10);
	out[AUD_TS_LEN - 1] = 'Z';
	out[AUD_TS_LEN] = '\0';
}

/* Start a line: the fixed prefix with the chain and seq. */
static void
line_begin(struct aud_log *l, uint64_t ts_ns, const char *ev)
{
	char hex[2 * AUD_HASH_LEN + 1], ts[AUD_TS_LEN + 1], num[32];

	l->line_len = 0;
	fmt_hex(hex, l->chain, AUD_HASH_LEN);
	fmt_ts(ts, ts_ns);
	num[fmt_u64(num, l->seq)] = '\0';
	lputs(l, "{\"prev\":\"");
	lputs(l, hex);
	lputs(l, "\",\"seq\":");
	lputs(l, num);
	lputs(l, ",\"ts\":\"");
	lputs(l, ts);
	lputs(l, "\",\"ev\":\"");
	lputs(l, ev);
	lputs(l, "\"");
}

/* Finish the line: hash it into the chain and move it to the out buffer. */
static void
line_end(struct aud_log *l)
{
	lputs(l, "}");
	crypto_generichash(l->chain, AUD_HASH_LEN, (const uint8_t *)l->line, l->line_len,
	    NULL, 0);
	memcpy(l->out + l->out_len, l->line, l->line_len);
	l->out_len += l->line_len;
	l->out[l->out_len++] = '\n';
	l->seq++;
	l->since_cp++;
}

static void
field_str(struct aud_log *l, const char *name, const char *s, size_t n)
{
	lputs(l, ",\"");
	lputs(l, name);
	lputs(l, "\":");
	json_str(l, s, n);
}

static void
fmt_record(struct aud_log *l, const struct slot *s)
{
	static const char *const names[NSTR] = { "sandbox", "op", "resource", "actor", "detail" };
	const char *strs = (const char *)(s + 1);
	const char *p[NSTR];
	const char *ev;
	char hex[2 * CAP_ID_LEN + 1];
	size_t i;

	for (i = 0; i < NSTR; i++) {
		p[i] = strs;
		strs += s->len[i];
	}
	switch (s->kind) {
	case K_OP: ev = "op"; break;
	case K_ADMIN: ev = "admin"; break;
	case K_OPEN: ev = "open"; break;
	case K_RECOVER: ev = "recover"; break;
	case K_CLOSE: ev = "close"; break;
	default: ev = "unknown"; break;
	}
	line_begin(l, s->ts_ns, ev);
	/* sandbox, op, resource; then token, decision, reason; then actor, detail */
	for (i = 0; i < 3; i++)
		if (s->present & (1u << i))
			field_str(l, names[i], p[i], s->len[i]);
	if (s->has_token) {
		fmt_hex(hex, s->token, CAP_ID_LEN);
		field_str(l, "token", hex, strlen(hex));
	}
	if (s->decision == AUD_ALLOW)
		lputs(l, ",\"decision\":\"allow\"");
	else if (s->decision == AUD_DENY)
		lputs(l, ",\"decision\":\"deny\"");
	if (s->reason != 0) {
		const char *rn = cb_errname(s->reason);

		field_str(l, "reason", rn, strlen(rn));
	}
	for (i = 3; i < NSTR; i++)
		if (s->present & (1u << i))
			field_str(l, names[i], p[i], s->len[i]);
	if (s->count) {
		char num[32], ts[AUD_TS_LEN + 1];

		num[fmt_u64(num, s->count)] = '\0';
		lputs(l, ",\"count\":");
		lputs(l, num);
		fmt_ts(ts, s->first_ns);
		field_str(l, "first", ts, AUD_TS_LEN);
		fmt_ts(ts, s->last_ns);
		field_str(l, "last", ts, AUD_TS_LEN);
	}
	if (s->dseq != 0) {
		char num[32];

		num[fmt_u64(num, s->dseq)] = '\0';
		lputs(l, ",\"dseq\":");
		lputs(l, num);
		if (s->dseq > l->dseq)
			l->dseq = s->dseq;
	}
	if (s->cut)
		lputs(l, ",\"cut\":true");
	line_end(l);
}

/* Append a signed checkpoint sealing every line before it. */
static int
fmt_checkpoint(struct aud_log *l)
{
	uint8_t msg[AUD_SIGMSG_DSEQ_LEN], sig[64], kid[CAP_KID_LEN];
	char hex[129], num[32];
	int rc;

	/* The signature covers the decision sequence too: the last checkpoint
	 * says, under the key, how many decisions the state must have. */
	aud_sigmsg_dseq(l->log_id, l->seq, l->chain, l->dseq, msg);
	if (l->o.sign != NULL)
		rc = l->o.sign(l->o.sign_arg, msg, sizeof(msg), sig, kid);
	else
		rc = cap_sign(l->kr, CAP_SIG_DOMAIN_AUDIT, msg, sizeof(msg), sig, kid);
	if (rc != 0)
		return rc;
	l->cp_seq = l->seq;
	memcpy(l->cp_hash, l->chain, AUD_HASH_LEN);
	line_begin(l, wall_ns(), "checkpoint");
	cap_hex(l->log_id, AUD_LOG_ID_LEN, hex);
	lputs(l, ",\"log\":\"");
	lputs(l, hex);
	cap_hex(kid, CAP_KID_LEN, hex);
	lputs(l, "\",\"kid\":\"");
	lputs(l, hex);
	cap_hex(sig, 64, hex);
	lputs(l, "\",\"sig\":\"");
	lputs(l, hex);
	num[fmt_u64(num, l->dseq)] = '\0';
	lputs(l, "\",\"dseq\":");
	lputs(l, num);
	line_end(l);
	l->since_cp = 0;
	l->cp_mono = cb_mono_ns();
	l->checkpoints++;
	l->cp_pending = true;
	return 0;
}

/* write() all of the out buffer; errno-style result. */
static int
out_write(struct aud_log *l)
{
	size_t off = 0;

	while (off < l->out_len) {
		ssize_t n = write(l->fd, l->out + off, l->out_len - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (n == 0)
			return EIO;
		off += (size_t)n;
		l->size += (uint64_t)n;
	}
	l->out_len = 0;
	return 0;
}

/* ---- the writer thread --------------------------------------------- */

static bool
checkpoint_due(const struct aud_log *l, uint64_t now)
{
	return l->since_cp > 0 &&
	    (l->since_cp >= l->o.checkpoint_lines ||
	    now - l->cp_mono >= (uint64_t)l->o.checkpoint_ms * 1000000u);
}

/* Format and write the entries in [t, h).  Returns an errno or a
 * CB_E* (signing), 0 on success; *n counts the entries. */
static int
drain(struct aud_log *l, uint64_t t, uint64_t h, uint64_t *n, uint64_t *est)
{
	int e;

	*n = 0;
	*est = 0;
	while (t < h) {
		size_t off = (size_t)(t % l->cap);
		const struct slot *s = (const struct slot *)(l->ring + off);

		if (l->cap - off < sizeof(uint32_t) || s->size == 0) {
			t += l->cap - off;	/* wrap marker */
			continue;
		}
		if (s->kind == K_CHECKPOINT) {
			if (l->since_cp > 0 && (e = fmt_checkpoint(l)) != 0)
				return e;
		} else {
			fmt_record(l, s);
			if (l->since_cp >= l->o.checkpoint_lines && (e = fmt_checkpoint(l)) != 0)
				return e;
		}
		*est += s->est;
		t += s->size;
		(*n)++;
		if (l->out_len >= OUTBUF_FLUSH) {
			if ((e = out_write(l)) != 0)
				return e;
			/* what is formatted no longer needs the ring: hand the
			 * room back now, so producers never wait for a whole batch */
			pthread_mutex_lock(&l->mu);
			l->tail = t;
			l->pub_size = l->size;
			l->est_done += *est;
			*est = 0;
			pthread_cond_broadcast(&l->space);
			pthread_mutex_unlock(&l->mu);
		}
	}
	if (checkpoint_due(l, cb_mono_ns()) && (e = fmt_checkpoint(l)) != 0)
		return e;
	return out_write(l);
}

static void *
writer_main(void *arg)
{
	struct aud_log *l = arg;
	uint64_t batch_deadline = 0;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		uint64_t t, h, want, n, est, now = cb_mono_ns();
		bool have = l->head != l->tail, sync, stop;
		int e;

		if (atomic_load(&l->failed))
			break;
		if (!(l->stopping || l->flush_want > l->durable || checkpoint_due(l, now) ||
		    (have && (l->o.fsync == AUD_FSYNC_ALWAYS ||
		    (size_t)(l->head - l->tail) > l->cap / 2 ||
		    (batch_deadline != 0 && now >= batch_deadline))))) {
			struct timespec dl;
			uint64_t wake = UINT64_MAX;

			if (have) {
				if (batch_deadline == 0)
					batch_deadline = now + (uint64_t)l->o.batch_ms * 1000000u;
				wake = batch_deadline;
			}
			if (l->since_cp > 0) {
				uint64_t cpd = l->cp_mono + (uint64_t)l->o.checkpoint_ms * 1000000u;

				if (cpd < wake)
					wake = cpd;
			}
			l->writer_idle = !have;
			if (wake == UINT64_MAX) {
				pthread_cond_wait(&l->work, &l->mu);
			} else {
				dl = mono_to_ts(wake);
				pthread_cond_timedwait(&l->work, &l->mu, &dl);
			}
			l->writer_idle = false;
			continue;
		}
		batch_deadline = 0;
		t = l->tail;
		h = l->head;
		want = l->flush_want;
		stop = l->stopping;
		pthread_mutex_unlock(&l->mu);

		/* durable, processed: only this thread writes them */
		e = drain(l, t, h, &n, &est);
		sync = l->o.fsync != AUD_FSYNC_NEVER || want > l->durable || l->cp_pending || stop;
		if (e == 0 && sync && (l->processed + n > l->durable || l->cp_pending) &&
		    fdatasync(l->fd) != 0)
			e = errno;
		if (e == 0 && l->cp_pending) {
			l->cp_pending = false;
			if (l->o.on_checkpoint != NULL)
				l->o.on_checkpoint(l->o.on_checkpoint_arg, l->log_id, l->cp_seq,
				    l->cp_hash);
		}

		pthread_mutex_lock(&l->mu);
		if (e != 0) {
			/* errno values are positive, CB_E* negative */
			set_failed(l, e > 0 ? e : EIO);
			break;
		}
		l->tail = h;
		l->pub_size = l->size;
		l->est_done += est;
		l->processed += n;
		l->pub_seq = l->seq;
		l->pub_checkpoints = l->checkpoints;
		if (sync)
			l->durable = l->processed;
		pthread_cond_broadcast(&l->space);
		pthread_cond_broadcast(&l->done);
		if (l->stopping && l->head == l->tail)
			break;
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* ---- opening and recovery ------------------------------------------ */

/* Read the first line into buf (NUL not added); its length or -1. */
static ssize_t
read_first_line(int fd, char *buf, size_t size)
{
	ssize_t n = pread(fd, buf, size, 0);
	char *nl;

	if (n <= 0)
		return -1;
	nl = memchr(buf, '\n', (size_t)n);
	return nl == NULL ? -1 : nl - buf;
}

/* Find the last complete line of a non-empty file of size sz.  Sets
 * *good (bytes up to and including its '\n'), and copies the line. */
static int
read_last_line(int fd, off_t sz, char *buf, size_t size, off_t *good, size_t *len)
{
	off_t start = sz > (off_t)size ? sz - (off_t)size : 0;
	ssize_t n = pread(fd, buf, (size_t)(sz - start), start);
	char *nl, *prev;

	if (n != sz - start)
		return CB_EIO;
	nl = memrchr(buf, '\n', (size_t)n);
	if (nl == NULL)
		return CB_ENOENT;
	*good = start + (nl - buf) + 1;
	prev = memrchr(buf, '\n', (size_t)(nl - buf));
	if (prev == NULL && start > 0)
		return CB_EAUDIT;	/* line longer than we allow */
	prev = prev == NULL ? buf : prev + 1;
	*len = (size_t)(nl - prev);
	memmove(buf, prev, *len);
	return 0;
}

/* The decision sequence of the last line in [0, end) that carries one,
 * read backwards in blocks: the field is short, so blocks overlap by a
 * little and no line needs splitting.  A checkpoint carries it at least
 * every checkpoint_lines lines, so this reads little of a new-format log
 * (an old one, without the field, is read once to its start). */
static int
find_last_dseq(int fd, off_t end, char *buf, size_t size, uint64_t *dseq)
{
	static const char key[] = ",\"dseq\":";
	const size_t overlap = sizeof(key) + 24;
	off_t hi = end;

	*dseq = 0;
	while (hi > 0) {
		off_t lo = hi > (off_t)size ? hi - (off_t)size : 0;
		size_t n = (size_t)(hi - lo);
		const char *k = NULL;

		if (pread(fd, buf, n, lo) != (ssize_t)n)
			return CB_EIO;
		for (const char *p = buf; (p = memmem(p, n - (size_t)(p - buf), key, sizeof(key) - 1));
		     p++)
			k = p;
		if (k != NULL) {
			/* the digits end the field at a ',' or '}' on the same line */
			size_t nl = (size_t)(buf + n - k);
			const char *e = memchr(k, '\n', nl);

			if (aud_line_dseq(k, e != NULL ? (size_t)(e - k) : nl, dseq))
				return 0;
		}
		if (lo == 0)
			break;
		hi = lo + (off_t)overlap;
		if (hi >= lo + (off_t)n)
			break;
	}
	return 0;
}

/* Write the genesis line and the first checkpoint, synchronously. */
static int
create_log(struct aud_log *l)
{
	char hex[2 * AUD_LOG_ID_LEN + 1];
	int rc, e;

	l->dseq = l->open_dseq = l->o.dseq_base;
	randombytes_buf(l->log_id, AUD_LOG_ID_LEN);
	memset(l->chain, 0, AUD_HASH_LEN);
	l->seq = 0;
	line_begin(l, wall_ns(), "genesis");
	cap_hex(l->log_id, AUD_LOG_ID_LEN, hex);
	lputs(l, ",\"log\":\"");
	lputs(l, hex);
	lputs(l, "\",\"version\":1");
	line_end(l);
	if ((rc = fmt_checkpoint(l)) != 0)
		return rc;
	if ((e = out_write(l)) != 0 || fdatasync(l->fd) != 0) {
		errno = e ? e : errno;
		return CB_EIO;
	}
	l->cp_pending = false;
	if (l->o.on_checkpoint != NULL)
		l->o.on_checkpoint(l->o.on_checkpoint_arg, l->log_id, l->cp_seq, l->cp_hash);
	return 0;
}

/* Continue an existing log: the log id from the genesis, the chain head
 * from the last complete line; cut a torn tail. */
static int
recover_log(struct aud_log *l, off_t sz, uint64_t *torn)
{
	struct aud_prefix p;
	off_t good = 0;
	size_t len = 0;
	ssize_t fl;
	int rc;

	*torn = 0;
	fl = read_first_line(l->fd, l->line, AUD_LINE_MAX);
	if (fl < 0 && l->o.expect != NULL)
		return CB_EAUDIT;	/* the remembered log had more than this */
	if (fl < 0) {
		/* no complete line at all: a crash while creating; start over */
		if (ftruncate(l->fd, 0) != 0)
			return CB_EIO;
		l->size = 0;
		*torn = (uint64_t)sz;
		return create_log(l);
	}
	if (aud_parse_prefix(l->line, (size_t)fl, &p) != 0 || p.seq != 0 ||
	    !aud_ev_is(&p, "genesis") || aud_parse_genesis(&p, l->log_id) != 0)
		return CB_EAUDIT;
	if ((rc = read_last_line(l->fd, sz, l->line, 2 * AUD_LINE_MAX, &good, &len)) != 0)
		return rc == CB_ENOENT ? CB_EAUDIT : rc;
	if (aud_parse_prefix(l->line, len, &p) != 0)
		return CB_EAUDIT;
	/* Is this the log the state remembers, and does it still reach the
	 * last checkpoint?  (The full check is aud_verify's.) */
	if (l->o.expect != NULL &&
	    (memcmp(l->o.expect->log_id, l->log_id, AUD_LOG_ID_LEN) != 0 || p.seq < l->o.expect->seq))
		return CB_EAUDIT;
	if (good < sz) {
		/* A crash mid-write leaves part of a line: cut it so the next
		 * line starts clean; the "recover" record says what was lost. */
		if (ftruncate(l->fd, good) != 0 || fdatasync(l->fd) != 0)
			return CB_EIO;
		l->size = (uint64_t)good;
		*torn = (uint64_t)(sz - good);
	}
	crypto_generichash(l->chain, AUD_HASH_LEN, (const uint8_t *)l->line, len, NULL, 0);
	if ((rc = find_last_dseq(l->fd, good, l->line, 2 * AUD_LINE_MAX, &l->dseq)) != 0)
		return rc;
	l->open_dseq = l->dseq;
	l->seq = p.seq + 1;
	l->since_cp = aud_ev_is(&p, "checkpoint") ? 0 : 1;
	if (p.seq == 0) {
		/* a crash between the genesis and its seal: seal it now, as
		 * create_log would have, before anything else is written */
		int e;

		if ((rc = fmt_checkpoint(l)) != 0)
			return rc;
		if ((e = out_write(l)) != 0 || fdatasync(l->fd) != 0) {
			errno = e ? e : errno;
			return CB_EIO;
		}
		l->cp_pending = false;
		if (l->o.on_checkpoint != NULL)
			l->o.on_checkpoint(l->o.on_checkpoint_arg, l->log_id, l->cp_seq, l->cp_hash);
	}
	return 0;
}

/* Locks, condition variables (on the monotonic clock, for the bounded
 * waits) and buffers of a new log; aud_close can undo a partial one. */
static int
log_init(struct aud_log *l, const struct cap_keyring *kr, const struct aud_opts *opts)
{
	pthread_condattr_t ca;

	l->fd = -1;
	l->kr = kr;
	fill_opts(&l->o, opts);
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->work, &ca);
	pthread_cond_init(&l->space, &ca);
	pthread_cond_init(&l->done, &ca);
	pthread_cond_init(&l->grow, &ca);
	pthread_condattr_destroy(&ca);
	l->cap = l->o.ring_bytes;
	l->out_cap = OUTBUF_FLUSH + 2 * LINE_CAP;
	if ((l->ring = malloc(l->cap)) == NULL || (l->out = malloc(l->out_cap)) == NULL ||
	    (l->line = malloc(LINE_CAP > 2 * AUD_LINE_MAX ? LINE_CAP : 2 * AUD_LINE_MAX)) == NULL)
		return CB_ENOMEM;
	return 0;
}

/* Open and lock the log file at path into l->fd; *st is its status. */
static int
log_open_file(struct aud_log *l, const char *path, struct stat *st)
{
	/* with a remembered head the log must already exist: never quietly
	 * start a new one in place of a deleted log */
	l->fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
	    (l->o.expect != NULL ? 0 : O_CREAT), 0600);
	if (l->fd < 0 && l->o.expect != NULL && errno == ENOENT)
		return CB_EAUDIT;
	if (l->fd < 0)
		return CB_EIO;
	/* one writer per log: two brokers appending would fork the chain */
	if (flock(l->fd, LOCK_EX | LOCK_NB) != 0)
		return errno == EWOULDBLOCK ? CB_EBUSY : CB_EIO;
	if (fstat(l->fd, st) != 0 || !S_ISREG(st->st_mode))
		return CB_EIO;
	if (st->st_size == 0 && l->o.expect != NULL)
		return CB_EAUDIT;
	return 0;
}

/* Start the writer thread of l, and the reserver where fallocate works. */
static int
start_threads(struct aud_log *l)
{
	sigset_t all, old;
	int prc;

	/* The threads take no signals: they stay with the broker's loop, and
	 * a SIGXFSZ from an oversized write becomes EFBIG (fail closed) rather
	 * than killing the broker. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	prc = pthread_create(&l->thread, NULL, writer_main, l);
	if (prc == 0) {
		l->thread_started = true;
		if (l->reserving &&
		    (prc = pthread_create(&l->reserver, NULL, reserver_main, l)) == 0)
			l->reserver_started = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return prc != 0 ? CB_EINTERNAL : 0;
}

/* The first reserve, before anyone may act on aud_room() (no thread runs
 * yet). */
static void
reserve_first(struct aud_log *l)
{
	uint64_t from, len;

	if (reserve_want(l, &from, &len))
		reserve_extend(l, from, len);
}

/* The first records of a reopened log: what a torn tail lost, then the open. */
static int
note_reopen(struct aud_log *l, uint64_t torn, bool existed)
{
	char detail[128];
	int rc;

	if (torn > 0) {
		struct aud_rec r = { .kind = AUD_ADMIN, .actor = "broker", .detail = detail };

		snprintf(detail, sizeof(detail),
		    "cut %llu bytes of a torn last line (crash during a write)",
		    (unsigned long long)torn);
		if ((rc = push(l, K_RECOVER, &r)) != 0)
			return rc;
	}
	if (existed) {
		struct aud_rec r = { .kind = AUD_ADMIN, .actor = "broker" };

		if ((rc = push(l, K_OPEN, &r)) != 0)
			return rc;
	}
	return 0;
}

int
aud_open(const char *path, const struct cap_keyring *kr, const struct aud_opts *opts,
    struct aud_log **out)
{
	struct aud_log *l = NULL;
	struct stat st;
	uint64_t torn = 0;
	bool existed;
	int rc;

	*out = NULL;
	if (path == NULL || (kr == NULL && (opts == NULL || opts->sign == NULL)))
		return CB_EINVAL;
	if (sodium_init() < 0)
		return CB_EINTERNAL;
	if ((l = calloc(1, sizeof(*l))) == NULL)
		return CB_ENOMEM;
	if ((rc = log_init(l, kr, opts)) != 0)
		goto out;
	if ((rc = log_open_file(l, path, &st)) != 0)
		goto out;
	existed = st.st_size > 0;
	l->cp_mono = cb_mono_ns();
	l->size = (uint64_t)st.st_size;
	l->reserving = true;
	if (!existed)
		rc = create_log(l);
	else
		rc = recover_log(l, st.st_size, &torn);
	if (rc != 0)
		goto out;
	l->pub_size = l->size;
	reserve_first(l);
	l->pub_seq = l->seq;
	l->pub_checkpoints = l->checkpoints;
	if ((rc = start_threads(l)) != 0)
		goto out;
	if ((rc = note_reopen(l, torn, existed)) != 0)
		goto out;
	*out = l;
	l = NULL;
	rc = 0;
out:
	if (l != NULL)
		(void)aud_close(l);
	return rc;
}

int
aud_close(struct aud_log *l)
{
	int rc = 0;

	if (l == NULL)
		return 0;
	if (l->thread_started) {
		struct aud_rec r = { .kind = AUD_ADMIN, .actor = "broker" };

		if (!atomic_load(&l->failed)) {
			(void)push(l, K_CLOSE, &r);
			(void)push(l, K_CHECKPOINT, NULL);
		}
		pthread_mutex_lock(&l->mu);
		l->stopping = true;
		pthread_cond_signal(&l->work);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->thread, NULL);
	}
	/* after the writer: the close record may have waited for its room */
	if (l->reserver_started) {
		pthread_mutex_lock(&l->mu);
		l->reserver_stop = true;
		pthread_cond_signal(&l->grow);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->reserver, NULL);
	}
	if (atomic_load(&l->failed))
		rc = CB_EAUDIT;
	/* give the unused reserve back to the file system */
	if (l->fd >= 0 && l->reserving && l->alloc_end > l->size)
		(void)fallocate(l->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)l->size,
		    (off_t)(l->alloc_end - l->size));
	if (l->fd >= 0)
		close(l->fd);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->work);
	pthread_cond_destroy(&l->space);
	pthread_cond_destroy(&l->done);
	pthread_cond_destroy(&l->grow);
	free(l->ring);
	free(l->out);
	free(l->line);
	free(l);
	return rc;
}
