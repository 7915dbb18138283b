/*
 * token.c - signed capability tokens: issue, strict decode, verification,
 * and the codec of the token body.
 *
 * Runs in the broker on token text presented by agents (hostile).  Decoding
 * bounds the input first (CAP_TOKEN_MAX), checks the text framing, then
 * decodes the body strictly on wire/codec.h's bounded primitives, giving
 * each fault its own CB_ETOK_* code.  Verification answers with the one
 * precise reason a token fails, so a denial can say why.  The signature is
 * checked last by callers that have cheaper tests.
 */
#include "caps/caps.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "wire/codec.h"

#define CAP_TEXT_PREFIX "cap1."
#define CAP_B64 sodium_base64_VARIANT_URLSAFE_NO_PADDING

bool
cap_aud_valid(const char *s, size_t n)
{
	if (n == 0 || n > CAP_AUD_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

void
cap_hex(const uint8_t *b, size_t n, char *out)
{
	sodium_bin2hex(out, 2 * n + 1, b, n);
}

int
cap_unhex(const char *s, uint8_t *b, size_t n)
{
	size_t got;
	const char *end;

	if (strlen(s) != 2 * n)
		return CB_EINVAL;
	if (sodium_hex2bin(b, n, s, 2 * n, NULL, &got, &end) != 0 || got != n || *end)
		return CB_EINVAL;
	return 0;
}

void
cap_claims_clear(struct cap_claims *c)
{
	for (size_t i = 0; i < c->ncaps; i++) {
		cap_free(c->caps[i]);
		c->caps[i] = NULL;
	}
	c->ncaps = 0;
}

void
cap_token_free(struct cap_token *t)
{
	if (!t)
		return;
	cap_claims_clear(&t->c);
	free(t->body);
	free(t);
}

static bool
cap_is_zero(const uint8_t *b, size_t n)
{
	uint8_t acc = 0;

	for (size_t i = 0; i < n; i++)
		acc |= b[i];
	return acc == 0;
}

/* ---- the token body: a msgpack map (docs/tokens.md) ---------------------- */

enum {
	CT_V = 1 << 0, CT_KID = 1 << 1, CT_ID = 1 << 2, CT_AUD = 1 << 3,
	CT_NBF = 1 << 4, CT_EXP = 1 << 5, CT_USES = 1 << 6, CT_PAR = 1 << 7,
	CT_ELEV = 1 << 8, CT_CAPS = 1 << 9,
};
#define CT_REQUIRED (CT_V | CT_KID | CT_ID | CT_AUD | CT_NBF | CT_EXP | CT_CAPS)
/* A body is a map holding one array of strings: two levels. */
#define CAP_BODY_DEPTH 2

static const struct { const char *key; unsigned bit; } cap_body_fields[] = {
	{ "v", CT_V }, { "kid", CT_KID }, { "id", CT_ID }, { "aud", CT_AUD },
	{ "nbf", CT_NBF }, { "exp", CT_EXP }, { "uses", CT_USES }, { "par", CT_PAR },
	{ "elev", CT_ELEV }, { "caps", CT_CAPS },
};

int
cap_token_body_encode(const struct cap_claims *c, uint8_t **out, size_t *len)
{
	uint8_t *buf;
	struct wire_enc e;
	int r;

	*out = NULL;
	if (!(buf = malloc(CAP_TOKEN_MAX)))
		return CB_ENOMEM;
	wire_enc_init(&e, buf, CAP_TOKEN_MAX);
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "v", c->version);
	wire_put_bin(&e, "kid", c->kid, CAP_KID_LEN);
	wire_put_bin(&e, "id", c->id, CAP_ID_LEN);
	wire_put_str(&e, "aud", c->aud);
	wire_put_u64(&e, "nbf", c->nbf);
	wire_put_u64(&e, "exp", c->exp);
	if (c->has_uses)
		wire_put_u64(&e, "uses", c->uses);
	if (c->has_parent)
		wire_put_bin(&e, "par", c->parent, CAP_ID_LEN);
	if (c->elevated)
		wire_put_bool(&e, "elev", true);
	wire_arr_begin(&e, "caps");
	for (size_t i = 0; i < c->ncaps; i++)
		wire_put_str(&e, NULL, c->caps[i]->text);
	wire_arr_end(&e);
	wire_map_end(&e);
	if ((r = wire_enc_finish(&e, len)) != 0) {
		free(buf);
		return r == CB_ETOOBIG ? CB_ETOK_TOOBIG : r;
	}
	*out = buf;
	return 0;
}

static int
cap_body_bin(struct wire_val v, uint8_t *dst, size_t n)
{
	const uint8_t *b;
	size_t got;

	if (wire_val_bin(v, &b, &got) != 0 || got != n)
		return CB_ETOK_TYPE;
	memcpy(dst, b, n);
	return 0;
}

static int
cap_body_caps(struct wire_val v, struct cap_claims *c)
{
	char buf[CAP_STR_MAX + 1];
	uint32_t n;
	int r;

	if (wire_val_arr(v, &n) != 0 || n == 0 || n > CAP_MAX_CAPS)
		return CB_ETOK_TYPE;
	for (uint32_t i = 0; i < n; i++) {
		const char *s;
		size_t len;

		if (wire_val_str(wire_val_at(v, i), &s, &len) != 0)
			return CB_ETOK_TYPE;
		if (len > CAP_STR_MAX)
			return CB_ECAP_TOOLONG;
		if (memchr(s, '\0', len))
			return CB_ECAP_NUL;
		memcpy(buf, s, len);
		buf[len] = '\0';
		if ((r = cap_parse(buf, &c->caps[c->ncaps])) != 0)
			return r;
		c->ncaps++;
	}
	return 0;
}

static int
cap_body_u64(struct wire_val v, uint64_t max, uint64_t *u)
{
	return wire_val_u64(v, u) != 0 || *u > max ? CB_ETOK_TYPE : 0;
}

static int
cap_body_field(unsigned bit, struct wire_val v, struct cap_claims *c)
{
	const char *s;
	uint64_t u = 0;
	size_t n;
	int r;

	switch (bit) {
	case CT_V:
		r = cap_body_u64(v, UINT64_MAX, &u);
		c->version = (uint32_t)u;
		return r;
	case CT_KID:
		return cap_body_bin(v, c->kid, CAP_KID_LEN);
	case CT_ID:
		return cap_body_bin(v, c->id, CAP_ID_LEN);
	case CT_PAR:
		c->has_parent = true;
		return cap_body_bin(v, c->parent, CAP_ID_LEN);
	case CT_AUD:
		if (wire_val_str(v, &s, &n) != 0 || !cap_aud_valid(s, n))
			return CB_ETOK_TYPE;
		memcpy(c->aud, s, n);
		c->aud[n] = '\0';
		return 0;
	case CT_NBF:
		return cap_body_u64(v, UINT64_MAX, &c->nbf);
	case CT_EXP:
		return cap_body_u64(v, UINT64_MAX, &c->exp);
	case CT_USES:
		r = cap_body_u64(v, UINT32_MAX, &u);
		c->has_uses = (r == 0);
		c->uses = (uint32_t)u;
		return r;
	case CT_ELEV:
		return wire_val_bool(v, &c->elevated) != 0 ? CB_ETOK_TYPE : 0;
	case CT_CAPS:
		return cap_body_caps(v, c);
	}
	return CB_ETOK_UNKNOWN;
}

/* The version decides what the other fields mean: judge it first. */
static int
cap_body_version(struct wire_val body, uint32_t n)
{
	struct wire_val k, v;
	uint64_t u;

	for (uint32_t i = 0; i < n; i++) {
		wire_val_entry(body, i, &k, &v);
		if (wire_val_streq(k, "v") && wire_val_u64(v, &u) == 0 && u != CAP_TOKEN_VERSION)
			return CB_ETOK_VERSION;
	}
	return 0;
}

static int
cap_body_entry(struct wire_val k, struct wire_val v, unsigned *seen, struct cap_claims *c)
{
	const char *s;
	unsigned bit = 0;
	size_t n;

	if (wire_val_str(k, &s, &n) != 0)
		return CB_ETOK_TYPE;
	for (size_t f = 0; f < sizeof(cap_body_fields) / sizeof(cap_body_fields[0]); f++)
		if (wire_val_streq(k, cap_body_fields[f].key))
			bit = cap_body_fields[f].bit;
	if (!bit)
		return CB_ETOK_UNKNOWN;
	if (*seen & bit)
		return CB_ETOK_DUPKEY;
	*seen |= bit;
	return cap_body_field(bit, v, c);
}

/* Strict: CB_ETOK_VERSION, _MISSING, _TYPE, _DUPKEY, _TRAILING, _UNKNOWN,
 * _MALFORMED, or a CB_ECAP_* code for a malformed capability. */
static int
cap_body_decode(const uint8_t *buf, size_t len, struct cap_claims *out)
{
	struct wire_dec *d = NULL;
	struct wire_val body, k, v;
	size_t used = 0;
	unsigned seen = 0;
	uint32_t n;
	int r;

	memset(out, 0, sizeof(*out));
	if (len > CAP_TOKEN_MAX)
		return CB_ETOK_TOOBIG;
	if ((r = wire_dec_new(CAP_TOKEN_MAX, &d)) != 0)
		return r;
	r = wire_decode_val(d, buf, len, CAP_BODY_DEPTH, &body, &used);
	if (r == CB_ENOMEM)
		goto out;
	if (r != 0 || (used == len && wire_val_map(body, &n) != 0)) {
		r = CB_ETOK_MALFORMED;
		goto out;
	}
	if (used != len) {
		r = CB_ETOK_TRAILING;
		goto out;
	}
	if ((r = cap_body_version(body, n)) != 0)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		wire_val_entry(body, i, &k, &v);
		if ((r = cap_body_entry(k, v, &seen, out)) != 0)
			goto out;
	}
	r = (seen & CT_REQUIRED) == CT_REQUIRED ? 0 : CB_ETOK_MISSING;
out:
	wire_dec_free(d);
	if (r != 0)
		cap_claims_clear(out);
	return r;
}

