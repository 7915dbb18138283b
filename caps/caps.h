/*
 * caps.h - capability grammar, Ed25519 keys and signed capability tokens.
 *
 * Shared by the broker (trusted), capctl (admin) and the tests.  Everything
 * here treats its input as hostile: token text comes from agents, capability
 * strings from agents and administrators.  Nothing here does I/O except the
 * key file functions.
 *
 * Capability text:  OP:RESOURCE
 *   fs.read|fs.list|fs.write|fs.delete:/abs/path/glob   (* within a component,
 *                                                    ** as a whole component)
 *   net.connect:HOST:PORT   HOST = name | *.domain | * | IPv4[/len] | [IPv6[/len]]
 *                           PORT = 1-65535 | *
 *   proc.exec:/abs/path/glob
 *
 * Token text:  "cap1." base64url(body) "." base64url(signature), unpadded.
 * The body is a msgpack map (encoded and decoded in caps/token.c on the
 * primitives of wire/codec.h); the signature is Ed25519 over
 * CAP_SIG_DOMAIN_TOKEN || body.
 */
#ifndef CB_CAPS_H
#define CB_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define CAP_STR_MAX	1024	/* longest capability text */
#define CAP_MAX_COMPONENTS 64	/* most path components in a glob or path */
#define CAP_TOKEN_MAX	4096	/* longest token text accepted */
#define CAP_MAX_CAPS	32	/* most capabilities in one token */
#define CAP_ID_LEN	16	/* token id bytes */
#define CAP_KID_LEN	8	/* key id bytes: BLAKE2b(public key) prefix */
#define CAP_AUD_MAX	64	/* longest sandbox id */
#define CAP_TOKEN_VERSION 1

#define CAP_SIG_DOMAIN_TOKEN "capbroker token v1"
#define CAP_SIG_DOMAIN_AUDIT "capbroker audit checkpoint v1"

enum cap_op {
	CAP_FS_READ,
	CAP_FS_LIST,
	CAP_FS_WRITE,
	CAP_FS_DELETE,
	CAP_NET_CONNECT,
	CAP_PROC_EXEC,
	CAP_OP_COUNT
};

/* An IP address; IPv4-mapped IPv6 (::ffff:a.b.c.d) is stored as IPv4 so
 * that every comparison sees one form. */
struct cap_addr {
	int family;		/* AF_INET or AF_INET6 */
	uint8_t b[16];		/* network order; 4 bytes used for AF_INET */
};

enum cap_host_kind {
	CAP_HOST_ANY,		/* "*" */
	CAP_HOST_NAME,		/* exact DNS name, lowercase */
	CAP_HOST_WILDCARD,	/* "*.domain": any name with >= 1 more label */
	CAP_HOST_IP,		/* address with prefix length (CIDR) */
};

struct cap_net {
	enum cap_host_kind kind;
	char name[254];		/* NAME: the name; WILDCARD: the domain */
	struct cap_addr addr;	/* IP: network address (host bits zero) */
	unsigned prefix;	/* IP: prefix length */
	int port;		/* 1..65535, or -1 for "*" */
};

/* A parsed capability.  Read-only after cap_parse(). */
struct cap {
	enum cap_op op;
	char *text;		/* canonical "op:resource" */
	const char *res;	/* resource part, points into text */
	struct cap_net net;	/* net.connect only */
};

/* What an operation asks for, checked against capabilities. */
struct cap_req {
	enum cap_op op;
	const char *path;	/* fs.*, proc.exec: absolute, checked path */
	const char *host;	/* net.connect: name or IP literal as asked */
	int port;		/* net.connect */
	const struct cap_addr *addr; /* net.connect: one resolved address */
};

/* Parse capability text.  On success *out is owned by the caller
 * (cap_free).  Errors: CB_ECAP_* , CB_ENOMEM. */
int cap_parse(const char *s, struct cap **out) CB_WARN_UNUSED;
void cap_free(struct cap *c);
int cap_dup(const struct cap *c, struct cap **out) CB_WARN_UNUSED;

const char *cap_op_name(enum cap_op op);
int cap_op_parse(const char *name, size_t len, enum cap_op *out) CB_WARN_UNUSED;
bool cap_op_is_fs(enum cap_op op);

/* Validate a concrete request path: absolute, no empty, "." or ".."
 * components, no control characters, at most CAP_STR_MAX bytes and
 * CAP_MAX_COMPONENTS components.  "/" itself is valid. */
