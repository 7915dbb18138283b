/*
 * codec.c - the msgpack primitives (see codec.h for why inputs are
 * pre-scanned).  The only file in capbroker that includes msgpack.h.
 *
 * Runs in the broker on agent bytes and in clients on broker bytes.  The
 * decoder never trusts a length: wire_scan() proves the structure fits the
 * input before msgpack-c sees it, then every getter checks type and range.
 */
#include "wire/codec.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

/* msgpack-c gives an empty string or bin a NULL pointer, and passing NULL
 * to memcmp, memcpy or memchr is undefined even for length 0: every such
 * call on decoded data goes through these. */
static bool
wire_memeq(const void *a, const void *b, size_t n)
{
	return n == 0 || memcmp(a, b, n) == 0;
}

static bool
wire_has_nul(const void *p, size_t n)
{
	return n != 0 && memchr(p, '\0', n) != NULL;
}

static void
wire_copy(void *dst, const void *src, size_t n)
{
	if (n)
		memcpy(dst, src, n);
}

/* ---- bounded pre-scan ------------------------------------------------- */

enum { WIRE_SCAN_OK = 0, WIRE_SCAN_TRUNC = 1, WIRE_SCAN_BAD = 2 };

static uint64_t
wire_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

/*
 * Walk one msgpack object without allocating.  Every container's element
 * count must fit in the bytes left (each element takes at least one), the
 * nesting stays within max_depth, and only the types we use are allowed.
 * *used gets the object's size.
 */
static int
wire_scan(const uint8_t *p, size_t n, unsigned max_depth, size_t *used, size_t *nobj)
{
	uint64_t stack[WIRE_MAX_DEPTH + 1];
	unsigned depth = 1;
	size_t pos = 0, objs = 0;

	stack[0] = 1;
	while (depth > 0) {
		uint64_t cnt = 0, skip = 0;
		unsigned lenbytes = 0;
		bool container = false;
		uint8_t b;

		if (stack[depth - 1] == 0) {
			depth--;
			continue;
		}
		stack[depth - 1]--;
		if (pos >= n)
			return WIRE_SCAN_TRUNC;
		b = p[pos++];
		objs++;
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			/* fixint, nil, bool */
		} else if ((b & 0xf0) == 0x80) {
			cnt = 2u * (b & 0x0fu);
			container = true;
		} else if ((b & 0xf0) == 0x90) {
			cnt = b & 0x0fu;
			container = true;
		} else if ((b & 0xe0) == 0xa0) {
			skip = b & 0x1fu;
		} else {
			switch (b) {
			case 0xc4: case 0xd9: lenbytes = 1; break;	/* bin8 str8 */
			case 0xc5: case 0xda: lenbytes = 2; break;
			case 0xc6: case 0xdb: lenbytes = 4; break;
			case 0xcc: case 0xd0: skip = 1; break;
			case 0xcd: case 0xd1: skip = 2; break;
			case 0xce: case 0xd2: skip = 4; break;
			case 0xcf: case 0xd3: skip = 8; break;
			case 0xdc: case 0xde: lenbytes = 2; container = true; break;
			case 0xdd: case 0xdf: lenbytes = 4; container = true; break;
			default:
				return WIRE_SCAN_BAD;	/* c1, ext, float */
			}
			if (lenbytes) {
				if (n - pos < lenbytes)
					return WIRE_SCAN_TRUNC;
				if (container) {
					cnt = wire_be(p + pos, lenbytes);
					if (b == 0xde || b == 0xdf)
						cnt *= 2;
				} else {
					skip = wire_be(p + pos, lenbytes);
				}
				pos += lenbytes;
			}
		}
		if (skip > n - pos)
			return WIRE_SCAN_TRUNC;
		pos += (size_t)skip;
		if (container && cnt > 0) {
			if (cnt > n - pos)
				return WIRE_SCAN_TRUNC;
			if (depth > max_depth)
				return WIRE_SCAN_BAD;
			stack[depth++] = cnt;
		}
	}
	*used = pos;
	if (nobj)
		*nobj = objs;
	return WIRE_SCAN_OK;
}

/* ---- encoder ----------------------------------------------------------- */

static int
wire_enc_write(void *data, const char *buf, size_t len)
{
	struct wire_enc *e = data;

	if (e->err)
		return -1;
	if (len > e->cap - e->len) {
		e->err = CB_ETOOBIG;
		return -1;
	}
	wire_copy(e->buf + e->len, buf, len);
	e->len += len;
	return 0;
}