int
cap_token_issue(const struct cap_keyring *kr, struct cap_claims *c, char **text)
{
	uint8_t *body = NULL, sig[64], kid[CAP_KID_LEN];
	size_t blen, b64b, b64s, plen = sizeof(CAP_TEXT_PREFIX) - 1;
	char *t = NULL;
	int r;

	*text = NULL;
	if (c->ncaps == 0 || c->ncaps > CAP_MAX_CAPS || c->exp < c->nbf ||
	    !cap_aud_valid(c->aud, strlen(c->aud)))
		return CB_EINVAL;
	if ((r = cap_keyring_signer(kr, c->kid)) != 0)
		return r;
	c->version = CAP_TOKEN_VERSION;
	if (cap_is_zero(c->id, CAP_ID_LEN))
		randombytes_buf(c->id, CAP_ID_LEN);
	if ((r = cap_token_body_encode(c, &body, &blen)) != 0)
		goto out;
	if ((r = cap_sign(kr, CAP_SIG_DOMAIN_TOKEN, body, blen, sig, kid)) != 0)
		goto out;
	b64b = sodium_base64_ENCODED_LEN(blen, CAP_B64);
	b64s = sodium_base64_ENCODED_LEN(64, CAP_B64);
	if (plen + b64b + b64s > CAP_TOKEN_MAX) {
		r = CB_ETOK_TOOBIG;
		goto out;
	}
	if (!(t = malloc(plen + b64b + b64s + 1))) {
		r = CB_ENOMEM;
		goto out;
	}
	memcpy(t, CAP_TEXT_PREFIX, plen);
	sodium_bin2base64(t + plen, b64b, body, blen, CAP_B64);
	{
		size_t at = strlen(t);

		t[at++] = '.';
		sodium_bin2base64(t + at, b64s, sig, 64, CAP_B64);
	}
	*text = t;
	t = NULL;
out:
	free(body);
	free(t);
	return r;
}

