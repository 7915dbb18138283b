/*
 * approval.h - elevation requests waiting for a human (approval.c),
 * private to broker/.
 */
#ifndef CB_BROKER_APPROVAL_H
#define CB_BROKER_APPROVAL_H

#include "broker/core.h"

/* Mint the elevated token cap for s (its clock starting now), record the
 * approval (rid 0: none waited) through the commit gate and answer the
 * agent's request qid.  session: later requests inside cap are granted
 * without asking.  CB_EBUSY (no room), the mint budget's or brk_decide's
 * error; the agent was not answered then. */
int brk_grant(struct brk *b, struct brk_sbx *s, uint32_t qid, struct cap *cap, uint64_t ttl,
    uint64_t rid, const char *by, bool session) CB_WARN_UNUSED;

/* Queue s's request q for cap (which it takes) and ask a human; on
 * failure q is denied (too many waiting, or the state's error). */
void brk_pending_add(struct brk_sbx *s, const struct wire_req *q, struct cap **cap, uint64_t ttl,
    uint64_t max_ttl);

/* Once a second: expire what no one decided in time (expiry means deny). */
void brk_pending_tick(struct brk *b);
/* A human's decision on request rid (admin socket or terminal): approve
 * mints the token (ttl 0: as asked; session: later requests inside it are
 * granted without asking), deny refuses; both on record through the commit
 * gate.  CB_ENOENT (unknown), CB_EEXPIREDREQ (no longer waiting), CB_EBUSY
 * (no room for the grant) or the gate's error. */
int brk_pending_decide(struct brk *b, uint64_t rid, bool approve, uint64_t ttl, bool session,
    const char *by, const char *reason) CB_WARN_UNUSED;
/* s is gone: its waiting requests are denied on record. */
void brk_pending_drop_sbx(struct brk *b, struct brk_sbx *s);
/* Ask the oldest waiting request at the terminal (--approve tty). */
void brk_tty_prompt_next(struct brk *b);

#endif
