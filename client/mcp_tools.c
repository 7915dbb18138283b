/*
 * mcp_tools.c - the tools of `capcall mcp`: each one broker operation
 * through the client library, its input schema, and a description that
 * says what the held tokens allow right now.
 *
 * Agent side (inside the sandbox).  Why this is safe with hostile
 * arguments: every argument is checked here for type, presence and length
 * (unknown arguments are refused) before a wire request is built, and the
 * broker checks everything again against the tokens; the server holds no
 * authority of its own, only the sandbox's channel.  File content and peer
 * bytes are bounded (CC_MCP_CONTENT_MAX, CC_MCP_NET_MAX) and never need to
 * be UTF-8: what is not becomes base64.
 */
#include "client/mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "wire/wire.h"

#define CAP_TEXT_MAX	1024	/* longest capability text (CAP_STR_MAX) */
#define ARGV_MAX	64	/* the protocol's proc.exec limit */
#define HOST_MAX	253
#define EXEC_TIMEOUT_MAX 3600

/* ---- what the tokens allow ------------------------------------------------ */

/* The ops a tool's description reports on. */
enum { A_READ, A_LIST, A_WRITE, A_DELETE, A_NET, A_EXEC, A_N };
static const char *const allow_ops[A_N] = {
	"fs.read", "fs.list", "fs.write", "fs.delete", "net.connect", "proc.exec",
};

struct allow {
	json_t *res[A_N];	/* arrays of resources of usable tokens */
	json_t *tokens;		/* cc_tokens() for the capabilities tool */
	int err;		/* why tokens could not be read (0: they were) */
	const char *why;
};

static void
allow_clear(struct allow *a)
{
	for (int i = 0; i < A_N; i++)
		json_decref(a->res[i]);
	json_decref(a->tokens);
}

static const char *
tok_state(int st)
{
	switch (st) {
	case 0: return "usable";
	case CB_EEXPIRED: return "expired";
	case CB_ENOTYET: return "not yet valid";
	case CB_EREVOKED: return "revoked";
	case CB_ESPENT: return "uses spent";
	default: return cb_errname(st);
	}
}