/* Decode one unpadded base64url segment exactly: every character used, no
 * padding, no whitespace, no leftover bits. */
static int
cap_b64_segment(const char *s, size_t n, uint8_t *out, size_t max, size_t *outlen)
{
	const char *end;

	if (n == 0)
		return CB_ETOK_BASE64;
	if (sodium_base642bin(out, max, s, n, NULL, outlen, &end, CAP_B64) != 0 ||
	    end != s + n)
		return CB_ETOK_BASE64;
	return 0;
}

int
cap_token_decode(const char *text, size_t len, struct cap_token **out)
{
	const size_t plen = sizeof(CAP_TEXT_PREFIX) - 1;
	struct cap_token *t = NULL;
	const char *body64, *dot;
	size_t siglen;
	int r;

	*out = NULL;
	if (len > CAP_TOKEN_MAX)
		return CB_ETOK_TOOBIG;
	if (len < plen || memcmp(text, CAP_TEXT_PREFIX, plen) != 0)
		return CB_ETOK_PREFIX;
	/* libsodium's decoder reads a byte with the high bit set as the ASCII
	 * character below it, which would give one token many texts.  Accept
	 * only the base64url alphabet and the one separator. */
	for (size_t i = plen; i < len; i++) {
		unsigned char ch = (unsigned char)text[i];

		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
			(ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.'))
			return CB_ETOK_BASE64;
	}
	body64 = text + plen;
	dot = memchr(body64, '.', len - plen);
	if (!dot || memchr(dot + 1, '.', (size_t)(text + len - dot - 1)))
		return CB_ETOK_BASE64;
	if (!(t = calloc(1, sizeof(*t))))
		return CB_ENOMEM;
	/* base64 is 4/3 of the bytes, so this bounds the body */
	if (!(t->body = malloc(CAP_TOKEN_MAX))) {
		r = CB_ENOMEM;
		goto out;
	}
	if ((r = cap_b64_segment(body64, (size_t)(dot - body64), t->body, CAP_TOKEN_MAX,
		 &t->body_len)) != 0)
		goto out;
	if ((r = cap_b64_segment(dot + 1, (size_t)(text + len - dot - 1), t->sig,
		 sizeof(t->sig), &siglen)) != 0)
		goto out;
	if (siglen != sizeof(t->sig)) {
		r = CB_ETOK_BASE64;
		goto out;
	}
	if ((r = cap_body_decode(t->body, t->body_len, &t->c)) != 0)
		goto out;
	*out = t;
	t = NULL;
out:
	cap_token_free(t);
	return r;
}

int
cap_token_check_time(const struct cap_token *t, uint64_t now)
{
	if (now < t->c.nbf)
		return CB_ENOTYET;
	if (now > t->c.exp)
		return CB_EEXPIRED;
	return 0;
}

int
cap_token_check_audience(const struct cap_token *t, const char *aud)
{
	return aud && strcmp(t->c.aud, aud) == 0 ? 0 : CB_EAUDIENCE;
}

int
cap_token_covers(const struct cap_token *t, const struct cap_req *r)
{
	for (size_t i = 0; i < t->c.ncaps; i++)
		if (cap_match(t->c.caps[i], r))
			return 0;
	return CB_ENOTCOVERED;
}

int
cap_token_check_sig(const struct cap_keyring *kr, const struct cap_token *t)
{
	return cap_verify(kr, t->c.kid, CAP_SIG_DOMAIN_TOKEN, t->body, t->body_len, t->sig);
}

int
cap_token_verify(const struct cap_keyring *kr, const struct cap_token *t, uint64_t now,
    const char *aud, const struct cap_req *r)
{
	int rc;

	if ((rc = cap_token_check_time(t, now)) != 0)
		return rc;
	if ((rc = cap_token_check_audience(t, aud)) != 0)
		return rc;
	if (r && (rc = cap_token_covers(t, r)) != 0)
		return rc;
	return cap_token_check_sig(kr, t);
}

int
cap_derive_check(const struct cap_claims *parent, const struct cap_claims *child)
{
	if (!child->has_parent || memcmp(child->parent, parent->id, CAP_ID_LEN) != 0)
		return CB_ENARROW;
	if (child->nbf < parent->nbf || child->exp > parent->exp)
		return CB_ENARROW;
	if (parent->has_uses && (!child->has_uses || child->uses > parent->uses))
		return CB_ENARROW;
	/* Elevation changes which ceiling applies; it can only be inherited. */
	if (child->elevated && !parent->elevated)
		return CB_ENARROW;
	if (child->ncaps == 0)
		return CB_ENARROW;
	for (size_t i = 0; i < child->ncaps; i++) {
		bool inside = false;

		for (size_t j = 0; j < parent->ncaps && !inside; j++)
			inside = cap_contains(parent->caps[j], child->caps[i]);
		if (!inside)
			return CB_ENARROW;
	}
	return 0;
}
