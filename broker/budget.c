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

/* The line for c's repeats since its last line. */
static void
brk_coal_write(struct brk_sbx *s, struct brk_coal *c)
{
	struct aud_rec r = {
		.kind = AUD_OP, .decision = AUD_DENY, .reason = c->reason, .sandbox = s->id,
		.op = c->op, .resource = c->resource, .token_id = c->has_tid ? c->tid : NULL,
		.actor = "agent", .detail = c->detail, .count = c->count, .first_ns = c->first_ns,
		.last_ns = c->last_ns,
	};

	if (s->b->aud && aud_append(s->b->aud, &r) == 0)
		brk_budget_charge(s, aud_rec_cost(&r));
	c->count = 0;
	s->aud_bucket -= 1.0;
}

void
brk_budget_charge(struct brk_sbx *s, size_t bytes)
{
	s->aud_bytes -= (double)bytes;
	s->nbytes += bytes;
}

int
brk_audit_sbx(struct brk_sbx *s, const struct aud_rec *r)
{
	struct aud_rec c = *r;
	int e;

	if (!s->b->aud)
		return 0;
	c.sandbox = s->id;
	if ((e = aud_append(s->b->aud, &c)) == 0)
		brk_budget_charge(s, aud_rec_cost(&c));
	return e;
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
	/* health is checked before acting: a denial that finds no room is
	 * only refused, and the reply says so */
	cb_ignore(brk_audit_sbx(s, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_DENY,
	    .reason = reason, .op = op, .resource = resource, .token_id = tid, .actor = "agent",
	    .detail = detail }));
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
}

void
brk_budget_end(struct brk_sbx *s)
{
	for (size_t i = 0; i < BRK_COAL_SLOTS; i++) {
		if (s->coal[i].used && s->coal[i].count)
			brk_coal_write(s, &s->coal[i]);
		brk_coal_clear(&s->coal[i]);
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