static json_t *
tok_json(const struct cc_tokinfo *t, json_t *caps)
{
	char when[32] = "";
	time_t exp = (time_t)t->exp;
	struct tm tm;

	if (gmtime_r(&exp, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return json_pack("{s:I, s:s, s:O, s:I, s:s, s:o, s:b, s:b, s:s}",
	    "handle", (json_int_t)t->th, "id", t->id, "caps", caps, "expires", (json_int_t)t->exp,
	    "expires_at", when, "uses_left", t->has_uses ? json_integer(t->uses) : json_null(),
	    "elevated", t->elevated, "usable", t->state == 0, "state", tok_state(t->state));
}

/* Read the held tokens into a: the resources each op may reach (from the
 * usable tokens) and the full list.  A failure is kept in a->err. */
static void
allow_load(struct cc_mcp *m, struct allow *a)
{
	struct cc_toklist *l = NULL;
	json_t *caps = NULL, *t;

	memset(a, 0, sizeof(*a));
	if (!m->c || cc_is_broken(m->c)) {
		a->err = CB_ECLOSED;
		a->why = m->c ? cc_last_reason(m->c) : "no broker channel (" CC_ENV_FD " unset)";
		return;
	}
	if ((a->err = cc_tokens(m->c, &l)) != 0) {
		a->why = cc_last_reason(m->c);
		return;
	}
	a->tokens = json_array();
	for (int i = 0; i < A_N; i++)
		a->res[i] = json_array();
	for (size_t i = 0; i < l->n; i++) {
		const struct cc_tokinfo *ti = &l->toks[i];

		caps = json_array();
		/* Capabilities carry no spaces (the grammar forbids them). */
		for (const char *p = ti->caps, *e; *p; p = *e ? e + 1 : e) {
			const char *colon;

			if (!(e = strchr(p, ' ')))
				e = p + strlen(p);
			if (e == p)
				continue;
			json_array_append_new(caps, cli_json_strn(p, (size_t)(e - p)));
			if (ti->state != 0 || !(colon = memchr(p, ':', (size_t)(e - p))))
				continue;
			for (int k = 0; k < A_N; k++) {
				json_t *r, *x;
				size_t j;
				bool dup = false;

				if (strlen(allow_ops[k]) != (size_t)(colon - p) ||
				    memcmp(p, allow_ops[k], (size_t)(colon - p)) != 0)
					continue;
				r = cli_json_strn(colon + 1, (size_t)(e - colon - 1));
				json_array_foreach(a->res[k], j, x)
					dup = dup || json_equal(x, r);
				if (dup)
					json_decref(r);
				else
					json_array_append_new(a->res[k], r);
			}
		}
		if ((t = tok_json(ti, caps)) != NULL)
			json_array_append_new(a->tokens, t);
		json_decref(caps);
	}
	cc_toklist_free(l);
}

/* "a, b and c" of op k's resources, or "nothing". */
static void
allow_text(const struct allow *a, int k, char *buf, size_t cap)
{
	size_t n = 0, cnt = a->res[k] ? json_array_size(a->res[k]) : 0;

	buf[0] = '\0';
	if (a->err) {
		snprintf(buf, cap, "unknown (the held tokens could not be read: %s)", a->why);
		return;
	}
	if (cnt == 0) {
		snprintf(buf, cap, "nothing (no usable %s capability is held)", allow_ops[k]);
		return;
	}
	for (size_t i = 0; i < cnt && n + 1 < cap; i++) {
		int w = snprintf(buf + n, cap - n, "%s%s", i == 0 ? "" : i + 1 == cnt ? " and " : ", ",
		    json_string_value(json_array_get(a->res[k], i)));

		if (w < 0 || (size_t)w >= cap - n) {
			/* A very long list: say that it goes on. */
			if (cap > 8)
				snprintf(buf + cap - 8, 8, " (...)");
			return;
		}
		n += (size_t)w;
	}
}

/* ---- results ------------------------------------------------------------------ */

/* A tool result: text for the model, structured for programs.  Takes both
 * references (text may be NULL: then the structured value as JSON). */
static json_t *
result(json_t *text, json_t *structured, bool is_error)
{
	json_t *r;

	if (!text && structured) {
		char *s = json_dumps(structured, JSON_COMPACT | JSON_INDENT(0));

		text = s ? json_string(s) : NULL;
		free(s);
	}
	if (!text || !structured) {
		json_decref(text);
		json_decref(structured);
		return NULL;
	}
	r = json_pack("{s:[{s:s, s:o}], s:o, s:b}", "content", "type", "text", "text", text,
	    "structuredContent", structured, "isError", is_error);
	return r;
}

static json_t *
fail_text(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A failure that is not the broker's: a bad argument, a local error. */
static json_t *
fail_text(const char *what, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return result(cli_json_strn(msg, strlen(msg)),
	    json_pack("{s:b, s:s, s:s}", "ok", false, "error", what, "reason", msg), true);
}

/* Refusals a request_capability could turn around: nothing held covers it,
 * or what covered it has run out. */
static bool
askable(int err)
{
	return err == CB_ENOTCOVERED || err == CB_ENOTOKEN || err == CB_EPOLICY ||
	    err == CB_EEXPIRED || err == CB_EREVOKED || err == CB_ESPENT;
}

/*
 * The broker failed or refused a call for capability cap ("fs.read:/x").
 * The text names the broker's reason and, for a refusal a human could
 * lift, the capability to ask for and how.
 */
static json_t *
fail_broker(struct cc_mcp *m, int err, const char *cap)
{
	const char *reason = m->c ? cc_last_reason(m->c) : "";
	char msg[3 * 1024];
	json_t *s;

	if (!*reason)
		reason = cb_strerror(err);
	if (!m->c || cc_is_broken(m->c) || err == CB_ECLOSED) {
		snprintf(msg, sizeof(msg), "broker unavailable: %s", m->c ? reason :
		    "no broker channel (" CC_ENV_FD " is not set: not inside a capbroker sandbox?)");
		return result(json_string(msg), json_pack("{s:b, s:s, s:s}", "ok", false,
		    "error", "broker-unavailable", "reason", msg), true);
	}
	if (askable(err)) {
		snprintf(msg, sizeof(msg),
		    "denied: %s\nmissing capability: %s\nTo ask a human for it, call "
		    "request_capability with {\"capability\": \"%s\", \"reason\": \"<why you need it>\"} "
		    "(the policy decides whether it may be asked for at all).", reason, cap, cap);
	} else if (err == CB_EDENIED || err == CB_EESCAPE || err == CB_EFTYPE ||
	    err == CB_ENETBLOCKED || err == CB_EPERM || (err <= CB_EBADSIG && err >= CB_EUNKNOWNTOK)) {
		snprintf(msg, sizeof(msg), "denied: %s (%s; no capability can allow this)", reason, cap);
	} else {
		snprintf(msg, sizeof(msg), "%s failed: %s", cap, reason);
	}
	s = json_pack("{s:b, s:s, s:i, s:s, s:s}", "ok", false, "error", cb_errname(err),
	    "code", err, "reason", reason, "capability", cap);
	if (s && askable(err))
		json_object_set_new(s, "request_with",
		    json_pack("{s:s, s:{s:s}}", "tool", "request_capability",
		    "arguments", "capability", cap));
	return result(cli_json_strn(msg, strlen(msg)), s, true);
}

/* ---- arguments ------------------------------------------------------------------ */

struct argspec {
	const char *name;
	json_type type;		/* JSON_STRING, JSON_INTEGER, JSON_ARRAY */
	bool required;
	size_t max;		/* strings: bytes; integers: largest; arrays: items */
	size_t min;		/* integers: smallest; strings: shortest */
};

/* Check args against spec; NULL when they fit, else why not (in buf). */
static const char *
args_check(json_t *args, const struct argspec *spec, size_t n, char *buf, size_t cap)
{
	const char *k;
	json_t *v;

	json_object_foreach(args, k, v) {
		size_t i;

		for (i = 0; i < n && strcmp(spec[i].name, k) != 0; i++)
			;
		if (i == n) {
			snprintf(buf, cap, "unknown argument '%.64s'", k);
			return buf;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct argspec *s = &spec[i];

		v = json_object_get(args, s->name);
		if (!v || json_is_null(v)) {
			if (s->required) {
				snprintf(buf, cap, "argument '%s' is required", s->name);
				return buf;
			}
			continue;
		}
		if (s->type == JSON_STRING) {
			size_t l = json_string_length(v);

			if (!json_is_string(v)) {
				snprintf(buf, cap, "argument '%s' must be a string", s->name);
				return buf;
			}
			if (l > s->max || l < s->min) {
				snprintf(buf, cap, "argument '%s' must be %zu to %zu bytes long", s->name,
				    s->min, s->max);
				return buf;
			}
		} else if (s->type == JSON_INTEGER) {
			json_int_t x = json_integer_value(v);

			if (!json_is_integer(v) || x < (json_int_t)s->min || x > (json_int_t)s->max) {
				snprintf(buf, cap, "argument '%s' must be an integer from %zu to %zu",
				    s->name, s->min, s->max);
				return buf;
			}
		} else if (s->type == JSON_ARRAY) {
			json_t *x;
			size_t j;

			if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > s->max) {
				snprintf(buf, cap, "argument '%s' must be an array of 1 to %zu strings",
				    s->name, s->max);
				return buf;
			}
			json_array_foreach(v, j, x) {
				if (!json_is_string(x) || json_string_length(x) > CC_MCP_PATH_MAX) {
					snprintf(buf, cap, "argument '%s' must hold strings of at most %d bytes",
					    s->name, CC_MCP_PATH_MAX);
					return buf;
				}
			}
		}
	}
	return NULL;
}

#define ARGS(args, spec) do { \
	char why_[256]; \
	const char *e_ = args_check((args), (spec), sizeof(spec) / sizeof((spec)[0]), why_, \
	    sizeof(why_)); \
	if (e_) \
		return fail_text("invalid-arguments", "invalid arguments: %s", e_); \
} while (0)

static const char *
arg_s(json_t *args, const char *k)
{
	return json_string_value(json_object_get(args, k));
}

/* ---- bytes in and out ------------------------------------------------------------ */

/* The bytes as text when they are UTF-8, else base64; into obj as
 * "content" and "encoding".  The text result is returned (new ref). */
static json_t *
put_bytes(json_t *obj, const char *key, const uint8_t *p, size_t n)
{
	json_t *s = json_stringn((const char *)p, n);
	char enc_key[64];

	snprintf(enc_key, sizeof(enc_key), "%s_encoding", key);
	if (s) {
		json_object_set(obj, key, s);
		json_object_set_new(obj, enc_key, json_string("utf-8"));
		return s;
	}
	{
		size_t blen = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
		char *b = malloc(blen);

		if (!b)
			return NULL;
		sodium_bin2base64(b, blen, p, n, sodium_base64_VARIANT_ORIGINAL);
		s = json_string(b);
		free(b);
		json_object_set(obj, key, s);
		json_object_set_new(obj, enc_key, json_string("base64"));
		return s;
	}
}

/* Read at most max bytes from fd (until EOF or the deadline, 0: none). */
static int
read_upto(int fd, uint8_t *buf, size_t max, size_t *got, bool *eof, uint64_t deadline_ms)
{
	*got = 0;
	*eof = false;
	while (*got < max) {
		ssize_t n;

		if (deadline_ms) {
			uint64_t now = cb_mono_ns() / 1000000u;
			struct pollfd pf = { .fd = fd, .events = POLLIN };
			int r;

			if (now >= deadline_ms)
				return 0;
			r = poll(&pf, 1, (int)(deadline_ms - now));
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 0)
				return 0;
			if (r < 0)
				return -1;
		}
		n = read(fd, buf + *got, max - *got);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			*eof = true;
			return 0;
		}
		*got += (size_t)n;
	}
	return 0;
}

