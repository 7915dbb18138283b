/*
 * agent.c - agent requests and broker replies (wire/agent.h).
 *
 * Runs in the broker on request bytes from agents (hostile) and in clients
 * on reply bytes from the broker.  The op table below is the one list of
 * which keys each request takes: a request carrying a key its op does not
 * take is refused before any handler sees it, so no handler can be steered
 * by a field it never looked at.
 */
#include "wire/agent.h"

#include <stdio.h>
#include <string.h>

/* ---- agent requests ------------------------------------------------------ */

/* Every key a request may carry, as bits of a per-op mask. */
enum {
	WK_TOK = 1u << 0, WK_TH = 1u << 1, WK_PATH = 1u << 2, WK_PATH2 = 1u << 3,
	WK_FLAGS = 1u << 4, WK_MODE = 1u << 5, WK_DATA = 1u << 6, WK_HOST = 1u << 7,
	WK_PORT = 1u << 8, WK_ARGV = 1u << 9, WK_CAP = 1u << 10, WK_CAPS = 1u << 11,
	WK_TTL = 1u << 12, WK_USES = 1u << 13, WK_REASON = 1u << 14, WK_AUD = 1u << 15,
	WK_H = 1u << 16, WK_LEN = 1u << 17, WK_TIMEOUT = 1u << 18,
};

#define WIRE_KEY_COUNT 19

/* In bit order: wire_req_keys[i] is the key of bit 1 << i. */
static const char *const wire_req_keys[WIRE_KEY_COUNT + 3] = {
	"tok", "th", "path", "path2", "flags", "mode", "data", "host", "port", "argv",
	"cap", "caps", "ttl", "uses", "reason", "aud", "h", "len", "timeout",
	"id", "op", NULL
};

/* Clients attach their token (tok or th) to every request, so every op
 * takes them; the handlers that act without a token ignore them. */
#define WK_ANY (WK_TOK | WK_TH)

static const struct wire_op_spec {
	const char *name;
	uint32_t keys;		/* WK_* the op takes besides id and op */
} wire_ops[WIRE_OP_COUNT] = {
	[WIRE_OP_PING] = { "ping", WK_ANY },
	[WIRE_OP_FS_READ] = { "fs.read", WK_ANY | WK_PATH | WK_FLAGS },
	[WIRE_OP_FS_WRITE] = { "fs.write", WK_ANY | WK_PATH | WK_FLAGS | WK_MODE | WK_DATA },
	[WIRE_OP_FS_LIST] = { "fs.list", WK_ANY | WK_PATH },
	[WIRE_OP_FS_STAT] = { "fs.stat", WK_ANY | WK_PATH },
	[WIRE_OP_FS_MKDIR] = { "fs.mkdir", WK_ANY | WK_PATH | WK_MODE },
	[WIRE_OP_FS_DELETE] = { "fs.delete", WK_ANY | WK_PATH },
	[WIRE_OP_FS_RENAME] = { "fs.rename", WK_ANY | WK_PATH | WK_PATH2 },
	[WIRE_OP_NET_CONNECT] = { "net.connect", WK_ANY | WK_HOST | WK_PORT | WK_TIMEOUT },
	[WIRE_OP_PROC_EXEC] = { "proc.exec", WK_ANY | WK_ARGV | WK_DATA | WK_TIMEOUT },
	[WIRE_OP_REQUEST] = { "request", WK_ANY | WK_CAP | WK_TTL | WK_REASON },
	[WIRE_OP_TOKENS] = { "tokens", WK_ANY },
	[WIRE_OP_TOKEN_ADD] = { "token.add", WK_ANY },
	[WIRE_OP_DERIVE] = { "derive", WK_ANY | WK_CAPS | WK_TTL | WK_USES | WK_AUD },
	[WIRE_OP_IO_READ] = { "io.read", WK_ANY | WK_H | WK_LEN },
	[WIRE_OP_IO_WRITE] = { "io.write", WK_ANY | WK_H | WK_DATA },
	[WIRE_OP_IO_CLOSE] = { "io.close", WK_ANY | WK_H },
};

const char *
wire_op_name(enum wire_op op)
{
	return (unsigned)op < WIRE_OP_COUNT ? wire_ops[op].name : "?";
}

