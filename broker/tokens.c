/*
 * tokens.c - the tokens a sandbox holds and the check every operation
 * passes, cheapest test first.
 *
 * Trust domain: broker.  Token text comes from agents.  A token is decoded
 * once when it enters the sandbox's table; its signature is verified once
 * and the result cached in the table entry (a verification costs ~90 us, a
 * lookup nanoseconds).  What can change after that is re-checked on every
 * use: the clock, revocation (st_token_state: O(1) per ancestor, in memory,
 * so a revocation bites on the very next operation) and use counts.  Key
 * retirement bumps st_epoch(), which invalidates every cached signature.
 */
#include "broker/core.h"
#include "broker/commit.h"
#include "broker/fleet.h"
#include "broker/tokens.h"

#include <stdlib.h>
#include <string.h>

static void
brk_held_ceiling(struct brk_sbx *s, struct brk_held *h)
{
	const struct cap_claims *c = &h->tok->c;

	h->in_ceiling = 0;
	for (size_t i = 0; i < c->ncaps; i++) {
		bool ok;

		/* An approved elevation is judged against what the policy lets
		 * this tier request, an ordinary token against the ceiling. */
		if (c->elevated) {
			enum pol_approval mode;
			uint64_t max_ttl;

			ok = pol_inst_requestable(s->inst, c->caps[i], &mode, &max_ttl) == 0;
		} else {
			ok = pol_inst_within_ceiling(s->inst, c->caps[i]);
		}
		if (ok)
			h->in_ceiling |= 1u << i;
	}
}

int
brk_held_add(struct brk_sbx *s, const char *text, size_t len, bool granted, uint32_t *th)
{
	struct brk_held *h;
	int r;

	for (size_t i = 0; i < s->nheld; i++) {
		if (s->held[i].text_len == len && memcmp(s->held[i].text, text, len) == 0) {
			*th = (uint32_t)i;
			return 0;
		}
	}
	if (s->nheld == BRK_HELD_MAX)
		return CB_EBUSY;
	h = &s->held[s->nheld];
	memset(h, 0, sizeof(*h));
	if ((r = cap_token_decode(text, len, &h->tok)) != 0)
		return r;
	if (!(h->text = malloc(len + 1))) {
		cap_token_free(h->tok);
		h->tok = NULL;
		return CB_ENOMEM;
	}
	memcpy(h->text, text, len);
	h->text[len] = '\0';
	h->text_len = len;
	h->granted = granted;
	/* An approval belongs to the sandbox instance a human saw: the state
	 * says which.  A later sandbox with the same id (the token's audience)
	 * never inherits one, even if ending the old instance could not be
	 * written. */
	if (h->tok->c.elevated) {
		uint64_t inst = 0;

		h->inst_ok = st_token_instance(s->b->st, h->tok->c.id, &inst) == 0 &&
		    inst == s->instance && inst != 0;
	}
	brk_held_ceiling(s, h);
	*th = (uint32_t)s->nheld++;
	if (s->b->tokens_changed)
		s->b->tokens_changed(s);
	return 0;
}

void
brk_held_clear(struct brk_sbx *s)
{
	for (size_t i = 0; i < s->nheld; i++) {
		cap_token_free(s->held[i].tok);
		free(s->held[i].text);
	}
	s->nheld = 0;
}

/* Which capability covers r inside the ceiling?  CB_ENOTCOVERED if none
 * covers, CB_EPOLICY if only capabilities beyond the ceiling do. */
static int
brk_cover(const struct brk_held *h, const struct cap_req *r, size_t *capi)
{
	const struct cap_claims *c = &h->tok->c;
	int best = CB_ENOTCOVERED;

	for (size_t i = 0; i < c->ncaps; i++) {
		if (!cap_match(c->caps[i], r))
			continue;
		if (h->in_ceiling & (1u << i)) {
			*capi = i;
			return 0;
		}
		best = CB_EPOLICY;
	}
	return best;
}

bool
brk_tok_never(const struct brk_sbx *s, const struct brk_held *h, const struct cap_req *r)
{
	/* An approval was judged against the never rules as a glob; the
	 * concrete operation is judged again (a name resolving into a never
	 * range, a path a never rule names). */
	return h->tok->c.elevated && r && pol_inst_never_match(s->inst, r);
}

