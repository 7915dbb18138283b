/*
 * wire.c - the msgpack codec (see wire.h for why inputs are pre-scanned).
 *
 * Runs in the broker on agent bytes and in clients on broker bytes.  The
 * decoder never trusts a length: wire_scan() proves the structure fits the
 * input before msgpack-c sees it, then every getter checks type and range.
 */
#include "wire/wire.h"

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
wire_keyeq(const msgpack_object *k, const char *key)
{
	size_t n = strlen(key);

	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
	    wire_memeq(k->via.str.ptr, key, n);
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

	for (uint32_t i = 0; i < m->n; i++)
		if (wire_keyeq(&kv[i].key, key))
			return &kv[i].val;
	return NULL;
}

int
wire_only_keys(const struct wire_msg *m, const char *const *keys)
{
	const msgpack_object_kv *kv = m->kv;

	for (uint32_t i = 0; i < m->n; i++) {
		bool known = false;

		for (size_t k = 0; keys[k] && !known; k++)
			known = wire_keyeq(&kv[i].key, keys[k]);
		if (!known)
			return CB_EPROTO;
	}
	return 0;
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

/* ---- agent requests ---------------------------------------------------- */

static const char *const wire_op_names[WIRE_OP_COUNT] = {
	[WIRE_OP_PING] = "ping",
	[WIRE_OP_FS_READ] = "fs.read",
	[WIRE_OP_FS_WRITE] = "fs.write",
	[WIRE_OP_FS_LIST] = "fs.list",
	[WIRE_OP_FS_STAT] = "fs.stat",
	[WIRE_OP_FS_MKDIR] = "fs.mkdir",
	[WIRE_OP_FS_DELETE] = "fs.delete",
	[WIRE_OP_FS_RENAME] = "fs.rename",
	[WIRE_OP_NET_CONNECT] = "net.connect",
	[WIRE_OP_PROC_EXEC] = "proc.exec",
	[WIRE_OP_REQUEST] = "request",
	[WIRE_OP_TOKENS] = "tokens",
	[WIRE_OP_TOKEN_ADD] = "token.add",
	[WIRE_OP_DERIVE] = "derive",
	[WIRE_OP_IO_READ] = "io.read",
	[WIRE_OP_IO_WRITE] = "io.write",
	[WIRE_OP_IO_CLOSE] = "io.close",
};

const char *
wire_op_name(enum wire_op op)
{
	return (unsigned)op < WIRE_OP_COUNT ? wire_op_names[op] : "?";
}

static const char *const wire_req_keys[] = {
	"id", "op", "tok", "th", "path", "path2", "flags", "mode", "data", "host",
	"port", "argv", "cap", "caps", "ttl", "uses", "reason", "aud", "h", "len",
	"timeout", NULL
};

/* Optional fields: absent is fine, present must have the right type. */
#define WIRE_OPT(call) do { int _r = (call); if (_r != 0 && _r != CB_ENOENT) return _r; } while (0)

static int
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
wire_req_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_req *out)
{
	struct wire_msg m;
	const char *op;
	uint64_t id;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = wire_decode(d, buf, len, &m)) != 0)
		return r;
	if ((r = wire_only_keys(&m, wire_req_keys)) != 0)
		return r;
	if (wire_get_u64(&m, "id", &id) != 0 || id > UINT32_MAX)
		return CB_EPROTO;
	out->id = (uint32_t)id;
	if (wire_get_str(&m, "op", &op) != 0)
		return CB_EPROTO;
	out->op = WIRE_OP_COUNT;
	for (int i = 0; i < WIRE_OP_COUNT; i++)
		if (strcmp(op, wire_op_names[i]) == 0)
			out->op = (enum wire_op)i;
	if (out->op == WIRE_OP_COUNT)
		return CB_EUNKNOWNOP;
	WIRE_OPT(wire_get_str(&m, "tok", &out->tok));
	WIRE_OPT(wire_get_u32(&m, "th", &out->th, &out->has_th));
	WIRE_OPT(wire_get_str(&m, "path", &out->path));
	WIRE_OPT(wire_get_str(&m, "path2", &out->path2));
	WIRE_OPT(wire_get_u32(&m, "flags", &out->flags, NULL));
	WIRE_OPT(wire_get_u32(&m, "mode", &out->mode, NULL));
	r = wire_get_bin(&m, "data", &out->data, &out->data_len);
	if (r != 0 && r != CB_ENOENT)
		return r;
	out->has_data = (r == 0);
	if (out->has_data && out->data_len > WIRE_DATA_MAX)
		return CB_ETOOBIG;
	WIRE_OPT(wire_get_str(&m, "host", &out->host));
	WIRE_OPT(wire_get_u32(&m, "port", &out->port, NULL));
	WIRE_OPT(wire_get_strv(&m, "argv", out->argv, WIRE_ARGV_MAX, &out->argc));
	WIRE_OPT(wire_get_str(&m, "cap", &out->cap));
	WIRE_OPT(wire_get_strv(&m, "caps", out->caps, CAP_MAX_CAPS, &out->ncaps));
	WIRE_OPT(wire_get_u64(&m, "ttl", &out->ttl));
	WIRE_OPT(wire_get_u32(&m, "uses", &out->uses, &out->has_uses));
	WIRE_OPT(wire_get_str(&m, "reason", &out->reason));
	WIRE_OPT(wire_get_str(&m, "aud", &out->aud));
	WIRE_OPT(wire_get_u32(&m, "h", &out->h, NULL));
	WIRE_OPT(wire_get_u32(&m, "len", &out->len, NULL));
	WIRE_OPT(wire_get_u32(&m, "timeout", &out->timeout_ms, NULL));
	if (out->flags & ~WIRE_F_ALL)
		return CB_EPROTO;
	return 0;
}

