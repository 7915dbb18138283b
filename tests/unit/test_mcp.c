/*
 * test_mcp.c - the JSON-RPC side of `capcall mcp` (client/mcp.c),
 * without a broker: every reply to hostile and ordinary messages is one
 * line of valid JSON with the right id and code, notifications get none, and
 * text that is not UTF-8 is carried with U+FFFD.  Test code (trusted).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/mcp.h"
#include "tests/tap.h"

static struct cc_mcp *m;

/* Handle msg; the parsed reply (NULL when none), checked to be one line. */
static json_t *
ask(const char *msg)
{
	char *out = NULL;
	json_t *j;

	if (cc_mcp_handle(m, msg, strlen(msg), &out) != 0)
		return NULL;
	if (!out)
		return NULL;
	T_OK(!strchr(out, '\n'), "reply to %.40s is one line", msg);
	j = json_loads(out, 0, NULL);
	free(out);
	return j;
}

static int
handle(const char *msg, char **out)
{
	return cc_mcp_handle(m, msg, strlen(msg), out);
}

static int
code_of(json_t *r)
{
	return (int)json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

static void
expect_err(const char *msg, int code, bool null_id, const char *title)
{
	json_t *r = ask(msg);

	T_OK(r && code_of(r) == code && (!null_id || json_is_null(json_object_get(r, "id"))),
	    "%s: %d", title, code);
	json_decref(r);
}

int
main(void)
{
	json_t *r;
	char *out = (char *)1;

	if (cc_mcp_new(NULL, &m) != 0)
		return 1;
	r = ask("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
	    "{\"protocolVersion\":\"2025-06-18\"}}");
	T_OK(r && strcmp(json_string_value(json_object_get(json_object_get(r, "result"),
	    "protocolVersion")), "2025-06-18") == 0, "initialize echoes a version it speaks");
	json_decref(r);
	r = ask("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"initialize\",\"params\":"
	    "{\"protocolVersion\":\"2024-11-05\"}}");
	T_OK(r && strcmp(json_string_value(json_object_get(json_object_get(r, "result"),
	    "protocolVersion")), "2025-11-25") == 0, "... and answers an old one with its latest");
	json_decref(r);

	expect_err("{", -32700, true, "parse error");
	expect_err("[]", -32600, true, "batch");
	expect_err("\"str\"", -32600, true, "a string");
	expect_err("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", -32600, true, "id null");
	expect_err("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", -32600, true, "id true");
	expect_err("{\"jsonrpc\":\"2.0\",\"id\":[],\"method\":\"ping\"}", -32600, true, "id array");
	expect_err("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", -32600, true, "id object");
	expect_err("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\"}", -32601, false, "unknown method");
	expect_err("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}",
	    -32602, false, "unknown tool");
	expect_err("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":1}", -32602, false,
	    "params a number");

	T_OK(handle("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &out) == 0 &&
	    out == NULL, "a notification gets no reply");
	T_OK(handle(" \r", &out) == 0 && out == NULL, "a blank line gets no reply");
	T_OK(handle("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", &out) == 0 && out == NULL,
	    "a response gets no reply");

	r = ask("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	T_OK(r && json_array_size(json_object_get(json_object_get(r, "result"), "tools")) == 10,
	    "tools/list lists ten tools without a broker");
	T_OK(r && strstr(json_string_value(json_object_get(json_array_get(json_object_get(
	    json_object_get(r, "result"), "tools"), 0), "description")), "unknown") != NULL,
	    "... saying what is allowed is unknown");
	json_decref(r);
	r = ask("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"stat\","
	    "\"arguments\":{\"path\":\"/x\"}}}");
	T_OK(r && json_is_true(json_object_get(json_object_get(r, "result"), "isError")),
	    "a tool call without a broker is a tool error");
	json_decref(r);

	{
		json_t *s = cli_json_strn("a\xff" "b\xc0\x80" "c\xe2\x82\xac", 9);

		T_OK(s && strcmp(json_string_value(s), "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd"
		    "c\xe2\x82\xac") == 0, "invalid UTF-8 becomes U+FFFD, valid is kept");
		json_decref(s);
	}
	{
		char *l = cc_mcp_too_long();

		T_OK(l && strstr(l, "-32600") != NULL, "the too-long reply is an invalid request");
		free(l);
		l = cc_mcp_list_changed();
		T_OK(l && strcmp(l, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}")
		    == 0, "the list_changed notification");
		free(l);
	}
	cc_mcp_free(m);
	return t_done();
}