void
wire_enc_init(struct wire_enc *e, uint8_t *buf, size_t cap)
{
	memset(e, 0, sizeof(*e));
	e->buf = buf;
	e->cap = cap;
}

static void
wire_pk(struct wire_enc *e, msgpack_packer *pk)
{
	msgpack_packer_init(pk, e, wire_enc_write);
}

/* Count one element in the open container and write its key if a map. */
static void
wire_elem(struct wire_enc *e, const char *key)
{
	msgpack_packer pk;

	if (e->err)
		return;	/* the first error sticks */
	if (e->depth == 0) {
		if (key)
			e->err = CB_EINVAL;
		return;
	}
	if (e->is_map[e->depth - 1] != (key != NULL)) {
		e->err = CB_EINVAL;
		return;
	}
	e->count[e->depth - 1]++;
	if (key) {
		size_t n = strlen(key);

		wire_pk(e, &pk);
		msgpack_pack_str(&pk, n);
		msgpack_pack_str_body(&pk, key, n);
	}
}

/* Containers get a 32-bit header patched at the end, so callers need not
 * count their fields in advance. */
static void
wire_open(struct wire_enc *e, const char *key, bool map)
{
	static const uint8_t hdr[5];

	wire_elem(e, key);
	if (e->err)
		return;
	if (e->depth == WIRE_ENC_DEPTH) {
		e->err = CB_EINVAL;
		return;
	}
	e->mark[e->depth] = e->len;
	e->count[e->depth] = 0;
	e->is_map[e->depth] = map;
	e->depth++;
	wire_enc_write(e, (const char *)hdr, sizeof(hdr));
}

static void
wire_close(struct wire_enc *e, bool map)
{
	uint8_t *h;
	uint32_t c;

	if (e->err)
		return;
	if (e->depth == 0 || e->is_map[e->depth - 1] != map) {
		e->err = CB_EINVAL;
		return;
	}
	e->depth--;
	h = e->buf + e->mark[e->depth];
	c = e->count[e->depth];
	h[0] = map ? 0xdf : 0xdd;
	h[1] = (uint8_t)(c >> 24);
	h[2] = (uint8_t)(c >> 16);
	h[3] = (uint8_t)(c >> 8);
	h[4] = (uint8_t)c;
}

void wire_map_begin(struct wire_enc *e, const char *key) { wire_open(e, key, true); }
void wire_map_end(struct wire_enc *e) { wire_close(e, true); }
void wire_arr_begin(struct wire_enc *e, const char *key) { wire_open(e, key, false); }
void wire_arr_end(struct wire_enc *e) { wire_close(e, false); }

void
wire_put_u64(struct wire_enc *e, const char *key, uint64_t v)
{
	msgpack_packer pk;

	wire_elem(e, key);
	wire_pk(e, &pk);
	msgpack_pack_uint64(&pk, v);
}

void
wire_put_i64(struct wire_enc *e, const char *key, int64_t v)
{
	msgpack_packer pk;

	wire_elem(e, key);
	wire_pk(e, &pk);
	msgpack_pack_int64(&pk, v);
}

void
wire_put_bool(struct wire_enc *e, const char *key, bool v)
{
	msgpack_packer pk;

	wire_elem(e, key);
	wire_pk(e, &pk);
	if (v)
		msgpack_pack_true(&pk);
	else
		msgpack_pack_false(&pk);
}

void
wire_put_strn(struct wire_enc *e, const char *key, const char *s, size_t n)
{
	msgpack_packer pk;

	wire_elem(e, key);
	wire_pk(e, &pk);
	msgpack_pack_str(&pk, n);
	msgpack_pack_str_body(&pk, s, n);
}

void
wire_put_str(struct wire_enc *e, const char *key, const char *s)
{
	wire_put_strn(e, key, s, strlen(s));
}

void
wire_put_bin(struct wire_enc *e, const char *key, const void *b, size_t n)
{
	msgpack_packer pk;

	wire_elem(e, key);
	wire_pk(e, &pk);
	msgpack_pack_bin(&pk, n);
	msgpack_pack_bin_body(&pk, b, n);
}

int
wire_enc_finish(struct wire_enc *e, size_t *len)
{
	if (e->err)
		return e->err;
	if (e->depth != 0)
		return CB_EINVAL;
	*len = e->len;
	return 0;
}

