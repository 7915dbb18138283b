/*
 * fleet.h - the broker's side of a cluster (fleet.c): what other brokers
 * decided, applied here; what we decide, published; and the staleness
 * bound that fails closed when the database is away.  Private to broker/.
 * Without `--cluster` (or the policy's `cluster`) every function here is a
 * no-op that says yes.
 */
#ifndef CB_BROKER_FLEET_H
#define CB_BROKER_FLEET_H

#include "broker/approval.h"
#include "broker/core.h"
#include "cluster/cluster.h"

/* Connect (in the background) when a cluster is configured; publish our
 * keys.  CB_EINVAL and a sentence in why for a bad configuration. */
int brk_fleet_open(struct brk *b, char *why, size_t whylen) CB_WARN_UNUSED;
void brk_fleet_close(struct brk *b);

/* Is this broker in a cluster? */
bool brk_fleet_on(const struct brk *b);

/* May tokens be honoured now?  0, or CB_ECLUSTER when nothing was heard
 * from the database for longer than the staleness bound (hot path: a
 * clock read). */
int brk_fleet_fresh(const struct brk *b) CB_WARN_UNUSED;

/* May a token be minted or an approval granted now?  0, or CB_ECLUSTER
 * (the link is down or stale); why (may be NULL) gets a sentence. */
int brk_fleet_mint_ok(const struct brk *b, char *why, size_t whylen) CB_WARN_UNUSED;

/* A sentence on why the broker is stale (for replies and the audit log). */
const char *brk_fleet_why(const struct brk *b);

/* Hand a job to the link (it owns j from now on).  CB_ECLUSTER without a
 * cluster, CB_EBUSY when too many wait. */
int brk_fleet_submit(struct brk *b, struct cl_job *j) CB_WARN_UNUSED;

/* Publish a token we minted (kept and retried while the database is
 * away); done/arg, if done is set, make it a job that fails at once
 * instead and reports through done, later, on the loop.  0 (also without
 * a cluster), or CB_ENOMEM / CB_EBUSY (then done is never called). */
int brk_fleet_token(struct brk *b, const struct st_token *rec,
    void (*done)(void *arg, const struct cl_job *j), void *arg) CB_WARN_UNUSED;

/* Publish every key of ours again (after a rotation or retirement). */
void brk_fleet_keys(struct brk *b);

/* ---- elevation requests across the cluster (docs/cluster.md) ---- */

/* The cluster-wide id of a request this broker's state numbered local:
 * local itself without a cluster; 0 while this broker has no number in
 * the cluster yet (it never reached the database since it started). */
uint64_t brk_fleet_rid(const struct brk *b, uint64_t local);
/* Record a request of ours in the cluster (in the background; kept while
 * the database is away).  No-op without a cluster. */
void brk_fleet_request(struct brk *b, const struct st_request *rq);
/* A request of ours lapsed (expired) or was denied here without a human
 * (its sandbox is gone): closed in the cluster too, unless a decision won
 * there first (that one is then applied and finds it closed). */
void brk_fleet_closed(struct brk *b, uint64_t local, bool expired, const char *by, const char *why);
/* Decide v->rid (a cluster-wide id) in the cluster's database: exactly
 * one decision wins; the broker holding it applies it.  done (may be
 * NULL) runs on the loop once the holder applied it, or with the reason
 * it was not (struct cl_job's err).  0, CB_ENOMEM, CB_EBUSY, CB_ECLUSTER
 * (no cluster); then done is never called. */
int brk_fleet_decide(struct brk *b, const struct brk_verdict *v,
    void (*done)(void *arg, const struct cl_job *j), void *arg) CB_WARN_UNUSED;
/* Publish the sandboxes this broker runs when they changed (once a
 * second, from the broker's tick). */
void brk_fleet_sandboxes(struct brk *b);

/* Does the audit log at path (whose genesis says log_id) hold what the
 * cluster recorded for this broker (the heads read by a CL_GET_HEADS job
 * j)?  Every log recorded under our name must be this one, and this one
 * must still reach its recorded head.  *problem gets "" or
 * aud_problem_name's word, buf a sentence.  Reads the whole log. */
bool brk_fleet_check_heads(struct brk *b, const struct cap_keyring *kr, const char *path,
    const uint8_t log_id[16], const struct cl_job *j, const char **problem, char *buf, size_t len);

#endif
