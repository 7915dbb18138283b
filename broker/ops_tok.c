/*
 * ops_tok.c - tokens, token.add, derive and request (time-limited
 * elevation: what a human must decide waits in approval.c).
 *
 * Trust domain: broker.  Why these are safe:
 *  - tokens lists only this sandbox's own table.
 *  - token.add decodes and fully verifies a presented token (audience
 *    included), so a token stolen from another sandbox is refused here too.
 *  - derive mints only what cap_derive_check proves is inside a parent the
 *    sandbox validly holds, records the parent so revocation cascades, and
 *    cannot raise elevation.
 *  - request consults the policy first: a capability no rule lists is
 *    denied at once without bothering a human; only an AUTO rule inside the
 *    ceiling mints without a person; the elevation clock starts at
 *    approval; an undecided request expires and expiry means deny.
 */
#include "broker/core.h"
#include "broker/approval.h"
#include "broker/chan.h"
#include "broker/ops.h"
#include "broker/tokens.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* wire/ cannot see caps/ (caps/ is built on it), so it names its own bound
 * on a derive request's capabilities: the two must agree. */
_Static_assert(WIRE_CAPS_MAX == CAP_MAX_CAPS, "a derive request holds a token's capabilities");

#define BRK_TOKINFO_CAPS_MAX 2048	/* a held token's capabilities, listed for tokens */

static void
brk_tokinfo(struct brk_sbx *s, size_t i, struct wire_tokinfo *ti, char *idhex, char *caps,
    size_t capslen)
{
	const struct cap_claims *c = &s->held[i].tok->c;
	struct st_token rec;
	size_t l = 0;

	cap_hex(c->id, CAP_ID_LEN, idhex);
	caps[0] = '\0';
	for (size_t k = 0; k < c->ncaps && l + 2 < capslen; k++)
		l += (size_t)snprintf(caps + l, capslen - l, "%s%s", k ? " " : "", c->caps[k]->text);
	*ti = (struct wire_tokinfo){ .th = (uint32_t)i, .id = idhex, .caps = caps, .exp = c->exp,
		.elevated = c->elevated };
	/* Whether it would pass now (clock, revocation, uses, signature), so
	 * an agent can see that a token it holds has stopped working. */
	ti->state = brk_tok_check(s, &s->held[i], NULL, NULL);
	if (c->has_uses && st_token_get(s->b->st, c->id, &rec) == 0) {
		ti->has_uses = true;
		ti->uses = rec.uses_left;
		st_token_clear(&rec);
	}
}

/* Safe: lists only the sandbox's own table. */
void
brk_op_tokens(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	static struct wire_tokinfo ti[BRK_HELD_MAX];
	static char ids[BRK_HELD_MAX][2 * CAP_ID_LEN + 1];
	static char caps[BRK_HELD_MAX][BRK_TOKINFO_CAPS_MAX];
	struct wire_reply rp = { .id = q->id, .tokens = ti };

	(void)u;
	for (size_t i = 0; i < s->nheld; i++)
		brk_tokinfo(s, i, &ti[i], ids[i], caps[i], sizeof(caps[i]));
	rp.ntokens = s->nheld;
	brk_reply(s, &rp, -1);
}

void
brk_op_token_add(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct wire_reply rp = { .id = q->id };
	struct brk_held *h;
	int e;

	(void)u;
	if (!q->tok) {
		brk_deny(s, q, CB_EINVAL, NULL, NULL, "no token given");
		return;
	}
	if ((e = brk_held_present(s, q->tok, NULL, &h, NULL)) != 0) {
		brk_deny(s, q, e, "token.add", NULL, NULL);
		return;
	}
	rp.has_th = true;
	rp.th = (uint32_t)(h - s->held);
	brk_reply(s, &rp, -1);
}

/* No parent named: the first valid held token that contains every
 * capability asked for, or NULL. */