/* ---- decoder ----------------------------------------------------------- */

struct wire_dec {
	msgpack_zone zone;
	size_t max_input;
	char *arena;		/* NUL-terminated string copies, entry arrays */
	size_t arena_cap;
	size_t arena_len;
};

int
wire_dec_new(size_t max_input, struct wire_dec **out)
{
	struct wire_dec *d;

	*out = NULL;
	if (!(d = calloc(1, sizeof(*d))))
		return CB_ENOMEM;
	if (!msgpack_zone_init(&d->zone, 8192)) {
		free(d);
		return CB_ENOMEM;
	}
	d->max_input = max_input;
	/* Each decoded string or element costs at most its input bytes plus
	 * a terminator or a fixed-size record; this bound holds for any
	 * input the scan accepted. */
	d->arena_cap = 2 * max_input + 4096;
	if (!(d->arena = malloc(d->arena_cap))) {
		msgpack_zone_destroy(&d->zone);
		free(d);
		return CB_ENOMEM;
	}
	*out = d;
	return 0;
}

void
wire_dec_free(struct wire_dec *d)
{
	if (!d)
		return;
	msgpack_zone_destroy(&d->zone);
	free(d->arena);
	free(d);
}

static void *
wire_arena(struct wire_dec *d, size_t n, size_t align)
{
	size_t at = (d->arena_len + align - 1) & ~(align - 1);

	if (at > d->arena_cap || n > d->arena_cap - at)
		return NULL;
	d->arena_len = at + n;
	return d->arena + at;
}

static bool
wire_keyeqn(const msgpack_object *k, const char *key, size_t n)
{
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
	    wire_memeq(k->via.str.ptr, key, n);
}

static bool
wire_keyeq(const msgpack_object *k, const char *key)
{
	return wire_keyeqn(k, key, strlen(key));
}

static int
wire_map_check(const msgpack_object *o)
{
	const msgpack_object_kv *kv = o->via.map.ptr;

	if (o->type != MSGPACK_OBJECT_MAP)
		return CB_EPROTO;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		if (kv[i].key.type != MSGPACK_OBJECT_STR)
			return CB_EPROTO;
		for (uint32_t j = 0; j < i; j++)
			if (kv[j].key.via.str.size == kv[i].key.via.str.size &&
			    wire_memeq(kv[j].key.via.str.ptr, kv[i].key.via.str.ptr,
				kv[i].key.via.str.size))
				return CB_EPROTO;
	}
	return 0;
}

int
wire_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_msg *out)
{
	msgpack_object obj;
	size_t used = 0, off = 0;
	int r;

	memset(out, 0, sizeof(*out));
	if (len > d->max_input)
		return CB_ETOOBIG;
	if (wire_scan(buf, len, WIRE_MAX_DEPTH, &used, NULL) != WIRE_SCAN_OK || used != len)
		return CB_EPROTO;
	msgpack_zone_clear(&d->zone);
	d->arena_len = 0;
	if (msgpack_unpack((const char *)buf, len, &off, &d->zone, &obj) !=
	    MSGPACK_UNPACK_SUCCESS || off != len)
		return CB_EPROTO;
	if ((r = wire_map_check(&obj)) != 0)
		return r;
	out->kv = obj.via.map.ptr;
	out->n = obj.via.map.size;
	out->d = d;
	return 0;
}

static const msgpack_object *
wire_find(const struct wire_msg *m, const char *key)
{
	const msgpack_object_kv *kv = m->kv;
	size_t n = strlen(key);	/* once: a decoder looks up many keys per message */

	for (uint32_t i = 0; i < m->n; i++)
		if (wire_keyeqn(&kv[i].key, key, n))
			return &kv[i].val;
	return NULL;
}

int
wire_key_set(const struct wire_msg *m, const char *const *keys, uint64_t *present)
{
	const msgpack_object_kv *kv = m->kv;

	*present = 0;
	for (uint32_t i = 0; i < m->n; i++) {
		size_t k;

		for (k = 0; keys[k] && k < 64; k++)
			if (kv[i].key.type == MSGPACK_OBJECT_STR && kv[i].key.via.str.size > 0 &&
			    kv[i].key.via.str.ptr[0] == keys[k][0] && wire_keyeq(&kv[i].key, keys[k]))
				break;
		if (!keys[k] || k == 64)
			return CB_EPROTO;
		*present |= UINT64_C(1) << k;
	}
	return 0;
}

