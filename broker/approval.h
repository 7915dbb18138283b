/*
 * approval.h - elevation requests waiting for a human (approval.c),
 * private to broker/.
 */
#ifndef CB_BROKER_APPROVAL_H
#define CB_BROKER_APPROVAL_H

#include "broker/broker.h"

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

#endif