static struct brk_held *
brk_derive_parent(struct brk_sbx *s, struct cap *const *caps, size_t ncaps)
{
	for (size_t k = 0; k < s->nheld; k++) {
		struct brk_held *h = &s->held[k];
		bool all = brk_tok_check(s, h, NULL, NULL) == 0;

		for (size_t i = 0; i < ncaps && all; i++) {
			bool in = false;

			for (size_t j = 0; j < h->tok->c.ncaps && !in; j++)
				in = cap_contains(h->tok->c.caps[j], caps[i]);
			all = in;
		}
		if (all)
			return h;
	}
	return NULL;
}

void
brk_op_derive(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct wire_reply rp = { .id = q->id };
	struct brk_held *p = NULL;
	struct cap_claims child;
	struct cap *caps[CAP_MAX_CAPS];
	size_t ncaps = 0;
	char *text = NULL, tid[2 * CAP_ID_LEN + 1];
	uint8_t id[CAP_ID_LEN];
	uint64_t now = cb_now();
	const char *aud = q->aud ? q->aud : s->id;
	int e;

	(void)u;	/* the parent is chosen below */
	memset(&child, 0, sizeof(child));
	if (q->ttl > CB_DURATION_MAX) {
		brk_deny(s, q, CB_EINVAL, "derive", NULL, "ttl is at most 31622400 seconds (366 days)");
		return;
	}
	if (!cap_aud_valid(aud, strlen(aud)) || q->ncaps == 0) {
		brk_deny(s, q, CB_EINVAL, "derive", NULL, "need capabilities and a valid audience");
		return;
	}
	for (size_t i = 0; i < q->ncaps; i++) {
		if ((e = cap_parse(q->caps[i], &caps[ncaps])) != 0) {
			brk_deny(s, q, e, q->caps[i], NULL, NULL);
			goto out;
		}
		ncaps++;
	}
	if (q->tok || q->has_th) {
		if ((e = brk_tok_select(s, q, NULL, &p, NULL)) != 0) {
			brk_deny(s, q, e, "derive", p ? p->tok->c.id : NULL, NULL);
			goto out;
		}
	} else if (!(p = brk_derive_parent(s, caps, ncaps))) {
		brk_deny(s, q, CB_ENOTCOVERED, "derive", NULL,
		    "no token held contains the capabilities asked for");
		goto out;
	}
	/* A human approved an elevation for this sandbox, having seen its
	 * command: it is not this sandbox's to hand on. */
	if (p->tok->c.elevated && strcmp(aud, s->id) != 0) {
		brk_deny(s, q, CB_ENARROW, "derive", p->tok->c.id,
		    "an elevated token cannot be derived for another sandbox");
		goto out;
	}
	/* No silent truncation: a token the table could not hold is not
	 * minted at all. */
	if (strcmp(aud, s->id) == 0 && s->nheld >= BRK_HELD_MAX) {
		brk_deny(s, q, CB_EBUSY, "derive", p->tok->c.id, "this sandbox holds too many tokens");
		goto out;
	}
	/* The child as it would be signed, judged before signing. */
	child.nbf = now > p->tok->c.nbf ? now : p->tok->c.nbf;
	/* never past the parent's expiry; no overflow for a huge ttl */
	child.exp = q->ttl && p->tok->c.exp > now && q->ttl < p->tok->c.exp - now ?
	    now + q->ttl : p->tok->c.exp;
	child.has_uses = q->has_uses || p->tok->c.has_uses;
	child.uses = q->has_uses ? q->uses : p->tok->c.uses;
	child.has_parent = true;
	memcpy(child.parent, p->tok->c.id, CAP_ID_LEN);
	child.elevated = p->tok->c.elevated;
	child.ncaps = ncaps;
	memcpy(child.caps, caps, sizeof(caps[0]) * ncaps);
	e = cap_derive_check(&p->tok->c, &child);
	child.ncaps = 0;	/* caps[] still owns them */
	if (e == 0)
		e = brk_tok_commit(s, NULL);	/* the parent's uses are not spent */
	if (e == 0 && (e = brk_mint_charge(s)) != 0) {
		brk_deny(s, q, e, "derive", p->tok->c.id, "this sandbox has minted too many tokens");
		goto out;
	}
	if (e == 0)
		e = brk_tok_mint(s->b, &(struct brk_mint){ .aud = aud, .caps = caps,
			.ncaps = ncaps, .nbf = child.nbf, .exp = child.exp,
			.has_uses = child.has_uses, .uses = child.uses, .parent = p->tok->c.id,
			.elevated = child.elevated, .instance = s->instance, .by = s->id },
		    &text, id);
	if (e != 0) {
		brk_deny(s, q, e, "derive", p->tok->c.id, NULL);
		goto out;
	}
	cap_hex(id, CAP_ID_LEN, tid);
	rp.token = text;
	rp.tid = tid;
	if (strcmp(aud, s->id) == 0 && brk_held_add(s, text, strlen(text), true, &rp.th) == 0)
		rp.has_th = true;
	brk_reply(s, &rp, -1);
out:
	free(text);
	for (size_t i = 0; i < ncaps; i++)
		cap_free(caps[i]);
}