int
brk_tok_check(struct brk_sbx *s, struct brk_held *h, const struct cap_req *r, size_t *capi)
{
	const struct cap_token *t = h->tok;
	struct st *st = s->b->st;
	size_t ci = 0;
	int e;

	/* In a cluster, a broker that has not heard from the database within
	 * the staleness bound may have missed a revocation: refuse. */
	if ((e = brk_fleet_fresh(s->b)) != 0)
		return e;
	if ((e = cap_token_check_time(t, st_now(st))) != 0)
		return e;
	if (strcmp(t->c.aud, s->id) != 0 || (t->c.elevated && !h->inst_ok))
		return CB_EAUDIENCE;
	if ((e = st_token_state(st, t->c.id)) != 0)
		return e == CB_ENOENT ? CB_EUNKNOWNTOK : e;
	if (r && (e = brk_cover(h, r, &ci)) != 0)
		return e;
	if (brk_tok_never(s, h, r))
		return CB_EPOLICY;
	if (!h->sig_ok || h->sig_epoch != st_epoch(st)) {
		if ((e = cap_token_check_sig(st_keyring(st), t)) != 0) {
			h->sig_ok = false;
			return e;
		}
		h->sig_ok = true;
		h->sig_epoch = st_epoch(st);
	}
	if (capi)
		*capi = ci;
	return 0;
}

int
brk_held_present(struct brk_sbx *s, const char *text, const struct cap_req *r,
    struct brk_held **out, size_t *capi)
{
	size_t before = s->nheld;
	uint32_t th;
	int e;

	*out = NULL;
	if ((e = brk_held_add(s, text, strlen(text), false, &th)) != 0)
		return e;
	*out = &s->held[th];
	e = brk_tok_check(s, *out, r, capi);
	/* A presented token that is not genuinely this sandbox's (bad
	 * signature, other audience, unknown key or id) is not kept:
	 * forgeries must not fill the table. */
	if (th == before && (e == CB_EBADSIG || e == CB_EAUDIENCE || e == CB_EUNKNOWNKEY ||
	    e == CB_EUNKNOWNTOK || e == CB_ERETIRED)) {
		cap_token_free(s->held[th].tok);
		free(s->held[th].text);
		s->nheld--;
		*out = NULL;
	}
	return e;
}

int
brk_tok_select(struct brk_sbx *s, const struct wire_req *q, const struct cap_req *r,
    struct brk_held **out, size_t *capi)
{
	int first = 0, e;

	*out = NULL;
	if (q->has_th) {
		if (q->th >= s->nheld)
			return CB_ENOTOKEN;
		*out = &s->held[q->th];
		return brk_tok_check(s, *out, r, capi);
	}
	if (q->tok)
		return brk_held_present(s, q->tok, r, out, capi);
	/* Nothing presented: the first held token that covers the request
	 * and passes.  If some covered but failed, say why the first failed
	 * (more useful than "not covered"). */
	for (size_t i = 0; i < s->nheld; i++) {
		struct brk_held *h = &s->held[i];
		size_t ci;

		if (r && brk_cover(h, r, &ci) == CB_ENOTCOVERED)
			continue;
		e = brk_tok_check(s, h, r, capi);
		if (e == 0) {
			*out = h;
			return 0;
		}
		if (!first) {
			first = e;
			*out = h;
		}
	}
	if (first)
		return first;
	*out = NULL;
	return s->nheld ? CB_ENOTCOVERED : CB_ENOTOKEN;
}

int
brk_tok_commit(struct brk_sbx *s, struct brk_held *h)
{
	if (!aud_room(s->b->aud))
		return CB_EAUDIT;
	if (!h || !h->tok->c.has_uses)
		return 0;
	return st_use(s->b->st, h->tok->c.id, NULL);
}

int
brk_mint_charge(struct brk_sbx *s)
{
	/* Each minted token is a durable row, an audit line and a signed
	 * checkpoint: no path mints without bound. */
	if (s->minted >= BRK_MINT_MAX)
		return CB_EBUSY;
	s->minted++;
	return 0;
}

