/*
 * verify.c - check an audit log: the hash chain, the sequence numbers,
 * every checkpoint signature, the genesis seal and the state database's
 * memory of the last checkpoint.  Runs in capctl or the broker; the file is
 * hostile (anyone who could write it may have edited it), so lines are
 * bounded and parsed strictly, and we stop at the first problem and say
 * what it looks like and where.
 */
#include "audit/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "audit/audit_int.h"

#define HIST 64			/* lines remembered to explain an anomaly */
#define LOOKAHEAD 16		/* lines read past an anomaly to explain it */

/* A buffered line reader over a file descriptor. */
struct reader {
	int fd;
	char *buf;
	size_t cap, start, end;
	bool eof;
};

enum { R_LINE, R_EOF, R_TORN, R_LONG, R_ERR };

static int
next_line(struct reader *r, const char **line, size_t *len)
{
	for (;;) {
		char *nl = memchr(r->buf + r->start, '\n', r->end - r->start);
		ssize_t n;

		if (nl != NULL) {
			*line = r->buf + r->start;
			*len = (size_t)(nl - *line);
			r->start += *len + 1;
			return *len > AUD_LINE_MAX ? R_LONG : R_LINE;
		}
		if (r->eof)
			return r->end > r->start ? R_TORN : R_EOF;
		if (r->start > 0) {
			memmove(r->buf, r->buf + r->start, r->end - r->start);
			r->end -= r->start;
			r->start = 0;
		}
		if (r->end == r->cap)
			return R_LONG;
		n = read(r->fd, r->buf + r->end, r->cap - r->end);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return R_ERR;
		}
		if (n == 0)
			r->eof = true;
		r->end += (size_t)n;
	}
}

struct seen {
	bool ok;		/* prefix parsed */
	uint64_t seq;
	uint8_t prev[AUD_HASH_LEN];
};