int
wire_req_encode(const struct wire_req *r, uint8_t *buf, size_t cap, size_t *len)
{
	struct wire_enc e;

	if ((unsigned)r->op >= WIRE_OP_COUNT)
		return CB_EINVAL;
	wire_enc_init(&e, buf, cap);
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "id", r->id);
	wire_put_str(&e, "op", wire_op_names[r->op]);
	if (r->tok)
		wire_put_str(&e, "tok", r->tok);
	if (r->has_th)
		wire_put_u64(&e, "th", r->th);
	if (r->path)
		wire_put_str(&e, "path", r->path);
	if (r->path2)
		wire_put_str(&e, "path2", r->path2);
	if (r->flags)
		wire_put_u64(&e, "flags", r->flags);
	if (r->mode)
		wire_put_u64(&e, "mode", r->mode);
	if (r->has_data)
		wire_put_bin(&e, "data", r->data, r->data_len);
	if (r->host)
		wire_put_str(&e, "host", r->host);
	if (r->port)
		wire_put_u64(&e, "port", r->port);
	if (r->argc) {
		wire_arr_begin(&e, "argv");
		for (size_t i = 0; i < r->argc && i < WIRE_ARGV_MAX; i++)
			wire_put_str(&e, NULL, r->argv[i]);
		wire_arr_end(&e);
	}
	if (r->cap)
		wire_put_str(&e, "cap", r->cap);
	if (r->ncaps) {
		wire_arr_begin(&e, "caps");
		for (size_t i = 0; i < r->ncaps && i < CAP_MAX_CAPS; i++)
			wire_put_str(&e, NULL, r->caps[i]);
		wire_arr_end(&e);
	}
	if (r->ttl)
		wire_put_u64(&e, "ttl", r->ttl);
	if (r->has_uses)
		wire_put_u64(&e, "uses", r->uses);
	if (r->reason)
		wire_put_str(&e, "reason", r->reason);
	if (r->aud)
		wire_put_str(&e, "aud", r->aud);
	if (r->op == WIRE_OP_IO_READ || r->op == WIRE_OP_IO_WRITE || r->op == WIRE_OP_IO_CLOSE)
		wire_put_u64(&e, "h", r->h);
	if (r->len)
		wire_put_u64(&e, "len", r->len);
	if (r->timeout_ms)
		wire_put_u64(&e, "timeout", r->timeout_ms);
	wire_map_end(&e);
	return wire_enc_finish(&e, len);
}

