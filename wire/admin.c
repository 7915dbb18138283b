/*
 * admin.c - typed admin requests (wire/admin.h).
 *
 * Runs in the broker on request bytes from an administrator's client and in
 * capctl and `capbroker run --connect`, which encode them.  The two tables
 * below are the one list of the admin protocol's keys: which type each
 * has, and which commands take it.  A key a command does not take is
 * refused before the command's handler runs.
 */
#include "wire/admin.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum wire_adm_type { WA_STR, WA_U64, WA_BOOL, WA_STRV };

#define WA_NONE SIZE_MAX	/* no has_ flag / no count */

/* Every key a request may carry besides id and cmd: its type, where it
 * goes in struct wire_adm_req, and for lists the bound and the code a
 * longer list gets. */
static const struct wire_adm_key {
	const char *key;
	enum wire_adm_type type;
	size_t off;		/* the value (for WA_STRV: the array) */
	size_t aux;		/* WA_STRV: the count; WA_U64: the has_ flag or WA_NONE */
	size_t max;		/* WA_STRV: most elements */
	int over;		/* WA_STRV: the code for more */
} wire_adm_keys[] = {
#define WA_F(f) offsetof(struct wire_adm_req, f)
	{ "sandbox", WA_STR, WA_F(sandbox), WA_NONE, 0, 0 },
	{ "caps", WA_STRV, WA_F(caps), WA_F(ncaps), WIRE_CAPS_MAX, CB_EINVAL },
	{ "ttl", WA_U64, WA_F(ttl), WA_NONE, 0, 0 },
	{ "uses", WA_U64, WA_F(uses), WA_F(has_uses), 0, 0 },
	{ "tid", WA_STR, WA_F(tid), WA_NONE, 0, 0 },
	{ "offset", WA_U64, WA_F(offset), WA_NONE, 0, 0 },
	{ "rid", WA_U64, WA_F(rid), WA_F(has_rid), 0, 0 },
	{ "session", WA_BOOL, WA_F(session), WA_NONE, 0, 0 },
	{ "reason", WA_STR, WA_F(reason), WA_NONE, 0, 0 },
	{ "kid", WA_STR, WA_F(kid), WA_NONE, 0, 0 },
	{ "argv", WA_STRV, WA_F(argv), WA_F(argc), WIRE_ARGV_MAX, CB_EINVAL },
	{ "tier", WA_STR, WA_F(tier), WA_NONE, 0, 0 },
	{ "workspace", WA_STR, WA_F(workspace), WA_NONE, 0, 0 },
	{ "timeout", WA_U64, WA_F(timeout), WA_NONE, 0, 0 },
	{ "grants", WA_STRV, WA_F(grants), WA_F(ngrants), WIRE_CAPS_MAX, CB_ETOOBIG },
	{ "ro_binds", WA_STRV, WA_F(ro_binds), WA_F(nro_binds), WIRE_ADM_BINDS_MAX, CB_ETOOBIG },
	{ "chdir", WA_STR, WA_F(chdir), WA_NONE, 0, 0 },
	{ "pty", WA_BOOL, WA_F(pty), WA_NONE, 0, 0 },
	{ "setenv", WA_STRV, WA_F(setenv), WA_F(nsetenv), 2 * WIRE_ADM_ENV_MAX, CB_EINVAL },
	{ "unsetenv", WA_STRV, WA_F(unsetenv), WA_F(nunsetenv), WIRE_ADM_ENV_MAX, CB_EINVAL },
	{ "serve_workspace", WA_BOOL, WA_F(serve_workspace), WA_NONE, 0, 0 },
#undef WA_F
};

#define WA_NKEYS (sizeof(wire_adm_keys) / sizeof(wire_adm_keys[0]))

/* Bits of wire_adm_keys, in its order. */
enum {
	WA_SANDBOX = 1u << 0, WA_CAPS = 1u << 1, WA_TTL = 1u << 2, WA_USES = 1u << 3,
	WA_TID = 1u << 4, WA_OFFSET = 1u << 5, WA_RID = 1u << 6, WA_SESSION = 1u << 7,
	WA_REASON = 1u << 8, WA_KID = 1u << 9, WA_ARGV = 1u << 10, WA_TIER = 1u << 11,
	WA_WORKSPACE = 1u << 12, WA_TIMEOUT = 1u << 13, WA_GRANTS = 1u << 14,
	WA_RO_BINDS = 1u << 15, WA_CHDIR = 1u << 16, WA_PTY = 1u << 17, WA_SETENV = 1u << 18,
	WA_UNSETENV = 1u << 19, WA_SERVE_WORKSPACE = 1u << 20,
};

