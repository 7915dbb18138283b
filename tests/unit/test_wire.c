/*
 * test_wire.c - the msgpack codec: round trips and hostile frames.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/tap.h"
#include "wire/wire.h"

static struct wire_dec *d;

static int
req(const uint8_t *b, size_t n)
{
	struct wire_req r;

	return wire_req_decode(d, b, n, &r);
}

static void
test_roundtrip(void)
{
	uint8_t buf[4096];
	size_t len;
	struct wire_req in = { .id = 7, .op = WIRE_OP_FS_WRITE, .path = "/w/a.txt",
		.flags = WIRE_F_CREATE | WIRE_F_TRUNC, .mode = 0644, .has_data = true,
		.data = (const uint8_t *)"hi\0there", .data_len = 8, .has_th = true, .th = 3 };
	struct wire_req out;
	struct wire_reply rp = { .id = 9, .err = 0, .has_status = true, .status = -3,
		.out = (const uint8_t *)"o", .out_len = 1, .tid = "abcd" };
	struct wire_entry ents[2] = { { "a", 'f' }, { "b", 'd' } };
	struct wire_reply rout;

	T_ERR(wire_req_encode(&in, buf, sizeof(buf), &len), 0, "encode a request");
	T_ERR(wire_req_decode(d, buf, len, &out), 0, "decode it");
	T_OK(out.id == 7 && out.op == WIRE_OP_FS_WRITE && strcmp(out.path, "/w/a.txt") == 0 &&
	    out.flags == (WIRE_F_CREATE | WIRE_F_TRUNC) && out.mode == 0644 &&
	    out.data_len == 8 && memcmp(out.data, "hi\0there", 8) == 0 && out.has_th &&
	    out.th == 3, "request fields survive the round trip (binary data with NUL included)");
	T_ERR(wire_req_encode(&in, buf, 10, &len), CB_ETOOBIG, "encoding into a short buffer fails");
	in = (struct wire_req){ .id = 8, .op = WIRE_OP_PROC_EXEC, .timeout_ms = 500, .tok = "t" };
	in.argv[0] = "/usr/bin/ls";
	in.argv[1] = "-l";
	in.argc = 2;
	T_ERR(wire_req_encode(&in, buf, sizeof(buf), &len), 0, "encode a proc.exec request");
	T_OK(wire_req_decode(d, buf, len, &out) == 0 && out.op == WIRE_OP_PROC_EXEC &&
	    out.argc == 2 && strcmp(out.argv[1], "-l") == 0 && out.timeout_ms == 500 &&
	    strcmp(out.tok, "t") == 0, "argv, timeout and token survive the round trip");

	rp.entries = ents;
	rp.nentries = 2;
	T_ERR(wire_reply_encode(&rp, buf, sizeof(buf), &len), 0, "encode a reply");
	T_ERR(wire_reply_decode(d, buf, len, &rout), 0, "decode it");
	T_OK(rout.id == 9 && rout.err == 0 && rout.has_status && rout.status == -3 &&
	    rout.out_len == 1 && strcmp(rout.tid, "abcd") == 0 && rout.nentries == 2 &&
	    strcmp(rout.entries[1].name, "b") == 0 && rout.entries[1].type == 'd',
	    "reply fields survive the round trip");
	rp = (struct wire_reply){ .id = 1, .err = CB_EPOLICY };
	T_ERR(wire_reply_encode(&rp, buf, sizeof(buf), &len), 0, "encode an error reply");
	T_OK(wire_reply_decode(d, buf, len, &rout) == 0 && rout.err == CB_EPOLICY &&
	    strcmp(rout.reason, "exceeds policy") == 0, "error reply carries code and reason");
	{
		struct wire_tokinfo ti[2] = {
			{ .th = 0, .id = "aa", .caps = "fs.read:/w/**", .exp = 5 },
			{ .th = 1, .id = "bb", .caps = "fs.list:/w", .exp = 6, .elevated = true,
			  .state = CB_EREVOKED },
		};

		rp = (struct wire_reply){ .id = 2, .tokens = ti, .ntokens = 2 };
		T_ERR(wire_reply_encode(&rp, buf, sizeof(buf), &len), 0, "encode a token list");
		T_OK(wire_reply_decode(d, buf, len, &rout) == 0 && rout.ntokens == 2 &&
		    rout.tokens[0].state == 0 && rout.tokens[1].state == CB_EREVOKED &&
		    rout.tokens[1].elevated, "a token's state (usable or why not) survives");
	}
}

static void
test_hostile(void)
{
	uint8_t buf[256];
	struct wire_enc e;
	size_t len;

	/* map32 header claiming 268 million pairs in 5 bytes */
	static const uint8_t hugemap[] = { 0xdf, 0x0f, 0xff, 0xff, 0xf0 };
	static const uint8_t hugearr[] = { 0x81, 0xa4, 'a', 'r', 'g', 'v', 0xdd, 0xff, 0xff, 0xff, 0xff };
	static const uint8_t hugestr[] = { 0x81, 0xa2, 'o', 'p', 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x' };
	static const uint8_t ext[] = { 0x81, 0xa2, 'i', 'd', 0xd4, 0x01, 0x00 };
	static const uint8_t flt[] = { 0x81, 0xa2, 'i', 'd', 0xca, 0, 0, 0, 0 };
	static const uint8_t notmap[] = { 0x93, 1, 2, 3 };
	static const uint8_t c1[] = { 0xc1 };
	static const uint8_t intkey[] = { 0x81, 0x01, 0x02 };
	uint8_t deep[64];

	T_ERR(req(hugemap, sizeof(hugemap)), CB_EPROTO, "huge declared map count refused before allocation");
	T_ERR(req(hugearr, sizeof(hugearr)), CB_EPROTO, "huge declared array count refused");
	T_ERR(req(hugestr, sizeof(hugestr)), CB_EPROTO, "huge declared string length refused");
	T_ERR(req(ext, sizeof(ext)), CB_EPROTO, "ext types refused");
	T_ERR(req(flt, sizeof(flt)), CB_EPROTO, "floats refused");
	T_ERR(req(notmap, sizeof(notmap)), CB_EPROTO, "top level must be a map");
	T_ERR(req(c1, sizeof(c1)), CB_EPROTO, "reserved byte 0xc1 refused");
	T_ERR(req(intkey, sizeof(intkey)), CB_EPROTO, "non-string key refused");
	{
		/* found by fuzz_wire_reply: several empty keys (msgpack-c gives
		 * them NULL pointers; comparing them must not be undefined) */
		static const uint8_t empties[] = { 0x84, 0xa0, 0xa0, 0xa0, 0x3e, 0x3e, 0x3e,
			0x8c, 0xa0, 0xa0 };
		struct wire_reply rp;

		T_ERR(wire_reply_decode(d, empties, sizeof(empties), &rp), CB_EPROTO,
		    "empty keys (duplicates) refused without undefined behaviour");
	}
	T_ERR(req(NULL, 0), CB_EPROTO, "empty frame refused");
	for (size_t i = 0; i < sizeof(deep); i++)
		deep[i] = 0x91;	/* [[[[...]]]] */
	T_ERR(req(deep, sizeof(deep)), CB_EPROTO, "deep nesting refused");
	{
		uint8_t *big = calloc(1, WIRE_REQ_MAX + 1);
		struct wire_dec *small;

		if (wire_dec_new(WIRE_REQ_MAX, &small) != 0)
			abort();
		{
			struct wire_req r;

			T_ERR(wire_req_decode(small, big, WIRE_REQ_MAX + 1, &r), CB_ETOOBIG,
			    "frame over the hard maximum refused");
		}
		wire_dec_free(small);
		free(big);
	}

#define BUILD(stmts) do { wire_enc_init(&e, buf, sizeof(buf)); wire_map_begin(&e, NULL); stmts; wire_map_end(&e); if (wire_enc_finish(&e, &len)) abort(); } while (0)
	BUILD(wire_put_u64(&e, "id", 1); wire_put_str(&e, "op", "ping"));
	T_ERR(req(buf, len), 0, "minimal ping decodes");
	T_ERR(req(buf, len - 1), CB_EPROTO, "truncated frame refused");
	{
		uint8_t more[sizeof(buf) + 1];

		memcpy(more, buf, len);
		more[len] = 0xc0;
		T_ERR(req(more, len + 1), CB_EPROTO, "trailing bytes refused");
	}
	BUILD(wire_put_u64(&e, "id", 1); wire_put_str(&e, "op", "rm -rf"));
	T_ERR(req(buf, len), CB_EUNKNOWNOP, "unknown op refused");
	BUILD(wire_put_str(&e, "id", "1"); wire_put_str(&e, "op", "ping"));
	T_ERR(req(buf, len), CB_EPROTO, "id of the wrong type refused");
	BUILD(wire_put_u64(&e, "id", 1ull << 40); wire_put_str(&e, "op", "ping"));
	T_ERR(req(buf, len), CB_EPROTO, "id out of range refused");
	BUILD(wire_put_u64(&e, "id", 1); wire_put_str(&e, "op", "ping"); wire_put_u64(&e, "id", 2));
	T_ERR(req(buf, len), CB_EPROTO, "duplicate key refused");
	BUILD(wire_put_u64(&e, "id", 1); wire_put_str(&e, "op", "ping"); wire_put_u64(&e, "evil", 2));
	T_ERR(req(buf, len), CB_EPROTO, "unknown key refused");
	BUILD(wire_put_u64(&e, "id", 1); wire_put_str(&e, "op", "fs.read"); wire_put_strn(&e, "path", "/a\0b", 4));
	T_ERR(req(buf, len), CB_EPROTO, "NUL inside a string refused");
	BUILD(wire_put_u64(&e, "id", 1); wire_put_str(&e, "op", "fs.read"); wire_put_u64(&e, "path", 5));
	T_ERR(req(buf, len), CB_EPROTO, "path of the wrong type refused");
	BUILD(wire_put_u64(&e, "id", 1); wire_put_str(&e, "op", "fs.read"); wire_put_u64(&e, "flags", 0x100));
	T_ERR(req(buf, len), CB_EPROTO, "unknown flag bits refused");
	BUILD(wire_put_u64(&e, "id", 1); wire_put_str(&e, "op", "proc.exec"); wire_arr_begin(&e, "argv"); wire_put_u64(&e, NULL, 3); wire_arr_end(&e));
	T_ERR(req(buf, len), CB_EPROTO, "argv element of the wrong type refused");
	{
		/* One empty string a byte: room for WIRE_ARGV_MAX + 1 of them. */
		static uint8_t big[WIRE_ARGV_MAX + 256];

		wire_enc_init(&e, big, sizeof(big));
		wire_map_begin(&e, NULL);
		wire_put_u64(&e, "id", 1);
		wire_put_str(&e, "op", "proc.exec");
		wire_arr_begin(&e, "argv");
		for (int i = 0; i < WIRE_ARGV_MAX + 1; i++)
			wire_put_str(&e, NULL, "");
		wire_arr_end(&e);
		wire_map_end(&e);
		if (wire_enc_finish(&e, &len) != 0)
			abort();
		T_ERR(req(big, len), CB_ETOOBIG, "argv longer than the maximum refused");
	}
	wire_enc_init(&e, buf, sizeof(buf));
	wire_map_begin(&e, NULL);
	wire_map_end(&e);
	wire_map_end(&e);
	T_ERR(wire_enc_finish(&e, &len), CB_EINVAL, "unbalanced encoder reports an error");
}

