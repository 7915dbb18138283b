/*
 * mcp.c - `capcall mcp`: JSON-RPC 2.0 over stdio (one message a line), the
 * MCP methods (initialize, ping, tools/list, tools/call) and the loop that
 * also watches the sandbox's tokens for notifications/tools/list_changed.
 *
 * Agent side (inside the sandbox).  Why hostile input is safe here:
 *  - a line is bounded (CC_MCP_LINE_MAX) before anything parses it; a longer
 *    one is discarded up to its newline and answered with an error;
 *  - jansson parses it (no parser of our own), rejecting duplicate keys and
 *    NUL in strings; its recursion is bounded by its own depth limit, and
 *    we refuse anything nested deeper than CC_MCP_DEPTH_MAX afterwards;
 *  - every member is type-checked before use; each tool checks its own
 *    arguments and their lengths (mcp_tools.c) before a request is built;
 *  - stdout carries protocol only: replies and notifications, one compact
 *    JSON text a line (jansson escapes newlines inside strings); diagnostics
 *    go to stderr.
 */
#include "client/mcp.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JSONRPC_PARSE		(-32700)
#define JSONRPC_INVALID		(-32600)
#define JSONRPC_NOMETHOD	(-32601)
#define JSONRPC_PARAMS		(-32602)
#define JSONRPC_INTERNAL	(-32603)

#define MCP_VERSION_LATEST	"2025-11-25"
static const char *const mcp_versions[] = { MCP_VERSION_LATEST, "2025-06-18", NULL };

/* ---- building messages -------------------------------------------------- */

static char *
mcp_dump(json_t *msg)
{
	char *s = msg ? json_dumps(msg, JSON_COMPACT) : NULL;

	json_decref(msg);
	return s;
}

/* An error response.  id is borrowed (NULL: null). */
static char *
mcp_error(json_t *id, int code, const char *message)
{
	return mcp_dump(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0",
	    "id", id ? id : json_null(), "error", "code", code, "message", message));
}

/* A result response; result's reference is taken. */
static char *
mcp_result(json_t *id, json_t *result)
{
	if (!result)
		return mcp_error(id, JSONRPC_INTERNAL, "out of memory");
	return mcp_dump(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

char *
cc_mcp_too_long(void)
{
	char msg[96];

	snprintf(msg, sizeof(msg), "message longer than %u bytes", CC_MCP_LINE_MAX);
	return mcp_error(NULL, JSONRPC_INVALID, msg);
}

char *
cc_mcp_list_changed(void)
{
	return mcp_dump(json_pack("{s:s, s:s}", "jsonrpc", "2.0",
	    "method", "notifications/tools/list_changed"));
}

/* ---- decoding -------------------------------------------------------------- */

static bool
mcp_depth_ok(json_t *v, int depth)
{
	const char *k;
	json_t *x;
	size_t i;

	if (!json_is_object(v) && !json_is_array(v))
		return true;
	if (depth >= CC_MCP_DEPTH_MAX)
		return false;
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (!mcp_depth_ok(x, depth + 1))
				return false;
		return true;
	}
	json_object_foreach(v, k, x)
		if (!mcp_depth_ok(x, depth + 1))
			return false;
	return true;
}

/* MCP ids are strings or numbers; null, booleans, arrays and objects are not. */
static bool
mcp_id_ok(json_t *id)
{
	return json_is_string(id) || json_is_number(id);
}

/* ---- methods ------------------------------------------------------------------ */

static json_t *
mcp_initialize(struct cc_mcp *m, json_t *params, const char **err)
{
	json_t *v = json_object_get(params, "protocolVersion");
	const char *want = json_string_value(v), *ver = MCP_VERSION_LATEST;

	(void)m;
	if (!want) {
		*err = "initialize needs params.protocolVersion (a string)";
		return NULL;
	}
	/* The client's version when we speak it, else our latest: the client
	 * then decides whether it can go on. */
	for (size_t i = 0; mcp_versions[i]; i++)
		if (strcmp(want, mcp_versions[i]) == 0)
			ver = mcp_versions[i];
	return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}",
	    "protocolVersion", ver,
	    "capabilities", "tools", "listChanged", 1,
	    "serverInfo", "name", "capbroker", "title", "capbroker (capability-checked tools)",
	    "version", "0.1",
	    "instructions",
	    "Every tool here is an operation the capbroker broker performs for this sandbox "
	    "after checking a signed, revocable capability token. The tool descriptions say "
	    "what the held tokens allow right now; anything else is refused with the missing "
	    "capability named. Ask a human for it with request_capability (give a reason); "
	    "the capabilities tool lists what is held. The list changes when tokens are "
	    "granted, approved, revoked or expire (notifications/tools/list_changed).");
}

