/*
 * commit.h - the commit gate of administrative decisions (commit.c), and
 * revocation through it (admin.c); private to broker/.
 */
#ifndef CB_BROKER_COMMIT_H
#define CB_BROKER_COMMIT_H

#include "broker/core.h"

/* One administrative decision.  apply makes the durable state change (an
 * st_* call, which brk_decide arms with the record); after runs once the
 * record is durable too (an effect outside the state, such as a kill). */
struct brk_dec {
	const char *op, *sandbox, *resource, *actor, *detail;
	const uint8_t *tid;
	enum aud_decision decision;
	int reason;
	int (*apply)(struct brk *b, void *arg);
	void (*after)(struct brk *b, void *arg);
	void *arg;
};

/* Room, state, log, effect, in that order (see commit.c).  0 when all of it
 * is durable; apply's error with nothing changed; CB_EAUDIT when the log
 * had no room (nothing changed) or could not seal the record (the state
 * change stands): brk_decide_why says which, in a sentence. */
int brk_decide(struct brk *b, const struct brk_dec *d) CB_WARN_UNUSED;
const char *brk_decide_why(const struct brk *b, int err);
/* Revoke a token (and its descendants) through brk_decide; *count (may
 * be NULL) gets how many were newly revoked.  admin.c. */
int brk_revoke(struct brk *b, const uint8_t id[CAP_ID_LEN], const char *sandbox, const char *actor,
    const char *detail, size_t *count) CB_WARN_UNUSED;
/* Revocations committed in the cluster's database and waiting for their
 * decision here (admin.c): decided together, one sync of the state and
 * one of the log for them all, then each answered.  The loop calls it
 * after each delivery of the cluster's link. */
void brk_revoke_flush(struct brk *b);
/* At start: write the records the log lacks, refuse a state behind the log. */
int brk_reconcile(struct brk *b, char *why, size_t whylen) CB_WARN_UNUSED;

#endif
