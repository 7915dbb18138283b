/*
 * budget.c - the audit budget of a sandbox: how much audit log one agent
 * may make the broker write, by denied and by allowed operations.
 *
 * Trust domain: broker.  Every line an agent causes carries fields it
 * chose (path, host, token).  Without a budget, denied requests at the
 * request rate grew the log by about 16 MB/s, and allowed ones (an fs.stat
 * of an 800-byte path in a loop) by 11 MB/s; a full disk stops the log and
 * with it every sandbox on the broker.  So:
 *  - Every line a sandbox causes, allowed or denied, goes through
 *    brk_audit_sbx (or brk_budget_deny), which charges its bytes
 *    (aud_rec_cost: an upper bound, strings cut as the log cuts them) to a
 *    token bucket of the policy's size (defaults.audit_bytes a second,
 *    audit_bytes_burst).  One line is itself bounded (AUD_FIELD_MAX a
 *    string), so a request overdraws the bucket by a line or two at most.
 *  - Repeated identical denials are coalesced: the first is written as it
 *    is; identical ones after it (same op, resource, reason, token and
 *    detail) are only counted, and at most once a second one line says how
 *    many there were and when the first and last came (count, first,
 *    last: docs/audit.md).  A few recent denials are remembered
 *    (BRK_COAL_SLOTS), so alternating requests coalesce too.
 *  - Denials also draw on a bucket of their own (defaults.audit_budget a
 *    second, audit_burst): a written line costs one, a coalesced repeat
 *    1/BRK_COAL_COST.  A well-behaved agent is rarely denied; a hostile
 *    one is denied at will, with short lines, so bytes alone allow too
 *    many of them.
 *  - When either bucket is empty the sandbox is throttled: the loop stops
 *    reading its channel until the bucket refills, so its requests wait
 *    (none is lost, none is performed unaudited: the check comes before a
 *    request is read, never by dropping a line) and the others are served
 *    as before.  One line says so.
 *  - A sandbox throttled for audit_throttle_max seconds on end is stopped:
 *    one line says why (written before anything is stopped), its channel is
 *    closed and it is killed.
 * So one sandbox's log grows by at most audit_bytes a second beyond a
 * burst of audit_bytes_burst, and its denials by at most audit_burst +
 * audit_budget x throttle_max lines, plus the coalesced summaries (at most
 * one per slot a second) and a handful of life-cycle lines.
 *
 * A line the log refuses (its ring or reserve full, the disk full: a
 * denial is answered whatever the log says, and an operation's line comes
 * after it acted) is never dropped silently: it is counted by kind
 * (denial, allowed operation, other), and one audit.unlogged line a kind
 * says how many and from when to when as soon as the log takes a line
 * again (the sandbox's next line, its tick, its end).  A sandbox that ends
 * first hands its counts to the broker's own (brk_audit's), written once a
 * second; what the log still refuses at close is said on stderr.
 */
#include "broker/core.h"
#include "broker/budget.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BRK_COAL_COST	16			/* coalesced repeats per unit of budget */
#define BRK_COAL_FLUSH_NS 1000000000ull		/* a count is written after at most 1 s */
#define BRK_COAL_IDLE_NS 10000000000ull		/* a slot unused for 10 s is forgotten */
#define BRK_AUD_BYTES_UNIT (64.0 * 1024)	/* a throttled sandbox waits for this much */

static uint64_t
brk_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool
brk_str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool
brk_coal_same(const struct brk_coal *c, int reason, const char *op, const char *resource,
    const uint8_t *tid, const char *detail)
{
	return c->reason == reason && c->has_tid == (tid != NULL) &&
	    (!tid || memcmp(c->tid, tid, CAP_ID_LEN) == 0) && brk_str_eq(c->op, op) &&
	    brk_str_eq(c->resource, resource) && brk_str_eq(c->detail, detail);
}

static void
brk_coal_clear(struct brk_coal *c)
{
	free(c->op);
	free(c->resource);
	free(c->detail);
	memset(c, 0, sizeof(*c));
}

/* ---- lines the log refused ------------------------------------------ */

static const char *const brk_unl_why[BRK_UNL_KINDS] = {
	"denials without a line of their own: the audit log refused them (its ring or its "
	"reserve was full); count says how many, first and last when",
	"allowed operations, done, without a line of their own: the audit log refused them (its "
	"ring or its reserve was full); count says how many, first and last when",
	"other lines (events without a decision) the audit log refused (its ring or its reserve "
	"was full); count says how many, first and last when",
};

static size_t
brk_unl_kind(enum aud_decision d)
{
	return d == AUD_DENY ? BRK_UNL_DENY : d == AUD_ALLOW ? BRK_UNL_ALLOW : BRK_UNL_OTHER;
}