/* ---- replies ------------------------------------------------------------- */

int
wire_reply_encode(const struct wire_reply *r, uint8_t *buf, size_t cap, size_t *len)
{
	struct wire_enc e;
	char t[2] = { 0, 0 };

	wire_enc_init(&e, buf, cap);
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "id", r->id);
	wire_put_bool(&e, "ok", r->err == 0);
	if (r->err) {
		wire_put_i64(&e, "err", r->err);
		wire_put_str(&e, "name", cb_errname(r->err));
		wire_put_str(&e, "reason", r->reason ? r->reason : cb_strerror(r->err));
	}
	if (r->fd)
		wire_put_bool(&e, "fd", true);
	if (r->has_data)
		wire_put_bin(&e, "data", r->data, r->data_len);
	if (r->entries) {
		wire_arr_begin(&e, "entries");
		for (size_t i = 0; i < r->nentries; i++) {
			wire_map_begin(&e, NULL);
			wire_put_str(&e, "n", r->entries[i].name);
			t[0] = r->entries[i].type;
			wire_put_str(&e, "t", t);
			wire_map_end(&e);
		}
		wire_arr_end(&e);
	}
	if (r->trunc)
		wire_put_bool(&e, "trunc", true);
	if (r->has_stat) {
		wire_map_begin(&e, "st");
		wire_put_u64(&e, "size", r->stat_size);
		wire_put_u64(&e, "mtime", r->stat_mtime);
		wire_put_u64(&e, "mode", r->stat_mode);
		t[0] = r->stat_type;
		wire_put_str(&e, "type", t);
		wire_map_end(&e);
	}
	if (r->has_status)
		wire_put_i64(&e, "status", r->status);
	if (r->out)
		wire_put_bin(&e, "out", r->out, r->out_len);
	if (r->errout)
		wire_put_bin(&e, "errout", r->errout, r->errout_len);
	if (r->token)
		wire_put_str(&e, "token", r->token);
	if (r->tid)
		wire_put_str(&e, "tid", r->tid);
	if (r->has_th)
		wire_put_u64(&e, "th", r->th);
	if (r->rid)
		wire_put_str(&e, "rid", r->rid);
	if (r->tokens) {
		wire_arr_begin(&e, "tokens");
		for (size_t i = 0; i < r->ntokens; i++) {
			const struct wire_tokinfo *ti = &r->tokens[i];

			wire_map_begin(&e, NULL);
			wire_put_u64(&e, "th", ti->th);
			wire_put_str(&e, "id", ti->id);
			wire_put_str(&e, "caps", ti->caps);
			wire_put_u64(&e, "exp", ti->exp);
			if (ti->has_uses)
				wire_put_u64(&e, "uses", ti->uses);
			if (ti->elevated)
				wire_put_bool(&e, "elev", true);
			if (ti->state)
				wire_put_i64(&e, "st", ti->state);
			wire_map_end(&e);
		}
		wire_arr_end(&e);
	}
	if (r->has_h)
		wire_put_u64(&e, "h", r->h);
	if (r->has_n)
		wire_put_u64(&e, "n", r->n);
	wire_map_end(&e);
	return wire_enc_finish(&e, len);
}

#define WIRE_LIST_MAX 65536