static json_t *
mcp_tools_list(struct cc_mcp *m, json_t *params, const char **err)
{
	json_t *cursor = json_object_get(params, "cursor"), *tools;

	/* One page: a cursor can only be one we never gave. */
	if (cursor && !json_is_null(cursor)) {
		*err = json_is_string(cursor) ? "unknown cursor" : "cursor must be a string";
		return NULL;
	}
	if (!(tools = cc_mcp_tools_list(m)))
		return NULL;
	return json_pack("{s:o}", "tools", tools);
}

static json_t *
mcp_tools_call(struct cc_mcp *m, json_t *params, const char **err)
{
	json_t *name = json_object_get(params, "name"), *args = json_object_get(params, "arguments");
	json_t *empty = NULL, *r;
	bool bad = false;

	if (!json_is_string(name)) {
		*err = "tools/call needs params.name (a string)";
		return NULL;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		*err = "params.arguments must be an object";
		return NULL;
	}
	if (!args || json_is_null(args)) {
		if (!(args = empty = json_object()))
			return NULL;
	}
	r = cc_mcp_tool_call(m, json_string_value(name), args, &bad);
	json_decref(empty);
	if (bad)
		*err = "unknown tool";
	return r;
}

static json_t *
mcp_ping(struct cc_mcp *m, json_t *params, const char **err)
{
	(void)m;
	(void)params;
	(void)err;
	return json_object();
}

/* The methods a client may call: the one list of what it may ask for.  A
 * NULL result with *err set is an invalid-params error; without, ENOMEM. */
static const struct {
	const char *name;
	json_t *(*fn)(struct cc_mcp *, json_t *, const char **);
} mcp_methods[] = {
	{ "initialize", mcp_initialize },
	{ "ping", mcp_ping },
	{ "tools/list", mcp_tools_list },
	{ "tools/call", mcp_tools_call },
};

static char *
mcp_request(struct cc_mcp *m, json_t *id, const char *method, json_t *params)
{
	const char *err = NULL;
	json_t *r;

	for (size_t i = 0; i < sizeof(mcp_methods) / sizeof(mcp_methods[0]); i++) {
		if (strcmp(method, mcp_methods[i].name) != 0)
			continue;
		m->cur_id = id;
		m->deferred = false;
		r = mcp_methods[i].fn(m, params, &err);
		m->cur_id = NULL;
		if (!r && m->deferred)
			return NULL;	/* answered later, by cc_mcp_next_done() */
		if (!r && err)
			return mcp_error(id, JSONRPC_PARAMS, err);
		return mcp_result(id, r);
	}
	return mcp_error(id, JSONRPC_NOMETHOD, "method not found");
}

/* A notification gets no answer, whatever it says.  A cancelled
 * request_capability is forgotten here (the human may still decide it: an
 * approval then shows as a list_changed). */
static void
mcp_notification(struct cc_mcp *m, const char *method, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");

	if (strcmp(method, "notifications/initialized") == 0)
		m->initialized = true;
	if (strcmp(method, "notifications/cancelled") != 0 || !rid)
		return;
	for (size_t i = 0; i < m->npending; i++) {
		if (!json_equal(m->pending[i].id, rid))
			continue;
		if (m->c)
			cc_discard(m->c, m->pending[i].wid);
		json_decref(m->pending[i].id);
		free(m->pending[i].cap);
		m->pending[i] = m->pending[--m->npending];
		return;
	}
}

int
cc_mcp_wait_fd(const struct cc_mcp *m)
{
	return m->npending && m->c ? cc_fd(m->c) : -1;
}

char *
cc_mcp_next_done(struct cc_mcp *m)
{
	if (!m->npending || !m->c)
		return NULL;
	/* A broken channel shows in cc_is_broken(): every waiting request
	 * is then answered with it. */
	if (!cc_is_broken(m->c))
		cb_ignore(cc_collect(m->c));
	for (size_t i = 0; i < m->npending; i++) {
		struct cc_mcp_pending p = m->pending[i];
		char *line;

		if (!cc_is_broken(m->c) && !cc_arrived(m->c, p.wid))
			continue;
		m->pending[i] = m->pending[--m->npending];
		line = mcp_result(p.id, cc_mcp_request_result(m, &p));
		json_decref(p.id);
		free(p.cap);
		return line ? line : mcp_error(NULL, JSONRPC_INTERNAL, "out of memory");
	}
	return NULL;
}