static void
brk_unl_add(struct brk_unlogged *u, size_t k, uint64_t n, uint64_t first_ns, uint64_t last_ns)
{
	if (n == 0)
		return;
	/* A count written (n back to 0) leaves its times behind: they say
	 * nothing of the lines counted from now on. */
	if (u->n[k] == 0 || first_ns < u->first_ns[k])
		u->first_ns[k] = first_ns;
	if (u->n[k] == 0 || last_ns > u->last_ns[k])
		u->last_ns[k] = last_ns;
	u->n[k] += n;
}

static bool
brk_unl_any(const struct brk_unlogged *u)
{
	return (u->n[BRK_UNL_DENY] | u->n[BRK_UNL_ALLOW] | u->n[BRK_UNL_OTHER]) != 0;
}

/* r stood for one line of its kind that the log refused. */
static void
brk_unl_note(struct brk_unlogged *u, const struct aud_rec *r)
{
	uint64_t t = r->ts_ns ? r->ts_ns : brk_wall_ns();

	brk_unl_add(u, brk_unl_kind(r->decision), r->count ? r->count : 1,
	    r->count ? r->first_ns : t, r->count ? r->last_ns : t);
}

/* Write u's counts, one audit.unlogged line a kind, in sandbox's name
 * (NULL: the broker's own), as long as the log takes them; a kind whose
 * line is refused stays counted for the next chance.  The bytes written,
 * for the sandbox's budget. */
static size_t
brk_unl_write(struct aud_log *log, struct brk_unlogged *u, const char *sandbox)
{
	size_t bytes = 0;

	for (size_t k = 0; k < BRK_UNL_KINDS; k++) {
		struct aud_rec r = {
			.kind = AUD_ADMIN, .sandbox = sandbox, .op = "audit.unlogged",
			.decision = k == BRK_UNL_DENY ? AUD_DENY : k == BRK_UNL_ALLOW ? AUD_ALLOW :
			    AUD_NONE,
			.actor = "broker", .detail = brk_unl_why[k], .count = u->n[k],
			.first_ns = u->first_ns[k], .last_ns = u->last_ns[k],
		};

		if (u->n[k] == 0)
			continue;
		if (aud_append(log, &r) != 0)
			break;
		bytes += aud_rec_cost(&r);
		u->n[k] = 0;
	}
	return bytes;
}

void
brk_audit(struct brk *b, const struct aud_rec *r)
{
	if (!b->aud)
		return;
	if (aud_append(b->aud, r) != 0) {
		brk_unl_note(&b->unlogged, r);
		return;
	}
	if (brk_unl_any(&b->unlogged))
		(void)brk_unl_write(b->aud, &b->unlogged, NULL);
}

/* stderr: the broker's last word on what the log never got. */
static void
brk_unl_say(const struct brk_unlogged *u)
{
	static const char *const what[BRK_UNL_KINDS] = { "denials", "allowed operations",
		"other lines" };

	for (size_t k = 0; k < BRK_UNL_KINDS; k++) {
		char t0[32], t1[32];
		time_t a = (time_t)(u->first_ns[k] / 1000000000u);
		time_t z = (time_t)(u->last_ns[k] / 1000000000u);
		struct tm tm;

		if (u->n[k] == 0)
			continue;
		strftime(t0, sizeof(t0), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&a, &tm));
		strftime(t1, sizeof(t1), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&z, &tm));
		fprintf(stderr, "capbroker: %llu %s not logged, from %s to %s: the audit log "
		    "refused their lines and the line that counts them\n",
		    (unsigned long long)u->n[k], what[k], t0, t1);
	}
}

void
brk_unlogged_tick(struct brk *b, bool closing)
{
	if (!brk_unl_any(&b->unlogged))
		return;
	if (b->aud)
		(void)brk_unl_write(b->aud, &b->unlogged, NULL);
	if (closing)
		brk_unl_say(&b->unlogged);
}

/* ---- a sandbox's lines ----------------------------------------------- */

void
brk_budget_charge(struct brk_sbx *s, size_t bytes)
{
	s->aud_bytes -= (double)bytes;
	s->nbytes += bytes;
}

/* Write s's counts of refused lines if the log takes them now, charged to
 * its budget. */
static void
brk_unl_write_sbx(struct brk_sbx *s)
{
	if (s->b->aud && brk_unl_any(&s->unlogged))
		brk_budget_charge(s, brk_unl_write(s->b->aud, &s->unlogged, s->id));
}

