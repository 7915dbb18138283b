/*
 * wire.h - every msgpack encoding and decoding in capbroker: token bodies,
 * agent<->broker messages and admin<->broker messages.  No other module
 * includes msgpack.h.
 *
 * Runs in the broker on bytes from agents (hostile) and in clients on bytes
 * from the broker.  Decoding first scans the input with a bounded walk
 * (depth <= WIRE_MAX_DEPTH, every declared length and element count must fit
 * in the bytes that remain, no ext or float types) because msgpack-c's C
 * unpacker allocates count * sizeof(object) from a declared count before
 * reading any element and has no limit API: a 5-byte message could
 * otherwise request gigabytes.
 *
 * Messages are msgpack maps with short string keys.  See docs/protocol.md.
 */
#ifndef CB_WIRE_H
#define CB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caps/caps.h"
#include "common/common.h"

#define WIRE_REQ_MAX	(64 * 1024)	/* largest agent request packet */
#define WIRE_REPLY_MAX	(200 * 1024)	/* largest reply packet */
#define WIRE_DATA_MAX	(56 * 1024)	/* inline bytes in one write/read */
#define WIRE_OUT_MAX	(64 * 1024)	/* proc.exec output kept per stream */
#define WIRE_ARGV_MAX	64
#define WIRE_MAX_DEPTH	6
#define WIRE_ENC_DEPTH	8

/* ---- generic encoder ------------------------------------------------- */

/* Writes into a caller's fixed buffer; on overflow every later call is a
 * no-op and wire_enc_finish() reports CB_ETOOBIG. */
struct wire_enc {
	uint8_t *buf;
	size_t cap;
	size_t len;
	int err;
	int depth;
	size_t mark[WIRE_ENC_DEPTH];
	uint32_t count[WIRE_ENC_DEPTH];
	bool is_map[WIRE_ENC_DEPTH];
};

void wire_enc_init(struct wire_enc *e, uint8_t *buf, size_t cap);
/* Open a map (key NULL at top level or inside an array). */
void wire_map_begin(struct wire_enc *e, const char *key);
void wire_map_end(struct wire_enc *e);
void wire_arr_begin(struct wire_enc *e, const char *key);
void wire_arr_end(struct wire_enc *e);
/* Scalars: key names the map entry; NULL inside arrays. */
void wire_put_u64(struct wire_enc *e, const char *key, uint64_t v);
void wire_put_i64(struct wire_enc *e, const char *key, int64_t v);
void wire_put_bool(struct wire_enc *e, const char *key, bool v);
void wire_put_str(struct wire_enc *e, const char *key, const char *s);
void wire_put_strn(struct wire_enc *e, const char *key, const char *s, size_t n);
void wire_put_bin(struct wire_enc *e, const char *key, const void *b, size_t n);
/* 0 and the encoded length, or CB_ETOOBIG / CB_EINVAL (unbalanced). */
int wire_enc_finish(struct wire_enc *e, size_t *len) CB_WARN_UNUSED;

/* ---- generic decoder ------------------------------------------------- */

struct wire_dec;	/* reusable decoding context (zone + string arena) */

/* A decoded map.  A value type; valid until the next decode on its dec. */
struct wire_msg {
	const void *kv;
	uint32_t n;
	struct wire_dec *d;
};

int wire_dec_new(size_t max_input, struct wire_dec **out) CB_WARN_UNUSED;
void wire_dec_free(struct wire_dec *d);

/* Decode exactly one map from buf (trailing bytes, duplicate keys, non-string
 * keys, bad nesting are CB_EPROTO; input above max_input CB_ETOOBIG). */
int wire_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_msg *out) CB_WARN_UNUSED;

/* Typed getters: 0, CB_ENOENT when absent, CB_EPROTO on a wrong type,
 * embedded NUL or out-of-range value.  Strings are NUL-terminated copies in
 * the dec's arena. */
int wire_get_u64(const struct wire_msg *m, const char *key, uint64_t *v) CB_WARN_UNUSED;
int wire_get_i64(const struct wire_msg *m, const char *key, int64_t *v) CB_WARN_UNUSED;
int wire_get_bool(const struct wire_msg *m, const char *key, bool *v) CB_WARN_UNUSED;
int wire_get_str(const struct wire_msg *m, const char *key, const char **s) CB_WARN_UNUSED;
int wire_get_bin(const struct wire_msg *m, const char *key, const uint8_t **b, size_t *n) CB_WARN_UNUSED;
/* Array of strings; more than max elements is CB_ETOOBIG. */
int wire_get_strv(const struct wire_msg *m, const char *key, const char **v, size_t max,
    size_t *n) CB_WARN_UNUSED;
/* Array of maps; more than max elements is CB_ETOOBIG. */
int wire_get_maps(const struct wire_msg *m, const char *key, struct wire_msg *v, size_t max,
    size_t *n) CB_WARN_UNUSED;
/* CB_EPROTO if the map has a key not in the NULL-terminated list. */
int wire_only_keys(const struct wire_msg *m, const char *const *keys) CB_WARN_UNUSED;

/* ---- agent requests --------------------------------------------------- */