int
cc_mcp_handle(struct cc_mcp *m, const char *line, size_t len, char **reply)
{
	json_t *root = NULL, *id, *method, *params;
	json_error_t jerr;
	char *out = NULL;
	bool answer = true;	/* a reply is owed (so NULL means ENOMEM) */
	size_t i;

	*reply = NULL;
	m->deferred = false;
	for (i = 0; i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'); i++)
		;
	if (i == len)
		return 0;
	if (len > CC_MCP_LINE_MAX) {
		out = cc_mcp_too_long();
		goto out;
	}
	if (!(root = json_loadb(line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr))) {
		out = mcp_error(NULL, JSONRPC_PARSE, "parse error");
		goto out;
	}
	if (!json_is_object(root)) {
		out = mcp_error(NULL, JSONRPC_INVALID, json_is_array(root) ?
		    "batches are not supported (MCP 2025-06-18 removed them)" : "not a request object");
		goto out;
	}
	id = json_object_get(root, "id");
	method = json_object_get(root, "method");
	params = json_object_get(root, "params");
	if (id && !mcp_id_ok(id)) {
		out = mcp_error(NULL, JSONRPC_INVALID, "id must be a string or a number");
		goto out;
	}
	if (!mcp_depth_ok(root, 0)) {
		out = mcp_error(id, JSONRPC_INVALID, "nested too deeply");
		goto out;
	}
	if (!json_is_string(json_object_get(root, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(root, "jsonrpc")), "2.0") != 0) {
		out = mcp_error(id, JSONRPC_INVALID, "jsonrpc must be \"2.0\"");
		goto out;
	}
	if (!method) {
		/* A response to a request of ours: we send none, so it is
		 * dropped; anything else is not a valid message. */
		if (id && (json_object_get(root, "result") || json_object_get(root, "error"))) {
			answer = false;
			goto out;
		}
		out = mcp_error(id, JSONRPC_INVALID, "no method");
		goto out;
	}
	if (!json_is_string(method)) {
		out = mcp_error(id, JSONRPC_INVALID, "method must be a string");
		goto out;
	}
	if (!id) {
		mcp_notification(m, json_string_value(method), params);
		answer = false;
		goto out;
	}
	if (params && !json_is_object(params)) {
		out = mcp_error(id, JSONRPC_PARAMS, "params must be an object");
		goto out;
	}
	out = mcp_request(m, id, json_string_value(method), params);
	if (!out && m->deferred)
		answer = false;
out:
	json_decref(root);
	if (answer && !out)
		return CB_ENOMEM;
	*reply = out;
	return 0;
}

/* ---- the server object ---------------------------------------------------------- */

int
cc_mcp_new(struct cc_conn *c, struct cc_mcp **out)
{
	struct cc_mcp *m = calloc(1, sizeof(*m));

	*out = NULL;
	if (!m)
		return CB_ENOMEM;
	m->c = c;
	*out = m;
	return 0;
}

void
cc_mcp_free(struct cc_mcp *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->npending; i++) {
		json_decref(m->pending[i].id);
		free(m->pending[i].cap);
	}
	free(m->tokens_seen);
	free(m);
}

/* ---- the loop ---------------------------------------------------------------------- */

static int
mcp_write_line(char *s)
{
	size_t len, off = 0;
	int r = 0;

	if (!s)
		return 0;
	len = strlen(s);
	while (off <= len) {
		/* the line, then its newline */
		const char *p = off < len ? s + off : "\n";
		size_t n = off < len ? len - off : 1;
		ssize_t w = write(STDOUT_FILENO, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pf = { .fd = STDOUT_FILENO, .events = POLLOUT };

			poll(&pf, 1, -1);
			continue;
		}
		if (w <= 0) {
			r = -1;
			break;
		}
		off += (size_t)w;
	}
	free(s);
	return r;
}

static uint64_t
mcp_now_ms(void)
{
	return cb_mono_ns() / 1000000u;
}

struct mcp_in {
	char *buf;
	size_t len, cap;
	bool discarding;	/* inside a line that is too long */
};

/* Handle every complete line in the buffer; keep the incomplete rest. */
static int
mcp_lines(struct cc_mcp *m, struct mcp_in *in)
{
	size_t start = 0;
	char *nl, *reply;

	while ((nl = memchr(in->buf + start, '\n', in->len - start)) != NULL) {
		size_t l = (size_t)(nl - (in->buf + start));

		if (in->discarding) {
			in->discarding = false;
			reply = cc_mcp_too_long();
		} else if (cc_mcp_handle(m, in->buf + start, l, &reply) != 0) {
			fprintf(stderr, "capcall mcp: out of memory\n");
			reply = NULL;
		}
		if (mcp_write_line(reply) != 0)
			return -1;
		start += l + 1;
		/* A tool call may have changed the tokens (an approval): say so
		 * at once rather than at the next poll. */
		if (m->dirty) {
			m->dirty = false;
			if (cc_mcp_tokens_changed(m) && mcp_write_line(cc_mcp_list_changed()) != 0)
				return -1;
		}
	}
	memmove(in->buf, in->buf + start, in->len - start);
	in->len -= start;
	if (in->len > CC_MCP_LINE_MAX) {
		/* Too long: drop it; the error goes out at its newline. */
		in->len = 0;
		in->discarding = true;
	}
	return 0;
}