int
brk_audit_sbx(struct brk_sbx *s, const struct aud_rec *r)
{
	struct aud_rec c = *r;
	int e;

	if (!s->b->aud)
		return 0;
	c.sandbox = s->id;
	if ((e = aud_append(s->b->aud, &c)) != 0)
		return e;
	brk_budget_charge(s, aud_rec_cost(&c));
	/* the log takes lines again: say what it refused before */
	brk_unl_write_sbx(s);
	return 0;
}

void
brk_audit_done(struct brk_sbx *s, const struct aud_rec *r)
{
	if (brk_audit_sbx(s, r) != 0)
		brk_unl_note(&s->unlogged, r);
}

/* The line for c's repeats since its last line (counted if refused). */
static void
brk_coal_write(struct brk_sbx *s, struct brk_coal *c)
{
	brk_audit_done(s, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_DENY,
	    .reason = c->reason, .op = c->op, .resource = c->resource,
	    .token_id = c->has_tid ? c->tid : NULL, .actor = "agent", .detail = c->detail,
	    .count = c->count, .first_ns = c->first_ns, .last_ns = c->last_ns });
	c->count = 0;
	s->aud_bucket -= 1.0;
}

void
brk_budget_deny(struct brk_sbx *s, int reason, const char *op, const char *resource,
    const uint8_t *tid, const char *detail)
{
	uint64_t mono = cb_mono_ns();
	struct brk_coal *c = NULL, *victim = &s->coal[0];

	s->ndenied++;
	for (size_t i = 0; i < BRK_COAL_SLOTS; i++) {
		struct brk_coal *k = &s->coal[i];

		if (k->used && brk_coal_same(k, reason, op, resource, tid, detail)) {
			c = k;
			break;
		}
		/* a free slot, else the one seen longest ago */
		if (victim->used && (!k->used || k->seen_mono < victim->seen_mono))
			victim = k;
	}
	if (c) {
		uint64_t now = brk_wall_ns();

		if (c->count++ == 0) {
			c->first_ns = now;
			c->first_mono = mono;
		}
		c->last_ns = now;
		c->seen_mono = mono;
		s->aud_bucket -= 1.0 / BRK_COAL_COST;
		return;
	}
	/* The agent is denied whatever the log says; a line the log refuses
	 * (back-pressure, a full disk) is counted, and said once it takes
	 * lines again. */
	brk_audit_done(s, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_DENY,
	    .reason = reason, .op = op, .resource = resource, .token_id = tid, .actor = "agent",
	    .detail = detail });
	s->aud_bucket -= 1.0;
	if (victim->used) {
		if (victim->count)
			brk_coal_write(s, victim);
		brk_coal_clear(victim);
	}
	/* Remember it; if a copy fails the next one is simply written too. */
	victim->op = op ? strdup(op) : NULL;
	victim->resource = resource ? strdup(resource) : NULL;
	victim->detail = detail ? strdup(detail) : NULL;
	if ((op && !victim->op) || (resource && !victim->resource) || (detail && !victim->detail)) {
		brk_coal_clear(victim);
		return;
	}
	victim->used = true;
	victim->reason = reason;
	victim->has_tid = tid != NULL;
	if (tid)
		memcpy(victim->tid, tid, CAP_ID_LEN);
	victim->seen_mono = mono;
}

void
brk_budget_tick(struct brk_sbx *s)
{
	uint64_t mono = cb_mono_ns();

	for (size_t i = 0; i < BRK_COAL_SLOTS; i++) {
		struct brk_coal *c = &s->coal[i];

		if (!c->used)
			continue;
		if (c->count && mono - c->first_mono >= BRK_COAL_FLUSH_NS)
			brk_coal_write(s, c);
		else if (!c->count && mono - c->seen_mono >= BRK_COAL_IDLE_NS)
			brk_coal_clear(c);
	}
	brk_unl_write_sbx(s);
}

void
brk_budget_flush(struct brk_sbx *s)
{
	for (size_t i = 0; i < BRK_COAL_SLOTS; i++)
		if (s->coal[i].used && s->coal[i].count)
			brk_coal_write(s, &s->coal[i]);
	brk_unl_write_sbx(s);
}

void
brk_budget_end(struct brk_sbx *s)
{
	struct brk_unlogged *u = &s->unlogged;

	brk_budget_flush(s);
	for (size_t i = 0; i < BRK_COAL_SLOTS; i++)
		brk_coal_clear(&s->coal[i]);
	/* Refused still: the broker's own line will count them (its name is
	 * lost with the sandbox; the times say when). */
	for (size_t k = 0; k < BRK_UNL_KINDS; k++) {
		brk_unl_add(&s->b->unlogged, k, u->n[k], u->first_ns[k], u->last_ns[k]);
		u->n[k] = 0;
	}
}