enum wire_op {
	WIRE_OP_PING,
	WIRE_OP_FS_READ,	/* open read-only; fd (or handle if MEDIATED) */
	WIRE_OP_FS_WRITE,	/* open writable; fd/handle, or write `data` */
	WIRE_OP_FS_LIST,
	WIRE_OP_FS_STAT,
	WIRE_OP_FS_MKDIR,
	WIRE_OP_FS_DELETE,
	WIRE_OP_FS_RENAME,
	WIRE_OP_NET_CONNECT,
	WIRE_OP_PROC_EXEC,
	WIRE_OP_REQUEST,	/* ask for elevation */
	WIRE_OP_TOKENS,		/* list the sandbox's tokens */
	WIRE_OP_TOKEN_ADD,	/* present a token once, get a handle */
	WIRE_OP_DERIVE,		/* mint a narrower child token */
	WIRE_OP_IO_READ,	/* mediated read on a handle */
	WIRE_OP_IO_WRITE,	/* mediated write on a handle */
	WIRE_OP_IO_CLOSE,
	WIRE_OP_COUNT
};

#define WIRE_F_CREATE	0x01u
#define WIRE_F_TRUNC	0x02u
#define WIRE_F_APPEND	0x04u
#define WIRE_F_EXCL	0x08u
#define WIRE_F_MEDIATED	0x10u	/* broker keeps the fd; io.* go through it */
#define WIRE_F_ALL	0x1fu

const char *wire_op_name(enum wire_op op);

struct wire_req {
	uint32_t id;
	enum wire_op op;
	const char *tok;	/* token text presented, or NULL */
	bool has_th;
	uint32_t th;		/* token handle from tokens/token.add */
	const char *path;
	const char *path2;	/* rename target */
	uint32_t flags;		/* WIRE_F_* */
	uint32_t mode;		/* create mode, masked to 0777 by the broker */
	bool has_data;
	const uint8_t *data;
	size_t data_len;
	const char *host;
	uint32_t port;
	const char *argv[WIRE_ARGV_MAX];
	size_t argc;
	const char *cap;	/* request */
	const char *caps[CAP_MAX_CAPS];	/* derive */
	size_t ncaps;
	uint64_t ttl;
	bool has_uses;
	uint32_t uses;
	const char *reason;
	const char *aud;	/* derive: audience of the child */
	uint32_t h;		/* io.*: handle */
	uint32_t len;		/* io.read: bytes wanted */
	uint32_t timeout_ms;	/* net.connect, proc.exec */
};

/* Strictly decode an agent request: known keys only, each with its type,
 * strings without NUL.  Errors: CB_EPROTO, CB_ETOOBIG, CB_EUNKNOWNOP. */
int wire_req_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_req *out) CB_WARN_UNUSED;
int wire_req_encode(const struct wire_req *r, uint8_t *buf, size_t cap, size_t *len) CB_WARN_UNUSED;

/* ---- replies (broker -> agent) ----------------------------------------- */

struct wire_entry {
	const char *name;
	char type;		/* f file, d dir, l symlink, o other */
};

struct wire_tokinfo {
	uint32_t th;
	const char *id;		/* hex */
	const char *caps;	/* space-separated capability texts */
	uint64_t exp;
	bool has_uses;
	uint32_t uses;
	bool elevated;
	int state;		/* 0 usable now, else why not (CB_EEXPIRED, CB_EREVOKED...) */
};

struct wire_reply {
	uint32_t id;
	int err;		/* 0 or CB_E* */
	const char *reason;	/* why, on error */
	bool fd;		/* an fd is attached with SCM_RIGHTS */
	bool has_data;
	const uint8_t *data;
	size_t data_len;
	const struct wire_entry *entries;
	size_t nentries;
	bool trunc;		/* entries or output truncated */
	bool has_stat;
	uint64_t stat_size, stat_mtime;
	uint32_t stat_mode;
	char stat_type;
	bool has_status;
	int32_t status;
	const uint8_t *out;
	size_t out_len;
	const uint8_t *errout;
	size_t errout_len;
	const char *token;	/* new token text (derive, approved request) */
	const char *tid;	/* its id (hex) */
	bool has_th;
	uint32_t th;
	const char *rid;	/* elevation request id */
	const struct wire_tokinfo *tokens;
	size_t ntokens;
	bool has_h;
	uint32_t h;
	bool has_n;
	uint64_t n;
};

int wire_reply_encode(const struct wire_reply *r, uint8_t *buf, size_t cap, size_t *len) CB_WARN_UNUSED;
/* Entries and token lists are placed in the dec's arena. */
int wire_reply_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_reply *out) CB_WARN_UNUSED;

/* ---- token bodies (called by caps/token.c) ------------------------------ */

/* *out malloc'd. */
int wire_token_body_encode(const struct cap_claims *c, uint8_t **out, size_t *len) CB_WARN_UNUSED;
/* Strict: CB_ETOK_VERSION, _MISSING, _TYPE, _DUPKEY, _TRAILING, _UNKNOWN,
 * _MALFORMED, or a CB_ECAP_* code for a malformed capability. */
int wire_token_body_decode(const uint8_t *buf, size_t len, struct cap_claims *out) CB_WARN_UNUSED;

#endif