int
wire_only_keys(const struct wire_msg *m, const char *const *keys)
{
	uint64_t present;

	return wire_key_set(m, keys, &present);
}

int
wire_get_u64(const struct wire_msg *m, const char *key, uint64_t *v)
{
	const msgpack_object *o = wire_find(m, key);

	if (!o)
		return CB_ENOENT;
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return CB_EPROTO;
	*v = o->via.u64;
	return 0;
}

int
wire_get_i64(const struct wire_msg *m, const char *key, int64_t *v)
{
	const msgpack_object *o = wire_find(m, key);

	if (!o)
		return CB_ENOENT;
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		*v = o->via.i64;
	else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		*v = (int64_t)o->via.u64;
	else
		return CB_EPROTO;
	return 0;
}

int
wire_get_bool(const struct wire_msg *m, const char *key, bool *v)
{
	const msgpack_object *o = wire_find(m, key);

	if (!o)
		return CB_ENOENT;
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return CB_EPROTO;
	*v = o->via.boolean;
	return 0;
}

static int
wire_str_copy(struct wire_dec *d, const msgpack_object *o, const char **s)
{
	char *c;

	if (o->type != MSGPACK_OBJECT_STR)
		return CB_EPROTO;
	if (wire_has_nul(o->via.str.ptr, o->via.str.size))
		return CB_EPROTO;
	if (!(c = wire_arena(d, (size_t)o->via.str.size + 1, 1)))
		return CB_ETOOBIG;
	wire_copy(c, o->via.str.ptr, o->via.str.size);
	c[o->via.str.size] = '\0';
	*s = c;
	return 0;
}

int
wire_get_str(const struct wire_msg *m, const char *key, const char **s)
{
	const msgpack_object *o = wire_find(m, key);

	if (!o)
		return CB_ENOENT;
	return wire_str_copy(m->d, o, s);
}

int
wire_get_bin(const struct wire_msg *m, const char *key, const uint8_t **b, size_t *n)
{
	const msgpack_object *o = wire_find(m, key);

	if (!o)
		return CB_ENOENT;
	if (o->type != MSGPACK_OBJECT_BIN)
		return CB_EPROTO;
	/* Points into the caller's input buffer: no copy on the hot path. */
	*b = (const uint8_t *)o->via.bin.ptr;
	*n = o->via.bin.size;
	return 0;
}

int
wire_get_strv(const struct wire_msg *m, const char *key, const char **v, size_t max, size_t *n)
{
	const msgpack_object *o = wire_find(m, key);
	int r;

	*n = 0;
	if (!o)
		return CB_ENOENT;
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return CB_EPROTO;
	if (o->via.array.size > max)
		return CB_ETOOBIG;
	for (uint32_t i = 0; i < o->via.array.size; i++)
		if ((r = wire_str_copy(m->d, &o->via.array.ptr[i], &v[i])) != 0)
			return r;
	*n = o->via.array.size;
	return 0;
}

int
wire_get_maps(const struct wire_msg *m, const char *key, struct wire_msg *v, size_t max, size_t *n)
{
	const msgpack_object *o = wire_find(m, key);
	int r;

	*n = 0;
	if (!o)
		return CB_ENOENT;
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return CB_EPROTO;
	if (o->via.array.size > max)
		return CB_ETOOBIG;
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *e = &o->via.array.ptr[i];

		if ((r = wire_map_check(e)) != 0)
			return r;
		v[i].kv = e->via.map.ptr;
		v[i].n = e->via.map.size;
		v[i].d = m->d;
	}
	*n = o->via.array.size;
	return 0;
}


int
wire_get_u32(const struct wire_msg *m, const char *key, uint32_t *v, bool *has)
{
	uint64_t u;
	int r = wire_get_u64(m, key, &u);

	if (r == 0 && u > UINT32_MAX)
		return CB_EPROTO;
	if (r == 0)
		*v = (uint32_t)u;
	if (has)
		*has = (r == 0);
	return r;
}

int
wire_get_map(const struct wire_msg *m, const char *key, struct wire_msg *v)
{
	const msgpack_object *o = wire_find(m, key);
	int r;

	if (!o)
		return CB_ENOENT;
	if ((r = wire_map_check(o)) != 0)
		return r;
	v->kv = o->via.map.ptr;
	v->n = o->via.map.size;
	v->d = m->d;
	return 0;
}