int cap_path_check(const char *path) CB_WARN_UNUSED;

/* Does a path glob match a checked path?  "*" matches any run of
 * characters within one component (dot-files included); "**" as a whole
 * component matches zero or more components, so the glob /a followed by
 * a ** component matches "/a" itself. */
bool cap_path_match(const char *glob, const char *path);

/* Is every path matched by glob `inner` also matched by glob `outer`?
 * Sound: returns true only when containment holds. */
bool cap_path_contains(const char *outer, const char *inner);

/* Is some path matched by both globs?  Exact for the glob grammar (a
 * product of the two patterns, component by component); true for a glob
 * that does not parse, so a caller refusing on overlap fails closed. */
bool cap_path_intersects(const char *a, const char *b);

/* Copy into buf the longest leading directory of glob that has no
 * wildcard (for a glob of "*.txt" files under /srv/data: "/srv/data").  This is the
 * root beneath which the broker resolves requests.  CB_ETOOBIG if short. */
int cap_path_root(const char *glob, char *buf, size_t size) CB_WARN_UNUSED;

/* Parse an IP literal (no brackets, no prefix).  CB_ECAP_HOST on error. */
int cap_addr_parse(const char *s, struct cap_addr *out) CB_WARN_UNUSED;
/* Is a inside net/prefix (same family after IPv4-mapped normalisation)? */
bool cap_addr_in(const struct cap_addr *a, const struct cap_addr *net, unsigned prefix);
/* Format an address as text (IPv6 without brackets). */
void cap_addr_format(const struct cap_addr *a, char *buf, size_t size);

/* Does capability c permit request r?  Ops must be equal. */
bool cap_match(const struct cap *c, const struct cap_req *r);

/* Is there a request both a and b permit (same op, overlapping paths,
 * ports and hosts)?  Paths and IP ranges are exact; names: equal, or one
 * beneath the other's "*." domain.  A name and an address never meet here
 * (which addresses a name has is known only when it is resolved): callers
 * that refuse on overlap must also judge each resolved address with
 * cap_match.  Used for the policy's never rules (docs/policy.md). */
bool cap_intersects(const struct cap *a, const struct cap *b);

/* Is everything `inner` permits also permitted by `outer`?  Sound. */
bool cap_contains(const struct cap *outer, const struct cap *inner);

/* ---- keys ---------------------------------------------------------- */

struct cap_key;		/* an Ed25519 key pair; secret in guarded memory */
struct cap_keyring;	/* verifies with many keys, signs with one */

int cap_key_generate(struct cap_key **out) CB_WARN_UNUSED;
/* Deterministic key from a 32-byte seed (golden vectors, tests). */
int cap_key_from_seed(const uint8_t seed[32], struct cap_key **out) CB_WARN_UNUSED;
/* Load a secret key file.  Refuses (CB_EKEY_MODE) a file that group or
 * others can access, or that is not a regular file owned by us. */
int cap_key_load(const char *path, struct cap_key **out) CB_WARN_UNUSED;
/* Write a new secret key file, mode 0600, created exclusively, fsynced. */
int cap_key_save(const struct cap_key *k, const char *path) CB_WARN_UNUSED;
void cap_key_id(const struct cap_key *k, uint8_t kid[CAP_KID_LEN]);
void cap_key_public(const struct cap_key *k, uint8_t pk[32]);
void cap_key_free(struct cap_key *k);
/* Key id of a raw public key. */
void cap_kid_of(const uint8_t pk[32], uint8_t kid[CAP_KID_LEN]);

int cap_keyring_new(struct cap_keyring **out) CB_WARN_UNUSED;
void cap_keyring_free(struct cap_keyring *kr);
/* Add a key; takes ownership of k, even on error.  With `signing`, it
 * becomes the key that signs (the previous one keeps verifying). */
int cap_keyring_add(struct cap_keyring *kr, struct cap_key *k, bool signing) CB_WARN_UNUSED;
/* Add a verify-only public key. */
int cap_keyring_add_public(struct cap_keyring *kr, const uint8_t pk[32]) CB_WARN_UNUSED;
/* Retire a key: tokens it signed stop verifying (CB_ERETIRED).  The
 * signing key cannot be retired (CB_EBUSY). */
