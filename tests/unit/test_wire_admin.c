/*
 * test_wire_admin.c - typed admin requests: round trips, and each command
 * refusing keys it does not take, wrong types and overlong lists.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/tap.h"
#include "wire/admin.h"

static struct wire_dec *d;

/* Encode a map by hand: id 5, cmd, then one extra key of a given kind. */
static size_t
raw(uint8_t *buf, size_t cap, const char *cmd, const char *key, int kind, size_t n)
{
	struct wire_enc e;
	size_t len;

	wire_enc_init(&e, buf, cap);
	wire_map_begin(&e, NULL);
	wire_put_u64(&e, "id", 5);
	wire_put_str(&e, "cmd", cmd);
	if (kind == 's')
		wire_put_str(&e, key, "x");
	else if (kind == 'u')
		wire_put_u64(&e, key, 1);
	else if (kind == 'b')
		wire_put_bool(&e, key, true);
	else if (kind == 'v') {
		wire_arr_begin(&e, key);
		for (size_t i = 0; i < n; i++)
			wire_put_str(&e, NULL, "fs.read:/x");
		wire_arr_end(&e);
	}
	wire_map_end(&e);
	if (wire_enc_finish(&e, &len) != 0)
		abort();
	return len;
}

static void
test_roundtrip(void)
{
	static uint8_t buf[8192];
	struct wire_adm_req in = { .id = 3, .cmd = WIRE_ADM_ISSUE, .sandbox = "sbx-a", .ncaps = 2,
		.ttl = 60, .has_uses = true, .uses = 2 };
	static struct wire_adm_req out;
	size_t len;

	in.caps[0] = "fs.read:/w/**";
	in.caps[1] = "net.connect:example.com:443";
	T_ERR(wire_adm_encode(&in, buf, sizeof(buf), &len), 0, "encode issue");
	T_ERR(wire_adm_decode(d, buf, len, &out), 0, "decode it");
	T_OK(out.id == 3 && out.cmd == WIRE_ADM_ISSUE && strcmp(out.sandbox, "sbx-a") == 0 &&
	    out.ncaps == 2 && strcmp(out.caps[1], "net.connect:example.com:443") == 0 &&
	    out.ttl == 60 && out.has_uses && out.uses == 2, "issue survives the round trip");

	in = (struct wire_adm_req){ .id = 4, .cmd = WIRE_ADM_RUN, .sandbox = "t1", .tier = "assistant",
		.workspace = "/w", .ttl = 9, .timeout = 30, .chdir = "/w/s", .pty = true, .argc = 2,
		.ngrants = 1, .nro_binds = 1, .nsetenv = 2, .nunsetenv = 1, .serve_workspace = true };
	in.argv[0] = "/usr/bin/env";
	in.argv[1] = "-i";
	in.grants[0] = "fs.list:/w";
	in.ro_binds[0] = "/opt";
	in.setenv[0] = "A";
	in.setenv[1] = "b";
	in.unsetenv[0] = "HOME";
	T_ERR(wire_adm_encode(&in, buf, sizeof(buf), &len), 0, "encode run");
	T_OK(wire_adm_decode(d, buf, len, &out) == 0 && out.cmd == WIRE_ADM_RUN && out.argc == 2 &&
	    strcmp(out.argv[1], "-i") == 0 && strcmp(out.tier, "assistant") == 0 &&
	    strcmp(out.workspace, "/w") == 0 && out.ttl == 9 && out.timeout == 30 &&
	    strcmp(out.chdir, "/w/s") == 0 && out.pty && out.ngrants == 1 &&
	    strcmp(out.ro_binds[0], "/opt") == 0 && out.nsetenv == 2 &&
	    strcmp(out.setenv[1], "b") == 0 && out.nunsetenv == 1 && strcmp(out.sandbox, "t1") == 0 &&
	    out.serve_workspace,
	    "run survives the round trip");

	in = (struct wire_adm_req){ .id = 6, .cmd = WIRE_ADM_APPROVE, .has_rid = true, .rid = 0,
		.session = true, .reason = "ok", .sandbox = "not-sent" };
	T_ERR(wire_adm_encode(&in, buf, sizeof(buf), &len), 0, "encode approve");
	T_OK(wire_adm_decode(d, buf, len, &out) == 0 && out.has_rid && out.rid == 0 &&
	    out.session && strcmp(out.reason, "ok") == 0 && out.sandbox == NULL,
	    "approve keeps request id 0 and sends only its own fields");
	/* the cluster's views (docs/cluster.md) */
	in = (struct wire_adm_req){ .id = 8, .cmd = WIRE_ADM_SANDBOXES, .cluster = true, .offset = 200 };
	T_ERR(wire_adm_encode(&in, buf, sizeof(buf), &len), 0, "encode sandboxes --cluster");
	T_OK(wire_adm_decode(d, buf, len, &out) == 0 && out.cluster && out.offset == 200,
	    "sandboxes takes cluster and offset");
	in = (struct wire_adm_req){ .id = 9, .cmd = WIRE_ADM_LIST, .cluster = true, .sandbox = "t" };
	T_ERR(wire_adm_encode(&in, buf, sizeof(buf), &len), 0, "encode list --cluster");
	T_OK(wire_adm_decode(d, buf, len, &out) == 0 && out.cluster && strcmp(out.sandbox, "t") == 0,
	    "list takes cluster");
	in = (struct wire_adm_req){ .id = 7, .cmd = WIRE_ADM_ISSUE, .ncaps = WIRE_CAPS_MAX + 1 };
	T_ERR(wire_adm_encode(&in, buf, sizeof(buf), &len), CB_EINVAL,
	    "encoding a list over its bound is refused");
	in = (struct wire_adm_req){ .id = 7, .cmd = WIRE_ADM_COUNT };
	T_ERR(wire_adm_encode(&in, buf, sizeof(buf), &len), CB_EINVAL, "encoding an unknown command");
}