int
wire_get_maplist(const struct wire_msg *m, const char *key, size_t max, struct wire_msg **v,
    size_t *n)
{
	const msgpack_object *o = wire_find(m, key);
	struct wire_msg *sub;

	*v = NULL;
	*n = 0;
	if (!o)
		return CB_ENOENT;
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > max)
		return CB_EPROTO;
	sub = wire_arena(m->d, sizeof(*sub) * ((size_t)o->via.array.size + 1), _Alignof(struct wire_msg));
	if (!sub)
		return CB_ETOOBIG;
	*v = sub;
	return wire_get_maps(m, key, sub, max, n);
}

bool
wire_has(const struct wire_msg *m, const char *key)
{
	return wire_find(m, key) != NULL;
}

void *
wire_msg_alloc(const struct wire_msg *m, size_t n, size_t align)
{
	return wire_arena(m->d, n, align);
}

/* ---- values by position --------------------------------------------------- */

int
wire_decode_val(struct wire_dec *d, const uint8_t *buf, size_t len, unsigned max_depth,
    struct wire_val *out, size_t *used)
{
	msgpack_object *o;
	size_t off = 0;

	out->o = NULL;
	*used = 0;
	if (len > d->max_input)
		return CB_ETOOBIG;
	if (max_depth > WIRE_MAX_DEPTH ||
	    wire_scan(buf, len, max_depth, used, NULL) != WIRE_SCAN_OK)
		return CB_EPROTO;
	msgpack_zone_clear(&d->zone);
	d->arena_len = 0;
	/* The object lives in the zone so the view outlives this call. */
	if (!(o = msgpack_zone_malloc(&d->zone, sizeof(*o))))
		return CB_ENOMEM;
	if (msgpack_unpack((const char *)buf, *used, &off, &d->zone, o) != MSGPACK_UNPACK_SUCCESS ||
	    off != *used)
		return CB_EPROTO;
	out->o = o;
	return 0;
}

int
wire_val_map(struct wire_val v, uint32_t *n)
{
	const msgpack_object *o = v.o;

	if (o->type != MSGPACK_OBJECT_MAP)
		return CB_EPROTO;
	*n = o->via.map.size;
	return 0;
}

int
wire_val_arr(struct wire_val v, uint32_t *n)
{
	const msgpack_object *o = v.o;

	if (o->type != MSGPACK_OBJECT_ARRAY)
		return CB_EPROTO;
	*n = o->via.array.size;
	return 0;
}

int
wire_val_u64(struct wire_val v, uint64_t *u)
{
	const msgpack_object *o = v.o;

	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return CB_EPROTO;
	*u = o->via.u64;
	return 0;
}

int
wire_val_bool(struct wire_val v, bool *b)
{
	const msgpack_object *o = v.o;

	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return CB_EPROTO;
	*b = o->via.boolean;
	return 0;
}

int
wire_val_str(struct wire_val v, const char **s, size_t *n)
{
	const msgpack_object *o = v.o;

	if (o->type != MSGPACK_OBJECT_STR)
		return CB_EPROTO;
	/* msgpack-c gives an empty string a NULL pointer */
	*s = o->via.str.size ? o->via.str.ptr : "";
	*n = o->via.str.size;
	return 0;
}

int
wire_val_bin(struct wire_val v, const uint8_t **b, size_t *n)
{
	static const uint8_t none[1];
	const msgpack_object *o = v.o;

	if (o->type != MSGPACK_OBJECT_BIN)
		return CB_EPROTO;
	*b = o->via.bin.size ? (const uint8_t *)o->via.bin.ptr : none;
	*n = o->via.bin.size;
	return 0;
}

void
wire_val_entry(struct wire_val map, uint32_t i, struct wire_val *key, struct wire_val *val)
{
	const msgpack_object *o = map.o;

	key->o = &o->via.map.ptr[i].key;
	val->o = &o->via.map.ptr[i].val;
}

struct wire_val
wire_val_at(struct wire_val arr, uint32_t i)
{
	const msgpack_object *o = arr.o;

	return (struct wire_val){ &o->via.array.ptr[i] };
}

bool
wire_val_streq(struct wire_val v, const char *s)
{
	return wire_keyeq(v.o, s);
}
