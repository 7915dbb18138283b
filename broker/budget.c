/*
 * budget.c - the audit budget of a sandbox: what one agent's denials may
 * make the broker write to the audit log.
 *
 * Trust domain: broker.  Every denial is caused by a hostile agent, which
 * chooses its fields (path, host, token).  Without a budget, denied
 * requests at the request rate grow the log by about 16 MB/s, and a full
 * disk stops the log and with it every sandbox on the broker.  So:
 *  - Repeated identical denials are coalesced: the first is written as it
 *    is; identical ones after it (same op, resource, reason, token and
 *    detail) are only counted, and at most once a second one line says how
 *    many there were and when the first and last came (count, first,
 *    last: docs/audit.md).  A few recent denials are remembered
 *    (BRK_COAL_SLOTS), so alternating requests coalesce too.
 *  - Every denial draws on a token bucket of the policy's size
 *    (defaults.audit_budget a second, audit_burst): a written line costs
 *    one, a coalesced repeat 1/BRK_COAL_COST.  When the bucket is empty the
 *    sandbox is throttled: the loop stops reading its channel until the
 *    bucket refills, so its requests wait (none is lost or unaudited) and
 *    the others are served as before.  One line says so.
 *  - A sandbox throttled for audit_throttle_max seconds on end is stopped:
 *    its channel is closed (one line says why) and it is killed.
 * Every line an agent can cause is thereby bounded per sandbox: at most
 * burst + rate x throttle_max denial lines, plus the coalesced summaries
 * (at most one per slot a second), plus a handful of life-cycle lines.
 * Allowed operations are not budgeted: each needs a grant, and the request
 * rate (BRK_RATE) bounds them.
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

	if (s->b->aud)
		cb_ignore(aud_append(s->b->aud, &r));
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
	brk_audit(s->b, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_DENY, .reason = reason,
	    .sandbox = s->id, .op = op, .resource = resource, .token_id = tid, .actor = "agent",
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

enum brk_budget
brk_budget_check(struct brk_sbx *s, struct timeval *wait, char *why, size_t whylen)
{
	const struct pol_audit_budget *pb = pol_audit_budget(s->pol->pol);
	double rate = pb->rate ? (double)pb->rate : 1.0, burst = pb->burst ? (double)pb->burst : 1.0;
	uint64_t now = cb_mono_ns();
	double need, calm_s = burst / 2 / rate;

	s->aud_bucket += (double)(now - s->aud_bucket_ns) * rate / 1e9;
	if (s->aud_bucket > burst)
		s->aud_bucket = burst;
	s->aud_bucket_ns = now;
	if (s->aud_bucket >= 1.0) {
		/* The episode is over once the sandbox has not run dry for as
		 * long as half the burst takes to refill (at least 1 s): the
		 * agent calmed down.  Being served after a wait is not that,
		 * however late the loop's timer fired. */
		if (s->throttled_since &&
		    (double)(now - s->dry_ns) >= (calm_s > 1.0 ? calm_s : 1.0) * 1e9)
			s->throttled_since = 0;
		return BRK_BUDGET_OK;
	}
	s->dry_ns = now;
	if (!s->throttled_since) {
		char detail[256];

		s->throttled_since = now;
		snprintf(detail, sizeof(detail), "audit budget spent (%llu denials; %llu a second, "
		    "burst %llu): its requests wait; stopped if this lasts %llu s",
		    (unsigned long long)s->ndenied, (unsigned long long)pb->rate,
		    (unsigned long long)pb->burst, (unsigned long long)pb->throttle_max);
		brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .sandbox = s->id,
		    .op = "sandbox.throttled", .actor = "broker", .detail = detail });
	} else if ((double)(now - s->throttled_since) >= (double)pb->throttle_max * 1e9) {
		snprintf(why, whylen, "audit budget spent: throttled for %llu s (%llu denials; %llu a "
		    "second, burst %llu); stopped", (unsigned long long)pb->throttle_max,
		    (unsigned long long)s->ndenied, (unsigned long long)pb->rate,
		    (unsigned long long)pb->burst);
		return BRK_BUDGET_STOP;
	}
	/* Wait until one unit is back (at least 1 ms, at most 1 s). */
	need = (1.0 - s->aud_bucket) / rate;
	if (need < 0.001)
		need = 0.001;
	if (need > 1.0)
		need = 1.0;
	wait->tv_sec = (time_t)need;
	wait->tv_usec = (suseconds_t)((need - (double)wait->tv_sec) * 1e6);
	return BRK_BUDGET_WAIT;
}