void
brk_op_request(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct brk *b = s->b;
	struct cap *cap = NULL;
	enum pol_approval mode;
	uint64_t max_ttl, ttl;
	int e;

	(void)u;
	if (!q->cap) {
		brk_deny(s, q, CB_EINVAL, NULL, NULL, "request needs a capability");
		return;
	}
	if ((e = cap_parse(q->cap, &cap)) != 0) {
		brk_deny(s, q, e, q->cap, NULL, NULL);
		return;
	}
	if (q->ttl > CB_DURATION_MAX) {
		brk_deny(s, q, CB_EINVAL, cap->text, NULL, "ttl is at most 31622400 seconds (366 days)");
		goto out;
	}
	if ((e = pol_inst_requestable(s->inst, cap, &mode, &max_ttl)) != 0) {
		brk_deny(s, q, CB_EPOLICY, cap->text, NULL, "the policy does not let this tier request it");
		goto out;
	}
	ttl = q->ttl && q->ttl < max_ttl ? q->ttl : max_ttl;
	if (ttl == 0) {
		brk_deny(s, q, CB_EINVAL, cap->text, NULL, "ttl must be positive");
		goto out;
	}
	if (s->inflight >= BRK_INFLIGHT_MAX) {
		brk_deny(s, q, CB_EBUSY, cap->text, NULL, NULL);
		goto out;
	}
	/* Nothing could be minted: no human is asked for it. */
	if (s->minted >= BRK_MINT_MAX || s->nheld >= BRK_HELD_MAX) {
		brk_deny(s, q, CB_EBUSY, cap->text, NULL, "this sandbox has minted or holds too many tokens");
		goto out;
	}
	/* An approval "for this session" covers later requests inside it,
	 * until one of the tokens it minted is revoked: an administrator's
	 * revocation ends it, and a human is asked again. */
	for (size_t i = 0; i < s->nsession; i++) {
		if (!cap_contains(s->session_caps[i], cap))
			continue;
		if (!brk_session_live(s, i)) {
			brk_session_drop(s, i--);
			continue;
		}
		if (ttl > s->session_ttl[i])
			ttl = s->session_ttl[i];
		if ((e = brk_grant(s, q->id, &(struct brk_grant){ .cap = cap, .ttl = ttl,
		    .by = "session", .of_session = i + 1 })) != 0)
			brk_deny(s, q, e, cap->text, NULL, NULL);
		goto out;
	}
	if (mode == POL_APPROVE_AUTO) {
		if ((e = brk_grant(s, q->id, &(struct brk_grant){ .cap = cap, .ttl = ttl,
		    .by = "policy" })) != 0)
			brk_deny(s, q, e, cap->text, NULL, NULL);
		goto out;
	}
	if (b->opts.approve == BRK_APPROVE_DENY) {
		brk_deny(s, q, CB_EDENIED, cap->text, NULL, "approval mode is deny");
		goto out;
	}
	brk_pending_add(s, q, &cap, ttl, max_ttl);
out:
	cap_free(cap);
}