static int
write_upto(int fd, const void *p, size_t len, uint64_t deadline_ms)
{
	const uint8_t *b = p;

	while (len > 0) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);

		if (n < 0 && errno == ENOTSOCK)
			n = write(fd, b, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			uint64_t now = cb_mono_ns() / 1000000u;

			if (deadline_ms && now >= deadline_ms) {
				errno = ETIMEDOUT;
				return -1;
			}
			poll(&pf, 1, deadline_ms ? (int)(deadline_ms - now) : -1);
			continue;
		}
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static void
cap_of(char *buf, size_t cap, const char *op, const char *res)
{
	snprintf(buf, cap, "%s:%s", op, res);
}

/* ---- the tools ----------------------------------------------------------------------- */

static const struct argspec path_only[] = {
	{ "path", JSON_STRING, true, CC_MCP_PATH_MAX, 1 },
};

static json_t *
t_read_file(struct cc_mcp *m, json_t *args)
{
	const char *path;
	char cap[CAP_TEXT_MAX + 16];
	uint8_t *buf = NULL;
	size_t got = 0;
	bool eof = false;
	struct stat st;
	json_t *s = NULL, *text, *r = NULL;
	int fd = -1, err = CB_ECLOSED;

	ARGS(args, path_only);
	path = arg_s(args, "path");
	cap_of(cap, sizeof(cap), "fs.read", path);
	if (!m->c || (err = cc_fs_read(m->c, path, &fd)) != 0)
		return fail_broker(m, err, cap);
	if (!(buf = malloc(CC_MCP_CONTENT_MAX + 1)))
		goto out;
	if (read_upto(fd, buf, CC_MCP_CONTENT_MAX + 1, &got, &eof, 0) != 0) {
		r = fail_text("io", "reading %s: %s", path, strerror(errno));
		goto out;
	}
	if (got > CC_MCP_CONTENT_MAX)
		got = CC_MCP_CONTENT_MAX;
	s = json_pack("{s:b, s:s, s:I, s:I, s:b}", "ok", true, "path", path,
	    "size", (json_int_t)(fstat(fd, &st) == 0 ? st.st_size : (off_t)got),
	    "bytes", (json_int_t)got, "truncated", !eof);
	if (s && (text = put_bytes(s, "content", buf, got)) != NULL)
		r = result(text, s, false), s = NULL;
out:
	json_decref(s);
	free(buf);
	if (fd >= 0)
		close(fd);
	return r;
}