/* Each op takes only its own keys: one foreign key per op is refused, with
 * the id kept and the reason naming the key. */
static void
test_op_keys(void)
{
	static const struct { const char *op, *key; } foreign[] = {
		{ "ping", "path" }, { "fs.read", "mode" }, { "fs.read", "data" },
		{ "fs.write", "argv" }, { "fs.list", "data" }, { "fs.stat", "flags" },
		{ "fs.mkdir", "path2" }, { "fs.delete", "mode" }, { "fs.rename", "data" },
		{ "net.connect", "path" }, { "proc.exec", "host" }, { "request", "caps" },
		{ "tokens", "path" }, { "token.add", "path" }, { "derive", "cap" },
		{ "io.read", "data" }, { "io.write", "len" }, { "io.close", "path" },
	};
	static const char *const ops[] = { "ping", "fs.read", "fs.write", "fs.list", "fs.stat",
		"fs.mkdir", "fs.delete", "fs.rename", "net.connect", "proc.exec", "request",
		"tokens", "token.add", "derive", "io.read", "io.write", "io.close" };
	uint8_t buf[256];
	struct wire_enc e;
	struct wire_req r;
	size_t len;
	bool all = true;

	for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
		int rc;

		wire_enc_init(&e, buf, sizeof(buf));
		wire_map_begin(&e, NULL);
		wire_put_u64(&e, "id", 40 + i);
		wire_put_str(&e, "op", foreign[i].op);
		if (strcmp(foreign[i].key, "data") == 0)
			wire_put_bin(&e, "data", "x", 1);
		else if (strcmp(foreign[i].key, "argv") == 0 || strcmp(foreign[i].key, "caps") == 0) {
			wire_arr_begin(&e, foreign[i].key);
			wire_put_str(&e, NULL, "/x");
			wire_arr_end(&e);
		} else if (strcmp(foreign[i].key, "mode") == 0 || strcmp(foreign[i].key, "flags") == 0 ||
		    strcmp(foreign[i].key, "len") == 0)
			wire_put_u64(&e, foreign[i].key, 1);
		else
			wire_put_str(&e, foreign[i].key, "/x");
		wire_map_end(&e);
		if (wire_enc_finish(&e, &len) != 0)
			abort();
		rc = wire_req_decode(d, buf, len, &r);
		T_OK(rc == CB_EPROTO && r.id == 40 + i && r.why && strstr(r.why, foreign[i].key) &&
		    strstr(r.why, foreign[i].op), "%s refuses the key %s, naming it",
		    foreign[i].op, foreign[i].key);
	}
	/* Clients attach their token to every call: every op takes tok and th. */
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		wire_enc_init(&e, buf, sizeof(buf));
		wire_map_begin(&e, NULL);
		wire_put_u64(&e, "id", 1);
		wire_put_str(&e, "op", ops[i]);
		wire_put_str(&e, "tok", "cap1.x");
		wire_map_end(&e);
		if (wire_enc_finish(&e, &len) != 0)
			abort();
		all = all && wire_req_decode(d, buf, len, &r) == 0 && r.why == NULL;
		wire_enc_init(&e, buf, sizeof(buf));
		wire_map_begin(&e, NULL);
		wire_put_u64(&e, "id", 1);
		wire_put_str(&e, "op", ops[i]);
		wire_put_u64(&e, "th", 2);
		wire_map_end(&e);
		if (wire_enc_finish(&e, &len) != 0)
			abort();
		all = all && wire_req_decode(d, buf, len, &r) == 0 && r.has_th;
	}
	T_OK(all, "every op takes a token (tok) or a token handle (th)");
}

int
main(void)
{
	if (wire_dec_new(WIRE_REPLY_MAX, &d) != 0)
		return 1;
	test_roundtrip();
	test_hostile();
	test_op_keys();
	wire_dec_free(d);
	return t_done();
}