static double
brk_at_least_1(uint64_t v)
{
	return v ? (double)v : 1.0;
}

/* The line that says s is throttled, once an episode. */
static void
brk_throttle_note(struct brk_sbx *s, const struct pol_audit_budget *pb, bool dry_d)
{
	char detail[384];

	snprintf(detail, sizeof(detail), "audit budget spent (%s; %llu denials, %llu bytes of log "
	    "in all; budget %llu denials a second, burst %llu; %llu bytes a second, burst %llu): its "
	    "requests wait; stopped if this lasts %llu s",
	    dry_d ? "denials" : "bytes of log", (unsigned long long)s->ndenied,
	    (unsigned long long)s->nbytes, (unsigned long long)pb->rate,
	    (unsigned long long)pb->burst, (unsigned long long)pb->bytes,
	    (unsigned long long)pb->bytes_burst, (unsigned long long)pb->throttle_max);
	s->throttle_noted = brk_audit_sbx(s, &(struct aud_rec){ .kind = AUD_ADMIN,
	    .op = "sandbox.throttled", .actor = "broker", .detail = detail }) == 0;
}

enum brk_budget
brk_budget_check(struct brk_sbx *s, struct timeval *wait, char *why, size_t whylen)
{
	const struct pol_audit_budget *pb = pol_audit_budget(s->pol->pol);
	double rate = brk_at_least_1(pb->rate), burst = brk_at_least_1(pb->burst);
	double brate = brk_at_least_1(pb->bytes), bburst = brk_at_least_1(pb->bytes_burst);
	double unit = bburst < BRK_AUD_BYTES_UNIT ? bburst : BRK_AUD_BYTES_UNIT;
	uint64_t now = cb_mono_ns(), calm;
	double dt = (double)(now - s->aud_bucket_ns) / 1e9, need = 0.0;
	bool dry_d, dry_b;

	s->aud_bucket += dt * rate;
	if (s->aud_bucket > burst)
		s->aud_bucket = burst;
	s->aud_bytes += dt * brate;
	if (s->aud_bytes > bburst)
		s->aud_bytes = bburst;
	s->aud_bucket_ns = now;
	dry_d = s->aud_bucket < 1.0;
	dry_b = s->aud_bytes < 0.0;
	if (!dry_d && !dry_b) {
		/* The episode is over once the sandbox has not run dry for as
		 * long as half the burst of the bucket it emptied takes to
		 * refill (at least 1 s): the agent calmed down.  Being served
		 * after a wait is not that, however late the loop's timer
		 * fired. */
		if (s->throttled_since && now - s->dry_ns >= s->calm_ns) {
			s->throttled_since = 0;
			s->throttle_noted = false;
		}
		return BRK_BUDGET_OK;
	}
	calm = 1000000000ull;
	if (dry_d && burst / 2 / rate * 1e9 > (double)calm)
		calm = (uint64_t)(burst / 2 / rate * 1e9);
	if (dry_b && bburst / 2 / brate * 1e9 > (double)calm)
		calm = (uint64_t)(bburst / 2 / brate * 1e9);
	if (!s->throttled_since || calm > s->calm_ns)
		s->calm_ns = calm;
	s->dry_ns = now;
	if (!s->throttled_since)
		s->throttled_since = now;
	/* The line first; should the log refuse it for now (a burst the
	 * writer has not caught up with), the next check tries again. */
	if (!s->throttle_noted)
		brk_throttle_note(s, pb, dry_d);
	else if ((double)(now - s->throttled_since) >= (double)pb->throttle_max * 1e9) {
		snprintf(why, whylen, "audit budget spent: throttled for %llu s (%llu denials, %llu bytes "
		    "of log; budget %llu denials a second, burst %llu; %llu bytes a second, burst "
		    "%llu); stopped", (unsigned long long)pb->throttle_max,
		    (unsigned long long)s->ndenied, (unsigned long long)s->nbytes,
		    (unsigned long long)pb->rate, (unsigned long long)pb->burst,
		    (unsigned long long)pb->bytes, (unsigned long long)pb->bytes_burst);
		return BRK_BUDGET_STOP;
	}
	/* Wait until one denial, or a unit of bytes, is back (at least 1 ms,
	 * at most 1 s). */
	if (dry_d)
		need = (1.0 - s->aud_bucket) / rate;
	if (dry_b && (unit - s->aud_bytes) / brate > need)
		need = (unit - s->aud_bytes) / brate;
	if (need < 0.001)
		need = 0.001;
	if (need > 1.0)
		need = 1.0;
	wait->tv_sec = (time_t)need;
	wait->tv_usec = (suseconds_t)((need - (double)wait->tv_sec) * 1e6);
	return BRK_BUDGET_WAIT;
}
