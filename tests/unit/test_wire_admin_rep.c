/*
 * test_wire_admin_rep.c - typed admin replies and events (wire/admin.h):
 * round trips of every command's reply, the streamed encoder agreeing with
 * the whole one, and the decoder refusing wrong types, unknown or missing
 * keys and lists or inputs over their bounds.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/tap.h"
#include "wire/admin.h"

static struct wire_dec *d;
static uint8_t buf[WIRE_REPLY_MAX + 64];

static size_t
enc(const struct wire_adm_rep *r)
{
	size_t len;

	if (wire_adm_rep_encode(r, buf, sizeof(buf), &len) != 0)
		abort();
	return len;
}

/* A hand-made reply: id 9, ok, then one key of a given kind. */
static size_t
raw(bool ok, const char *key, int kind)
{
	struct wire_enc e;
	size_t len;

	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "id", 9);
	wire_put_bool(&e, "ok", ok);
	if (!ok) {
		wire_put_i64(&e, "err", CB_EPERM);
		wire_put_str(&e, "name", "EPERM");
		wire_put_str(&e, "reason", "no");
	}
	if (kind == 's')
		wire_put_str(&e, key, "x");
	else if (kind == 'u')
		wire_put_u64(&e, key, 1);
	else if (kind == 'b')
		wire_put_bool(&e, key, true);
	wire_map_end(&e);
	if (wire_enc_finish(&e, &len) != 0)
		abort();
	return len;
}