static void
test_hostile(void)
{
	static uint8_t buf[8192];
	static struct wire_adm_req out;
	size_t len;

	len = raw(buf, sizeof(buf), "status", NULL, 0, 0);
	T_OK(wire_adm_decode(d, buf, len, &out) == 0 && out.cmd == WIRE_ADM_STATUS && out.id == 5,
	    "a bare status decodes");
	len = raw(buf, sizeof(buf), "format-disk", NULL, 0, 0);
	T_OK(wire_adm_decode(d, buf, len, &out) == CB_EUNKNOWNOP && out.id == 5,
	    "an unknown command is refused, its id kept");
	len = raw(buf, sizeof(buf), "kill", "tid", 's', 0);
	T_OK(wire_adm_decode(d, buf, len, &out) == CB_EPROTO && out.id == 5 && out.why &&
	    strstr(out.why, "kill") && strstr(out.why, "\"tid\""),
	    "kill refuses revoke's key tid, naming it");
	len = raw(buf, sizeof(buf), "kill", "cluster", 'u', 0);
	T_OK(wire_adm_decode(d, buf, len, &out) == CB_EPROTO && out.why && strstr(out.why, "\"cluster\""),
	    "kill refuses the views' key cluster, naming it");
	len = raw(buf, sizeof(buf), "status", "flush", 'b', 0);
	T_OK(wire_adm_decode(d, buf, len, &out) == 0 && out.cmd == WIRE_ADM_STATUS && out.flush,
	    "status takes flush");
	len = raw(buf, sizeof(buf), "kill", "flush", 'b', 0);
	T_ERR(wire_adm_decode(d, buf, len, &out), CB_EPROTO, "kill refuses status's flush");
	len = raw(buf, sizeof(buf), "status", "argv", 'v', 1);
	T_ERR(wire_adm_decode(d, buf, len, &out), CB_EPROTO, "status refuses argv");
	len = raw(buf, sizeof(buf), "audit-verify", "cluster", 'b', 0);
	T_OK(wire_adm_decode(d, buf, len, &out) == 0 && out.cmd == WIRE_ADM_AUDIT_VERIFY && out.cluster,
	    "audit-verify takes cluster");
	len = raw(buf, sizeof(buf), "revoke", "cluster", 'b', 0);
	T_ERR(wire_adm_decode(d, buf, len, &out), CB_EPROTO, "revoke refuses audit-verify's cluster");
	len = raw(buf, sizeof(buf), "issue", "evil", 's', 0);
	T_OK(wire_adm_decode(d, buf, len, &out) == CB_EPROTO && out.why &&
	    strstr(out.why, "does not know"), "a key of no command is refused");
	len = raw(buf, sizeof(buf), "issue", "sandbox", 'u', 0);
	T_OK(wire_adm_decode(d, buf, len, &out) == CB_EPROTO && out.why &&
	    strstr(out.why, "\"sandbox\" has the wrong type"), "a wrong type is refused, named");
	len = raw(buf, sizeof(buf), "issue", "caps", 'v', WIRE_CAPS_MAX + 1);
	T_ERR(wire_adm_decode(d, buf, len, &out), CB_EINVAL, "issue: too many caps (EINVAL)");
	len = raw(buf, sizeof(buf), "run", "grants", 'v', WIRE_CAPS_MAX + 1);
	T_OK(wire_adm_decode(d, buf, len, &out) == CB_ETOOBIG && out.why &&
	    strstr(out.why, "grants"), "run: too many grants (ETOOBIG), named");
	len = raw(buf, sizeof(buf), "run", "unsetenv", 'v', WIRE_ADM_ENV_MAX + 1);
	T_ERR(wire_adm_decode(d, buf, len, &out), CB_EINVAL, "run: too many unsetenv (EINVAL)");
	len = raw(buf, sizeof(buf), "run", "argv", 'v', WIRE_CAPS_MAX);
	T_OK(wire_adm_decode(d, buf, len, &out) == 0 && out.argc == WIRE_CAPS_MAX,
	    "run: a list at its bound is fine");
	{
		static const uint8_t noid[] = { 0x81, 0xa3, 'c', 'm', 'd', 0xa6, 's', 't', 'a', 't',
			'u', 's' };

		T_ERR(wire_adm_decode(d, noid, sizeof(noid), &out), CB_EPROTO, "no id: refused");
	}
}

int
main(void)
{
	if (wire_dec_new(WIRE_REQ_MAX, &d) != 0)
		return 1;
	test_roundtrip();
	test_hostile();
	wire_dec_free(d);
	return t_done();
}
