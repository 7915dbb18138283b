/*
 * approval.h - elevation requests waiting for a human (approval.c),
 * private to broker/.
 */
#ifndef CB_BROKER_APPROVAL_H
#define CB_BROKER_APPROVAL_H

#include "broker/core.h"

/* An elevation granted: what, for how long, on whose word. */
struct brk_grant {
	struct cap *cap;	/* copied: the caller keeps it */
	uint64_t ttl;		/* seconds from now */
	uint64_t rid;		/* the request a human decided; 0: none waited */
	const char *by;		/* the audit actor: "uid:N", "tty", "session", "policy" */
	bool session;		/* later requests inside cap are granted without asking */
	size_t of_session;	/* 1 + the approval "for this session" granting it; 0: none */
	const char *where;	/* in a cluster: the broker it was decided on; NULL: here */
};

/* Mint the elevated token g->cap for s (its clock starting now), record the
 * approval through the commit gate and answer the agent's request qid.
 * CB_EBUSY (no room), the mint budget's or brk_decide's error; the agent
 * was not answered then. */
int brk_grant(struct brk_sbx *s, uint32_t qid, const struct brk_grant *g) CB_WARN_UNUSED;

/* Is s's approval "for this session" i still in force: none of the tokens
 * it minted (the human's approval and its later grants) revoked? */
bool brk_session_live(const struct brk_sbx *s, size_t i);
/* End it (its tokens stay as they are). */
void brk_session_drop(struct brk_sbx *s, size_t i);

/* Queue s's request q for cap (which it takes) and ask a human; on
 * failure q is denied (too many waiting, or the state's error). */
void brk_pending_add(struct brk_sbx *s, const struct wire_req *q, struct cap **cap, uint64_t ttl,
    uint64_t max_ttl);

/* Once a second: expire what no one decided in time (expiry means deny). */
void brk_pending_tick(struct brk *b);
/* A human's decision on a waiting request (admin socket or terminal). */
struct brk_verdict {
	uint64_t rid;
	bool approve;
	uint64_t ttl;		/* approve: 0 as asked, else at most that */
	bool session;		/* approve: later requests inside it without asking */
	const char *by;		/* the audit actor */
	const char *reason;	/* deny: why, for the agent and the log (may be NULL) */
	const char *where;	/* in a cluster: the broker it was decided on (fleet.c); NULL: here */
};

/* Apply v: approve mints the token, deny refuses; both on record through
 * the commit gate.  CB_ENOENT (unknown, or its sandbox is gone), CB_EEXIST
 * (already decided), CB_EEXPIREDREQ (expired), CB_EBUSY (no room for the
 * grant) or the gate's error. */
int brk_pending_decide(struct brk *b, const struct brk_verdict *v) CB_WARN_UNUSED;
/* s is gone: its waiting requests are denied on record. */
void brk_pending_drop_sbx(struct brk *b, struct brk_sbx *s);
/* Ask the oldest waiting request at the terminal (--approve tty). */
void brk_tty_prompt_next(struct brk *b);

#endif