int cap_keyring_retire(struct cap_keyring *kr, const uint8_t kid[CAP_KID_LEN]) CB_WARN_UNUSED;
/* Key id of the signing key; CB_ENOENT if none. */
int cap_keyring_signer(const struct cap_keyring *kr, uint8_t kid[CAP_KID_LEN]) CB_WARN_UNUSED;
/* Public key of kid; CB_EUNKNOWNKEY / CB_ERETIRED. */
int cap_keyring_public(const struct cap_keyring *kr, const uint8_t kid[CAP_KID_LEN], uint8_t pk[32]) CB_WARN_UNUSED;
/* Sign domain || msg with the signing key. */
int cap_sign(const struct cap_keyring *kr, const char *domain, const uint8_t *msg, size_t len,
    uint8_t sig[64], uint8_t kid[CAP_KID_LEN]) CB_WARN_UNUSED;
/* Verify domain || msg under kid.  CB_EUNKNOWNKEY, CB_ERETIRED, CB_EBADSIG. */
int cap_verify(const struct cap_keyring *kr, const uint8_t kid[CAP_KID_LEN], const char *domain,
    const uint8_t *msg, size_t len, const uint8_t sig[64]) CB_WARN_UNUSED;

/* ---- tokens -------------------------------------------------------- */

/* The signed claims.  caps[] are owned parsed capabilities. */
struct cap_claims {
	uint32_t version;
	uint8_t kid[CAP_KID_LEN];
	uint8_t id[CAP_ID_LEN];
	char aud[CAP_AUD_MAX + 1];
	uint64_t nbf;
	uint64_t exp;
	bool has_uses;
	uint32_t uses;
	bool has_parent;
	uint8_t parent[CAP_ID_LEN];
	bool elevated;		/* minted by an approved elevation */
	size_t ncaps;
	struct cap *caps[CAP_MAX_CAPS];
};

struct cap_token {
	struct cap_claims c;
	uint8_t *body;		/* the signed msgpack bytes */
	size_t body_len;
	uint8_t sig[64];
};

/* Release the capabilities a claims struct owns (not the struct). */
void cap_claims_clear(struct cap_claims *c);

/* Sign claims with the keyring's signing key (fills c->kid and, if all
 * zero, a random c->id).  *text is malloc'd, NUL-terminated. */
int cap_token_issue(const struct cap_keyring *kr, struct cap_claims *c, char **text) CB_WARN_UNUSED;

/* The unsigned body of claims as cap_token_issue signs it (for golden
 * vectors and forgery tests).  *out malloc'd; CB_ETOK_TOOBIG, CB_ENOMEM. */
int cap_token_body_encode(const struct cap_claims *c, uint8_t **out, size_t *len) CB_WARN_UNUSED;

/* Strictly decode token text (no signature check).  Distinct errors for
 * each defect: CB_ETOK_*.  *out freed with cap_token_free. */
int cap_token_decode(const char *text, size_t len, struct cap_token **out) CB_WARN_UNUSED;
void cap_token_free(struct cap_token *t);

/* Stateless checks, cheapest first.  Each returns 0 or the precise reason. */
int cap_token_check_time(const struct cap_token *t, uint64_t now) CB_WARN_UNUSED;
int cap_token_check_audience(const struct cap_token *t, const char *aud) CB_WARN_UNUSED;
int cap_token_covers(const struct cap_token *t, const struct cap_req *r) CB_WARN_UNUSED;
int cap_token_check_sig(const struct cap_keyring *kr, const struct cap_token *t) CB_WARN_UNUSED;
/* All of the above in order: time, audience, coverage, signature.
 * Revocation and use counts are the broker's (they need state). */
int cap_token_verify(const struct cap_keyring *kr, const struct cap_token *t, uint64_t now,
    const char *aud, const struct cap_req *r) CB_WARN_UNUSED;

/* May `child` be derived from `parent`?  Every child capability inside some
 * parent capability, nbf not earlier, exp not later, use limit not larger
 * (nor unlimited under a limited parent), and child->parent == parent id.
 * CB_ENARROW otherwise. */
int cap_derive_check(const struct cap_claims *parent, const struct cap_claims *child) CB_WARN_UNUSED;

/* A sandbox id / audience: 1..CAP_AUD_MAX of [A-Za-z0-9._-], not starting
 * with '.' or '-'. */
bool cap_aud_valid(const char *s, size_t n);

/* Lowercase hex of n bytes into out (2n+1 bytes). */
void cap_hex(const uint8_t *b, size_t n, char *out);
/* Parse exactly 2n hex digits.  CB_EINVAL otherwise. */
int cap_unhex(const char *s, uint8_t *b, size_t n) CB_WARN_UNUSED;

#endif