/* Optional fields: absent is fine, present must have the right type. */
#define WIRE_OPT(call) do { int _r = (call); if (_r != 0 && _r != CB_ENOENT) return _r; } while (0)

/* Refuse a key the op does not take (present: the keys the request
 * has, as bits of wire_req_keys), saying which. */
static int
wire_req_op_keys(const struct wire_msg *m, uint64_t present, struct wire_req *out)
{
	uint64_t foreign = present & ((UINT64_C(1) << WIRE_KEY_COUNT) - 1) & ~wire_ops[out->op].keys;
	int i;
	char *why;

	if (!foreign)
		return 0;
	i = __builtin_ctzll(foreign);
	if ((why = wire_msg_alloc(m, 64, 1)))
		snprintf(why, 64, "%s does not take the key \"%s\"", wire_ops[out->op].name,
		    wire_req_keys[i]);
	out->why = why;
	return CB_EPROTO;
}

/* A field the request has (present: bits of wire_req_keys) must decode;
 * one it lacks stays zero, so only present keys are looked up. */
#define WIRE_FIELD(bit, call) do { \
		if (present & (bit)) { int _r = (call); if (_r != 0) return _r; } \
	} while (0)

static int
wire_req_fields(const struct wire_msg *m, uint64_t present, struct wire_req *out)
{
	WIRE_FIELD(WK_TOK, wire_get_str(m, "tok", &out->tok));
	WIRE_FIELD(WK_TH, wire_get_u32(m, "th", &out->th, &out->has_th));
	WIRE_FIELD(WK_PATH, wire_get_str(m, "path", &out->path));
	WIRE_FIELD(WK_PATH2, wire_get_str(m, "path2", &out->path2));
	WIRE_FIELD(WK_FLAGS, wire_get_u32(m, "flags", &out->flags, NULL));
	WIRE_FIELD(WK_MODE, wire_get_u32(m, "mode", &out->mode, NULL));
	WIRE_FIELD(WK_DATA, wire_get_bin(m, "data", &out->data, &out->data_len));
	out->has_data = (present & WK_DATA) != 0;
	if (out->has_data && out->data_len > WIRE_DATA_MAX)
		return CB_ETOOBIG;
	WIRE_FIELD(WK_HOST, wire_get_str(m, "host", &out->host));
	WIRE_FIELD(WK_PORT, wire_get_u32(m, "port", &out->port, NULL));
	WIRE_FIELD(WK_ARGV, wire_get_strv(m, "argv", out->argv, WIRE_ARGV_MAX, &out->argc));
	WIRE_FIELD(WK_CAP, wire_get_str(m, "cap", &out->cap));
	WIRE_FIELD(WK_CAPS, wire_get_strv(m, "caps", out->caps, WIRE_CAPS_MAX, &out->ncaps));
	WIRE_FIELD(WK_TTL, wire_get_u64(m, "ttl", &out->ttl));
	WIRE_FIELD(WK_USES, wire_get_u32(m, "uses", &out->uses, &out->has_uses));
	WIRE_FIELD(WK_REASON, wire_get_str(m, "reason", &out->reason));
	WIRE_FIELD(WK_AUD, wire_get_str(m, "aud", &out->aud));
	WIRE_FIELD(WK_H, wire_get_u32(m, "h", &out->h, NULL));
	WIRE_FIELD(WK_LEN, wire_get_u32(m, "len", &out->len, NULL));
	WIRE_FIELD(WK_TIMEOUT, wire_get_u32(m, "timeout", &out->timeout_ms, NULL));
	if (out->flags & ~WIRE_F_ALL)
		return CB_EPROTO;
	return 0;
}