static const struct {
	const char *name;
	uint32_t keys;
} wire_adm_cmds[WIRE_ADM_COUNT] = {
	[WIRE_ADM_STATUS] = { "status", 0 },
	[WIRE_ADM_ISSUE] = { "issue", WA_SANDBOX | WA_CAPS | WA_TTL | WA_USES },
	[WIRE_ADM_REVOKE] = { "revoke", WA_TID },
	[WIRE_ADM_LIST] = { "list", WA_OFFSET | WA_SANDBOX },
	[WIRE_ADM_SANDBOXES] = { "sandboxes", 0 },
	[WIRE_ADM_KILL] = { "kill", WA_SANDBOX },
	[WIRE_ADM_PENDING] = { "pending", WA_OFFSET },
	[WIRE_ADM_APPROVE] = { "approve", WA_RID | WA_TTL | WA_SESSION | WA_REASON },
	[WIRE_ADM_DENY] = { "deny", WA_RID | WA_TTL | WA_SESSION | WA_REASON },
	[WIRE_ADM_WATCH] = { "watch", 0 },
	[WIRE_ADM_ROTATE_KEY] = { "rotate-key", 0 },
	[WIRE_ADM_RETIRE_KEY] = { "retire-key", WA_KID },
	[WIRE_ADM_AUDIT_VERIFY] = { "audit-verify", 0 },
	[WIRE_ADM_RUN] = { "run", WA_ARGV | WA_SANDBOX | WA_TIER | WA_WORKSPACE | WA_TTL |
		WA_TIMEOUT | WA_GRANTS | WA_RO_BINDS | WA_CHDIR | WA_PTY | WA_SETENV | WA_UNSETENV |
		WA_SERVE_WORKSPACE },
};

const char *
wire_adm_cmd_name(enum wire_adm_cmd cmd)
{
	return (unsigned)cmd < WIRE_ADM_COUNT ? wire_adm_cmds[cmd].name : "?";
}

/* ---- encoding ------------------------------------------------------------- */

/* Put one field of r if set: 0, or CB_EINVAL for a list over its bound. */
static int
wire_adm_put(struct wire_enc *e, const struct wire_adm_key *k, const struct wire_adm_req *r)
{
	const char *base = (const char *)r;

	switch (k->type) {
	case WA_STR: {
		const char *s = *(const char *const *)(const void *)(base + k->off);

		if (s)
			wire_put_str(e, k->key, s);
		break;
	}
	case WA_U64: {
		uint64_t v = *(const uint64_t *)(const void *)(base + k->off);
		bool has = k->aux == WA_NONE ? v != 0 : *(const bool *)(base + k->aux);

		if (has)
			wire_put_u64(e, k->key, v);
		break;
	}
	case WA_BOOL:
		if (*(const bool *)(base + k->off))
			wire_put_bool(e, k->key, true);
		break;
	case WA_STRV: {
		const char *const *v = (const char *const *)(const void *)(base + k->off);
		size_t n = *(const size_t *)(const void *)(base + k->aux);

		if (n > k->max)
			return CB_EINVAL;
		if (n == 0)
			break;
		wire_arr_begin(e, k->key);
		for (size_t i = 0; i < n; i++)
			wire_put_str(e, NULL, v[i]);
		wire_arr_end(e);
		break;
	}
	}
	return 0;
}

int
wire_adm_encode(const struct wire_adm_req *r, uint8_t *buf, size_t cap, size_t *len)
{
	struct wire_enc e;
	int rc;

	if ((unsigned)r->cmd >= WIRE_ADM_COUNT)
		return CB_EINVAL;
	wire_enc_init(&e, buf, cap);
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "id", r->id);
	wire_put_str(&e, "cmd", wire_adm_cmds[r->cmd].name);
	for (size_t i = 0; i < WA_NKEYS; i++)
		if ((wire_adm_cmds[r->cmd].keys & (1u << i)) &&
		    (rc = wire_adm_put(&e, &wire_adm_keys[i], r)) != 0)
			return rc;
	wire_map_end(&e);
	return wire_enc_finish(&e, len);
}