static json_t *
t_write_file(struct cc_mcp *m, json_t *args)
{
	static const struct argspec spec[] = {
		{ "path", JSON_STRING, true, CC_MCP_PATH_MAX, 1 },
		{ "content", JSON_STRING, true, CC_MCP_CONTENT_MAX, 0 },
	};
	const char *path, *content;
	char cap[CAP_TEXT_MAX + 16], msg[256];
	size_t len;
	int fd = -1, err = CB_ECLOSED;

	ARGS(args, spec);
	path = arg_s(args, "path");
	content = arg_s(args, "content");
	len = json_string_length(json_object_get(args, "content"));
	cap_of(cap, sizeof(cap), "fs.write", path);
	if (!m->c || (err = cc_fs_write(m->c, path, CC_F_CREATE | CC_F_TRUNC, 0, &fd)) != 0)
		return fail_broker(m, err, cap);
	err = write_upto(fd, content, len, 0) != 0 ? errno : 0;
	/* A full disk may only show at close. */
	if (close(fd) != 0 && !err)
		err = errno;
	if (err)
		return fail_text("io", "writing %s: %s", path, strerror(err));
	snprintf(msg, sizeof(msg), "wrote %zu bytes", len);
	return result(json_string(msg), json_pack("{s:b, s:s, s:I}", "ok", true, "path", path,
	    "bytes", (json_int_t)len), false);
}

static const char *
type_name(char t)
{
	switch (t) {
	case 'f': return "file";
	case 'd': return "dir";
	case 'l': return "link";
	default: return "other";
	}
}

static json_t *
t_list_directory(struct cc_mcp *m, json_t *args)
{
	const char *path;
	char cap[CAP_TEXT_MAX + 16];
	struct cc_dir *d = NULL;
	json_t *ents, *s, *txt;
	char *text = NULL;
	size_t tl = 0;
	FILE *f;
	int err = CB_ECLOSED;

	ARGS(args, path_only);
	path = arg_s(args, "path");
	cap_of(cap, sizeof(cap), "fs.list", path);
	if (!m->c || (err = cc_fs_list(m->c, path, &d)) != 0)
		return fail_broker(m, err, cap);
	ents = json_array();
	if (!(f = open_memstream(&text, &tl))) {
		cc_dir_free(d);
		json_decref(ents);
		return NULL;
	}
	for (size_t i = 0; i < d->n; i++) {
		json_array_append_new(ents, json_pack("{s:o, s:s}", "name",
		    cli_json_strn(d->ents[i].name, strlen(d->ents[i].name)), "type",
		    type_name(d->ents[i].type)));
		fprintf(f, "%s%s\n", d->ents[i].name, d->ents[i].type == 'd' ? "/" :
		    d->ents[i].type == 'l' ? "@" : "");
	}
	if (d->n == 0)
		fputs("(empty)\n", f);
	if (d->trunc)
		fputs("(the broker cut the listing short)\n", f);
	fclose(f);
	s = json_pack("{s:b, s:s, s:o, s:b}", "ok", true, "path", path, "entries", ents,
	    "truncated", d->trunc);
	txt = text ? cli_json_strn(text, tl) : NULL;
	free(text);
	cc_dir_free(d);
	return result(txt, s, false);
}

