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

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum wire_adm_type { WA_STR, WA_U64, WA_I64, WA_BOOL, WA_STRV, WA_MAPS };

#define WA_NONE SIZE_MAX	/* no has_ flag / no count */

struct wire_adm_rec;

/* One key: its type, where it goes in its struct, and for lists the bound
 * and the code a longer list gets. */
struct wire_adm_key {
	const char *key;
	enum wire_adm_type type;
	size_t off;		/* the value (for WA_STRV, WA_MAPS: the array) */
	size_t aux;		/* WA_STRV, WA_MAPS: the count; WA_U64: the has_ flag or WA_NONE */
	size_t max;		/* WA_STRV, WA_MAPS: most elements */
	int over;		/* WA_STRV: the code for more */
	const struct wire_adm_rec *sub;	/* WA_MAPS: the keys of each element */
	bool need;		/* a reply: an ok one always carries it */
};

/* Every key a request may carry besides id and cmd. */
static const struct wire_adm_key wire_adm_keys[] = {
#define WA_F(f) offsetof(struct wire_adm_req, f)
	{ "sandbox", WA_STR, WA_F(sandbox), WA_NONE, 0, 0, NULL, false },
	{ "caps", WA_STRV, WA_F(caps), WA_F(ncaps), WIRE_CAPS_MAX, CB_EINVAL, NULL, false },
	{ "ttl", WA_U64, WA_F(ttl), WA_NONE, 0, 0, NULL, false },
	{ "uses", WA_U64, WA_F(uses), WA_F(has_uses), 0, 0, NULL, false },
	{ "tid", WA_STR, WA_F(tid), WA_NONE, 0, 0, NULL, false },
	{ "offset", WA_U64, WA_F(offset), WA_NONE, 0, 0, NULL, false },
	{ "rid", WA_U64, WA_F(rid), WA_F(has_rid), 0, 0, NULL, false },
	{ "session", WA_BOOL, WA_F(session), WA_NONE, 0, 0, NULL, false },
	{ "reason", WA_STR, WA_F(reason), WA_NONE, 0, 0, NULL, false },
	{ "kid", WA_STR, WA_F(kid), WA_NONE, 0, 0, NULL, false },
	{ "argv", WA_STRV, WA_F(argv), WA_F(argc), WIRE_ARGV_MAX, CB_EINVAL, NULL, false },
	{ "tier", WA_STR, WA_F(tier), WA_NONE, 0, 0, NULL, false },
	{ "workspace", WA_STR, WA_F(workspace), WA_NONE, 0, 0, NULL, false },
	{ "timeout", WA_U64, WA_F(timeout), WA_NONE, 0, 0, NULL, false },
	{ "grants", WA_STRV, WA_F(grants), WA_F(ngrants), WIRE_CAPS_MAX, CB_ETOOBIG, NULL, false },
	{ "ro_binds", WA_STRV, WA_F(ro_binds), WA_F(nro_binds), WIRE_ADM_BINDS_MAX, CB_ETOOBIG, NULL, false },
	{ "chdir", WA_STR, WA_F(chdir), WA_NONE, 0, 0, NULL, false },
	{ "pty", WA_BOOL, WA_F(pty), WA_NONE, 0, 0, NULL, false },
	{ "setenv", WA_STRV, WA_F(setenv), WA_F(nsetenv), 2 * WIRE_ADM_ENV_MAX, CB_EINVAL, NULL, false },
	{ "unsetenv", WA_STRV, WA_F(unsetenv), WA_F(nunsetenv), WIRE_ADM_ENV_MAX, CB_EINVAL, NULL, false },
	{ "serve_workspace", WA_BOOL, WA_F(serve_workspace), WA_NONE, 0, 0, NULL, false },
	{ "cluster", WA_BOOL, WA_F(cluster), WA_NONE, 0, 0, NULL, false },
	{ "flush", WA_BOOL, WA_F(flush), WA_NONE, 0, 0, NULL, false },
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
	WA_UNSETENV = 1u << 19, WA_SERVE_WORKSPACE = 1u << 20, WA_CLUSTER = 1u << 21,
	WA_FLUSH = 1u << 22,
};