int
wire_req_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_req *out)
{
	struct wire_msg m;
	const char *op;
	uint64_t id, present;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = wire_decode(d, buf, len, &m)) != 0)
		return r;
	if ((r = wire_key_set(&m, wire_req_keys, &present)) != 0)
		return r;
	if (wire_get_u64(&m, "id", &id) != 0 || id > UINT32_MAX)
		return CB_EPROTO;
	out->id = (uint32_t)id;
	if (wire_get_str(&m, "op", &op) != 0)
		return CB_EPROTO;
	out->op = WIRE_OP_COUNT;
	for (int i = 0; i < WIRE_OP_COUNT; i++)
		if (strcmp(op, wire_ops[i].name) == 0)
			out->op = (enum wire_op)i;
	if (out->op == WIRE_OP_COUNT)
		return CB_EUNKNOWNOP;
	if ((r = wire_req_op_keys(&m, present, out)) != 0)
		return r;
	return wire_req_fields(&m, present, out);
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
	wire_put_str(&e, "op", wire_ops[r->op].name);
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
		for (size_t i = 0; i < r->ncaps && i < WIRE_CAPS_MAX; i++)
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

static int
wire_reply_stat(const struct wire_msg *m, struct wire_reply *out)
{
	struct wire_msg st;
	const char *s;
	int r;

	if ((r = wire_get_map(m, "st", &st)) != 0)
		return r == CB_ENOENT ? 0 : r;
	if (wire_get_u64(&st, "size", &out->stat_size) != 0 ||
	    wire_get_u64(&st, "mtime", &out->stat_mtime) != 0 ||
	    wire_get_u32(&st, "mode", &out->stat_mode, NULL) != 0 ||
	    wire_get_str(&st, "type", &s) != 0)
		return CB_EPROTO;
	out->stat_type = s[0];
	out->has_stat = true;
	return 0;
}

static int
wire_reply_entries(const struct wire_msg *m, const struct wire_msg *sub, size_t n,
    struct wire_reply *out)
{
	struct wire_entry *ents = wire_msg_alloc(m, sizeof(*ents) * (n + 1),
	    _Alignof(struct wire_entry));
	const char *s;

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
	return 0;
}

static int
wire_reply_tokinfo(const struct wire_msg *m, struct wire_tokinfo *ti)
{
	int64_t st = 0;
	bool b = false;

	memset(ti, 0, sizeof(*ti));
	if (wire_get_u32(m, "th", &ti->th, NULL) != 0 ||
	    wire_get_str(m, "id", &ti->id) != 0 ||
	    wire_get_str(m, "caps", &ti->caps) != 0 ||
	    wire_get_u64(m, "exp", &ti->exp) != 0)
		return CB_EPROTO;
	WIRE_OPT(wire_get_u32(m, "uses", &ti->uses, &ti->has_uses));
	WIRE_OPT(wire_get_bool(m, "elev", &b));
	ti->elevated = b;
	WIRE_OPT(wire_get_i64(m, "st", &st));
	if (st > 0 || st < -1000)
		return CB_EPROTO;
	ti->state = (int)st;
	return 0;
}

static int
wire_reply_tokens(const struct wire_msg *m, const struct wire_msg *sub, size_t n,
    struct wire_reply *out)
{
	struct wire_tokinfo *ti = wire_msg_alloc(m, sizeof(*ti) * (n + 1),
	    _Alignof(struct wire_tokinfo));
	int r;

	if (!ti)
		return CB_ETOOBIG;
	for (size_t i = 0; i < n; i++)
		if ((r = wire_reply_tokinfo(&sub[i], &ti[i])) != 0)
			return r;
	out->tokens = ti;
	out->ntokens = n;
	return 0;
}

/* A reply carries a list of entries or of tokens, not both (entries win). */
static int
wire_reply_list(const struct wire_msg *m, struct wire_reply *out)
{
	const char *key = wire_has(m, "entries") ? "entries" : "tokens";
	struct wire_msg *sub;
	size_t n;
	int r;

	if (!wire_has(m, key))
		return 0;
	if ((r = wire_get_maplist(m, key, WIRE_LIST_MAX, &sub, &n)) != 0)
		return r;
	return key[0] == 'e' ? wire_reply_entries(m, sub, n, out) : wire_reply_tokens(m, sub, n, out);
}

int
wire_reply_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_reply *out)
{
	struct wire_msg m;
	uint64_t u;
	int64_t i64;
	bool ok;
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
	r = wire_get_i64(&m, "status", &i64);
	if (r != 0 && r != CB_ENOENT)
		return r;
	out->has_status = (r == 0);
	out->status = out->has_status ? (int32_t)i64 : 0;
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
	if ((r = wire_reply_stat(&m, out)) != 0)
		return r;
	return wire_reply_list(&m, out);
}