static json_t *
t_stat(struct cc_mcp *m, json_t *args)
{
	const char *path;
	char cap[CAP_TEXT_MAX + 16], octal[8], when[32] = "", text[256];
	struct cc_stat st;
	time_t t;
	struct tm tm;
	int err = CB_ECLOSED;

	ARGS(args, path_only);
	path = arg_s(args, "path");
	cap_of(cap, sizeof(cap), "fs.read", path);
	if (!m->c || (err = cc_fs_stat(m->c, path, &st)) != 0)
		return fail_broker(m, err, cap);
	t = (time_t)st.mtime;
	if (gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(octal, sizeof(octal), "%04o", (unsigned)st.mode & 07777);
	snprintf(text, sizeof(text), "type %s\nsize %" PRIu64 "\nmode %s\nmtime %s\n",
	    type_name(st.type), st.size, octal, when);
	return result(json_string(text), json_pack("{s:b, s:s, s:s, s:I, s:I, s:s, s:I, s:s}",
	    "ok", true, "path", path, "type", type_name(st.type), "size", (json_int_t)st.size,
	    "mode", (json_int_t)st.mode, "mode_octal", octal, "mtime", (json_int_t)st.mtime,
	    "mtime_iso", when), false);
}

static json_t *
t_make_directory(struct cc_mcp *m, json_t *args)
{
	const char *path;
	char cap[CAP_TEXT_MAX + 16];
	int err = CB_ECLOSED;

	ARGS(args, path_only);
	path = arg_s(args, "path");
	cap_of(cap, sizeof(cap), "fs.write", path);
	if (!m->c || (err = cc_fs_mkdir(m->c, path, 0)) != 0)
		return fail_broker(m, err, cap);
	return result(json_string("directory created"),
	    json_pack("{s:b, s:s}", "ok", true, "path", path), false);
}

static json_t *
t_delete(struct cc_mcp *m, json_t *args)
{
	const char *path;
	char cap[CAP_TEXT_MAX + 16];
	int err = CB_ECLOSED;

	ARGS(args, path_only);
	path = arg_s(args, "path");
	cap_of(cap, sizeof(cap), "fs.delete", path);
	if (!m->c || (err = cc_fs_delete(m->c, path)) != 0)
		return fail_broker(m, err, cap);
	return result(json_string("deleted"), json_pack("{s:b, s:s}", "ok", true, "path", path),
	    false);
}

static json_t *
t_exec(struct cc_mcp *m, json_t *args)
{
	static const struct argspec spec[] = {
		{ "argv", JSON_ARRAY, true, ARGV_MAX, 1 },
		{ "stdin", JSON_STRING, false, CC_DATA_MAX, 0 },
		{ "timeout", JSON_INTEGER, false, EXEC_TIMEOUT_MAX, 1 },
	};
	const char *argv[ARGV_MAX + 1];
	json_t *av, *x, *s = NULL, *o, *e, *text = NULL;
	char cap[CAP_TEXT_MAX + 16], *t = NULL;
	struct cc_exec *r = NULL;
	unsigned ms = 0;
	size_t i, tl = 0;
	FILE *f;
	int err;

	ARGS(args, spec);
	av = json_object_get(args, "argv");
	json_array_foreach(av, i, x)
		argv[i] = json_string_value(x);
	argv[json_array_size(av)] = NULL;
	if (json_object_get(args, "timeout"))
		ms = (unsigned)json_integer_value(json_object_get(args, "timeout")) * 1000u;
	cap_of(cap, sizeof(cap), "proc.exec", argv[0]);
	if (argv[0][0] != '/')
		return fail_text("invalid-arguments", "argv[0] must be an absolute path, not '%.256s'",
		    argv[0]);
	if (!m->c)
		err = CB_ECLOSED;
	else if (arg_s(args, "stdin"))
		err = cc_proc_exec_in(m->c, argv, ms, arg_s(args, "stdin"),
		    json_string_length(json_object_get(args, "stdin")), &r);
	else
		err = cc_proc_exec(m->c, argv, ms, &r);
	if (err != 0)
		return fail_broker(m, err, cap);
	s = json_pack("{s:b, s:s, s:i, s:b}", "ok", true, "program", argv[0], "status",
	    (int)r->status, "truncated", r->trunc);
	o = s ? put_bytes(s, "stdout", r->out, r->out_len) : NULL;
	e = s ? put_bytes(s, "stderr", r->err, r->err_len) : NULL;
	if (o && e && (f = open_memstream(&t, &tl)) != NULL) {
		fprintf(f, "exit status %d%s\n", (int)r->status,
		    r->trunc ? " (output cut at the broker's limit)" : "");
		fprintf(f, "--- stdout ---\n%s\n--- stderr ---\n%s", json_string_value(o),
		    json_string_value(e));
		fclose(f);
		text = t ? cli_json_strn(t, tl) : NULL;
		free(t);
	}
	json_decref(o);
	json_decref(e);
	cc_exec_free(r);
	return result(text, s, false);
}

static json_t *
t_connect(struct cc_mcp *m, json_t *args)
{
	static const struct argspec spec[] = {
		{ "host", JSON_STRING, true, HOST_MAX, 1 },
		{ "port", JSON_INTEGER, true, 65535, 1 },
		{ "send", JSON_STRING, false, CC_MCP_CONTENT_MAX, 0 },
		{ "max_bytes", JSON_INTEGER, false, CC_MCP_NET_MAX, 1 },
	};
	const char *host, *snd;
	char cap[CAP_TEXT_MAX + 16];
	size_t max = CC_MCP_NET_DEFAULT, got = 0, slen = 0;
	uint16_t port;
	uint64_t deadline;
	uint8_t *buf = NULL;
	bool eof = false;
	json_t *s = NULL, *text, *r = NULL;
	int fd = -1, err = CB_ECLOSED;

	ARGS(args, spec);
	host = arg_s(args, "host");
	port = (uint16_t)json_integer_value(json_object_get(args, "port"));
	if ((snd = arg_s(args, "send")) != NULL)
		slen = json_string_length(json_object_get(args, "send"));
	if (json_object_get(args, "max_bytes"))
		max = (size_t)json_integer_value(json_object_get(args, "max_bytes"));
	snprintf(cap, sizeof(cap), strchr(host, ':') ? "net.connect:[%s]:%u" : "net.connect:%s:%u",
	    host, (unsigned)port);
	if (!m->c || (err = cc_net_connect(m->c, host, port, 0, &fd)) != 0)
		return fail_broker(m, err, cap);
	deadline = cb_mono_ns() / 1000000u + CC_MCP_NET_WAIT_MS;
	/* Non-blocking, so that a peer that neither reads nor writes costs
	 * the deadline and no more. */
	if ((err = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, err | O_NONBLOCK) < 0) {
		r = fail_text("io", "socket: %s", strerror(errno));
		goto out;
	}
	if (slen && write_upto(fd, snd, slen, deadline) != 0) {
		r = fail_text("io", "sending to %s:%u: %s", host, (unsigned)port, strerror(errno));
		goto out;
	}
	/* Our side is done: a peer that answers at end of input answers now. */
	if (snd)
		shutdown(fd, SHUT_WR);
	if (!(buf = malloc(max)))
		goto out;
	if (read_upto(fd, buf, max, &got, &eof, deadline) != 0) {
		r = fail_text("io", "receiving from %s:%u: %s", host, (unsigned)port, strerror(errno));
		goto out;
	}
	s = json_pack("{s:b, s:s, s:i, s:I, s:I, s:b, s:b}", "ok", true, "host", host,
	    "port", (int)port, "sent", (json_int_t)slen, "received", (json_int_t)got,
	    "closed", eof, "truncated", !eof && got == max);
	if (s && (text = put_bytes(s, "data", buf, got)) != NULL)
		r = result(text, s, false), s = NULL;
out:
	json_decref(s);
	free(buf);
	if (fd >= 0)
		close(fd);
	return r;
}

/* The result of a decided request: err from the broker (0: approved, with
 * the new token's id tid and handle). */
static json_t *
request_result(struct cc_mcp *m, const char *capt, int err, const char *tid, bool has_th,
    uint32_t th)
{
	char msg[2048];
	json_t *s;

	if (err != 0) {
		const char *reason = cc_last_reason(m->c);

		if (cc_is_broken(m->c))
			return fail_broker(m, err, capt);
		if (!*reason)
			reason = cb_strerror(err);
		snprintf(msg, sizeof(msg), "%s: %s",
		    err == CB_EDENIED ? "refused" : err == CB_EEXPIREDREQ ? "not granted" :
		    err == CB_EPOLICY ? "cannot be asked for" : "request failed", reason);
		return result(cli_json_strn(msg, strlen(msg)), json_pack("{s:b, s:b, s:s, s:s, s:i, s:s}",
		    "ok", false, "granted", false, "capability", capt, "error", cb_errname(err),
		    "code", err, "reason", reason), true);
	}
	snprintf(msg, sizeof(msg), "approved: %s is held now (token %s); the tool descriptions "
	    "list it", capt, tid);
	s = json_pack("{s:b, s:b, s:s, s:s}", "ok", true, "granted", true, "capability", capt,
	    "token_id", tid);
	if (s && has_th)
		json_object_set_new(s, "handle", json_integer(th));
	return result(cli_json_strn(msg, strlen(msg)), s, false);
}

/*
 * request_capability waits for a human, possibly for minutes, so it does
 * not hold the server: the request is sent, the JSON-RPC answer deferred,
 * and the loop answers it when the broker's reply comes (cc_mcp_next_done),
 * serving other calls meanwhile.
 */
static json_t *
t_request(struct cc_mcp *m, json_t *args)
{
	static const struct argspec spec[] = {
		{ "capability", JSON_STRING, true, CAP_TEXT_MAX, 1 },
		{ "ttl", JSON_INTEGER, false, UINT32_MAX, 1 },
		{ "reason", JSON_STRING, true, CC_MCP_REASON_MAX, 1 },
	};
	struct wire_req r = { .op = WIRE_OP_REQUEST };
	struct cc_mcp_pending *p;
	const char *capt;
	uint32_t wid;
	int err;

	ARGS(args, spec);
	capt = arg_s(args, "capability");
	if (!m->c || cc_is_broken(m->c))
		return fail_broker(m, CB_ECLOSED, capt);
	if (m->npending == CC_MCP_PENDING_MAX || !m->cur_id)
		return fail_text("busy", "%d requests are already waiting for a human; wait for one "
		    "of them to be decided", CC_MCP_PENDING_MAX);
	r.cap = capt;
	r.reason = arg_s(args, "reason");
	if (json_object_get(args, "ttl"))
		r.ttl = (uint64_t)json_integer_value(json_object_get(args, "ttl"));
	if ((err = cc_send(m->c, &r, &wid)) != 0)
		return request_result(m, capt, err, NULL, false, 0);
	p = &m->pending[m->npending];
	if (!(p->cap = strdup(capt))) {
		cc_discard(m->c, wid);
		return NULL;
	}
	p->wid = wid;
	p->id = json_incref(m->cur_id);
	m->npending++;
	m->deferred = true;
	return NULL;
}

json_t *
cc_mcp_request_result(struct cc_mcp *m, const struct cc_mcp_pending *p)
{
	struct wire_reply rep;
	int err;

	m->dirty = true;
	if (cc_is_broken(m->c))
		return fail_broker(m, CB_ECLOSED, p->cap);
	if ((err = cc_recv(m->c, p->wid, &rep, NULL)) != 0)
		return fail_broker(m, err, p->cap);
	if (rep.err)
		return request_result(m, p->cap, rep.err, NULL, false, 0);
	if (!rep.token && !rep.tid)
		return fail_text("protocol", "the broker's approval lacks the new token");
	return request_result(m, p->cap, 0, rep.tid ? rep.tid : "", rep.has_th, rep.th);
}

static json_t *
t_capabilities(struct cc_mcp *m, json_t *args)
{
	struct allow a;
	json_t *allowed, *s, *t, *txt;
	char *text = NULL;
	size_t tl = 0, i;
	FILE *f;

	if (json_object_size(args) != 0)
		return fail_text("invalid-arguments", "invalid arguments: capabilities takes none");
	allow_load(m, &a);
	if (a.err) {
		int err = a.err;

		allow_clear(&a);
		return fail_broker(m, err, "tokens");
	}
	if (!(allowed = json_object()) || !(f = open_memstream(&text, &tl))) {
		json_decref(allowed);
		allow_clear(&a);
		return NULL;
	}
	for (int k = 0; k < A_N; k++)
		json_object_set(allowed, allow_ops[k], a.res[k]);
	fprintf(f, "%zu token(s) held\n", json_array_size(a.tokens));
	json_array_foreach(a.tokens, i, t) {
		json_t *c;
		size_t j;

		fprintf(f, "- token %s (%s%s, expires %s", json_string_value(json_object_get(t, "id")),
		    json_string_value(json_object_get(t, "state")),
		    json_is_true(json_object_get(t, "elevated")) ? ", elevated" : "",
		    json_string_value(json_object_get(t, "expires_at")));
		if (json_is_integer(json_object_get(t, "uses_left")))
			fprintf(f, ", %" JSON_INTEGER_FORMAT " use(s) left",
			    json_integer_value(json_object_get(t, "uses_left")));
		fputs("):", f);
		json_array_foreach(json_object_get(t, "caps"), j, c)
			fprintf(f, " %s", json_string_value(c));
		fputc('\n', f);
	}
	fclose(f);
	s = json_pack("{s:b, s:O, s:o}", "ok", true, "tokens", a.tokens, "allowed", allowed);
	txt = text ? cli_json_strn(text, tl) : NULL;
	free(text);
	allow_clear(&a);
	return result(txt, s, false);
}

/* ---- the table ---------------------------------------------------------------------- */

enum hint { RO = 1, DESTRUCTIVE = 2, IDEMPOTENT = 4, OPEN = 8 };

struct tool {
	const char *name, *title;
	int op;			/* A_*: whose resources the description lists; -1 none */
	unsigned hints;
	const char *what;	/* description, before the allowance */
	const char *schema;	/* inputSchema (JSON) */
	json_t *(*fn)(struct cc_mcp *, json_t *);
};

#define PATH_SCHEMA \
	"{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"minLength\":1," \
	"\"maxLength\":4096,\"description\":\"absolute path\"}},\"required\":[\"path\"]," \
	"\"additionalProperties\":false}"

static const struct tool tools[] = {
	{ "read_file", "Read a file", A_READ, RO | IDEMPOTENT,
	  "Read a file through the capbroker broker (at most 1 MiB; UTF-8 text as is, other "
	  "bytes as base64). Needs fs.read on the path.",
	  PATH_SCHEMA, t_read_file },
	{ "write_file", "Write a file", A_WRITE, DESTRUCTIVE | IDEMPOTENT,
	  "Create or replace a file with the given text (at most 1 MiB). Needs fs.write on the "
	  "path.",
	  "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"minLength\":1,"
	  "\"maxLength\":4096,\"description\":\"absolute path\"},\"content\":{\"type\":\"string\","
	  "\"description\":\"the file's new content (UTF-8)\"}},\"required\":[\"path\",\"content\"],"
	  "\"additionalProperties\":false}",
	  t_write_file },
	{ "list_directory", "List a directory", A_LIST, RO | IDEMPOTENT,
	  "List a directory's entries (name and type). Needs fs.list on the directory.",
	  PATH_SCHEMA, t_list_directory },
	{ "stat", "File status", A_READ, RO | IDEMPOTENT,
	  "Type, size, permission bits and modification time of a file or directory. Needs "
	  "fs.read, fs.list or fs.write on the path.",
	  PATH_SCHEMA, t_stat },
	{ "make_directory", "Make a directory", A_WRITE, 0,
	  "Create a directory (its parent must exist). Needs fs.write on the path.",
	  PATH_SCHEMA, t_make_directory },
	{ "delete", "Delete a file or empty directory", A_DELETE, DESTRUCTIVE,
	  "Delete a file or an empty directory. Needs fs.delete on the path.",
	  PATH_SCHEMA, t_delete },
	{ "exec", "Run a program", A_EXEC, 0,
	  "Run a program in a fresh sandbox of its own (no network, no broker, read-only view "
	  "of what fs.read allows) and return its exit status and output. argv[0] must be an "
	  "absolute path covered by proc.exec.",
	  "{\"type\":\"object\",\"properties\":{\"argv\":{\"type\":\"array\",\"minItems\":1,"
	  "\"maxItems\":64,\"items\":{\"type\":\"string\",\"maxLength\":4096},\"description\":"
	  "\"program (absolute path) and arguments\"},\"stdin\":{\"type\":\"string\",\"maxLength\":"
	  "57344,\"description\":\"text given to the program on its standard input\"},\"timeout\":"
	  "{\"type\":\"integer\",\"minimum\":1,\"maximum\":3600,\"description\":\"seconds (the "
	  "broker caps it)\"}},\"required\":[\"argv\"],\"additionalProperties\":false}",
	  t_exec },
	{ "connect", "TCP exchange", A_NET, DESTRUCTIVE | OPEN,
	  "Open a TCP connection (the broker resolves and connects), send the given text, then "
	  "return what the peer sends until it closes, max_bytes arrive or 10 s pass. Needs "
	  "net.connect on host:port.",
	  "{\"type\":\"object\",\"properties\":{\"host\":{\"type\":\"string\",\"minLength\":1,"
	  "\"maxLength\":253},\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535},"
	  "\"send\":{\"type\":\"string\",\"description\":\"bytes to send first (UTF-8); our side "
	  "then closes for writing\"},\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":"
	  "1048576,\"description\":\"most bytes to keep (default 65536)\"}},\"required\":[\"host\","
	  "\"port\"],\"additionalProperties\":false}",
	  t_connect },
	{ "request_capability", "Ask a human for a capability", -1, 0,
	  "Ask a human for time-limited access to a capability (OP:RESOURCE, e.g. "
	  "fs.read:/etc/hostname, fs.write:/home/me/notes/**, net.connect:example.org:443, "
	  "proc.exec:/usr/bin/git) and wait for the decision. On approval the sandbox holds it "
	  "until its ttl ends; the policy decides what may be asked for at all.",
	  "{\"type\":\"object\",\"properties\":{\"capability\":{\"type\":\"string\",\"minLength\":"
	  "1,\"maxLength\":1024,\"description\":\"OP:RESOURCE; OP one of fs.read fs.list fs.write "
	  "fs.delete net.connect proc.exec\"},\"ttl\":{\"type\":\"integer\",\"minimum\":1,"
	  "\"description\":\"seconds wanted (the policy and the approver may shorten it)\"},"
	  "\"reason\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1024,\"description\":"
	  "\"why: the human reads it to decide\"}},\"required\":[\"capability\",\"reason\"],"
	  "\"additionalProperties\":false}",
	  t_request },
	{ "capabilities", "Held capabilities", -1, RO | IDEMPOTENT,
	  "The capability tokens this sandbox holds: their capabilities, expiry, uses left, and "
	  "whether each is usable now.",
	  "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
	  t_capabilities },
};

static json_t *
tool_json(const struct tool *t, const struct allow *a)
{
	char allowed[4096], desc[5120];
	json_t *schema, *ann, *p;

	if (!(schema = json_loads(t->schema, 0, NULL)))
		return NULL;
	if (t->op >= 0) {
		allow_text(a, t->op, allowed, sizeof(allowed));
		snprintf(desc, sizeof(desc), "%s Allowed now (%s): %s. Anything else is refused; "
		    "ask for it with request_capability.", t->what, allow_ops[t->op], allowed);
		/* The limits where a model looks for them too: on the argument. */
		if ((p = json_object_get(json_object_get(schema, "properties"), "path")) ||
		    (p = json_object_get(json_object_get(schema, "properties"), "argv")) ||
		    (p = json_object_get(json_object_get(schema, "properties"), "host"))) {
			char pd[4200];

			snprintf(pd, sizeof(pd), "%s%sallowed now: %s",
			    json_string_value(json_object_get(p, "description")) ?
			    json_string_value(json_object_get(p, "description")) : "",
			    json_object_get(p, "description") ? "; " : "", allowed);
			json_object_set_new(p, "description", json_string(pd));
		}
	} else {
		snprintf(desc, sizeof(desc), "%s", t->what);
	}
	ann = json_pack("{s:s, s:b, s:b, s:b, s:b}", "title", t->title,
	    "readOnlyHint", (t->hints & RO) != 0, "destructiveHint", (t->hints & DESTRUCTIVE) != 0,
	    "idempotentHint", (t->hints & IDEMPOTENT) != 0, "openWorldHint", (t->hints & OPEN) != 0);
	return json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", t->name, "title", t->title,
	    "description", desc, "inputSchema", schema, "annotations", ann);
}