void
wire_adm_reply_begin(struct wire_enc *e, uint64_t id, int err, const char *reason)
{
	wire_map_begin(e, NULL);
	wire_put_u64(e, "id", id);
	wire_put_bool(e, "ok", err == 0);
	if (err) {
		wire_put_i64(e, "err", err);
		wire_put_str(e, "name", cb_errname(err));
		wire_put_str(e, "reason", reason ? reason : cb_strerror(err));
	}
}

/* ---- decoding ------------------------------------------------------------- */

#define WA_WHY_MAX 96

/* Say in r->why what was wrong (the text lives in m's arena); err back. */
static int __attribute__((format(printf, 4, 5)))
wire_adm_why(const struct wire_msg *m, struct wire_adm_req *r, int err, const char *fmt, ...)
{
	char *why = wire_msg_alloc(m, WA_WHY_MAX, 1);
	va_list ap;

	if (why) {
		va_start(ap, fmt);
		vsnprintf(why, WA_WHY_MAX, fmt, ap);
		va_end(ap);
		r->why = why;
	}
	return err;
}

static int
wire_adm_get(const struct wire_msg *m, const struct wire_adm_key *k, struct wire_adm_req *r)
{
	char *base = (char *)r;
	int rc = 0;

	switch (k->type) {
	case WA_STR:
		rc = wire_get_str(m, k->key, (const char **)(void *)(base + k->off));
		break;
	case WA_U64:
		rc = wire_get_u64(m, k->key, (uint64_t *)(void *)(base + k->off));
		if (k->aux != WA_NONE)
			*(bool *)(base + k->aux) = (rc == 0);
		break;
	case WA_BOOL:
		rc = wire_get_bool(m, k->key, (bool *)(base + k->off));
		break;
	case WA_STRV:
		rc = wire_get_strv(m, k->key, (const char **)(void *)(base + k->off), k->max,
		    (size_t *)(void *)(base + k->aux));
		if (rc == CB_ETOOBIG)
			return wire_adm_why(m, r, k->over, "more than %zu values for \"%s\"", k->max,
			    k->key);
		break;
	}
	if (rc != 0 && rc != CB_ENOENT)
		return wire_adm_why(m, r, CB_EPROTO, "\"%s\" has the wrong type", k->key);
	return 0;
}

int
wire_adm_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_adm_req *r)
{
	struct wire_msg m;
	const char *cmd;
	uint32_t keys, known = 2;	/* id, cmd */
	int rc;

	memset(r, 0, sizeof(*r));
	if ((rc = wire_decode(d, buf, len, &m)) != 0)
		return rc;
	if (wire_get_u64(&m, "id", &r->id) != 0 || wire_get_str(&m, "cmd", &cmd) != 0) {
		r->id = 0;
		return CB_EPROTO;
	}
	r->cmd = WIRE_ADM_COUNT;
	for (int i = 0; i < WIRE_ADM_COUNT; i++)
		if (strcmp(cmd, wire_adm_cmds[i].name) == 0)
			r->cmd = (enum wire_adm_cmd)i;
	if (r->cmd == WIRE_ADM_COUNT)
		return wire_adm_why(&m, r, CB_EUNKNOWNOP, "unknown admin command");
	/* Keys are unique (wire_decode), so counting the known ones finds
	 * any other. */
	for (size_t i = 0; i < WA_NKEYS; i++)
		known += wire_has(&m, wire_adm_keys[i].key);
	if (known != m.n)
		return wire_adm_why(&m, r, CB_EPROTO, "a key the admin protocol does not know");
	keys = wire_adm_cmds[r->cmd].keys;
	for (size_t i = 0; i < WA_NKEYS; i++) {
		if (keys & (1u << i)) {
			if ((rc = wire_adm_get(&m, &wire_adm_keys[i], r)) != 0)
				return rc;
		} else if (wire_has(&m, wire_adm_keys[i].key)) {
			return wire_adm_why(&m, r, CB_EPROTO, "%s does not take the key \"%s\"", cmd,
			    wire_adm_keys[i].key);
		}
	}
	return 0;
}