static void
test_roundtrip(void)
{
	static const struct wire_adm_token toks[2] = {
		{ .id = "00112233445566778899aabbccddeeff", .sandbox = "s1", .caps = "fs.read:/w/**",
		  .nbf = 10, .exp = 20, .by = "uid:0", .revoked = true },
		{ .id = "ff", .parent = "00", .sandbox = "s1", .caps = "", .nbf = 1, .exp = 2,
		  .has_uses = true, .uses = 0, .elevated = true, .by = "approval" },
	};
	static const struct wire_adm_sbx sbxs[1] = {
		{ .id = "s1", .tier = "medium", .command = "sh -c x", .workspace = "/w", .started = 5,
		  .pid = 42, .tokens = 3, .requests = 1, .owner = 1000 },
	};
	static const struct wire_adm_elev reqs[1] = {
		{ .rid = 7, .sandbox = "s1", .command = "c", .cap = "net.connect:h:1",
		  .reason = "\x1b[2Jfake", .ttl = 60, .asked = 100, .expires = 400, .state = "pending" },
	};
	struct wire_adm_rep in, out;
	struct wire_adm_event ev, evo;
	size_t len;

	in = (struct wire_adm_rep){ .id = 1, .cmd = WIRE_ADM_STATUS, .state = "/s", .pid = 0,
		.sandboxes = 2, .audit_healthy = false, .audit_lines = 9, .policy = "(built-in)" };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_STATUS, &out) == 0 && out.id == 1 &&
	    out.err == 0 && strcmp(out.state, "/s") == 0 && out.pid == 0 && out.sandboxes == 2 &&
	    !out.audit_healthy && out.audit_lines == 9 && strcmp(out.policy, "(built-in)") == 0,
	    "status survives the round trip, zeros and false included");

	in = (struct wire_adm_rep){ .id = 2, .cmd = WIRE_ADM_LIST, .tokens = toks, .ntokens = 2,
		.more = true };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_LIST, &out) == 0 && out.ntokens == 2 &&
	    out.more && !out.tokens[0].parent && !out.tokens[0].has_uses &&
	    out.tokens[0].revoked && out.tokens[0].exp == 20 &&
	    strcmp(out.tokens[1].parent, "00") == 0 && out.tokens[1].has_uses &&
	    out.tokens[1].uses == 0 && out.tokens[1].elevated &&
	    strcmp(out.tokens[1].by, "approval") == 0, "list: tokens, parent and uses when set");
	{
		/* The broker builds a list as it walks; the bytes must agree. */
		static uint8_t b2[4096];
		struct wire_enc e;
		size_t len2;

		wire_enc_init(&e, b2, sizeof(b2));
		wire_adm_rep_begin(&e, &(struct wire_adm_rep){ .id = 2, .cmd = WIRE_ADM_LIST });
		wire_adm_token_put(&e, &toks[0]);
		wire_adm_token_put(&e, &toks[1]);
		wire_adm_rep_end(&e, &in);
		T_OK(wire_enc_finish(&e, &len2) == 0 && len2 == len && memcmp(b2, buf, len) == 0,
		    "a list streamed entry by entry is the same bytes");
	}
	in = (struct wire_adm_rep){ .id = 3, .cmd = WIRE_ADM_SANDBOXES, .sbxs = sbxs, .nsbxs = 1 };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_SANDBOXES, &out) == 0 && out.nsbxs == 1 &&
	    out.sbxs[0].pid == 42 && out.sbxs[0].owner == 1000 &&
	    strcmp(out.sbxs[0].command, "sh -c x") == 0, "sandboxes survive the round trip");
	in = (struct wire_adm_rep){ .id = 4, .cmd = WIRE_ADM_PENDING, .requests = reqs,
		.nrequests = 1 };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_PENDING, &out) == 0 && out.nrequests == 1 &&
	    !out.more && out.requests[0].rid == 7 &&
	    strcmp(out.requests[0].reason, "\x1b[2Jfake") == 0, "pending survives the round trip");
	in = (struct wire_adm_rep){ .id = 5, .cmd = WIRE_ADM_PENDING };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_PENDING, &out) == 0 && out.nrequests == 0 &&
	    !out.requests, "an empty list");
	in = (struct wire_adm_rep){ .id = 6, .cmd = WIRE_ADM_ISSUE, .token = "cap1.x", .tid = "ab",
		.exp = 99 };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_ISSUE, &out) == 0 &&
	    strcmp(out.token, "cap1.x") == 0 && strcmp(out.tid, "ab") == 0 && out.exp == 99,
	    "issue survives the round trip");
	in = (struct wire_adm_rep){ .id = 7, .cmd = WIRE_ADM_RUN, .sandbox = "t1", .pty = true };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_RUN, &out) == 0 && out.pty &&
	    strcmp(out.sandbox, "t1") == 0, "run survives the round trip");
	in = (struct wire_adm_rep){ .id = 8, .cmd = WIRE_ADM_KILL };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_KILL, &out) == 0 && out.id == 8,
	    "kill: ok alone");
	in = (struct wire_adm_rep){ .id = 9, .cmd = WIRE_ADM_AUDIT_VERIFY, .err = CB_EIO,
		.problem = "io", .what = "cannot read", .path = "/s/audit.jsonl", .lines = 3 };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_AUDIT_VERIFY, &out) == 0 &&
	    out.err == CB_EIO && strcmp(out.name, cb_errname(CB_EIO)) == 0 &&
	    strcmp(out.reason, cb_strerror(CB_EIO)) == 0 && strcmp(out.what, "cannot read") == 0 &&
	    out.lines == 3, "a refusal with its report: code, name, default sentence, body");
	{
		static const struct wire_adm_head heads[2] = {
			{ .broker = "ci-1:/s", .log = "00112233445566778899aabbccddeeff", .seq = 41,
			  .age_ms = 1500, .live = true },
			{ .broker = "ci-2:/s", .log = "ff", .seq = 0, .age_ms = 0 },
		};

		in = (struct wire_adm_rep){ .id = 10, .cmd = WIRE_ADM_AUDIT_VERIFY, .intact = false,
			.problem = "", .what = "", .path = "/s/audit.jsonl", .checked_cluster = true,
			.cluster_intact = false, .cluster_problem = "truncated",
			.cluster_what = "against the head", .heads = heads, .nheads = 2 };
		len = enc(&in);
		T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_AUDIT_VERIFY, &out) == 0 &&
		    out.checked_cluster && !out.cluster_intact &&
		    strcmp(out.cluster_problem, "truncated") == 0 && out.nheads == 2 &&
		    strcmp(out.heads[0].broker, "ci-1:/s") == 0 && out.heads[0].seq == 41 &&
		    out.heads[0].age_ms == 1500 && out.heads[0].live && !out.heads[1].live &&
		    strcmp(out.heads[1].log, "ff") == 0,
		    "audit-verify --cluster: the cluster's check and every head survive the round trip");
		in = (struct wire_adm_rep){ .id = 11, .cmd = WIRE_ADM_AUDIT_VERIFY, .intact = true,
			.problem = "", .what = "", .path = "/s/audit.jsonl" };
		len = enc(&in);
		T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_AUDIT_VERIFY, &out) == 0 &&
		    out.intact && !out.checked_cluster && out.nheads == 0 && !out.cluster_what,
		    "audit-verify without --cluster: no heads, no cluster check");
	}
	in = (struct wire_adm_rep){ .id = 0, .cmd = WIRE_ADM_COUNT, .err = CB_EBUSY,
		.reason = "too many connections" };
	len = enc(&in);
	T_OK(wire_adm_rep_decode(d, buf, len, WIRE_ADM_STATUS, &out) == 0 && out.id == 0 &&
	    out.err == CB_EBUSY && strcmp(out.reason, "too many connections") == 0,
	    "a bare refusal reads as the refusal of any command");

	ev = (struct wire_adm_event){ .kind = WIRE_ADM_EV_REQUEST, .req = reqs[0] };
	T_OK(wire_adm_event_encode(&ev, buf, sizeof(buf), &len) == 0 &&
	    wire_adm_event_decode(d, buf, len, &evo) == 0 && evo.kind == WIRE_ADM_EV_REQUEST &&
	    evo.req.rid == 7 && strcmp(evo.req.cap, "net.connect:h:1") == 0,
	    "a request event survives the round trip");
	ev = (struct wire_adm_event){ .kind = WIRE_ADM_EV_EXIT, .status = -1 };
	T_OK(wire_adm_event_encode(&ev, buf, sizeof(buf), &len) == 0 &&
	    wire_adm_event_decode(d, buf, len, &evo) == 0 && evo.kind == WIRE_ADM_EV_EXIT &&
	    evo.status == -1 && !evo.reason, "an exit event, no reason");
	ev.reason = "no such tier";
	T_OK(wire_adm_event_encode(&ev, buf, sizeof(buf), &len) == 0 &&
	    wire_adm_event_decode(d, buf, len, &evo) == 0 && strcmp(evo.reason, "no such tier") == 0,
	    "an exit event with the reason the sandbox was not set up");

	in = (struct wire_adm_rep){ .cmd = WIRE_ADM_LIST, .tokens = toks,
		.ntokens = WIRE_ADM_PAGE_MAX + 1 };
	T_ERR(wire_adm_rep_encode(&in, buf, sizeof(buf), &len), CB_EINVAL,
	    "encoding a list over its bound is refused");
	in = (struct wire_adm_rep){ .cmd = WIRE_ADM_COUNT + 1 };
	T_ERR(wire_adm_rep_encode(&in, buf, sizeof(buf), &len), CB_EINVAL,
	    "encoding for no command is refused");
}

