/*
 * budget.h - what one sandbox may make the broker write to the audit log,
 * and the lines the log refused, counted (budget.c); private to broker/.
 */
#ifndef CB_BROKER_BUDGET_H
#define CB_BROKER_BUDGET_H

#include "broker/core.h"

enum brk_budget {
	BRK_BUDGET_OK,		/* read on */
	BRK_BUDGET_WAIT,	/* throttled: read again after *wait */
	BRK_BUDGET_STOP,	/* throttled too long: close the channel, saying why */
};
/* Audit a line that s caused (r->sandbox is set to s's id) and charge its
 * bytes to s's audit budget: every line an agent causes goes through here
 * (or brk_budget_deny, which does).  0, or aud_append's error (then nothing
 * was written or charged, nor counted: for a caller that tries again).
 * Once a line is taken, s's counts of refused lines are written too. */
int brk_audit_sbx(struct brk_sbx *s, const struct aud_rec *r);
/* The same for a line that will not be tried again (what was done or
 * answered already): one the log refuses is counted in s->unlogged by its
 * kind, and an audit.unlogged line says how many once the log takes lines
 * again (brk_audit_sbx, brk_budget_tick, brk_budget_end). */
void brk_audit_done(struct brk_sbx *s, const struct aud_rec *r);
/* Append r to the audit log (if open), for no sandbox or one that ended.
 * A failure is not reported: whoever is about to act checked the log's
 * room first (brk_tok_commit, brk_decide); a line the log refuses is
 * counted in b->unlogged, as brk_audit_done does. */
void brk_audit(struct brk *b, const struct aud_rec *r);
/* Once a second, and before the log closes (last): write b's counts of
 * refused lines.  At close, what the log still refuses is said on stderr. */
void brk_unlogged_tick(struct brk *b, bool closing);
/* Charge bytes of audit log written for s (a line appended elsewhere). */
void brk_budget_charge(struct brk_sbx *s, size_t bytes);
/* Audit a denial for s: written, or counted when it repeats a recent one;
 * either way charged to the sandbox's audit budget. */
void brk_budget_deny(struct brk_sbx *s, int reason, const char *op, const char *resource,
    const uint8_t *tid, const char *detail);
/* Before reading a request: may s be served now? */
enum brk_budget brk_budget_check(struct brk_sbx *s, struct timeval *wait, char *why,
    size_t whylen);
/* Once a second: write the counts that waited a second or more. */
void brk_budget_tick(struct brk_sbx *s);
/* capctl audit is about to read the log (admin status with flush): write
 * every pending count now, and s's counts of refused lines if the log
 * takes them; the kinds stay remembered, so repeats go on coalescing. */
void brk_budget_flush(struct brk_sbx *s);
/* The sandbox ends: write every count, forget every denial; a count of
 * refused lines the log still refuses passes to the broker's. */
void brk_budget_end(struct brk_sbx *s);

#endif
