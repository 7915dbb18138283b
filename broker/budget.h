/*
 * budget.h - what one sandbox may make the broker write to the audit log
 * (budget.c); private to broker/.
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
 * was written or charged). */
int brk_audit_sbx(struct brk_sbx *s, const struct aud_rec *r);
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
/* The sandbox ends: write every count, forget every denial. */
void brk_budget_end(struct brk_sbx *s);

#endif
