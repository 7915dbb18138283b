/*
 * codec.h - the msgpack primitives every capbroker message and token body is
 * built from: a fixed-buffer encoder and a strict, bounded decoder.  No other
 * module includes msgpack.h; this file depends on common/ only.
 *
 * Runs in the broker on bytes from agents (hostile) and in clients on bytes
 * from the broker.  Decoding first scans the input with a bounded walk
 * (depth <= max depth, every declared length and element count must fit in
 * the bytes that remain, no ext or float types) because msgpack-c's C
 * unpacker allocates count * sizeof(object) from a declared count before
 * reading any element and has no limit API: a 5-byte message could
 * otherwise request gigabytes.
 *
 * The messages built on this: wire/agent.h (agent <-> broker), wire/admin.h
 * (capctl <-> broker), and the token body in caps/token.c.
 */
#ifndef CB_WIRE_CODEC_H
#define CB_WIRE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define WIRE_MAX_DEPTH	6	/* nesting a decoded message may have */
#define WIRE_ENC_DEPTH	8	/* containers the encoder may hold open */

/* ---- encoder ------------------------------------------------------------ */

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

/* ---- decoder: maps with string keys -------------------------------------- */

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
 * the dec's arena; bin values point into the caller's input buffer. */
int wire_get_u64(const struct wire_msg *m, const char *key, uint64_t *v) CB_WARN_UNUSED;
int wire_get_i64(const struct wire_msg *m, const char *key, int64_t *v) CB_WARN_UNUSED;
int wire_get_bool(const struct wire_msg *m, const char *key, bool *v) CB_WARN_UNUSED;
int wire_get_str(const struct wire_msg *m, const char *key, const char **s) CB_WARN_UNUSED;
int wire_get_bin(const struct wire_msg *m, const char *key, const uint8_t **b, size_t *n) CB_WARN_UNUSED;
/* As wire_get_u64 for a value that must fit 32 bits; *has (if not NULL)
 * says whether the key was there. */
int wire_get_u32(const struct wire_msg *m, const char *key, uint32_t *v, bool *has) CB_WARN_UNUSED;
/* Array of strings; more than max elements is CB_ETOOBIG. */
int wire_get_strv(const struct wire_msg *m, const char *key, const char **v, size_t max,
    size_t *n) CB_WARN_UNUSED;
/* One nested map (same checks as the top level). */
int wire_get_map(const struct wire_msg *m, const char *key, struct wire_msg *v) CB_WARN_UNUSED;
/* Array of maps; more than max elements is CB_ETOOBIG. */
int wire_get_maps(const struct wire_msg *m, const char *key, struct wire_msg *v, size_t max,
    size_t *n) CB_WARN_UNUSED;
/* Array of maps into an array allocated in the dec's arena (more than max
 * elements is CB_EPROTO, an arena too small CB_ETOOBIG). */
int wire_get_maplist(const struct wire_msg *m, const char *key, size_t max, struct wire_msg **v,
    size_t *n) CB_WARN_UNUSED;
bool wire_has(const struct wire_msg *m, const char *key);
/* CB_EPROTO if the map has a key not in the NULL-terminated list. */
int wire_only_keys(const struct wire_msg *m, const char *const *keys) CB_WARN_UNUSED;
/* The same in one pass, for a list of at most 64 keys: 0 and in *present
 * bit i set for each keys[i] the map has. */
int wire_key_set(const struct wire_msg *m, const char *const *keys, uint64_t *present) CB_WARN_UNUSED;
/* n bytes aligned to align in the arena of m's dec, valid until its next
 * decode; NULL when the arena is full. */
void *wire_msg_alloc(const struct wire_msg *m, size_t n, size_t align);

/* ---- decoder: values by position ------------------------------------------
 * For a format that answers each fault with a code of its own and so judges
 * keys itself (the token body, caps/token.c).  A view is valid until the
 * next decode on its dec. */

struct wire_val {
	const void *o;
};

/* Decode the first object of buf, nested at most max_depth levels: 0 and
 * *used its size (bytes after it are the caller's to judge), CB_ETOOBIG
 * above the dec's max_input, CB_EPROTO when malformed or truncated. */
int wire_decode_val(struct wire_dec *d, const uint8_t *buf, size_t len, unsigned max_depth,
    struct wire_val *out, size_t *used) CB_WARN_UNUSED;
/* Each is 0, or CB_EPROTO when v has another type. */
int wire_val_map(struct wire_val v, uint32_t *n) CB_WARN_UNUSED;
int wire_val_arr(struct wire_val v, uint32_t *n) CB_WARN_UNUSED;
int wire_val_u64(struct wire_val v, uint64_t *u) CB_WARN_UNUSED;	/* non-negative integer */
int wire_val_bool(struct wire_val v, bool *b) CB_WARN_UNUSED;
/* The raw bytes (not NUL-terminated, may hold NUL; never NULL). */
int wire_val_str(struct wire_val v, const char **s, size_t *n) CB_WARN_UNUSED;
int wire_val_bin(struct wire_val v, const uint8_t **b, size_t *n) CB_WARN_UNUSED;
/* Entry i of a map (i below its wire_val_map count). */
void wire_val_entry(struct wire_val map, uint32_t i, struct wire_val *key, struct wire_val *val);
/* Element i of an array (i below its wire_val_arr count). */
struct wire_val wire_val_at(struct wire_val arr, uint32_t i);
/* Is v a string equal to s? */
bool wire_val_streq(struct wire_val v, const char *s);

#endif