static int
report(struct aud_report *rep, enum aud_problem p, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
report(struct aud_report *rep, enum aud_problem p, uint64_t line, const char *fmt, ...)
{
	va_list ap;

	rep->problem = p;
	rep->line = line;
	va_start(ap, fmt);
	vsnprintf(rep->what, sizeof(rep->what), fmt, ap);
	va_end(ap);
	return p == AUD_P_TORN ? 0 : CB_EAUDIT;
}

/* Explain the first line (index i, 0-based) whose seq or prev is wrong.
 * hist[j % HIST] holds the hash of line j for the last HIST lines. */
static int
explain(struct aud_report *rep, struct reader *r, uint64_t i, const struct seen *l0,
    const uint8_t h0[AUD_HASH_LEN], uint8_t hist[HIST][AUD_HASH_LEN])
{
	struct seen la[LOOKAHEAD];
	const uint8_t *e = hist[(i - 1) % HIST];
	size_t n = 0, k;
	uint64_t j;

	while (n < LOOKAHEAD) {
		const char *line;
		size_t len;
		struct aud_prefix p;

		if (next_line(r, &line, &len) != R_LINE)
			break;
		la[n].ok = aud_parse_prefix(line, len, &p) == 0;
		la[n].seq = p.seq;
		memcpy(la[n].prev, p.prev, AUD_HASH_LEN);
		n++;
	}
	if (l0->seq == i) {
		/* right number, wrong link: an inserted line (the chain resumes
		 * later at the same seq) or an edit of the line before */
		for (k = 0; k < n; k++) {
			if (la[k].ok && la[k].seq == i && sodium_memcmp(la[k].prev, e, AUD_HASH_LEN) == 0)
				return report(rep, AUD_P_INSERTED, i + 1,
				    "%zu line(s) inserted at line %llu (the chain resumes at line %llu)",
				    k + 1, (unsigned long long)(i + 1), (unsigned long long)(i + k + 2));
		}
		return report(rep, AUD_P_EDITED, i,
		    "line %llu was modified: its hash does not match the prev of line %llu",
		    (unsigned long long)i, (unsigned long long)(i + 1));
	}
	if (l0->seq > i) {
		for (k = 0; k < n; k++)
			if (la[k].ok && la[k].seq == i)
				return report(rep, AUD_P_REORDERED, i + 1,
				    "lines reordered: line %llu has seq %llu where seq %llu was due",
				    (unsigned long long)(i + 1), (unsigned long long)l0->seq,
				    (unsigned long long)i);
		return report(rep, AUD_P_REMOVED, i + 1,
		    "%llu line(s) removed before line %llu (seq %llu to %llu missing)",
		    (unsigned long long)(l0->seq - i), (unsigned long long)(i + 1),
		    (unsigned long long)i, (unsigned long long)(l0->seq - 1));
	}
	/* seq went back: lines were inserted (if this line still links to an
	 * earlier one) or moved */
	for (j = i - 1; j + HIST > i && j > 0; j--) {
		if (l0->seq != j || sodium_memcmp(l0->prev, hist[(j - 1) % HIST], AUD_HASH_LEN) != 0)
			continue;
		if (sodium_memcmp(h0, hist[j % HIST], AUD_HASH_LEN) == 0)
			return report(rep, AUD_P_INSERTED, i + 1,
			    "line %llu was inserted: it is a copy of line %llu",
			    (unsigned long long)(i + 1), (unsigned long long)(j + 1));
		return report(rep, AUD_P_INSERTED, j + 1,
			    "%llu line(s) inserted at line %llu (the chain resumes at line %llu)",
			    (unsigned long long)(i - j), (unsigned long long)(j + 1),
			    (unsigned long long)(i + 1));
	}
	return report(rep, AUD_P_REORDERED, i + 1,
	    "lines reordered: line %llu has seq %llu where seq %llu was due",
	    (unsigned long long)(i + 1), (unsigned long long)l0->seq, (unsigned long long)i);
}

/* What the walk over the log carries from line to line. */
struct vstate {
	const struct cap_keyring *kr;
	const struct aud_head *expect;	/* the checkpoint the state remembers, or NULL */
	bool expect_seen;
	bool check_dseq;		/* compare decisions with the state's */
	uint64_t state_dseq;
	uint64_t log_dseq, dseq_line;	/* the highest decision the log records, where */
};

static int verify(const char *path, struct vstate *v, struct aud_report *rep);

int
aud_verify(const char *path, const struct cap_keyring *kr, const struct aud_head *expect,
    struct aud_report *rep)
{
	struct vstate v = { .kr = kr, .expect = expect };

	return verify(path, &v, rep);
}

int
aud_verify_state(const char *path, const struct cap_keyring *kr, const struct aud_head *expect,
    uint64_t state_dseq, struct aud_report *rep)
{
	struct vstate v = { .kr = kr, .expect = expect, .check_dseq = true,
		.state_dseq = state_dseq };

	return verify(path, &v, rep);
}

/* Line 1: a genesis record, seq 0, no predecessor, and the log id the
 * state remembers (when it remembers one). */
static int
check_genesis(const struct vstate *v, const struct aud_prefix *p, struct aud_report *rep)
{
	uint8_t zero[AUD_HASH_LEN] = { 0 };

	if (p->seq != 0)
		return report(rep, AUD_P_REMOVED, 1,
		    "%llu line(s) removed at the start (line 1 has seq %llu)",
		    (unsigned long long)p->seq, (unsigned long long)p->seq);
	if (!aud_ev_is(p, "genesis") || aud_parse_genesis(p, rep->log_id) != 0 ||
	    sodium_memcmp(p->prev, zero, AUD_HASH_LEN) != 0)
		return report(rep, AUD_P_MALFORMED, 1, "line 1 is not a genesis record");
	if (v->expect != NULL &&
	    sodium_memcmp(v->expect->log_id, rep->log_id, AUD_LOG_ID_LEN) != 0)
		return report(rep, AUD_P_REPLACED, 1,
		    "the log id differs from the one the state remembers: the file was replaced");
	return 0;
}

/* Line i+1: a checkpoint must verify under a known key and name this log;
 * line 2 must be one (it seals the genesis).  Other lines are unsealed. */
static int
check_seal(const struct vstate *v, const struct aud_prefix *p, uint64_t i,
    struct aud_report *rep)
{
	uint8_t lid[AUD_LOG_ID_LEN], kid[CAP_KID_LEN], sig[64], msg[AUD_SIGMSG_DSEQ_LEN];
	uint64_t dseq = 0;
	bool has_dseq = false;
	int vr;

	if (!aud_ev_is(p, "checkpoint")) {
		if (i == 1)
			return report(rep, AUD_P_NOSEAL, 2, "line 2 is not the signed checkpoint "
			    "sealing the genesis: forged or replaced log");
		rep->unsealed++;
		return 0;
	}
	if (aud_parse_checkpoint(p, lid, kid, sig, &dseq, &has_dseq) != 0)
		return report(rep, i == 1 ? AUD_P_NOSEAL : AUD_P_MALFORMED, i + 1,
		    "line %llu is a malformed checkpoint", (unsigned long long)(i + 1));
	aud_sigmsg_dseq(lid, p->seq, p->prev, dseq, msg);
	vr = cap_verify(v->kr, kid, CAP_SIG_DOMAIN_AUDIT, msg,
	    has_dseq ? AUD_SIGMSG_DSEQ_LEN : AUD_SIGMSG_LEN, sig);
	if (vr != 0 || sodium_memcmp(lid, rep->log_id, AUD_LOG_ID_LEN) != 0)
		return report(rep, i == 1 ? AUD_P_NOSEAL : AUD_P_BADSIG, i + 1,
		    "checkpoint at line %llu does not verify (%s)", (unsigned long long)(i + 1),
		    vr != 0 ? cb_strerror(vr) : "it names another log");
	rep->checkpoints++;
	rep->last_checkpoint = p->seq;
	rep->unsealed = 0;
	return 0;
}

/* The line at the seq the state remembers must be that checkpoint; note
 * the highest decision a line records. */
static int
check_state(struct vstate *v, const struct aud_prefix *p, const char *line, size_t len,
    uint64_t i, struct aud_report *rep)
{
	uint64_t d;

	if (v->expect != NULL && p->seq == v->expect->seq) {
		if (!aud_ev_is(p, "checkpoint") ||
		    sodium_memcmp(p->prev, v->expect->hash, AUD_HASH_LEN) != 0)
			return report(rep, AUD_P_MISMATCH, i + 1,
			    "line %llu is not the checkpoint the state remembers: the log was rewritten",
			    (unsigned long long)(i + 1));
		v->expect_seen = true;
	}
	if (aud_line_dseq(line, len, &d) && d > v->log_dseq) {
		v->log_dseq = d;
		v->dseq_line = i + 1;
	}
	return 0;
}

/* After the last line (i lines read; rc what the walk found so far). */
static int
check_end(const struct vstate *v, uint64_t i, int rc, struct aud_report *rep)
{
	if (i == 0 && rc == 0)
		return report(rep, AUD_P_MALFORMED, 0, "the log is empty");
	/* a genesis alone (even followed by a torn line) proves nothing */
	if (rep->checkpoints == 0)
		return report(rep, AUD_P_NOSEAL, 2,
		    "line 2 is not the signed checkpoint sealing the genesis: forged or replaced log");
	/* a torn last line does not excuse a missing checkpoint */
	if (v->expect != NULL && !v->expect_seen)
		return report(rep, AUD_P_TRUNCATED, rep->lines,
		    "the log ends at line %llu but the state remembers a checkpoint at line %llu: truncated",
		    (unsigned long long)rep->lines, (unsigned long long)(v->expect->seq + 1));
	if (rc == 0 && v->check_dseq && v->log_dseq > v->state_dseq)
		return report(rep, AUD_P_BEHIND, v->dseq_line,
		    "line %llu records decision %llu but the state has only %llu: the state was rolled "
		    "back or damaged (capbroker state rebuild)", (unsigned long long)v->dseq_line,
		    (unsigned long long)v->log_dseq, (unsigned long long)v->state_dseq);
	if (rc == 0 && rep->problem == AUD_P_NONE)
		snprintf(rep->what, sizeof(rep->what),
		    "%llu lines intact, %llu checkpoints, %llu lines after the last one",
		    (unsigned long long)rep->lines, (unsigned long long)rep->checkpoints,
		    (unsigned long long)rep->unsealed);
	return rc;
}

static int
verify(const char *path, struct vstate *v, struct aud_report *rep)
{
	struct aud_report dummy;
	struct reader r = { .fd = -1 };
	uint8_t (*hist)[AUD_HASH_LEN] = NULL;
	uint64_t i = 0;
	int rc = 0, st;

	if (rep == NULL)
		rep = &dummy;
	memset(rep, 0, sizeof(*rep));
	if (path == NULL || v->kr == NULL)
		return CB_EINVAL;
	if (sodium_init() < 0)
		return CB_EINTERNAL;
	if ((r.fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = errno == ENOENT ? CB_ENOENT : CB_EIO;
		snprintf(rep->what, sizeof(rep->what), "cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	r.cap = 2 * AUD_LINE_MAX;
	if ((r.buf = malloc(r.cap)) == NULL || (hist = calloc(HIST, sizeof(*hist))) == NULL) {
		rc = CB_ENOMEM;
		goto out;
	}
	for (;; i++) {
		struct aud_prefix p;
		struct seen s;
		const char *line;
		size_t len;
		uint8_t h[AUD_HASH_LEN];

		st = next_line(&r, &line, &len);
		if (st == R_EOF)
			break;
		if (st == R_ERR) {
			rc = CB_EIO;
			snprintf(rep->what, sizeof(rep->what), "read error: %s", strerror(errno));
			goto out;
		}
		if (st == R_LONG) {
			rc = report(rep, AUD_P_MALFORMED, i + 1, "line %llu is too long",
			    (unsigned long long)(i + 1));
			goto out;
		}
		if (st == R_TORN) {
			rc = report(rep, AUD_P_TORN, i + 1,
			    "line %llu is incomplete (a crash or a write in progress)",
			    (unsigned long long)(i + 1));
			break;
		}
		if (aud_parse_prefix(line, len, &p) != 0) {
			rc = report(rep, AUD_P_MALFORMED, i + 1,
			    "line %llu does not start with the fixed prefix", (unsigned long long)(i + 1));
			goto out;
		}
		s.ok = true;
		s.seq = p.seq;
		memcpy(s.prev, p.prev, AUD_HASH_LEN);
		if (i == 0 && (rc = check_genesis(v, &p, rep)) != 0)
			goto out;
		crypto_generichash(h, AUD_HASH_LEN, (const uint8_t *)line, len, NULL, 0);
		if (i > 0 && (p.seq != i ||
		    sodium_memcmp(p.prev, hist[(i - 1) % HIST], AUD_HASH_LEN) != 0)) {
			rc = explain(rep, &r, i, &s, h, hist);
			goto out;
		}
		if ((rc = check_seal(v, &p, i, rep)) != 0 ||
		    (rc = check_state(v, &p, line, len, i, rep)) != 0)
			goto out;
		memcpy(hist[i % HIST], h, AUD_HASH_LEN);
		rep->lines = i + 1;
	}
	rc = check_end(v, i, rc, rep);
out:
	if (r.fd >= 0)
		close(r.fd);
	free(r.buf);
	free(hist);
	return rc;
}

const char *
aud_problem_name(enum aud_problem p)
{
	switch (p) {
	case AUD_P_NONE: return "intact";
	case AUD_P_MALFORMED: return "malformed";
	case AUD_P_EDITED: return "edited";
	case AUD_P_REMOVED: return "removed";
	case AUD_P_INSERTED: return "inserted";
	case AUD_P_REORDERED: return "reordered";
	case AUD_P_BADSIG: return "bad-signature";
	case AUD_P_NOSEAL: return "no-seal";
	case AUD_P_REPLACED: return "replaced";
	case AUD_P_TRUNCATED: return "truncated";
	case AUD_P_MISMATCH: return "mismatch";
	case AUD_P_TORN: return "torn";
	case AUD_P_BEHIND: return "state-behind";
	}
	return "unknown";
}