int
brk_tok_sign(struct brk *b, const struct brk_mint *m, char **text, struct st_token *rec)
{
	struct cap_claims c;
	char *joined = NULL;
	size_t jl = 0, jcap = 1;
	int r;

	*text = NULL;
	memset(&c, 0, sizeof(c));
	memset(rec, 0, sizeof(*rec));
	if (m->ncaps == 0 || m->ncaps > CAP_MAX_CAPS || strlen(m->aud) > CAP_AUD_MAX)
		return CB_EINVAL;
	snprintf(c.aud, sizeof(c.aud), "%s", m->aud);
	c.nbf = m->nbf;
	c.exp = m->exp;
	c.has_uses = m->has_uses;
	c.uses = m->uses;
	c.elevated = m->elevated;
	if (m->parent) {
		c.has_parent = true;
		memcpy(c.parent, m->parent, CAP_ID_LEN);
	}
	for (size_t i = 0; i < m->ncaps; i++) {
		if ((r = cap_dup(m->caps[i], &c.caps[c.ncaps])) != 0)
			goto out;
		c.ncaps++;
		jcap += strlen(m->caps[i]->text) + 1;
	}
	if (!(joined = calloc(1, jcap))) {
		r = CB_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < m->ncaps; i++)
		jl += (size_t)sprintf(joined + jl, "%s%s", i ? "\n" : "", m->caps[i]->text);
	if ((r = cap_token_issue(st_keyring(b->st), &c, text)) != 0)
		goto out;
	memcpy(rec->id, c.id, CAP_ID_LEN);
	rec->has_parent = c.has_parent;
	memcpy(rec->parent, c.parent, CAP_ID_LEN);
	snprintf(rec->sandbox, sizeof(rec->sandbox), "%s", m->aud);
	rec->caps = joined;
	joined = NULL;
	rec->nbf = m->nbf;
	rec->exp = m->exp;
	rec->uses_left = m->has_uses ? m->uses : ST_UNLIMITED;
	rec->elevated = m->elevated;
	/* Elevated tokens are only ever minted for the sandbox that asked
	 * (derive refuses another audience): they belong to its running
	 * instance, which the caller names. */
	if (m->elevated)
		rec->instance = m->instance;
	rec->issued_at = cb_now();
	snprintf(rec->issued_by, sizeof(rec->issued_by), "%s", m->by ? m->by : "broker");
out:
	free(joined);
	cap_claims_clear(&c);
	return r;
}

int
brk_tok_apply_add(struct brk *b, void *arg)
{
	return st_token_add(b->st, arg);
}

int
brk_tok_mint(struct brk *b, const struct brk_mint *m, char **text, uint8_t id[CAP_ID_LEN])
{
	struct st_token rec;
	char *t = NULL;
	int r;

	*text = NULL;
	/* In a cluster, nothing new while the database is away: the others
	 * could neither verify it nor hear of its revocation. */
	if ((r = brk_fleet_mint_ok(b, b->dec_why, sizeof(b->dec_why))) != 0)
		return r;
	if ((r = brk_tok_sign(b, m, &t, &rec)) != 0)
		return r;
	/* On disk and in the log before anyone holds it: a token the state
	 * does not know is refused at use (unknown-token). */
	{
		struct brk_dec d = { .op = "issue", .sandbox = m->aud, .resource = rec.caps,
			.tid = rec.id, .actor = m->by, .detail = m->elevated ? "elevated" : NULL,
			.apply = brk_tok_apply_add, .arg = &rec };

		if ((r = brk_decide(b, &d)) != 0) {
			free(t);
			free(rec.caps);
			return r;
		}
	}
	/* ... and then to the cluster, so that every broker knows it. */
	if ((r = brk_fleet_token(b, &rec, m->published, m->published_arg)) != 0) {
		free(t);
		free(rec.caps);
		return r;
	}
	memcpy(id, rec.id, CAP_ID_LEN);
	free(rec.caps);
	*text = t;
	return 0;
}

bool
brk_path_is_state(const struct brk *b, const char *path, bool or_ancestor)
{
	size_t sl = strlen(b->state_real), pl = strlen(path);

	if (!sl)
		return false;
	/* inside (or equal) */
	if (pl >= sl && strncmp(path, b->state_real, sl) == 0 && (path[sl] == '/' || path[sl] == '\0'))
		return true;
	/* an ancestor: "/" or a proper prefix ending at a component */
	return or_ancestor && pl < sl && strncmp(b->state_real, path, pl) == 0 &&
	    (b->state_real[pl] == '/' || pl == 1);
}