static const struct {
	const char *name;
	uint32_t keys;
} wire_adm_cmds[WIRE_ADM_COUNT] = {
	[WIRE_ADM_STATUS] = { "status", WA_FLUSH },
	[WIRE_ADM_ISSUE] = { "issue", WA_SANDBOX | WA_CAPS | WA_TTL | WA_USES },
	[WIRE_ADM_REVOKE] = { "revoke", WA_TID },
	[WIRE_ADM_LIST] = { "list", WA_OFFSET | WA_SANDBOX | WA_CLUSTER },
	[WIRE_ADM_SANDBOXES] = { "sandboxes", WA_OFFSET | WA_CLUSTER },
	[WIRE_ADM_KILL] = { "kill", WA_SANDBOX },
	[WIRE_ADM_PENDING] = { "pending", WA_OFFSET },
	[WIRE_ADM_APPROVE] = { "approve", WA_RID | WA_TTL | WA_SESSION | WA_REASON },
	[WIRE_ADM_DENY] = { "deny", WA_RID | WA_TTL | WA_SESSION | WA_REASON },
	[WIRE_ADM_WATCH] = { "watch", 0 },
	[WIRE_ADM_ROTATE_KEY] = { "rotate-key", 0 },
	[WIRE_ADM_RETIRE_KEY] = { "retire-key", WA_KID },
	[WIRE_ADM_AUDIT_VERIFY] = { "audit-verify", WA_CLUSTER },
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

/* Put one field of the struct at base if set (zeros: numbers and false
 * are set too, as replies send them): 0, or CB_EINVAL for a list over its
 * bound.  A WA_MAPS list is the caller's to put. */
static int
wire_adm_put(struct wire_enc *e, const struct wire_adm_key *k, const void *rec, bool zeros)
{
	const char *base = rec;

	switch (k->type) {
	case WA_STR: {
		const char *s = *(const char *const *)(const void *)(base + k->off);

		if (s)
			wire_put_str(e, k->key, s);
		break;
	}
	case WA_U64: {
		uint64_t v = *(const uint64_t *)(const void *)(base + k->off);
		bool has = k->aux == WA_NONE ? zeros || v != 0 : *(const bool *)(base + k->aux);

		if (has)
			wire_put_u64(e, k->key, v);
		break;
	}
	case WA_I64:
		wire_put_i64(e, k->key, *(const int64_t *)(const void *)(base + k->off));
		break;
	case WA_BOOL:
		if (zeros || *(const bool *)(base + k->off))
			wire_put_bool(e, k->key, *(const bool *)(base + k->off));
		break;
	case WA_MAPS:
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
		    (rc = wire_adm_put(&e, &wire_adm_keys[i], r, false)) != 0)
			return rc;
	wire_map_end(&e);
	return wire_enc_finish(&e, len);
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
	case WA_I64:
	case WA_MAPS:
		rc = CB_EPROTO;	/* no request key has these types */
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

/* ---- replies and events ---------------------------------------------------
 * Each reply, list entry and event is a record: a table of its keys over
 * its struct.  The broker encodes from these tables, capctl and `run
 * --connect` decode with them, so a key is spelled here and nowhere else. */

struct wire_adm_rec {
	const struct wire_adm_key *keys;
	size_t n;
	size_t size;	/* of the struct (list entries: the array's stride) */
};

#define WR_STR(k, T, f, need)	{ k, WA_STR, offsetof(T, f), WA_NONE, 0, 0, NULL, need }
#define WR_U64(k, T, f)		{ k, WA_U64, offsetof(T, f), WA_NONE, 0, 0, NULL, true }
#define WR_U64_HAS(k, T, f, h)	{ k, WA_U64, offsetof(T, f), offsetof(T, h), 0, 0, NULL, false }
#define WR_I64(k, T, f)		{ k, WA_I64, offsetof(T, f), WA_NONE, 0, 0, NULL, true }
#define WR_BOOL(k, T, f)	{ k, WA_BOOL, offsetof(T, f), WA_NONE, 0, 0, NULL, true }
#define WR_MAPS(k, T, f, nf, sub) \
	{ k, WA_MAPS, offsetof(T, f), offsetof(T, nf), WIRE_ADM_PAGE_MAX, CB_EPROTO, sub, true }
#define WR_REC(keys, T)		{ keys, sizeof(keys) / sizeof(keys[0]), sizeof(T) }

#define T_ struct wire_adm_token
static const struct wire_adm_key wr_token_keys[] = {
	WR_STR("id", T_, id, true), WR_STR("parent", T_, parent, false),
	WR_STR("sandbox", T_, sandbox, true), WR_STR("caps", T_, caps, true),
	WR_U64("nbf", T_, nbf), WR_U64("exp", T_, exp), WR_U64_HAS("uses", T_, uses, has_uses),
	WR_BOOL("revoked", T_, revoked), WR_BOOL("elevated", T_, elevated),
	WR_STR("by", T_, by, true), WR_STR("broker", T_, broker, false),
};
static const struct wire_adm_rec wr_token = WR_REC(wr_token_keys, T_);
#undef T_

#define T_ struct wire_adm_sbx
static const struct wire_adm_key wr_sbx_keys[] = {
	WR_STR("id", T_, id, true), WR_STR("tier", T_, tier, true),
	WR_STR("command", T_, command, true), WR_STR("workspace", T_, workspace, true),
	WR_U64("started", T_, started), WR_U64("pid", T_, pid), WR_U64("tokens", T_, tokens),
	WR_U64("requests", T_, requests), WR_U64("owner", T_, owner),
	WR_STR("broker", T_, broker, false),
};
static const struct wire_adm_rec wr_sbx = WR_REC(wr_sbx_keys, T_);
#undef T_

#define T_ struct wire_adm_elev
static const struct wire_adm_key wr_elev_keys[] = {
	WR_U64("rid", T_, rid), WR_STR("sandbox", T_, sandbox, true),
	WR_STR("command", T_, command, true), WR_STR("cap", T_, cap, true),
	WR_STR("reason", T_, reason, true), WR_U64("ttl", T_, ttl), WR_U64("asked", T_, asked),
	WR_U64("expires", T_, expires), WR_STR("state", T_, state, true),
	WR_STR("broker", T_, broker, false),
};
static const struct wire_adm_rec wr_elev = WR_REC(wr_elev_keys, T_);
#undef T_

#define T_ struct wire_adm_head
static const struct wire_adm_key wr_head_keys[] = {
	WR_STR("broker", T_, broker, true), WR_STR("log", T_, log, true), WR_U64("seq", T_, seq),
	WR_U64("age_ms", T_, age_ms), WR_BOOL("live", T_, live),
};
static const struct wire_adm_rec wr_head = WR_REC(wr_head_keys, T_);
#undef T_

/* The replies' own keys, after the envelope.  A list comes before the
 * keys that are known only once it is walked (more). */
#define T_ struct wire_adm_rep
static const struct wire_adm_key wr_status_keys[] = {
	WR_STR("state", T_, state, true), WR_U64("pid", T_, pid),
	WR_U64("sandboxes", T_, sandboxes), WR_BOOL("audit_healthy", T_, audit_healthy),
	WR_U64("audit_lines", T_, audit_lines), WR_U64("accept_failures", T_, accept_failures),
	WR_U64("admin_refused", T_, admin_refused), WR_STR("policy", T_, policy, true),
	/* in a cluster only (docs/cluster.md) */
	WR_STR("cluster", T_, cluster, false),
	{ "cluster_fresh", WA_BOOL, offsetof(T_, cluster_fresh), WA_NONE, 0, 0, NULL, false },
	WR_U64_HAS("cluster_applied", T_, cluster_applied, has_cluster),
};
static const struct wire_adm_key wr_issue_keys[] = {
	WR_STR("token", T_, token, true), WR_STR("tid", T_, tid, true), WR_U64("exp", T_, exp),
};
static const struct wire_adm_key wr_revoke_keys[] = {
	WR_U64("count", T_, count), WR_STR("unconfirmed", T_, unconfirmed, false),
};
static const struct wire_adm_key wr_list_keys[] = {
	WR_MAPS("tokens", T_, tokens, ntokens, &wr_token), WR_BOOL("more", T_, more),
};
static const struct wire_adm_key wr_sandboxes_keys[] = {
	WR_MAPS("sandboxes", T_, sbxs, nsbxs, &wr_sbx),
	{ "more", WA_BOOL, offsetof(T_, more), WA_NONE, 0, 0, NULL, false },
};
static const struct wire_adm_key wr_pending_keys[] = {
	WR_MAPS("requests", T_, requests, nrequests, &wr_elev), WR_BOOL("more", T_, more),
};
static const struct wire_adm_key wr_rotate_keys[] = { WR_STR("kid", T_, kid, true) };
static const struct wire_adm_key wr_verify_keys[] = {
	WR_BOOL("intact", T_, intact), WR_STR("problem", T_, problem, true),
	WR_U64("line", T_, line), WR_U64("lines", T_, lines),
	WR_U64("checkpoints", T_, checkpoints), WR_U64("unsealed", T_, unsealed),
	WR_STR("what", T_, what, true), WR_STR("path", T_, path, true),
	/* with --cluster (an empty list without) */
	WR_MAPS("heads", T_, heads, nheads, &wr_head),
	{ "cluster_checked", WA_BOOL, offsetof(T_, checked_cluster), WA_NONE, 0, 0, NULL, false },
	{ "cluster_intact", WA_BOOL, offsetof(T_, cluster_intact), WA_NONE, 0, 0, NULL, false },
	WR_STR("cluster_problem", T_, cluster_problem, false),
	WR_STR("cluster_what", T_, cluster_what, false),
};
static const struct wire_adm_key wr_run_keys[] = {
	WR_STR("sandbox", T_, sandbox, true), WR_BOOL("pty", T_, pty),
};
#undef T_

/* Indexed by command; an empty record: ok alone. */
static const struct wire_adm_rec wr_reps[WIRE_ADM_COUNT] = {
	[WIRE_ADM_STATUS] = WR_REC(wr_status_keys, struct wire_adm_rep),
	[WIRE_ADM_ISSUE] = WR_REC(wr_issue_keys, struct wire_adm_rep),
	[WIRE_ADM_REVOKE] = WR_REC(wr_revoke_keys, struct wire_adm_rep),
	[WIRE_ADM_LIST] = WR_REC(wr_list_keys, struct wire_adm_rep),
	[WIRE_ADM_SANDBOXES] = WR_REC(wr_sandboxes_keys, struct wire_adm_rep),
	[WIRE_ADM_PENDING] = WR_REC(wr_pending_keys, struct wire_adm_rep),
	[WIRE_ADM_ROTATE_KEY] = WR_REC(wr_rotate_keys, struct wire_adm_rep),
	[WIRE_ADM_AUDIT_VERIFY] = WR_REC(wr_verify_keys, struct wire_adm_rep),
	[WIRE_ADM_RUN] = WR_REC(wr_run_keys, struct wire_adm_rep),
};

/* Events: "event" names one, the rest are its record's keys.  A request
 * event carries the request's keys at the top level. */
#define T_ struct wire_adm_event
static const struct wire_adm_key wr_exit_keys[] = {
	WR_I64("status", T_, status), WR_STR("reason", T_, reason, false),
};
#undef T_
static const struct {
	const char *name;
	struct wire_adm_rec rec;
	size_t off;	/* of the record's struct in struct wire_adm_event */
} wr_events[WIRE_ADM_EV_COUNT] = {
	[WIRE_ADM_EV_REQUEST] = { "request", WR_REC(wr_elev_keys, struct wire_adm_elev),
		offsetof(struct wire_adm_event, req) },
	[WIRE_ADM_EV_EXIT] = { "exit", WR_REC(wr_exit_keys, struct wire_adm_event), 0 },
};

/* The keys of rec from the struct at base, from key i on, until a list
 * (*at: its index, or rec->n). */
static void
wr_put_keys(struct wire_enc *e, const struct wire_adm_rec *rec, const void *base, size_t i,
    size_t *at)
{
	for (; i < rec->n && rec->keys[i].type != WA_MAPS; i++)
		cb_ignore(wire_adm_put(e, &rec->keys[i], base, true));
	*at = i;
}

static void
wr_put_map(struct wire_enc *e, const struct wire_adm_rec *rec, const void *base)
{
	size_t at;

	wire_map_begin(e, NULL);
	wr_put_keys(e, rec, base, 0, &at);
	wire_map_end(e);
}

void wire_adm_token_put(struct wire_enc *e, const struct wire_adm_token *t) { wr_put_map(e, &wr_token, t); }
void wire_adm_sbx_put(struct wire_enc *e, const struct wire_adm_sbx *s) { wr_put_map(e, &wr_sbx, s); }
void wire_adm_elev_put(struct wire_enc *e, const struct wire_adm_elev *q) { wr_put_map(e, &wr_elev, q); }
void wire_adm_head_put(struct wire_enc *e, const struct wire_adm_head *h) { wr_put_map(e, &wr_head, h); }

static const struct wire_adm_rec *
wr_rep_rec(const struct wire_adm_rep *r)
{
	return (unsigned)r->cmd < WIRE_ADM_COUNT ? &wr_reps[r->cmd] : NULL;
}

void
wire_adm_rep_begin(struct wire_enc *e, const struct wire_adm_rep *r)
{
	const struct wire_adm_rec *rec = wr_rep_rec(r);
	size_t at;

	wire_map_begin(e, NULL);
	wire_put_u64(e, "id", r->id);
	wire_put_bool(e, "ok", r->err == 0);
	if (r->err) {
		wire_put_i64(e, "err", r->err);
		wire_put_str(e, "name", cb_errname(r->err));
		wire_put_str(e, "reason", r->reason ? r->reason : cb_strerror(r->err));
	}
	if (!rec)
		return;
	wr_put_keys(e, rec, r, 0, &at);
	if (at < rec->n)
		wire_arr_begin(e, rec->keys[at].key);
}

void
wire_adm_rep_end(struct wire_enc *e, const struct wire_adm_rep *r)
{
	const struct wire_adm_rec *rec = wr_rep_rec(r);
	size_t at = 0;

	while (rec && at < rec->n && rec->keys[at].type != WA_MAPS)
		at++;
	if (rec && at < rec->n) {
		wire_arr_end(e);
		wr_put_keys(e, rec, r, at + 1, &at);
	}
	wire_map_end(e);
}

int
wire_adm_rep_encode(const struct wire_adm_rep *r, uint8_t *buf, size_t cap, size_t *len)
{
	const struct wire_adm_rec *rec = wr_rep_rec(r);
	struct wire_enc e;

	if ((unsigned)r->cmd > WIRE_ADM_COUNT)
		return CB_EINVAL;
	wire_enc_init(&e, buf, cap);
	wire_adm_rep_begin(&e, r);
	for (size_t i = 0; rec && i < rec->n; i++) {
		const struct wire_adm_key *k = &rec->keys[i];
		const char *base = (const char *)r, *v;
		size_t n;

		if (k->type != WA_MAPS)
			continue;
		v = *(const char *const *)(const void *)(base + k->off);
		n = *(const size_t *)(const void *)(base + k->aux);
		if (n > k->max || (n && !v))
			return CB_EINVAL;
		for (size_t j = 0; j < n; j++)
			wr_put_map(&e, k->sub, v + j * k->sub->size);
	}
	wire_adm_rep_end(&e, r);
	return wire_enc_finish(&e, len);
}

int
wire_adm_msg_id(const struct wire_msg *m, uint64_t *id)
{
	*id = 0;
	if (wire_has(m, "id"))
		return wire_get_u64(m, "id", id) == 0 ? 0 : CB_EPROTO;
	return wire_has(m, "event") ? CB_ENOENT : CB_EPROTO;
}

static int wr_get_rec(const struct wire_msg *m, const struct wire_adm_rec *rec, void *base,
    uint32_t others, bool need);

/* A list: the array, then each entry into an array of rec's structs in the
 * arena (each complete: every key it always has). */
static int
wr_get_maps(const struct wire_msg *m, const struct wire_adm_key *k, char *base)
{
	struct wire_msg *v;
	size_t n;
	char *arr;
	int rc;

	if ((rc = wire_get_maplist(m, k->key, k->max, &v, &n)) != 0)
		return rc;
	if (n && !(arr = wire_msg_alloc(m, n * k->sub->size, _Alignof(max_align_t))))
		return CB_ETOOBIG;
	if (n == 0)
		arr = NULL;
	for (size_t i = 0; i < n; i++) {
		memset(arr + i * k->sub->size, 0, k->sub->size);
		if ((rc = wr_get_rec(&v[i], k->sub, arr + i * k->sub->size, 0, true)) != 0)
			return rc;
	}
	*(const void **)(void *)(base + k->off) = arr;
	*(size_t *)(void *)(base + k->aux) = n;
	return 0;
}

static int
wr_get_key(const struct wire_msg *m, const struct wire_adm_key *k, char *base)
{
	switch (k->type) {
	case WA_STR:
		return wire_get_str(m, k->key, (const char **)(void *)(base + k->off));
	case WA_U64: {
		int rc = wire_get_u64(m, k->key, (uint64_t *)(void *)(base + k->off));

		if (k->aux != WA_NONE)
			*(bool *)(base + k->aux) = rc == 0;
		return rc;
	}
	case WA_I64:
		return wire_get_i64(m, k->key, (int64_t *)(void *)(base + k->off));
	case WA_BOOL:
		return wire_get_bool(m, k->key, (bool *)(base + k->off));
	case WA_MAPS:
		return wr_get_maps(m, k, base);
	case WA_STRV:
		break;
	}
	return CB_EPROTO;
}

/* The keys of rec from m into the struct at base: m holds no key but
 * rec's and the others (envelope keys, already read); with need, every
 * key rec always has. */
static int
wr_get_rec(const struct wire_msg *m, const struct wire_adm_rec *rec, void *base, uint32_t others,
    bool need)
{
	uint32_t known = others;
	int rc;

	for (size_t i = 0; rec && i < rec->n; i++)
		known += wire_has(m, rec->keys[i].key);
	/* Keys are unique (wire_decode), so the count finds any other. */
	if (known != m->n)
		return CB_EPROTO;
	for (size_t i = 0; rec && i < rec->n; i++) {
		rc = wr_get_key(m, &rec->keys[i], base);
		if (rc == CB_ENOENT && !(need && rec->keys[i].need))
			continue;
		if (rc != 0)
			return rc == CB_ETOOBIG ? rc : CB_EPROTO;
	}
	return 0;
}

int
wire_adm_rep_get(const struct wire_msg *m, enum wire_adm_cmd cmd, struct wire_adm_rep *r)
{
	int64_t err;
	bool ok;

	memset(r, 0, sizeof(*r));
	r->cmd = cmd;
	if ((unsigned)cmd > WIRE_ADM_COUNT)
		return CB_EINVAL;
	if (wire_get_u64(m, "id", &r->id) != 0 || wire_get_bool(m, "ok", &ok) != 0)
		return CB_EPROTO;
	if (!ok) {
		/* Every code is negative (common.h); the name and the
		 * sentence always come with it. */
		if (wire_get_i64(m, "err", &err) != 0 || err >= 0 || err < INT_MIN ||
		    wire_get_str(m, "name", &r->name) != 0 || wire_get_str(m, "reason", &r->reason) != 0)
			return CB_EPROTO;
		r->err = (int)err;
	}
	return wr_get_rec(m, wr_rep_rec(r), r, ok ? 2 : 5, ok);
}

int
wire_adm_rep_decode(struct wire_dec *d, const uint8_t *buf, size_t len, enum wire_adm_cmd cmd,
    struct wire_adm_rep *r)
{
	struct wire_msg m;
	int rc;

	memset(r, 0, sizeof(*r));
	r->cmd = cmd;
	if ((rc = wire_decode(d, buf, len, &m)) != 0)
		return rc;
	return wire_adm_rep_get(&m, cmd, r);
}

int
wire_adm_event_encode(const struct wire_adm_event *ev, uint8_t *buf, size_t cap, size_t *len)
{
	struct wire_enc e;
	size_t at;

	if ((unsigned)ev->kind >= WIRE_ADM_EV_COUNT)
		return CB_EINVAL;
	wire_enc_init(&e, buf, cap);
	wire_map_begin(&e, NULL);
	wire_put_str(&e, "event", wr_events[ev->kind].name);
	wr_put_keys(&e, &wr_events[ev->kind].rec, (const char *)ev + wr_events[ev->kind].off, 0,
	    &at);
	wire_map_end(&e);
	return wire_enc_finish(&e, len);
}

int
wire_adm_event_get(const struct wire_msg *m, struct wire_adm_event *ev)
{
	const char *name;

	memset(ev, 0, sizeof(*ev));
	if (wire_get_str(m, "event", &name) != 0)
		return CB_EPROTO;
	for (int i = 0; i < WIRE_ADM_EV_COUNT; i++) {
		if (strcmp(name, wr_events[i].name) == 0) {
			ev->kind = (enum wire_adm_ev)i;
			return wr_get_rec(m, &wr_events[i].rec, (char *)ev + wr_events[i].off, 1, true);
		}
	}
	return CB_EPROTO;
}

int
wire_adm_event_decode(struct wire_dec *d, const uint8_t *buf, size_t len, struct wire_adm_event *ev)
{
	struct wire_msg m;
	int rc;

	memset(ev, 0, sizeof(*ev));
	if ((rc = wire_decode(d, buf, len, &m)) != 0)
		return rc;
	return wire_adm_event_get(&m, ev);
}
