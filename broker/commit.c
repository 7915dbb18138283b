/*
 * commit.c - the one commit gate every administrative decision passes
 * (issue, derive, revoke, approve, deny, rotate-key, retire-key, kill).
 *
 * Trust domain: broker.  The order is fixed here and nowhere else:
 *  1. room: the audit log must be healthy and have room reserved for the
 *     record, or nothing is done (fail closed before acting);
 *  2. state: the change is one SQLite transaction, synced, that also bumps
 *     the decision sequence and keeps the decision's record beside it; the
 *     in-memory view changes only after that commit (state/ does this);
 *  3. log: the record, carrying the sequence, is appended and sealed by a
 *     signed checkpoint, synced;
 *  4. only then the effect outside the state (a kill) and the answer.
 * A crash between 2 and 3 leaves the state one decision ahead of the log:
 * the next start writes the kept record (brk_reconcile).  The log can never
 * get ahead of the state, so a state found behind the log was damaged or
 * rolled back, and the broker refuses it (docs/state.md).
 */
#include "broker/core.h"
#include "broker/commit.h"

#include <stdio.h>
#include <string.h>

static void
brk_dec_copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

int
brk_decide(struct brk *b, const struct brk_dec *d)
{
	struct st_decision sd;
	const struct st_decision *rec = &sd;
	struct aud_rec r;
	int e;

	b->dec_why[0] = '\0';
	if (!aud_room(b->aud)) {
		snprintf(b->dec_why, sizeof(b->dec_why), "nothing was changed: the audit log %s",
		    aud_healthy(b->aud) ? "has no room reserved for the record (disk full?)" :
		    "cannot be written");
		return CB_EAUDIT;
	}
	memset(&sd, 0, sizeof(sd));
	brk_dec_copy(sd.op, sizeof(sd.op), d->op);
	brk_dec_copy(sd.sandbox, sizeof(sd.sandbox), d->sandbox);
	brk_dec_copy(sd.resource, sizeof(sd.resource), d->resource);
	brk_dec_copy(sd.actor, sizeof(sd.actor), d->actor);
	brk_dec_copy(sd.detail, sizeof(sd.detail), d->detail);
	if (d->tid) {
		sd.has_token = true;
		memcpy(sd.token, d->tid, CAP_ID_LEN);
	}
	sd.decision = d->decision;
	sd.reason = d->reason;
	if (d->apply) {
		st_decision_arm(b->st, &sd);
		e = d->apply(b, d->arg);
		/* a change that did not commit leaves nothing armed */
		st_decision_disarm(b->st);
		if (e == CB_EIO || e == CB_EINTERNAL || e == CB_EBUSY || e == CB_ENOMEM) {
			snprintf(b->dec_why, sizeof(b->dec_why), "nothing was changed: the state "
			    "database %s/state.db could not be written (%s)", b->state_dir, cb_strerror(e));
			return e;
		}
		if (e != 0)
			return e;
		/* the record exactly as the state kept it (rotate-key fills in
		 * the new key's id) */
		rec = st_decision_committed(b->st);
	}
	memset(&r, 0, sizeof(r));
	r.kind = AUD_ADMIN;
	r.decision = (enum aud_decision)rec->decision;
	r.reason = rec->reason;
	r.sandbox = rec->sandbox[0] ? rec->sandbox : NULL;
	r.op = rec->op;
	r.resource = rec->resource[0] ? rec->resource : NULL;
	r.token_id = rec->has_token ? rec->token : NULL;
	r.actor = rec->actor[0] ? rec->actor : NULL;
	r.detail = rec->detail[0] ? rec->detail : NULL;
	r.dseq = d->apply ? rec->dseq : 0;
	if ((e = aud_append(b->aud, &r)) == 0)
		e = aud_checkpoint(b->aud);
	if (e != 0) {
		snprintf(b->dec_why, sizeof(b->dec_why), d->apply ?
		    "it took effect in the state, but its audit record could not be made durable (%s); "
		    "the broker refuses operations until the log is repaired, and writes the record "
		    "at its next start" :
		    "nothing was done: its audit record could not be made durable (%s)", cb_strerror(e));
		return CB_EAUDIT;
	}
	if (d->after)
		d->after(b, d->arg);
	return 0;
}

const char *
brk_decide_why(const struct brk *b, int err)
{
	return b->dec_why[0] ? b->dec_why : cb_strerror(err);
}

/* At start: the log may lack the last decision (a crash between the state's
 * commit and the log's sync).  Write the record the state kept.  A state
 * behind the log was rolled back or damaged: refuse it. */
int
brk_reconcile(struct brk *b, char *why, size_t whylen)
{
	uint64_t sd = st_dseq(b->st), ld = aud_open_dseq(b->aud);
	struct st_decision rec;
	struct aud_rec r;
	char detail[ST_DEC_TEXT_MAX + 128];
	int e;

	if (sd == ld)
		return 0;
	if (sd < ld) {
		snprintf(why, whylen, "state %s/state.db is behind its audit log: the log records "
		    "decision %llu, the state only %llu (its database or write-ahead log was deleted, "
		    "cut or damaged?); refusing to start from a state that forgot decisions. Rebuild it "
		    "from the log with `capbroker state rebuild --state %s`, or restore a backup",
		    b->state_dir, (unsigned long long)ld, (unsigned long long)sd, b->state_dir);
		return CB_EAUDIT;
	}
	/* The state keeps the record of its last decision, and of every
	 * decision committed in the same transaction (a batch of revokes,
	 * st_revoke_many): a crash can leave the log that many behind. */
	for (uint64_t k = ld + 1; k <= sd; k++) {
		if (st_decision_at(b->st, k, &rec) == 0 && rec.dseq == k)
			continue;
		snprintf(why, whylen, "audit log %s/audit.jsonl is behind the state: the state "
		    "has decision %llu, the log only %llu; refusing to start (check it with "
		    "`capctl --state %s audit verify`)", b->state_dir, (unsigned long long)sd,
		    (unsigned long long)ld, b->state_dir);
		return CB_EAUDIT;
	}
	e = 0;
	for (uint64_t k = ld + 1; k <= sd && e == 0; k++) {
		if ((e = st_decision_at(b->st, k, &rec)) != 0)
			break;
		snprintf(detail, sizeof(detail), "recovered at start (committed before a crash, its "
		    "record was not yet durable)%s%s", rec.detail[0] ? ": " : "", rec.detail);
		memset(&r, 0, sizeof(r));
		r.kind = AUD_ADMIN;
		r.decision = (enum aud_decision)rec.decision;
		r.reason = rec.reason;
		r.sandbox = rec.sandbox[0] ? rec.sandbox : NULL;
		r.op = rec.op;
		r.resource = rec.resource[0] ? rec.resource : NULL;
		r.token_id = rec.has_token ? rec.token : NULL;
		r.actor = rec.actor[0] ? rec.actor : NULL;
		r.detail = detail;
		r.dseq = rec.dseq;
		e = aud_append(b->aud, &r);
	}
	if (e == 0)
		e = aud_checkpoint(b->aud);
	if (e != 0)
		snprintf(why, whylen, "audit log %s/audit.jsonl: cannot write the recovered record of "
		    "decision %llu: %s", b->state_dir, (unsigned long long)sd, cb_strerror(e));
	return e;
}