json_t *
cc_mcp_tools_list(struct cc_mcp *m)
{
	struct allow a;
	json_t *list = json_array(), *t;

	allow_load(m, &a);
	for (size_t i = 0; list && i < sizeof(tools) / sizeof(tools[0]); i++) {
		if (!(t = tool_json(&tools[i], &a)) || json_array_append_new(list, t) != 0) {
			json_decref(list);
			list = NULL;
		}
	}
	allow_clear(&a);
	return list;
}

json_t *
cc_mcp_tool_call(struct cc_mcp *m, const char *name, json_t *args, bool *bad)
{
	*bad = false;
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		if (strcmp(name, tools[i].name) == 0)
			return tools[i].fn(m, args);
	*bad = true;
	return NULL;
}

/*
 * What the usable tokens allow, as one string: the tokens' ids and
 * capabilities, in the broker's order.  Uses left are not part of it (they
 * change with every call); a token that runs out of them becomes unusable,
 * which is.
 */
bool
cc_mcp_tokens_changed(struct cc_mcp *m)
{
	struct cc_toklist *l = NULL;
	char *now = NULL;
	size_t nl = 0;
	bool changed;
	FILE *f;

	if (!m->c || cc_is_broken(m->c) || cc_tokens(m->c, &l) != 0)
		return false;
	if (!(f = open_memstream(&now, &nl))) {
		cc_toklist_free(l);
		return false;
	}
	for (size_t i = 0; i < l->n; i++)
		if (l->toks[i].state == 0)
			fprintf(f, "%s %s\n", l->toks[i].id, l->toks[i].caps);
	fclose(f);
	cc_toklist_free(l);
	if (!now)
		return false;
	changed = !m->tokens_seen || strcmp(now, m->tokens_seen) != 0;
	if (!m->tokens_seen)
		changed = false;	/* the first look only records */
	free(m->tokens_seen);
	m->tokens_seen = now;
	return changed && m->initialized;
}