static void
test_hostile(void)
{
	struct wire_adm_rep out;
	struct wire_adm_event ev;
	struct wire_enc e;
	struct wire_msg m;
	uint64_t id;
	size_t len;

	T_ERR(wire_adm_rep_decode(d, buf, raw(true, "pid", 's'), WIRE_ADM_STATUS, &out), CB_EPROTO,
	    "status: a missing key (and pid a string) is refused");
	T_ERR(wire_adm_rep_decode(d, buf, raw(true, NULL, 0), WIRE_ADM_ISSUE, &out), CB_EPROTO,
	    "an ok issue reply without its token is refused");
	T_ERR(wire_adm_rep_decode(d, buf, raw(true, "count", 's'), WIRE_ADM_REVOKE, &out),
	    CB_EPROTO, "revoke: count a string (wrong type)");
	T_ERR(wire_adm_rep_decode(d, buf, raw(true, "count", 'u'), WIRE_ADM_KILL, &out), CB_EPROTO,
	    "kill: another command's key is refused");
	T_ERR(wire_adm_rep_decode(d, buf, raw(true, "evil", 'u'), WIRE_ADM_KILL, &out), CB_EPROTO,
	    "a key no reply has is refused");
	T_ERR(wire_adm_rep_decode(d, buf, raw(true, "reason", 's'), WIRE_ADM_KILL, &out), CB_EPROTO,
	    "an ok reply carrying a refusal's reason is refused");
	T_ERR(wire_adm_rep_decode(d, buf, raw(false, "more", 'u'), WIRE_ADM_LIST, &out), CB_EPROTO,
	    "a refusal: its body keys still typed (more a number)");
	T_ERR(wire_adm_rep_decode(d, buf, raw(true, "tokens", 's'), WIRE_ADM_LIST, &out), CB_EPROTO,
	    "list: tokens a string, not a list");
	T_ERR(wire_adm_rep_decode(d, buf, raw(true, "ok", 'u'), WIRE_ADM_KILL, &out), CB_EPROTO,
	    "a duplicate ok is refused");

	/* Envelope faults. */
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "id", 1);
	wire_put_bool(&e, "ok", false);
	wire_put_i64(&e, "err", 5);
	wire_put_str(&e, "name", "x");
	wire_put_str(&e, "reason", "y");
	wire_map_end(&e);
	T_OK(wire_enc_finish(&e, &len) == 0 &&
	    wire_adm_rep_decode(d, buf, len, WIRE_ADM_KILL, &out) == CB_EPROTO,
	    "a refusal whose code is not negative is refused");
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "id", 1);
	wire_put_bool(&e, "ok", false);
	wire_put_i64(&e, "err", CB_EIO);
	wire_map_end(&e);
	T_OK(wire_enc_finish(&e, &len) == 0 &&
	    wire_adm_rep_decode(d, buf, len, WIRE_ADM_KILL, &out) == CB_EPROTO,
	    "a refusal without its name and sentence is refused");
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_str(&e, "id", "1");
	wire_put_bool(&e, "ok", true);
	wire_map_end(&e);
	T_OK(wire_enc_finish(&e, &len) == 0 &&
	    wire_adm_rep_decode(d, buf, len, WIRE_ADM_KILL, &out) == CB_EPROTO &&
	    wire_decode(d, buf, len, &m) == 0 && wire_adm_msg_id(&m, &id) == CB_EPROTO,
	    "an id that is a string: neither reply nor event");

	/* A list entry missing a key, or with one it should not have. */
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "id", 1);
	wire_put_bool(&e, "ok", true);
	wire_put_bool(&e, "more", false);
	wire_arr_begin(&e, "sandboxes");
	wire_map_begin(&e, NULL);
	wire_put_str(&e, "id", "s");
	wire_map_end(&e);
	wire_arr_end(&e);
	wire_map_end(&e);
	T_OK(wire_enc_finish(&e, &len) == 0 &&
	    wire_adm_rep_decode(d, buf, len, WIRE_ADM_SANDBOXES, &out) == CB_EPROTO,
	    "sandboxes: more (pending's key) and an incomplete entry are refused");
	{
		struct wire_adm_sbx s = { .id = "s", .tier = "t", .command = "c", .workspace = "/" };

		wire_enc_init(&e, buf, sizeof(buf));
		wire_map_begin(&e, NULL);
		wire_put_u64(&e, "id", 1);
		wire_put_bool(&e, "ok", true);
		wire_arr_begin(&e, "sandboxes");
		wire_adm_sbx_put(&e, &s);
		wire_map_begin(&e, NULL);
		wire_put_str(&e, "id", "s");
		wire_put_str(&e, "tier", "t");
		wire_put_str(&e, "command", "c");
		wire_put_str(&e, "workspace", "/");
		wire_put_u64(&e, "started", 0);
		wire_put_u64(&e, "pid", 0);
		wire_put_u64(&e, "tokens", 0);
		wire_put_u64(&e, "requests", 0);
		wire_put_str(&e, "owner", "root");
		wire_map_end(&e);
		wire_arr_end(&e);
		wire_map_end(&e);
		T_OK(wire_enc_finish(&e, &len) == 0 &&
		    wire_adm_rep_decode(d, buf, len, WIRE_ADM_SANDBOXES, &out) == CB_EPROTO,
		    "sandboxes: an entry with a wrongly typed key is refused");
	}

	/* Lengths: a list one over its bound, an array header claiming 2^32-1
	 * entries in a few bytes, an input over the decoder's bound. */
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "id", 1);
	wire_put_bool(&e, "ok", true);
	wire_put_bool(&e, "more", false);
	wire_arr_begin(&e, "requests");
	for (size_t i = 0; i <= WIRE_ADM_PAGE_MAX; i++)
		wire_adm_elev_put(&e, &(struct wire_adm_elev){ .sandbox = "s", .command = "",
		    .cap = "", .reason = "", .state = "pending" });
	wire_arr_end(&e);
	wire_map_end(&e);
	T_OK(wire_enc_finish(&e, &len) == 0 && len <= WIRE_REPLY_MAX &&
	    wire_adm_rep_decode(d, buf, len, WIRE_ADM_PENDING, &out) == CB_EPROTO,
	    "pending: one entry over WIRE_ADM_PAGE_MAX is refused");
	{
		static const uint8_t huge[] = { 0x83, 0xa2, 'i', 'd', 0x01, 0xa2, 'o', 'k', 0xc3,
			0xa6, 't', 'o', 'k', 'e', 'n', 's', 0xdd, 0xff, 0xff, 0xff, 0xff };

		T_ERR(wire_adm_rep_decode(d, huge, sizeof(huge), WIRE_ADM_LIST, &out), CB_EPROTO,
		    "a list claiming 4 G entries in 21 bytes: refused before any allocation");
	}
	T_ERR(wire_adm_rep_decode(d, buf, WIRE_REPLY_MAX + 1, WIRE_ADM_STATUS, &out), CB_ETOOBIG,
	    "an input over WIRE_REPLY_MAX is refused");

	/* Events. */
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_str(&e, "event", "exit");
	wire_put_str(&e, "status", "0");
	wire_map_end(&e);
	T_OK(wire_enc_finish(&e, &len) == 0 && wire_adm_event_decode(d, buf, len, &ev) == CB_EPROTO,
	    "exit: a status that is a string is refused");
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_str(&e, "event", "exit");
	wire_put_i64(&e, "status", 0);
	wire_put_u64(&e, "rid", 3);
	wire_map_end(&e);
	T_OK(wire_enc_finish(&e, &len) == 0 && wire_adm_event_decode(d, buf, len, &ev) == CB_EPROTO,
	    "exit: a request event's key is refused");
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_str(&e, "event", "reboot");
	wire_map_end(&e);
	T_OK(wire_enc_finish(&e, &len) == 0 && wire_adm_event_decode(d, buf, len, &ev) == CB_EPROTO &&
	    wire_decode(d, buf, len, &m) == 0 && wire_adm_msg_id(&m, &id) == CB_ENOENT,
	    "an unknown event is refused (and is an event, not a reply)");
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_put_str(&e, "event", "request");
	wire_put_u64(&e, "rid", 3);
	wire_map_end(&e);
	T_OK(wire_enc_finish(&e, &len) == 0 && wire_adm_event_decode(d, buf, len, &ev) == CB_EPROTO,
	    "a request event without its request is refused");
}

int
main(void)
{
	if (wire_dec_new(WIRE_REPLY_MAX, &d) != 0)
		return 1;
	test_roundtrip();
	test_hostile();
	wire_dec_free(d);
	return t_done();
}