int
wire_reply_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_reply *out)
{
	struct wire_msg m, *sub = NULL;
	uint64_t u;
	int64_t i64;
	bool ok, b;
	const char *s;
	size_t n;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = wire_decode(d, buf, len, &m)) != 0)
		return r;
	if (wire_get_u64(&m, "id", &u) != 0 || u > UINT32_MAX)
		return CB_EPROTO;
	out->id = (uint32_t)u;
	if (wire_get_bool(&m, "ok", &ok) != 0)
		return CB_EPROTO;
	if (!ok) {
		if (wire_get_i64(&m, "err", &i64) != 0 || i64 >= 0 || i64 < -1000)
			return CB_EPROTO;
		out->err = (int)i64;
		WIRE_OPT(wire_get_str(&m, "reason", &out->reason));
	}
	WIRE_OPT(wire_get_bool(&m, "fd", &out->fd));
	r = wire_get_bin(&m, "data", &out->data, &out->data_len);
	if (r != 0 && r != CB_ENOENT)
		return r;
	out->has_data = (r == 0);
	WIRE_OPT(wire_get_bool(&m, "trunc", &out->trunc));
	WIRE_OPT(wire_get_i64(&m, "status", &i64));
	if (wire_find(&m, "status")) {
		out->has_status = true;
		out->status = (int32_t)i64;
	}
	WIRE_OPT(wire_get_bin(&m, "out", &out->out, &out->out_len));
	WIRE_OPT(wire_get_bin(&m, "errout", &out->errout, &out->errout_len));
	WIRE_OPT(wire_get_str(&m, "token", &out->token));
	WIRE_OPT(wire_get_str(&m, "tid", &out->tid));
	WIRE_OPT(wire_get_u32(&m, "th", &out->th, &out->has_th));
	WIRE_OPT(wire_get_str(&m, "rid", &out->rid));
	WIRE_OPT(wire_get_u32(&m, "h", &out->h, &out->has_h));
	r = wire_get_u64(&m, "n", &out->n);
	if (r != 0 && r != CB_ENOENT)
		return r;
	out->has_n = (r == 0);

	if (wire_find(&m, "st")) {
		struct wire_msg st;

		{
			const msgpack_object *o = wire_find(&m, "st");

			if ((r = wire_map_check(o)) != 0)
				return r;
			st.kv = o->via.map.ptr;
			st.n = o->via.map.size;
			st.d = d;
		}
		if (wire_get_u64(&st, "size", &out->stat_size) != 0 ||
		    wire_get_u64(&st, "mtime", &out->stat_mtime) != 0 ||
		    wire_get_u32(&st, "mode", &out->stat_mode, NULL) != 0 ||
		    wire_get_str(&st, "type", &s) != 0)
			return CB_EPROTO;
		out->stat_type = s[0];
		out->has_stat = true;
	}

	if (wire_find(&m, "entries") || wire_find(&m, "tokens")) {
		const char *key = wire_find(&m, "entries") ? "entries" : "tokens";
		const msgpack_object *o = wire_find(&m, key);

		if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > WIRE_LIST_MAX)
			return CB_EPROTO;
		sub = wire_arena(d, sizeof(*sub) * (o->via.array.size + 1), _Alignof(struct wire_msg));
		if (!sub)
			return CB_ETOOBIG;
		if ((r = wire_get_maps(&m, key, sub, WIRE_LIST_MAX, &n)) != 0)
			return r;
		if (key[0] == 'e') {
			struct wire_entry *ents = wire_arena(d, sizeof(*ents) * (n + 1),
			    _Alignof(struct wire_entry));

			if (!ents)
				return CB_ETOOBIG;
			for (size_t i = 0; i < n; i++) {
				if (wire_get_str(&sub[i], "n", &ents[i].name) != 0 ||
				    wire_get_str(&sub[i], "t", &s) != 0)
					return CB_EPROTO;
				ents[i].type = s[0];
			}
			out->entries = ents;
			out->nentries = n;
		} else {
			struct wire_tokinfo *ti = wire_arena(d, sizeof(*ti) * (n + 1),
			    _Alignof(struct wire_tokinfo));

			if (!ti)
				return CB_ETOOBIG;
			for (size_t i = 0; i < n; i++) {
				memset(&ti[i], 0, sizeof(ti[i]));
				if (wire_get_u32(&sub[i], "th", &ti[i].th, NULL) != 0 ||
				    wire_get_str(&sub[i], "id", &ti[i].id) != 0 ||
				    wire_get_str(&sub[i], "caps", &ti[i].caps) != 0 ||
				    wire_get_u64(&sub[i], "exp", &ti[i].exp) != 0)
					return CB_EPROTO;
				WIRE_OPT(wire_get_u32(&sub[i], "uses", &ti[i].uses, &ti[i].has_uses));
				b = false;
				WIRE_OPT(wire_get_bool(&sub[i], "elev", &b));
				ti[i].elevated = b;
				i64 = 0;
				WIRE_OPT(wire_get_i64(&sub[i], "st", &i64));
				if (i64 > 0 || i64 < -1000)
					return CB_EPROTO;
				ti[i].state = (int)i64;
			}
			out->tokens = ti;
			out->ntokens = n;
		}
	}
	return 0;
}

