/*
 * test_caps_token.c - keys, keyrings, token issue/decode/verify, derivation.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps/caps.h"
#include "tests/tap.h"
#include "wire/codec.h"

/* Golden vector: seed 01..20, the claims in golden_claims().  A change to
 * the token format must change this text deliberately. */
static const char GOLDEN[] =
    "cap1.3wAAAAihdgGja2lkxAjUAkeqX9E5DKJpZMQQAAECAwQFBgcICQoLDA0OD6NhdWSqc2J4LWdvbGRlbqNuYmbOZVPxAKNleHDOZVP_EKR1c2VzBaRjYXBz3QAAAAKwZnMucmVhZDovZGF0YS8qKrtuZXQuY29ubmVjdDpleGFtcGxlLmNvbTo0NDM.pv7Z-FeUsnHAy8N7zVd-0O9dRGnShvgonqctHeW48XaBj4dy7faDu4_GTrjQXbqkNO_uN60ekHC8gpw-gmaBCg";

static struct cap_key *
seeded(uint8_t start)
{
	uint8_t seed[32];
	struct cap_key *k = NULL;

	for (int i = 0; i < 32; i++)
		seed[i] = (uint8_t)(start + i);
	if (cap_key_from_seed(seed, &k) != 0)
		abort();
	return k;
}

static struct cap_keyring *
ring(uint8_t start)
{
	struct cap_keyring *kr = NULL;

	if (cap_keyring_new(&kr) != 0 || cap_keyring_add(kr, seeded(start), true) != 0)
		abort();
	return kr;
}

static void
claims(struct cap_claims *c, const char *aud, uint64_t nbf, uint64_t exp, const char *cap1,
    const char *cap2)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->aud, sizeof(c->aud), "%s", aud);
	c->nbf = nbf;
	c->exp = exp;
	if (cap_parse(cap1, &c->caps[c->ncaps++]) != 0)
		abort();
	if (cap2 && cap_parse(cap2, &c->caps[c->ncaps++]) != 0)
		abort();
}

static void
golden_claims(struct cap_claims *c)
{
	claims(c, "sbx-golden", 1700000000, 1700003600, "fs.read:/data/**",
	    "net.connect:example.com:443");
	for (int i = 0; i < CAP_ID_LEN; i++)
		c->id[i] = (uint8_t)i;
	c->has_uses = true;
	c->uses = 5;
}

/* Sign arbitrary body bytes into token text (to test the decoder on bodies
 * the issuer would never produce). */