static int
mcp_loop(struct cc_mcp *m, unsigned poll_ms)
{
	struct mcp_in in = { 0 };
	uint64_t next = mcp_now_ms() + poll_ms;
	int rc = 0;

	in.cap = 64 * 1024;
	if (!(in.buf = malloc(in.cap)))
		return 1;
	for (;;) {
		struct pollfd pf[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
			{ .fd = cc_mcp_wait_fd(m), .events = POLLIN } };
		uint64_t now = mcp_now_ms();
		int wait = now >= next ? 0 : (int)(next - now), n;
		ssize_t got;
		char *done;

		n = poll(pf, 2, wait);
		if (n < 0 && errno != EINTR) {
			rc = 1;
			break;
		}
		if (mcp_now_ms() >= next) {
			if (cc_mcp_tokens_changed(m) && mcp_write_line(cc_mcp_list_changed()) != 0)
				break;
			next = mcp_now_ms() + poll_ms;
		}
		/* Decided requests (their replies may also have been read while
		 * another call waited for its own). */
		while ((done = cc_mcp_next_done(m)) != NULL)
			if (mcp_write_line(done) != 0)
				goto out;
		if (m->dirty) {
			m->dirty = false;
			if (cc_mcp_tokens_changed(m) && mcp_write_line(cc_mcp_list_changed()) != 0)
				break;
		}
		if (n <= 0 || !pf[0].revents)
			continue;
		if (in.cap - in.len < 16 * 1024) {
			size_t ncap = in.cap * 2;
			char *nb;

			/* bounded: mcp_lines() never keeps more than the line max */
			if (ncap > CC_MCP_LINE_MAX + 128 * 1024)
				ncap = CC_MCP_LINE_MAX + 128 * 1024;
			if (ncap <= in.cap || !(nb = realloc(in.buf, ncap))) {
				rc = 1;
				break;
			}
			in.buf = nb;
			in.cap = ncap;
		}
		got = read(STDIN_FILENO, in.buf + in.len, in.cap - in.len);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			break;	/* the client went away: we are done */
		in.len += (size_t)got;
		if (mcp_lines(m, &in) != 0)
			break;	/* nobody reads our answers any more */
	}
out:
	free(in.buf);
	return rc;
}

static const char mcp_usage[] =
    "usage: capcall mcp [--poll-ms N]\n"
    "  a Model Context Protocol server on stdin/stdout (see docs/mcp.md);\n"
    "  --poll-ms: how often the held tokens are checked for changes (default 1000)\n";

int
cc_mcp_main(int argc, char **argv)
{
	static const struct option lo[] = { { "poll-ms", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
	struct cc_conn *c = NULL;
	struct cc_mcp *m = NULL;
	unsigned poll_ms = CC_MCP_POLL_MS;
	char *end;
	int ch, err, rc;

	optind = 0;	/* argv[0] is "mcp": parse afresh from there */
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (ch == 'p') {
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !(*optarg >= '0' && *optarg <= '9') || v < 50 || v > 3600000) {
				fputs("capcall mcp: --poll-ms takes 50 to 3600000\n", stderr);
				return 64;
			}
			poll_ms = (unsigned)v;
		} else if (ch == 'h') {
			fputs(mcp_usage, stdout);
			return 0;
		} else {
			fputs(mcp_usage, stderr);
			return 64;
		}
	}
	if (optind != argc) {
		fputs(mcp_usage, stderr);
		return 64;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Without a broker the server still answers (every tool then says
	 * why it cannot work), so an agent host shows a clear error. */
	if ((err = cc_open_env(&c)) != 0)
		fprintf(stderr, "capcall mcp: broker unavailable: %s\n",
		    err == CB_ENOENT ? CC_ENV_FD " is not set (not inside a sandbox?)" : cb_strerror(err));
	if (cc_mcp_new(c, &m) != 0) {
		cc_close(c);
		return 1;
	}
	/* The first look only records what the tokens allow. */
	(void)cc_mcp_tokens_changed(m);
	rc = mcp_loop(m, poll_ms);
	cc_mcp_free(m);
	cc_close(c);
	return rc;
}