/* ---- token bodies -------------------------------------------------------- */

enum {
	WT_V = 1 << 0, WT_KID = 1 << 1, WT_ID = 1 << 2, WT_AUD = 1 << 3,
	WT_NBF = 1 << 4, WT_EXP = 1 << 5, WT_USES = 1 << 6, WT_PAR = 1 << 7,
	WT_ELEV = 1 << 8, WT_CAPS = 1 << 9,
};
#define WT_REQUIRED (WT_V | WT_KID | WT_ID | WT_AUD | WT_NBF | WT_EXP | WT_CAPS)

static const struct { const char *key; unsigned bit; } wire_tok_fields[] = {
	{ "v", WT_V }, { "kid", WT_KID }, { "id", WT_ID }, { "aud", WT_AUD },
	{ "nbf", WT_NBF }, { "exp", WT_EXP }, { "uses", WT_USES }, { "par", WT_PAR },
	{ "elev", WT_ELEV }, { "caps", WT_CAPS },
};

int
wire_token_body_encode(const struct cap_claims *c, uint8_t **out, size_t *len)
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
wire_tok_bin(const msgpack_object *o, uint8_t *dst, size_t n)
{
	if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != n)
		return CB_ETOK_TYPE;
	memcpy(dst, o->via.bin.ptr, n);
	return 0;
}

static int
wire_tok_caps(const msgpack_object *o, struct cap_claims *c)
{
	char buf[CAP_STR_MAX + 1];
	int r;

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size == 0 ||
	    o->via.array.size > CAP_MAX_CAPS)
		return CB_ETOK_TYPE;
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *s = &o->via.array.ptr[i];

		if (s->type != MSGPACK_OBJECT_STR)
			return CB_ETOK_TYPE;
		if (s->via.str.size > CAP_STR_MAX)
			return CB_ECAP_TOOLONG;
		if (wire_has_nul(s->via.str.ptr, s->via.str.size))
			return CB_ECAP_NUL;
		wire_copy(buf, s->via.str.ptr, s->via.str.size);
		buf[s->via.str.size] = '\0';
		if ((r = cap_parse(buf, &c->caps[c->ncaps])) != 0)
			return r;
		c->ncaps++;
	}
	return 0;
}