static char *
mk(const struct cap_keyring *kr, const uint8_t *body, size_t blen)
{
	uint8_t sig[64], kid[CAP_KID_LEN];
	size_t b64b = sodium_base64_ENCODED_LEN(blen, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	char *t = malloc(8 + b64b + 90);

	if (!t || cap_sign(kr, CAP_SIG_DOMAIN_TOKEN, body, blen, sig, kid) != 0)
		abort();
	strcpy(t, "cap1.");
	sodium_bin2base64(t + 5, b64b, body, blen, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	strcat(t, ".");
	sodium_bin2base64(t + strlen(t), 90, sig, 64, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return t;
}

static int
dec(const char *text)
{
	struct cap_token *t = NULL;
	int r = cap_token_decode(text, strlen(text), &t);

	cap_token_free(t);
	return r;
}

/* Decode + full verification for sandbox `aud` at time `now`. */
static int
check(const struct cap_keyring *kr, const char *text, const char *aud, uint64_t now)
{
	struct cap_token *t = NULL;
	int r = cap_token_decode(text, strlen(text), &t);

	if (r == 0)
		r = cap_token_verify(kr, t, now, aud, NULL);
	cap_token_free(t);
	return r;
}

static void
test_golden(void)
{
	struct cap_keyring *kr = ring(1);
	struct cap_claims c;
	char *text = NULL;

	golden_claims(&c);
	T_ERR(cap_token_issue(kr, &c, &text), 0, "golden token issues");
	T_OK(text && strcmp(text, GOLDEN) == 0, "golden vector: fixed key and claims give fixed text");
	if (text && strcmp(text, GOLDEN) != 0)
		printf("# got %s\n", text);
	T_ERR(check(kr, GOLDEN, "sbx-golden", 1700000001), 0, "golden vector verifies");
	cap_claims_clear(&c);
	free(text);
	cap_keyring_free(kr);
}

static void
test_roundtrip_and_flips(void)
{
	struct cap_keyring *kr = ring(1);
	struct cap_claims c;
	struct cap_token *t = NULL;
	char *text = NULL;
	size_t n, rejected = 0, total = 0;
	const uint8_t masks[] = { 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80 };

	golden_claims(&c);
	memset(c.id, 0, sizeof(c.id));	/* random id */
	if (cap_token_issue(kr, &c, &text) != 0)
		abort();
	T_ERR(cap_token_decode(text, strlen(text), &t), 0, "issued token decodes");
	T_OK(t && t->c.ncaps == 2 && strcmp(t->c.caps[1]->text, "net.connect:example.com:443") == 0 &&
	    t->c.has_uses && t->c.uses == 5 && strcmp(t->c.aud, "sbx-golden") == 0,
	    "claims survive the round trip");
	T_OK(t && memcmp(t->c.id, c.id, CAP_ID_LEN) == 0 && c.id[0] | c.id[1] | c.id[2],
	    "a random token id was assigned");
	cap_token_free(t);

	n = strlen(text);
	for (size_t i = 0; i < n; i++) {
		for (size_t m = 0; m < sizeof(masks); m++) {
			char *mut = strdup(text);

			mut[i] = (char)(mut[i] ^ masks[m]);
			if (mut[i] == '\0') {	/* cannot be sent as text */
				free(mut);
				continue;
			}
			total++;
			if (check(kr, mut, "sbx-golden", 1700000001) != 0)
				rejected++;
			else
				printf("# accepted: byte %zu ^ 0x%02x: %s\n", i, masks[m], mut);
			free(mut);
		}
	}
	T_OK(total > 8 * n - 8 && rejected == total,
	    "every byte flipped with every bit: %zu of %zu variants rejected", rejected, total);
	cap_claims_clear(&c);
	free(text);
	cap_keyring_free(kr);
}

static void
test_reasons(void)
{
	struct cap_keyring *kr = ring(1), *other = ring(100);
	struct cap_claims c;
	char *text = NULL;

	claims(&c, "sbx-a", 1000, 2000, "fs.read:/x/**", NULL);
	if (cap_token_issue(kr, &c, &text) != 0)
		abort();
	T_ERR(check(kr, text, "sbx-a", 1500), 0, "valid inside its window");
	T_ERR(check(kr, text, "sbx-a", 1000), 0, "valid at not-before exactly");
	T_ERR(check(kr, text, "sbx-a", 2000), 0, "valid at expiry exactly");
	T_ERR(check(kr, text, "sbx-a", 2001), CB_EEXPIRED, "expired");
	T_ERR(check(kr, text, "sbx-a", 999), CB_ENOTYET, "not yet valid");
	T_ERR(check(kr, text, "sbx-b", 1500), CB_EAUDIENCE, "wrong audience (stolen token)");
	T_ERR(check(other, text, "sbx-a", 1500), CB_EUNKNOWNKEY, "unknown key id");
	{
		struct cap_token *t = NULL;
		struct cap_req rq = { .op = CAP_FS_READ, .path = "/x/y" };
		struct cap_req rq2 = { .op = CAP_FS_READ, .path = "/etc/shadow" };
		struct cap_req rq3 = { .op = CAP_FS_WRITE, .path = "/x/y" };

		if (cap_token_decode(text, strlen(text), &t) != 0)
			abort();
		T_ERR(cap_token_verify(kr, t, 1500, "sbx-a", &rq), 0, "covered request");
		T_ERR(cap_token_verify(kr, t, 1500, "sbx-a", &rq2), CB_ENOTCOVERED, "path not covered");
		T_ERR(cap_token_verify(kr, t, 1500, "sbx-a", &rq3), CB_ENOTCOVERED, "op not covered");
		cap_token_free(t);
	}
	/* Wrong key: the kid names `other` but the signature is by kr's key. */
	{
		uint8_t *body = NULL;
		size_t blen;
		char *forged;
		struct cap_key *ok = seeded(100);

		cap_key_id(ok, c.kid);
		cap_key_free(ok);
		c.version = 1;
		if (cap_token_body_encode(&c, &body, &blen) != 0)
			abort();
		forged = mk(kr, body, blen);
		T_ERR(check(other, forged, "sbx-a", 1500), CB_EBADSIG,
		    "signed by the wrong key: bad signature");
		free(forged);
		free(body);
	}
	free(text);
	cap_claims_clear(&c);

	/* Rotation: old tokens verify until their key is retired. */
	{
		char *t1 = NULL, *t2 = NULL;
		uint8_t kid1[CAP_KID_LEN];

		claims(&c, "sbx-a", 1000, 2000, "fs.read:/x", NULL);
		if (cap_token_issue(kr, &c, &t1) != 0)
			abort();
		memcpy(kid1, c.kid, CAP_KID_LEN);
		memset(c.id, 0, sizeof(c.id));
		T_ERR(cap_keyring_add(kr, seeded(50), true), 0, "rotate: add a new signing key");
		if (cap_token_issue(kr, &c, &t2) != 0)
			abort();
		T_OK(memcmp(c.kid, kid1, CAP_KID_LEN) != 0, "new tokens carry the new key id");
		T_ERR(check(kr, t1, "sbx-a", 1500), 0, "rotated: old key still verifies");
		T_ERR(check(kr, t2, "sbx-a", 1500), 0, "rotated: new key verifies");
		T_ERR(cap_keyring_retire(kr, c.kid), CB_EBUSY, "the signing key cannot be retired");
		T_ERR(cap_keyring_retire(kr, kid1), 0, "retire the old key");
		T_ERR(check(kr, t1, "sbx-a", 1500), CB_ERETIRED, "retired key no longer verifies");
		T_ERR(check(kr, t2, "sbx-a", 1500), 0, "new key unaffected by retirement");
		free(t1);
		free(t2);
		cap_claims_clear(&c);
	}
	cap_keyring_free(kr);
	cap_keyring_free(other);
}

/* Build bodies by hand to reach each decoding error. */
static char *
body_token(const struct cap_keyring *kr, void (*fill)(struct wire_enc *), size_t extra)
{
	uint8_t buf[CAP_TOKEN_MAX];
	struct wire_enc e;
	size_t len;

	wire_enc_init(&e, buf, sizeof(buf));
	fill(&e);
	if (wire_enc_finish(&e, &len) != 0)
		abort();
	memset(buf + len, 0xc0, extra);
	return mk(kr, buf, len + extra);
}

static const uint8_t zid[CAP_ID_LEN];

static void
base_fields(struct wire_enc *e, bool v, bool kid, bool exp, bool caps)
{
	if (v)
		wire_put_u64(e, "v", 1);
	if (kid)
		wire_put_bin(e, "kid", zid, CAP_KID_LEN);
	wire_put_bin(e, "id", zid, CAP_ID_LEN);
	wire_put_str(e, "aud", "s");
	wire_put_u64(e, "nbf", 1);
	if (exp)
		wire_put_u64(e, "exp", 2);
	if (caps) {
		wire_arr_begin(e, "caps");
		wire_put_str(e, NULL, "fs.read:/x");
		wire_arr_end(e);
	}
}

static void f_ok(struct wire_enc *e) { wire_map_begin(e, NULL); base_fields(e, true, true, true, true); wire_map_end(e); }
static void f_noexp(struct wire_enc *e) { wire_map_begin(e, NULL); base_fields(e, true, true, false, true); wire_map_end(e); }
static void f_nov(struct wire_enc *e) { wire_map_begin(e, NULL); base_fields(e, false, true, true, true); wire_map_end(e); }
static void f_v2(struct wire_enc *e) { wire_map_begin(e, NULL); wire_put_u64(e, "v", 2); base_fields(e, false, true, true, true); wire_map_end(e); }
static void f_vstr(struct wire_enc *e) { wire_map_begin(e, NULL); wire_put_str(e, "v", "1"); base_fields(e, false, true, true, true); wire_map_end(e); }
static void f_kidlen(struct wire_enc *e) { wire_map_begin(e, NULL); wire_put_bin(e, "kid", zid, 7); base_fields(e, true, false, true, true); wire_map_end(e); }
static void f_dup(struct wire_enc *e) { wire_map_begin(e, NULL); base_fields(e, true, true, true, true); wire_put_u64(e, "exp", 3); wire_map_end(e); }
static void f_unknown(struct wire_enc *e) { wire_map_begin(e, NULL); base_fields(e, true, true, true, true); wire_put_u64(e, "admin", 1); wire_map_end(e); }
static void f_array(struct wire_enc *e) { wire_arr_begin(e, NULL); wire_put_u64(e, NULL, 1); wire_arr_end(e); }
static void f_expneg(struct wire_enc *e) { wire_map_begin(e, NULL); base_fields(e, true, true, false, true); wire_put_i64(e, "exp", -5); wire_map_end(e); }
static void f_badcap(struct wire_enc *e) { wire_map_begin(e, NULL); base_fields(e, true, true, true, false); wire_arr_begin(e, "caps"); wire_put_str(e, NULL, "fs.read:../x"); wire_arr_end(e); wire_map_end(e); }
static void f_nulcap(struct wire_enc *e) { wire_map_begin(e, NULL); base_fields(e, true, true, true, false); wire_arr_begin(e, "caps"); wire_put_strn(e, NULL, "fs.read:/x\0y", 12); wire_arr_end(e); wire_map_end(e); }
static void f_nocaps(struct wire_enc *e) { wire_map_begin(e, NULL); base_fields(e, true, true, true, false); wire_arr_begin(e, "caps"); wire_arr_end(e); wire_map_end(e); }
static void f_badaud(struct wire_enc *e) { wire_map_begin(e, NULL); wire_put_u64(e, "v", 1); wire_put_bin(e, "kid", zid, 8); wire_put_bin(e, "id", zid, 16); wire_put_str(e, "aud", "a/b"); wire_put_u64(e, "nbf", 1); wire_put_u64(e, "exp", 2); wire_arr_begin(e, "caps"); wire_put_str(e, NULL, "fs.read:/x"); wire_arr_end(e); wire_map_end(e); }

static void
test_decode_errors(void)
{
	struct cap_keyring *kr = ring(1);
	char *t;
	struct {
		void (*fill)(struct wire_enc *);
		size_t extra;
		int want;
		const char *what;
	} cases[] = {
		{ f_ok, 0, 0, "a hand-built valid body decodes" },
		{ f_ok, 1, CB_ETOK_TRAILING, "trailing byte after the body" },
		{ f_noexp, 0, CB_ETOK_MISSING, "missing expiry" },
		{ f_nov, 0, CB_ETOK_MISSING, "missing version" },
		{ f_v2, 0, CB_ETOK_VERSION, "unknown version" },
		{ f_vstr, 0, CB_ETOK_TYPE, "version of the wrong type" },
		{ f_kidlen, 0, CB_ETOK_TYPE, "key id of the wrong size" },
		{ f_dup, 0, CB_ETOK_DUPKEY, "duplicate field" },
		{ f_unknown, 0, CB_ETOK_UNKNOWN, "unknown field" },
		{ f_array, 0, CB_ETOK_MALFORMED, "body not a map" },
		{ f_expneg, 0, CB_ETOK_TYPE, "negative expiry" },
		{ f_badcap, 0, CB_ECAP_RELATIVE, "malformed capability inside" },
		{ f_nulcap, 0, CB_ECAP_NUL, "NUL inside a capability" },
		{ f_nocaps, 0, CB_ETOK_TYPE, "empty capability list" },
		{ f_badaud, 0, CB_ETOK_TYPE, "audience with a slash" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		t = body_token(kr, cases[i].fill, cases[i].extra);
		T_ERR(dec(t), cases[i].want, "decode: %s", cases[i].what);
		free(t);
	}
	T_ERR(dec("cap2.AAAA.AAAA"), CB_ETOK_PREFIX, "wrong prefix");
	T_ERR(dec(""), CB_ETOK_PREFIX, "empty text");
	T_ERR(dec("cap1.AAAA"), CB_ETOK_BASE64, "no signature segment");
	T_ERR(dec("cap1.AA=A.AAAA"), CB_ETOK_BASE64, "padding refused");
	T_ERR(dec("cap1.AA+A.AAAA"), CB_ETOK_BASE64, "standard base64 alphabet refused");
	T_ERR(dec("cap1.AAAA.AAAA.AAAA"), CB_ETOK_BASE64, "three segments refused");
	T_ERR(dec("cap1.AAAA.AAAA"), CB_ETOK_BASE64, "short signature refused");
	{
		char *big = malloc(CAP_TOKEN_MAX + 100);

		memset(big, 'A', CAP_TOKEN_MAX + 99);
		memcpy(big, "cap1.", 5);
		big[CAP_TOKEN_MAX + 99] = '\0';
		T_ERR(dec(big), CB_ETOK_TOOBIG, "oversized token refused before decoding");
		free(big);
	}
	/* Truncations of a real token at every length are all rejected. */
	{
		struct cap_claims c;
		char *text = NULL;
		size_t n, bad = 0;

		claims(&c, "s", 1, 2, "fs.read:/x", NULL);
		if (cap_token_issue(kr, &c, &text) != 0)
			abort();
		n = strlen(text);
		for (size_t l = 0; l < n; l++) {
			struct cap_token *tk = NULL;
			int r = cap_token_decode(text, l, &tk);

			if (r == 0)
				r = cap_token_check_sig(kr, tk);
			if (r != 0)
				bad++;
			cap_token_free(tk);
		}
		T_OK(bad == n, "every truncation rejected (%zu of %zu)", bad, n);
		{
			char *g = malloc(n + 2);

			memcpy(g, text, n);
			g[n] = 'A';
			g[n + 1] = '\0';
			T_OK(check(kr, g, "s", 1) != 0, "trailing garbage after the signature rejected");
			free(g);
		}
		free(text);
		cap_claims_clear(&c);
	}
	cap_keyring_free(kr);
}

static void
test_keyfiles(void)
{
	char dir[] = "/tmp/cbkeyXXXXXX", path[128], link[160];
	struct cap_key *k = seeded(7), *l = NULL;
	uint8_t a[CAP_KID_LEN], b[CAP_KID_LEN];
	struct stat st;
	int fd;

	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/k.key", dir);
	T_ERR(cap_key_save(k, path), 0, "save a key file");
	T_OK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "key file has mode 0600");
	T_ERR(cap_key_save(k, path), CB_EEXIST, "never overwrite a key file");
	T_ERR(cap_key_load(path, &l), 0, "load it back");
	cap_key_id(k, a);
	if (l)
		cap_key_id(l, b);
	T_OK(l && memcmp(a, b, sizeof(a)) == 0, "loaded key has the same key id");
	cap_key_free(l);
	l = NULL;
	chmod(path, 0640);
	T_ERR(cap_key_load(path, &l), CB_EKEY_MODE, "group-readable key file refused");
	chmod(path, 0604);
	T_ERR(cap_key_load(path, &l), CB_EKEY_MODE, "world-readable key file refused");
	chmod(path, 0600);
	snprintf(link, sizeof(link), "%s/link.key", dir);
	if (symlink(path, link) != 0)
		abort();
	T_OK(cap_key_load(link, &l) != 0 && !l, "symlinked key file refused");
	snprintf(path, sizeof(path), "%s/bad.key", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	if (fd < 0 || write(fd, "capbroker-ed25519-secret-v1\n!!!!\n", 33) != 33)
		abort();
	close(fd);
	T_ERR(cap_key_load(path, &l), CB_EKEY_FORMAT, "garbage key file refused");
	T_ERR(cap_key_load("/nonexistent/x.key", &l), CB_ENOENT, "missing key file");
	cap_key_free(k);
	{
		char cmd[200];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			abort();
	}
}

static void
test_derive(void)
{
	struct cap_claims p, c;

	claims(&p, "s", 100, 200, "fs.read:/w/**", "net.connect:*.example.com:443");
	p.has_uses = true;
	p.uses = 10;
	for (int i = 0; i < CAP_ID_LEN; i++)
		p.id[i] = (uint8_t)(i + 1);

#define CHILD(CAP, NBF, EXP, USES) do { \
		cap_claims_clear(&c); \
		claims(&c, "t", NBF, EXP, CAP, NULL); \
		c.has_parent = true; memcpy(c.parent, p.id, CAP_ID_LEN); \
		c.has_uses = (USES) >= 0; c.uses = (USES) >= 0 ? (uint32_t)(USES) : 0; \
	} while (0)

	memset(&c, 0, sizeof(c));
	CHILD("fs.read:/w/sub/*", 100, 150, 3);
	T_ERR(cap_derive_check(&p, &c), 0, "narrower child accepted");
	CHILD("net.connect:api.example.com:443", 120, 200, 10);
	T_ERR(cap_derive_check(&p, &c), 0, "sub-name, same expiry and uses accepted");
	CHILD("fs.read:/**", 100, 150, 3);
	T_ERR(cap_derive_check(&p, &c), CB_ENARROW, "wider capability refused");
	CHILD("fs.write:/w/x", 100, 150, 3);
	T_ERR(cap_derive_check(&p, &c), CB_ENARROW, "other op refused");
	CHILD("fs.read:/w/x", 100, 201, 3);
	T_ERR(cap_derive_check(&p, &c), CB_ENARROW, "later expiry refused");
	CHILD("fs.read:/w/x", 99, 150, 3);
	T_ERR(cap_derive_check(&p, &c), CB_ENARROW, "earlier not-before refused");
	CHILD("fs.read:/w/x", 100, 150, 11);
	T_ERR(cap_derive_check(&p, &c), CB_ENARROW, "larger use limit refused");
	CHILD("fs.read:/w/x", 100, 150, -1);
	T_ERR(cap_derive_check(&p, &c), CB_ENARROW, "unlimited child of a limited parent refused");
	CHILD("fs.read:/w/x", 100, 150, 3);
	c.parent[0] ^= 1;
	T_ERR(cap_derive_check(&p, &c), CB_ENARROW, "child must record its parent's id");
	CHILD("fs.read:/w/x", 100, 150, 3);
	c.elevated = true;
	T_ERR(cap_derive_check(&p, &c), CB_ENARROW, "elevation cannot be conjured by derivation");
	cap_claims_clear(&c);
	cap_claims_clear(&p);
}

static void *
sign_loop(void *arg)
{
	const struct cap_keyring *kr = arg;
	uint8_t sig[64], kid[CAP_KID_LEN], msg[32] = { 1 };

	for (int i = 0; i < 20000; i++)
		if (cap_sign(kr, CAP_SIG_DOMAIN_AUDIT, msg, sizeof(msg), sig, kid) != 0)
			return (void *)1;
	return NULL;
}

/* The broker signs tokens on its loop while the audit writer signs
 * checkpoints with the same key: the key page's protection must not be
 * flipped under a signer (this crashed before the lock in key.c). */
static void
test_concurrent_sign(void)
{
	struct cap_keyring *kr = ring(3);
	pthread_t a, b;
	void *ra = (void *)1, *rb = (void *)1;

	pthread_create(&a, NULL, sign_loop, kr);
	pthread_create(&b, NULL, sign_loop, kr);
	pthread_join(a, &ra);
	pthread_join(b, &rb);
	T_OK(ra == NULL && rb == NULL, "two threads sign 20000 times each with one key");
	cap_keyring_free(kr);
}

int
main(void)
{
	test_concurrent_sign();
	test_golden();
	test_roundtrip_and_flips();
	test_reasons();
	test_decode_errors();
	test_keyfiles();
	test_derive();
	return t_done();
}
