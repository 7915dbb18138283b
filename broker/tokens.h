/*
 * tokens.h - a sandbox's token table, the check pipeline, the commit gate
 * of an operation, and minting (tokens.c); private to broker/.
 */
#ifndef CB_BROKER_TOKENS_H
#define CB_BROKER_TOKENS_H

#include "broker/core.h"

struct cl_job;

/* Add a token to the sandbox's table (decode; dedupe by text).  *th gets its
 * handle.  Full verification except coverage happens in brk_tok_check. */
int brk_held_add(struct brk_sbx *s, const char *text, size_t len, bool granted, uint32_t *th) CB_WARN_UNUSED;
void brk_held_clear(struct brk_sbx *s);

/* The check pipeline, cheapest first: time, audience, revocation and uses,
 * coverage, ceiling, signature.  r may be NULL (no coverage check).  On
 * success *capi is the index of the covering capability. */
int brk_tok_check(struct brk_sbx *s, struct brk_held *h, const struct cap_req *r, size_t *capi) CB_WARN_UNUSED;

/* The one mint budget of a sandbox, charged by every path that mints a
 * token for it (derive, and request: human, session and auto): CB_EBUSY
 * once BRK_MINT_MAX tokens were minted in its life, else 0 (and counted). */
int brk_mint_charge(struct brk_sbx *s) CB_WARN_UNUSED;

/* Is h an elevated token whose operation r a never rule of the sandbox's
 * tier names?  Such an operation is refused (CB_EPOLICY) whatever the
 * approval said: never rules win (docs/policy.md). */
bool brk_tok_never(const struct brk_sbx *s, const struct brk_held *h, const struct cap_req *r);

/* Present token text: add it to the table and check it (coverage of r if
 * given).  A token that fails as a forgery or another sandbox's is dropped
 * again.  *out is NULL on such a failure. */
int brk_held_present(struct brk_sbx *s, const char *text, const struct cap_req *r,
    struct brk_held **out, size_t *capi) CB_WARN_UNUSED;

/* Pick the token for request q needing r: the one presented (tok / th) or
 * the first held token that passes.  On failure the most telling reason. */
int brk_tok_select(struct brk_sbx *s, const struct wire_req *q, const struct cap_req *r,
    struct brk_held **out, size_t *capi) CB_WARN_UNUSED;

/* The commit gate of an operation done for an agent, passed last before
 * acting: the audit log has room for the record (CB_EAUDIT), then a use of
 * h is spent if it is limited (durable; CB_ESPENT and the state's errors).
 * h NULL: only the log. */
int brk_tok_commit(struct brk_sbx *s, struct brk_held *h) CB_WARN_UNUSED;

/* What a new token says (brk_tok_sign, brk_tok_mint). */
struct brk_mint {
	const char *aud;		/* the sandbox it is for */
	struct cap *const *caps;	/* 1..CAP_MAX_CAPS, copied */
	size_t ncaps;
	uint64_t nbf, exp;
	bool has_uses;
	uint32_t uses;
	const uint8_t *parent;		/* CAP_ID_LEN bytes; NULL: none */
	bool elevated;
	uint64_t instance;		/* elevated: the sandbox instance it belongs to */
	const char *by;			/* who issued it (audit actor); NULL: "broker" */
	/* In a cluster: called when the token is published (or could not
	 * be); NULL: published in the background, retried while the
	 * database is away. */
	void (*published)(void *arg, const struct cl_job *j);
	void *published_arg;
};

/* Sign a token and fill its state record (rec->caps malloc'd) without
 * recording it. */
int brk_tok_sign(struct brk *b, const struct brk_mint *m, char **text, struct st_token *rec)
    CB_WARN_UNUSED;

/* brk_dec.apply for a token record (arg: struct st_token). */
int brk_tok_apply_add(struct brk *b, void *arg) CB_WARN_UNUSED;

/* Mint and record a token (through brk_decide: durable in the state and
 * the log when it returns); text malloc'd, id its id. */
int brk_tok_mint(struct brk *b, const struct brk_mint *m, char **text, uint8_t id[CAP_ID_LEN])
    CB_WARN_UNUSED;

/* Is path the broker's state directory or inside it (or, with
 * `or_ancestor`, a directory that contains it)?  Such paths are never
 * served, whatever a token says: the state holds the signing keys. */
/* (tokens.c) */
bool brk_path_is_state(const struct brk *b, const char *path, bool or_ancestor);

#endif