static int
wire_tok_field(unsigned bit, const msgpack_object *v, struct cap_claims *c)
{
	switch (bit) {
	case WT_V:
		if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return CB_ETOK_TYPE;
		c->version = (uint32_t)v->via.u64;
		return 0;
	case WT_KID:
		return wire_tok_bin(v, c->kid, CAP_KID_LEN);
	case WT_ID:
		return wire_tok_bin(v, c->id, CAP_ID_LEN);
	case WT_PAR:
		c->has_parent = true;
		return wire_tok_bin(v, c->parent, CAP_ID_LEN);
	case WT_AUD:
		if (v->type != MSGPACK_OBJECT_STR ||
		    !cap_aud_valid(v->via.str.ptr, v->via.str.size))
			return CB_ETOK_TYPE;
		wire_copy(c->aud, v->via.str.ptr, v->via.str.size);
		c->aud[v->via.str.size] = '\0';
		return 0;
	case WT_NBF:
	case WT_EXP:
		if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return CB_ETOK_TYPE;
		if (bit == WT_NBF)
			c->nbf = v->via.u64;
		else
			c->exp = v->via.u64;
		return 0;
	case WT_USES:
		if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 > UINT32_MAX)
			return CB_ETOK_TYPE;
		c->has_uses = true;
		c->uses = (uint32_t)v->via.u64;
		return 0;
	case WT_ELEV:
		if (v->type != MSGPACK_OBJECT_BOOLEAN)
			return CB_ETOK_TYPE;
		c->elevated = v->via.boolean;
		return 0;
	case WT_CAPS:
		return wire_tok_caps(v, c);
	}
	return CB_ETOK_UNKNOWN;
}

int
wire_token_body_decode(const uint8_t *buf, size_t len, struct cap_claims *out)
{
	msgpack_zone zone;
	msgpack_object obj;
	const msgpack_object_kv *kv;
	size_t used = 0, off = 0;
	unsigned seen = 0;
	int r, s;

	memset(out, 0, sizeof(*out));
	if (len > CAP_TOKEN_MAX)
		return CB_ETOK_TOOBIG;
	s = wire_scan(buf, len, 2, &used, NULL);
	if (s != WIRE_SCAN_OK)
		return CB_ETOK_MALFORMED;
	if (used != len)
		return CB_ETOK_TRAILING;
	if (!msgpack_zone_init(&zone, 2048))
		return CB_ENOMEM;
	if (msgpack_unpack((const char *)buf, len, &off, &zone, &obj) !=
	    MSGPACK_UNPACK_SUCCESS || off != len) {
		r = CB_ETOK_MALFORMED;
		goto out;
	}
	if (obj.type != MSGPACK_OBJECT_MAP) {
		r = CB_ETOK_MALFORMED;
		goto out;
	}
	kv = obj.via.map.ptr;
	/* The version decides what the other fields mean: judge it first. */
	for (uint32_t i = 0; i < obj.via.map.size; i++) {
		if (wire_keyeq(&kv[i].key, "v") &&
		    kv[i].val.type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
		    kv[i].val.via.u64 != CAP_TOKEN_VERSION) {
			r = CB_ETOK_VERSION;
			goto out;
		}
	}
	for (uint32_t i = 0; i < obj.via.map.size; i++) {
		unsigned bit = 0;

		if (kv[i].key.type != MSGPACK_OBJECT_STR) {
			r = CB_ETOK_TYPE;
			goto out;
		}
		for (size_t f = 0; f < sizeof(wire_tok_fields) / sizeof(wire_tok_fields[0]); f++)
			if (wire_keyeq(&kv[i].key, wire_tok_fields[f].key))
				bit = wire_tok_fields[f].bit;
		if (!bit) {
			r = CB_ETOK_UNKNOWN;
			goto out;
		}
		if (seen & bit) {
			r = CB_ETOK_DUPKEY;
			goto out;
		}
		seen |= bit;
		if ((r = wire_tok_field(bit, &kv[i].val, out)) != 0)
			goto out;
	}
	if ((seen & WT_REQUIRED) != WT_REQUIRED) {
		r = CB_ETOK_MISSING;
		goto out;
	}
	r = 0;
out:
	msgpack_zone_destroy(&zone);
	if (r != 0)
		cap_claims_clear(out);
	return r;
}
