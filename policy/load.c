/*
 * load.c - reading a policy file (libconfig) over the built-in default and
 * validating it.  Trust domain: the broker at start-up and check-policy.
 *
 * Every error is reported with file:line and what was expected, and loading
 * goes on to find the others; a policy with any error is refused whole, so
 * the broker never runs on a policy it did not fully understand.
 */
#include "policy/pol_int.h"
#include "sandbox-stub/sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define POL_FILE_MAX	(1024 * 1024)	/* a policy is a few KiB */
#define POL_BUILTIN	"<built-in>"
#define POL_RULE_TTL	3600	/* a rule's max_ttl when it names none */
/* Stands for the workspace while validating: tier rules are judged on the
 * capabilities a real workspace would produce. */
#define POL_SAMPLE_WS	"/capbroker-workspace"

struct lctx {
	FILE *errs;
	int nerr;
	const char *file;	/* name for settings of the main text */
	const char *text;	/* the main text, for the integer check */
	struct pol *p;
	const config_setting_t *deftier;	/* defaults.tier, checked last */
};

static void perr(struct lctx *x, const config_setting_t *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static const char *
src_file(struct lctx *x, const config_setting_t *s)
{
	const char *f = s ? config_setting_source_file(s) : NULL;

	return f ? f : x->file;
}

static unsigned setting_line(struct lctx *x, const config_setting_t *s);

/* Write one message line to errs.  Every message a policy load prints
 * goes through here and so through the one escaper for text a person reads
 * (common/text.c): the strings it quotes come from a file, and a file is
 * not always the administrator's own (check-policy is run on files others
 * wrote), so a control, bidi or invisible character in it is shown, not
 * acted on. */
static void pol_vmsg(FILE *errs, const char *where, unsigned line, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

static void
pol_vmsg(FILE *errs, const char *where, unsigned line, const char *fmt, va_list ap)
{
	char *msg = NULL;

	if (!errs)
		return;
	cb_ignore(cb_text_fputs(where, errs));
	if (line)
		fprintf(errs, ":%u", line);
	fputs(": ", errs);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	cb_ignore(cb_text_fputs(msg ? msg : "(out of memory)", errs));
	fputc('\n', errs);
	free(msg);
}

static void pol_msg(FILE *errs, const char *where, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
pol_msg(FILE *errs, const char *where, unsigned line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pol_vmsg(errs, where, line, fmt, ap);
	va_end(ap);
}

/* Print "file:line: message" and count it. */
static void
perr(struct lctx *x, const config_setting_t *s, const char *fmt, ...)
{
	va_list ap;

	x->nerr++;
	va_start(ap, fmt);
	pol_vmsg(x->errs, s ? src_file(x, s) : x->file, s ? setting_line(x, s) : 0, fmt, ap);
	va_end(ap);
}

static const char *
type_name(const config_setting_t *s)
{
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_GROUP: return "a group";
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64: return "an integer";
	case CONFIG_TYPE_FLOAT: return "a float";
	case CONFIG_TYPE_STRING: return "a string";
	case CONFIG_TYPE_BOOL: return "a boolean";
	case CONFIG_TYPE_ARRAY: return "an array";
	case CONFIG_TYPE_LIST: return "a list";
	}
	return "nothing";
}

static const char *
key_name(const config_setting_t *s)
{
	const char *n = config_setting_name(s);

	return n ? n : "element";
}

static void
wrong_type(struct lctx *x, const config_setting_t *s, const char *expected)
{
	perr(x, s, "wrong type for \"%s\": %s (expected %s)", key_name(s), type_name(s), expected);
}

static void
unknown_key(struct lctx *x, const config_setting_t *s, const char *where, const char *keys)
{
	perr(x, s, "unknown key \"%s\" in %s (expected one of: %s)", key_name(s), where, keys);
}

/* ---- libconfig 1.5 integer truncation --------------------------------- */

/* Copy line n (1-based) of text into buf; false if there is none. */
static bool
text_line(const char *text, unsigned n, char *buf, size_t size)
{
	const char *e;

	for (unsigned i = 1; text && i < n; i++) {
		if (!(text = strchr(text, '\n')))
			return false;
		text++;
	}
	if (!text || size == 0)
		return false;
	e = strchrnul(text, '\n');
	snprintf(buf, size, "%.*s", (int)(e - text), text);
	return true;
}

static bool
file_line(const char *path, unsigned n, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	char *ln = NULL;
	size_t cap = 0;
	bool ok = false;

	if (!f)
		return false;
	for (unsigned i = 0; i < n && getline(&ln, &cap, f) >= 0; i++)
		ok = i + 1 == n;
	if (ok)
		snprintf(buf, size, "%s", ln);
	free(ln);
	fclose(f);
	return ok;
}

/* The line of a setting.  libconfig 1.5 dates a list element by the token
 * after it, so the last string of a list whose closing bracket is on a
 * later line gets that line; look back (no further than the list) for the
 * line that holds the string itself. */
static unsigned
setting_line(struct lctx *x, const config_setting_t *s)
{
	unsigned n = config_setting_source_line(s), stop;
	const char *f = config_setting_source_file(s);
	const config_setting_t *parent = config_setting_parent(s);
	char ln[4096], *q = NULL;

	if (config_setting_name(s) || config_setting_type(s) != CONFIG_TYPE_STRING || !parent)
		return n;
	stop = config_setting_source_line(parent);
	if (asprintf(&q, "\"%s\"", config_setting_get_string(s)) < 0)
		return n;
	for (unsigned i = n; i >= stop && i > 0; i--) {
		if (f ? !file_line(f, i, ln, sizeof(ln)) : !text_line(x->text, i, ln, sizeof(ln)))
			break;
		if (strstr(ln, q)) {
			n = i;
			break;
		}
	}
	free(q);
	return n;
}

/* Does the line hold an integer literal that does not fit 32 bits, has no
 * L suffix and that libconfig 1.5 (Debian 12) would have truncated to got?
 * That version silently wraps such literals, so "memory = 8589934592;"
 * would read as 0.  This scans the source line of a setting libconfig
 * already parsed (it does not parse the file); comparing with the value
 * read tells which setting of a line the literal was. */
static bool
line_truncated_int(const char *ln, long long got, bool first)
{
	bool inq = false;

	for (const char *s = ln; *s; s++) {
		char *e;
		unsigned long long v;
		bool neg;

		if (inq) {
			if (*s == '\\' && s[1])
				s++;
			else if (*s == '"')
				inq = false;
			continue;
		}
		if (*s == '"') {
			inq = true;
			continue;
		}
		if (*s == '#' || (s[0] == '/' && (s[1] == '/' || s[1] == '*')))
			break;
		if (!isdigit((unsigned char)*s) ||
		    (s > ln && (isalnum((unsigned char)s[-1]) || s[-1] == '_' || s[-1] == '.')))
			continue;
		neg = s > ln && s[-1] == '-';
		errno = 0;
		v = strtoull(s, &e, 0);
		if (*e == 'L' || *e == '.' || *e == 'e' || *e == 'E') {
			s = e;
			continue;
		}
		if (errno == ERANGE)
			return true;	/* libconfig's value is unpredictable */
		if (v > (neg ? 0x80000000ULL : 0x7fffffffULL) &&
		    (int32_t)(uint32_t)(neg ? 0 - v : v) == got)
			return true;
		if (first)
			break;
		s = e - 1;
	}
	return false;
}

static bool
int_truncated(struct lctx *x, const config_setting_t *s)
{
	char ln[4096];
	const char *f = config_setting_source_file(s), *name = config_setting_name(s);
	unsigned n = config_setting_source_line(s);

	if (config_setting_type(s) != CONFIG_TYPE_INT)
		return false;
	if (f ? !file_line(f, n, ln, sizeof(ln)) : !text_line(x->text, n, ln, sizeof(ln)))
		return false;
	/* A named setting: judge the literal after "name =" when it is found. */
	for (const char *p = ln; name && (p = strstr(p, name)); p++) {
		const char *v = p + strlen(name);

		if (p > ln && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '-'))
			continue;
		v += strspn(v, " \t");
		if (*v != '=' && *v != ':')
			continue;
		v += 1 + strspn(v + 1, " \t");
		return line_truncated_int(v, config_setting_get_int(s), true);
	}
	return line_truncated_int(ln, config_setting_get_int(s), false);
}

/* ---- typed values ---------------------------------------------------- */

enum num_kind { NUM_SECONDS, NUM_COUNT, NUM_BYTES };

static const char *
num_expected(enum num_kind k)
{
	switch (k) {
	case NUM_SECONDS: return "a positive number of seconds";
	case NUM_COUNT: return "a positive integer";
	case NUM_BYTES: return "a positive number of bytes, or a string such as \"512M\" (K, M, G, T: powers of 1024)";
	}
	return "a number";
}

/* "512M" -> 536870912.  False if malformed or out of range. */
static bool
parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0, mul = 1;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return false;
	for (; isdigit((unsigned char)*p); p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'T': mul <<= 10; /* FALLTHROUGH */
	case 'G': mul <<= 10; /* FALLTHROUGH */
	case 'M': mul <<= 10; /* FALLTHROUGH */
	case 'K': mul <<= 10; p++; break;
	case '\0': break;
	default: return false;
	}
	if (*p || (v && mul > UINT64_MAX / v))
		return false;
	*out = v * mul;
	return true;
}

/* A positive number; limits say "negative limit" so the class is plain. */
static bool
get_num(struct lctx *x, const config_setting_t *s, enum num_kind k, bool limit, uint64_t *out)
{
	long long v;
	const char *str;

	if (k == NUM_BYTES && config_setting_type(s) == CONFIG_TYPE_STRING) {
		str = config_setting_get_string(s);
		if (str[0] == '-') {
			perr(x, s, "negative %s \"%s\": %s (expected %s)", limit ? "limit" : "value",
			    key_name(s), str, num_expected(k));
			return false;
		}
		if (!parse_size(str, out)) {
			perr(x, s, "invalid value \"%s\" for \"%s\" (expected %s)", str, key_name(s),
			    num_expected(k));
			return false;
		}
		goto check;
	}
	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64) {
		wrong_type(x, s, num_expected(k));
		return false;
	}
	if (int_truncated(x, s)) {
		perr(x, s, "out of range: \"%s\" does not fit 32 bits (expected an L suffix, "
		    "e.g. 8589934592L%s)", key_name(s), k == NUM_BYTES ? ", or a string such as \"8G\"" : "");
		return false;
	}
	v = config_setting_get_int64(s);
	if (v < 0) {
		perr(x, s, "negative %s \"%s\": %lld (expected %s)", limit ? "limit" : "value",
		    key_name(s), v, num_expected(k));
		return false;
	}
	*out = (uint64_t)v;
check:
	if (*out == 0) {
		perr(x, s, "out of range: \"%s\" is 0 (expected %s)", key_name(s), num_expected(k));
		return false;
	}
	if (k == NUM_SECONDS && *out > CB_DURATION_MAX) {
		perr(x, s, "out of range: \"%s\" is %llu seconds (expected at most %u, 366 days)",
		    key_name(s), (unsigned long long)*out, CB_DURATION_MAX);
		return false;
	}
	return true;
}

static const char *
get_str(struct lctx *x, const config_setting_t *s, const char *expected)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		wrong_type(x, s, expected);
		return NULL;
	}
	return config_setting_get_string(s);
}

/* An array or list of strings; reports each bad element. */
static bool
is_strlist(struct lctx *x, const config_setting_t *s, const char *expected)
{
	bool ok = true;

	if (!config_setting_is_array(s) && !config_setting_is_list(s)) {
		wrong_type(x, s, expected);
		return false;
	}
	for (int i = 0; i < config_setting_length(s); i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);

		if (config_setting_type(e) != CONFIG_TYPE_STRING) {
			perr(x, e, "wrong type for element %d of \"%s\": %s (expected a string)", i + 1,
			    key_name(s), type_name(e));
			ok = false;
		}
	}
	return ok;
}

static bool
is_group(struct lctx *x, const config_setting_t *s, const char *expected)
{
	if (!config_setting_is_group(s)) {
		wrong_type(x, s, expected);
		return false;
	}
	return true;
}

/* An absolute, clean path without wildcards, as binds and exec need. */
static bool
path_ok(struct lctx *x, const config_setting_t *s, const char *path, const char *what)
{
	int r;

	if ((r = cap_path_check(path)) != 0) {
		perr(x, s, "invalid path \"%s\" in %s: %s (expected an absolute path without "
		    ". or .. components)", path, what, cb_strerror(r));
		return false;
	}
	if (strchr(path, '*')) {
		perr(x, s, "invalid path \"%s\" in %s: wildcard (expected a single path)", path, what);
		return false;
	}
	return true;
}

/* ---- capability specs ------------------------------------------------ */

static void
spec_error(struct lctx *x, const config_setting_t *s, const char *text, int r)
{
	if (r == CB_EINVAL)
		perr(x, s, "malformed capability \"%s\": " POL_WORKSPACE " may only open a path "
		    "resource, once (expected e.g. \"fs.read:" POL_WORKSPACE "/**\")", text);
	else
		perr(x, s, "malformed capability \"%s\": %s (expected OP:RESOURCE, OP one of fs.read, "
		    "fs.list, fs.write, fs.delete, fs.*, net.connect, proc.exec)", text, cb_strerror(r));
}

/* Parse a spec with the sample workspace into caps[4]; *n caps. */
static int
spec_sample(const char *text, struct cap **caps, size_t *n)
{
	*n = 0;
	return pol_spec_parse(text, POL_SAMPLE_WS, caps, n);
}

static void
caps_clear(struct cap **caps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cap_free(caps[i]);
}

/* Replace sv by the string list s, each element a valid spec; with add,
 * append them to sv instead (a tier's `ceiling_add`). */
static int
get_specs_to(struct lctx *x, const config_setting_t *s, struct pol_specv *sv, bool add)
{
	struct pol_specv nv = { 0, NULL };
	size_t have = add ? sv->n : 0;
	int len, r = 0;

	if (!is_strlist(x, s, "a list of capabilities, e.g. [ \"fs.read:/srv/**\" ]"))
		return 0;
	len = config_setting_length(s);
	if (!(nv.v = calloc(have + (size_t)len + 1, sizeof(*nv.v))))
		return CB_ENOMEM;
	for (size_t i = 0; i < have; i++) {
		nv.v[i].line = sv->v[i].line;
		nv.v[i].text = strdup(sv->v[i].text);
		nv.v[i].file = sv->v[i].file ? strdup(sv->v[i].file) : NULL;
		nv.n++;
		if (!nv.v[i].text || (sv->v[i].file && !nv.v[i].file)) {
			r = CB_ENOMEM;
			goto out;
		}
	}
	for (int i = 0; i < len; i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);
		const char *text = config_setting_get_string(e);
		struct pol_spec *sp = &nv.v[nv.n];
		struct cap *caps[4];
		size_t n;

		if ((r = spec_sample(text, caps, &n)) != 0) {
			caps_clear(caps, n);
			if (r == CB_ENOMEM)
				goto out;
			spec_error(x, e, text, r);
			r = 0;
			continue;
		}
		caps_clear(caps, n);
		sp->line = setting_line(x, e);
		sp->text = strdup(text);
		sp->file = strdup(src_file(x, e));
		nv.n++;
		if (!sp->text || !sp->file) {
			r = CB_ENOMEM;
			goto out;
		}
	}
	pol_specv_clear(sv);
	*sv = nv;
	nv.v = NULL;
	nv.n = 0;
out:
	pol_specv_clear(&nv);
	return r;
}

static int
get_specs(struct lctx *x, const config_setting_t *s, struct pol_specv *sv)
{
	return get_specs_to(x, s, sv, false);
}

/* ---- sections -------------------------------------------------------- */

/* defaults.pool_size: 0 (no warm pool) is a value here, unlike a limit. */
/* A small count where 0 means none (pool_size, fs_slots): 0 to max. */
static void
get_count0(struct lctx *x, const config_setting_t *s, int max, uint64_t *out)
{
	long long v;
	char want[48];

	snprintf(want, sizeof(want), "an integer from 0 to %d", max);
	if (config_setting_type(s) != CONFIG_TYPE_INT && config_setting_type(s) != CONFIG_TYPE_INT64) {
		wrong_type(x, s, want);
		return;
	}
	v = config_setting_get_int64(s);
	if (v < 0) {
		perr(x, s, "negative value \"%s\": %lld (expected %s)", key_name(s), v, want);
		return;
	}
	if (v > max) {
		perr(x, s, "out of range: \"%s\" is %lld (expected at most %d)", key_name(s), v, max);
		return;
	}
	*out = (uint64_t)v;
}

/* A slot is a tree the stub attaches (sandbox.h): the policy may not ask
 * for more than the stub takes. */
_Static_assert(POL_FS_SLOTS_MAX <= SBX_SLOTS_MAX, "fs_slots fits the stub's slots");

static int
apply_defaults(struct lctx *x, const config_setting_t *g)
{
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s), *v;

		if (strcmp(name, "tier") == 0) {
			if (!(v = get_str(x, s, "a tier name, e.g. \"low\"")))
				continue;
			free(x->p->default_tier);
			if (!(x->p->default_tier = strdup(v)))
				return CB_ENOMEM;
			x->deftier = s;
		} else if (strcmp(name, "ttl") == 0) {
			get_num(x, s, NUM_SECONDS, false, &x->p->default_ttl);
		} else if (strcmp(name, "request_expiry") == 0) {
			get_num(x, s, NUM_SECONDS, false, &x->p->request_expiry);
		} else if (strcmp(name, "audit_fsync") == 0) {
			if (!(v = get_str(x, s, "\"always\", \"batch\" or \"never\"")))
				continue;
			if (strcmp(v, "always") == 0)
				x->p->fsync = POL_FSYNC_ALWAYS;
			else if (strcmp(v, "batch") == 0)
				x->p->fsync = POL_FSYNC_BATCH;
			else if (strcmp(v, "never") == 0)
				x->p->fsync = POL_FSYNC_NEVER;
			else
				perr(x, s, "invalid value \"%s\" for \"audit_fsync\" (expected one of: "
				    "always, batch, never)", v);
		} else if (strcmp(name, "audit_budget") == 0) {
			get_num(x, s, NUM_COUNT, false, &x->p->budget.rate);
		} else if (strcmp(name, "audit_burst") == 0) {
			get_num(x, s, NUM_COUNT, false, &x->p->budget.burst);
		} else if (strcmp(name, "audit_bytes") == 0) {
			get_num(x, s, NUM_BYTES, false, &x->p->budget.bytes);
		} else if (strcmp(name, "audit_bytes_burst") == 0) {
			get_num(x, s, NUM_BYTES, false, &x->p->budget.bytes_burst);
		} else if (strcmp(name, "audit_throttle_max") == 0) {
			get_num(x, s, NUM_SECONDS, false, &x->p->budget.throttle_max);
		} else if (strcmp(name, "pool_size") == 0) {
			get_count0(x, s, POL_POOL_MAX, &x->p->pool_size);
		} else if (strcmp(name, "cluster") == 0) {
			if (!(v = get_str(x, s, "a PostgreSQL connection string, e.g. \"host=db dbname=capbroker\"")))
				continue;
			free(x->p->cluster);
			x->p->cluster = NULL;
			if (v[0] && !(x->p->cluster = strdup(v)))
				return CB_ENOMEM;
		} else if (strcmp(name, "cluster_stale") == 0) {
			get_num(x, s, NUM_SECONDS, false, &x->p->cluster_stale);
		} else if (strcmp(name, "served_names") == 0) {
			uint64_t n;

			if (!get_num(x, s, NUM_COUNT, false, &n))
				continue;
			if (n > POL_SERVED_NAMES_MAX)
				perr(x, s, "out of range: \"served_names\" is %llu (expected at most %u)",
				    (unsigned long long)n, POL_SERVED_NAMES_MAX);
			else
				x->p->served_names = n;
		} else if (strcmp(name, "fs_slots") == 0) {
			get_count0(x, s, POL_FS_SLOTS_MAX, &x->p->fs_slots);
		} else {
			unknown_key(x, s, "defaults", "tier, ttl, request_expiry, audit_fsync, audit_budget, "
			    "audit_burst, audit_bytes, audit_bytes_burst, audit_throttle_max, pool_size, "
			    "cluster, cluster_stale, served_names, fs_slots");
		}
	}
	return 0;
}

static int
get_ids(struct lctx *x, const config_setting_t *s, uint32_t **ids, size_t *nids)
{
	uint32_t *v;
	size_t n = 0;

	if (!config_setting_is_array(s) && !config_setting_is_list(s)) {
		wrong_type(x, s, "an array of numeric ids, e.g. [ 1000, 1001 ]");
		return 0;
	}
	if (!(v = calloc((size_t)config_setting_length(s) + 1, sizeof(*v))))
		return CB_ENOMEM;
	for (int i = 0; i < config_setting_length(s); i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);
		long long id;

		if (config_setting_type(e) != CONFIG_TYPE_INT && config_setting_type(e) != CONFIG_TYPE_INT64) {
			perr(x, e, "wrong type for element %d of \"%s\": %s (expected a numeric id)",
			    i + 1, key_name(s), type_name(e));
			continue;
		}
		if (int_truncated(x, e)) {
			perr(x, e, "out of range: element %d of \"%s\" does not fit 32 bits "
			    "(expected an L suffix, e.g. 4294967294L)", i + 1, key_name(s));
			continue;
		}
		id = config_setting_get_int64(e);
		if (id < 0 || id >= UINT32_MAX) {
			perr(x, e, "out of range: id %lld in \"%s\" (expected 0 to 4294967294)", id, key_name(s));
			continue;
		}
		v[n++] = (uint32_t)id;
	}
	free(*ids);
	*ids = v;
	*nids = n;
	return 0;
}

static int
apply_admins(struct lctx *x, const config_setting_t *g)
{
	int r;

	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s);

		if (strcmp(name, "uids") == 0)
			r = get_ids(x, s, &x->p->uids, &x->p->nuids);
		else if (strcmp(name, "gids") == 0)
			r = get_ids(x, s, &x->p->gids, &x->p->ngids);
		else {
			unknown_key(x, s, "admins", "uids, gids");
			r = 0;
		}
		if (r)
			return r;
	}
	return 0;
}

/* Replace the domain allow list by s.  Each entry is kept as the
 * capability net.connect:ENTRY:* so that caps.h does all the matching. */
static int
get_domains(struct lctx *x, const config_setting_t *s)
{
	struct pol *p = x->p;
	struct cap *c = NULL;
	char *t = NULL;
	int r = 0;

	if (!is_strlist(x, s, "a list of domains, e.g. [ \"pypi.org\", \"*.python.org\" ]"))
		return 0;
	for (size_t i = 0; i < p->nallow; i++) {
		free(p->allow[i].text);
		cap_free(p->allow[i].cap);
	}
	free(p->allow);
	p->nallow = 0;
	p->has_allow = true;
	if (!(p->allow = calloc((size_t)config_setting_length(s) + 1, sizeof(*p->allow))))
		return CB_ENOMEM;
	for (int i = 0; i < config_setting_length(s); i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);
		const char *d = config_setting_get_string(e);

		if (asprintf(&t, "net.connect:%s:*", d) < 0) {
			t = NULL;
			r = CB_ENOMEM;
			goto out;
		}
		if ((r = cap_parse(t, &c)) == CB_ENOMEM)
			goto out;
		free(t);
		t = NULL;
		if (r || (c->net.kind != CAP_HOST_NAME && c->net.kind != CAP_HOST_WILDCARD) ||
		    strchr(d, ':')) {
			perr(x, e, "invalid value \"%s\" in \"allow_domains\" (expected a domain name "
			    "or *.domain, without port)", d);
			cap_free(c);
			c = NULL;
			r = 0;
			continue;
		}
		if (!(p->allow[p->nallow].text = strdup(d))) {
			r = CB_ENOMEM;
			goto out;
		}
		p->allow[p->nallow++].cap = c;
		c = NULL;
	}
out:
	cap_free(c);
	free(t);
	return r;
}

static int
apply_network(struct lctx *x, const config_setting_t *g)
{
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		int r;

		if (strcmp(config_setting_name(s), "allow_domains") == 0) {
			if ((r = get_domains(x, s)) != 0)
				return r;
		} else {
			unknown_key(x, s, "network", "allow_domains");
		}
	}
	return 0;
}

static void
apply_limits(struct lctx *x, const config_setting_t *g, struct pol_limits *l)
{
	/* The sandbox's own ranges (sandbox.h), not a copy of them: a limit
	 * the stub would refuse fails every sandbox of the tier, so it is
	 * refused here, where check-policy sees it. */
	static const struct {
		const char *name;
		enum num_kind kind;
		size_t off;
		uint64_t min, max;
	} keys[] = {
		{ "memory", NUM_BYTES, offsetof(struct pol_limits, memory), SBX_MEM_MIN, SBX_MEM_MAX },
		{ "processes", NUM_COUNT, offsetof(struct pol_limits, processes), SBX_NPROC_MIN,
		  SBX_NPROC_MAX },
		{ "open_files", NUM_COUNT, offsetof(struct pol_limits, open_files), SBX_NOFILE_MIN,
		  UINT64_MAX },
		{ "file_size", NUM_BYTES, offsetof(struct pol_limits, file_size), SBX_FSIZE_MIN,
		  SBX_FSIZE_MAX },
		{ "cpu", NUM_SECONDS, offsetof(struct pol_limits, cpu), 1, SBX_SECS_MAX },
		{ "wall", NUM_SECONDS, offsetof(struct pol_limits, wall), 1, SBX_SECS_MAX },
		{ "tmp_size", NUM_BYTES, offsetof(struct pol_limits, tmp_size), SBX_TMP_MIN,
		  SBX_TMP_MAX },
	};

	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		uint64_t *v;
		size_t k;

		for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (strcmp(config_setting_name(s), keys[k].name) == 0)
				break;
		if (k == sizeof(keys) / sizeof(keys[0])) {
			unknown_key(x, s, "limits", "memory, processes, open_files, file_size, cpu, "
			    "wall, tmp_size");
			continue;
		}
		v = (uint64_t *)((char *)l + keys[k].off);
		if (!get_num(x, s, keys[k].kind, true, v))
			continue;
		if (*v < keys[k].min)
			perr(x, s, "out of range for a sandbox: \"%s\" is %" PRIu64 " (expected at least %"
			    PRIu64 ")", keys[k].name, *v, keys[k].min);
		else if (*v > keys[k].max)
			perr(x, s, "out of range for a sandbox: \"%s\" is %" PRIu64 " (expected at most %"
			    PRIu64 ")", keys[k].name, *v, keys[k].max);
	}
}

/* One "SRC" or "SRC:DST" element into *b (b->src NULL if it is invalid,
 * which has been reported). */
static int
get_bind(struct lctx *x, const config_setting_t *list, const config_setting_t *e, bool rw,
    struct pol_bind *b)
{
	const char *v = config_setting_get_string(e), *colon = strchr(v, ':');
	char *src = colon ? strndup(v, (size_t)(colon - v)) : strdup(v);
	char *dst = strdup(colon ? colon + 1 : v);
	const char *why;
	int r = 0;

	*b = (struct pol_bind){ .rw = rw };
	if (!src || !dst) {
		r = CB_ENOMEM;
		goto out;
	}
	if (!path_ok(x, e, src, key_name(list)) || !path_ok(x, e, dst, key_name(list)))
		goto out;
	/* The sandbox's own rule, not a copy of it: what it would refuse at
	 * start-up is refused here, so check-policy catches it. */
	if ((why = sbx_bind_dst_refusal(dst)) != NULL) {
		perr(x, e, "bind destination \"%s\" in %s refused: %s", dst, key_name(list), why);
		goto out;
	}
	b->src = src;
	b->dst = dst;
	src = dst = NULL;
out:
	free(src);
	free(dst);
	return r;
}

/* Replace the read-only or the writable binds of t by the list s; the
 * others stay.  Read-only ones come first, as pol_tier_binds promises. */
static int
get_binds(struct lctx *x, struct pol_tier *t, const config_setting_t *s, bool rw)
{
	struct pol_tier nt = { .nbinds = 0 };
	size_t len;
	int r = 0;

	if (!is_strlist(x, s, "a list of \"SRC\" or \"SRC:DST\" absolute paths"))
		return 0;
	len = (size_t)config_setting_length(s);
	if (!(nt.binds = calloc(t->nbinds + len + 1, sizeof(*nt.binds))))
		return CB_ENOMEM;
	for (int pass = 0; pass < 2; pass++) {
		bool prw = pass == 1;

		for (size_t i = 0; prw != rw && i < t->nbinds; i++) {
			if (t->binds[i].rw != prw)
				continue;
			nt.binds[nt.nbinds++] = t->binds[i];
			t->binds[i].src = t->binds[i].dst = NULL;	/* moved */
		}
		for (size_t i = 0; prw == rw && i < len; i++) {
			if ((r = get_bind(x, s, config_setting_get_elem(s, (unsigned)i), rw,
			    &nt.binds[nt.nbinds])) != 0)
				goto out;
			if (nt.binds[nt.nbinds].src)
				nt.nbinds++;
		}
	}
	pol_binds_clear(t);
	t->binds = nt.binds;
	t->nbinds = nt.nbinds;
	nt.binds = NULL;
	nt.nbinds = 0;
out:
	pol_binds_clear(&nt);
	return r;
}

static bool
strv_has(const struct pol_strv *v, const char *s)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->v[i], s) == 0)
			return true;
	return false;
}

/* `exec` replaces the tier's list; `exec_add` (add) appends to it, so a
 * policy that wants one program more (curl, say) keeps the built-in
 * medium list instead of copying it: an `exec` naming only curl left a
 * sandbox whose shell could not run `cat`. */
static int
get_exec(struct lctx *x, struct pol_tier *t, const config_setting_t *s, bool add)
{
	struct pol_strv nv = { 0, NULL };
	size_t have = add ? t->exec.n : 0;
	int r = 0;

	if (!is_strlist(x, s, "a list of absolute program paths"))
		return 0;
	if (!(nv.v = calloc(have + (size_t)config_setting_length(s) + 1, sizeof(char *))))
		return CB_ENOMEM;
	for (size_t i = 0; i < have; i++)
		if (!(nv.v[nv.n++] = strdup(t->exec.v[i]))) {
			r = CB_ENOMEM;
			goto out;
		}
	for (int i = 0; i < config_setting_length(s); i++) {
		const config_setting_t *e = config_setting_get_elem(s, i);
		const char *v = config_setting_get_string(e);

		if (!path_ok(x, e, v, add ? "exec_add" : "exec") || strv_has(&nv, v))
			continue;
		if (!(nv.v[nv.n++] = strdup(v))) {
			r = CB_ENOMEM;
			goto out;
		}
	}
	pol_strv_clear(&t->exec);
	t->exec = nv;
	nv.v = NULL;
	nv.n = 0;
out:
	pol_strv_clear(&nv);
	return r;
}

static int
get_rule(struct lctx *x, const config_setting_t *g, struct pol_rule *rule)
{
	const config_setting_t *caps = NULL;
	const char *v;
	int r;

	rule->mode = POL_APPROVE_HUMAN;
	rule->max_ttl = POL_RULE_TTL;
	if (!is_group(x, g, "a group { caps = [ ... ]; approval = \"human\"; max_ttl = 3600; }"))
		return 0;
	for (int i = 0; i < config_setting_length(g); i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s);

		if (strcmp(name, "caps") == 0) {
			caps = s;
			if ((r = get_specs(x, s, &rule->caps)) != 0)
				return r;
		} else if (strcmp(name, "approval") == 0) {
			if (!(v = get_str(x, s, "\"human\", \"auto\" or \"never\"")))
				continue;
			if (strcmp(v, "human") == 0)
				rule->mode = POL_APPROVE_HUMAN;
			else if (strcmp(v, "auto") == 0)
				rule->mode = POL_APPROVE_AUTO;
			else if (strcmp(v, "never") == 0)
				rule->mode = POL_APPROVE_NEVER;
			else
				perr(x, s, "invalid value \"%s\" for \"approval\" (expected one of: "
				    "human, auto, never)", v);
		} else if (strcmp(name, "max_ttl") == 0) {
			get_num(x, s, NUM_SECONDS, false, &rule->max_ttl);
		} else {
			unknown_key(x, s, "a requestable rule", "caps, approval, max_ttl");
		}
	}
	if (!caps)
		perr(x, g, "missing key \"caps\" in a requestable rule (expected caps = "
		    "[ \"OP:RESOURCE\", ... ])");
	return 0;
}

static int
get_rules(struct lctx *x, struct pol_tier *t, const config_setting_t *s)
{
	struct pol_tier tmp;
	int r = 0;

	if (!config_setting_is_list(s)) {
		wrong_type(x, s, "a list of rules ( { caps = [ ... ]; approval = \"human\"; "
		    "max_ttl = 3600; }, ... )");
		return 0;
	}
	memset(&tmp, 0, sizeof(tmp));
	if (!(tmp.rules = calloc((size_t)config_setting_length(s) + 1, sizeof(*tmp.rules))))
		return CB_ENOMEM;
	for (int i = 0; i < config_setting_length(s); i++) {
		r = get_rule(x, config_setting_get_elem(s, i), &tmp.rules[tmp.nrules++]);
		if (r)
			goto out;
	}
	pol_rules_clear(t);
	t->rules = tmp.rules;
	t->nrules = tmp.nrules;
	tmp.rules = NULL;
	tmp.nrules = 0;
out:
	pol_rules_clear(&tmp);
	return r;
}

static bool
is_builtin_tier(const char *name)
{
	return strcmp(name, POL_TIER_LOW) == 0 || strcmp(name, POL_TIER_MEDIUM) == 0 ||
	    strcmp(name, POL_TIER_HIGH) == 0;
}

/* The rules a built-in tier's directly seen files obey (the contract's
 * table): low sees no host files and execs nothing; medium may have
 * read-only binds and an exec list; high anything. */
static void
check_tier_direct(struct lctx *x, const struct pol_tier *t, const config_setting_t *s,
    const char *key)
{
	bool low = strcmp(t->name, POL_TIER_LOW) == 0, med = strcmp(t->name, POL_TIER_MEDIUM) == 0;

	if (config_setting_length(s) == 0)
		return;
	if (low && (strcmp(key, "ro_binds") == 0 || strcmp(key, "rw_binds") == 0 ||
	    strncmp(key, "exec", 4) == 0))
		perr(x, s, "wider than tier \"low\" allows: %s (expected none: the low tier sees no "
		    "host files and cannot exec)", key);
	else if (med && strcmp(key, "rw_binds") == 0)
		perr(x, s, "wider than tier \"medium\" allows: rw_binds (expected none: only the "
		    "high tier has writable binds; medium writes its workspace through the broker)");
}

static int
apply_tier_keys(struct lctx *x, struct pol_tier *t, const config_setting_t *g)
{
	const config_setting_t *s_add;
	int r = 0;

	for (int i = 0; i < config_setting_length(g) && r == 0; i++) {
		const config_setting_t *s = config_setting_get_elem(g, i);
		const char *name = config_setting_name(s), *v;

		if (strcmp(name, "extends") == 0) {
			continue;	/* apply_tier */
		} else if (strcmp(name, "workspace") == 0) {
			if (!(v = get_str(x, s, "an absolute directory path")))
				continue;
			if (!pol_workspace_ok(v)) {
				perr(x, s, "invalid path \"%s\" in workspace (expected an absolute, clean "
				    "path other than / without *)", v);
				continue;
			}
			free(t->workspace);
			if (!(t->workspace = strdup(v)))
				r = CB_ENOMEM;
		} else if (strcmp(name, "ceiling") == 0) {
			r = get_specs(x, s, &t->ceiling);
		} else if (strcmp(name, "exec") == 0) {
			r = get_exec(x, t, s, false);
			check_tier_direct(x, t, s, name);
		} else if (strcmp(name, "exec_add") == 0 || strcmp(name, "ceiling_add") == 0) {
			continue;	/* after exec and ceiling, wherever written: below */
		} else if (strcmp(name, "ro_binds") == 0 || strcmp(name, "rw_binds") == 0) {
			r = get_binds(x, t, s, name[1] == 'w');
			check_tier_direct(x, t, s, name);
		} else if (strcmp(name, "limits") == 0) {
			if (is_group(x, s, "a group { memory = \"512M\"; ... }"))
				apply_limits(x, s, &t->limits);
		} else if (strcmp(name, "requestable") == 0) {
			r = get_rules(x, t, s);
		} else if (strcmp(name, "fs_cache_data") == 0 || strcmp(name, "fs_passthrough") == 0) {
			if (config_setting_type(s) != CONFIG_TYPE_BOOL)
				wrong_type(x, s, "a boolean (true or false)");
			else if (name[3] == 'c')
				t->fs_cache_data = config_setting_get_bool(s) != 0;
			else
				t->fs_passthrough = config_setting_get_bool(s) != 0;
		} else {
			char where[128];

			snprintf(where, sizeof(where), "tier \"%s\"", t->name);
			unknown_key(x, s, where, "extends, workspace, ceiling, ceiling_add, exec, exec_add, "
			    "ro_binds, rw_binds, limits, requestable, fs_cache_data, fs_passthrough");
		}
	}
	if (r == 0 && (s_add = config_setting_get_member(g, "exec_add"))) {
		r = get_exec(x, t, s_add, true);
		check_tier_direct(x, t, s_add, "exec_add");
	}
	/* As exec_add: network access for the medium tier without restating
	 * its workspace capabilities, whose loss (a ceiling naming only a host)
	 * silently narrowed the workspace's own tokens to nothing. */
	if (r == 0 && (s_add = config_setting_get_member(g, "ceiling_add")))
		r = get_specs_to(x, s_add, &t->ceiling, true);
	return r;
}

static void
unknown_tier(struct lctx *x, const config_setting_t *s, const char *name)
{
	char list[1024] = "";
	size_t len = 0;

	for (size_t i = 0; i < x->p->ntiers && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "",
		    x->p->tiers[i]->name);
	perr(x, s, "unknown tier \"%s\" (expected one of: %s)", name, list);
}

static int
apply_tier(struct lctx *x, const config_setting_t *g)
{
	const char *name = config_setting_name(g), *ext = NULL;
	const config_setting_t *es = config_setting_get_member(g, "extends");
	struct pol_tier *t, *base, **nt;
	int r;

	if (!is_group(x, g, "a group: the tier's settings"))
		return 0;
	if (es && !(ext = get_str(x, es, "the name of a tier defined before this one")))
		return 0;
	if ((t = pol_tier_find(x->p, name))) {
		if (ext)
			perr(x, es, "invalid value: tier \"%s\" is built in and extends nothing "
			    "(expected no \"extends\")", name);
		return apply_tier_keys(x, t, g);
	}
	/* A new tier starts as a copy of the one it extends (low, the safest,
	 * by default), so that a key it leaves out is never left empty. */
	base = pol_tier_find(x->p, ext ? ext : POL_TIER_LOW);
	if (ext && !base) {
		unknown_tier(x, es, ext);
		return 0;
	}
	if (!(t = pol_tier_new(name)))
		return CB_ENOMEM;
	t->base = strcmp(name, POL_TIER_MEDIUM) == 0 ? POL_TIER_MEDIUM :
	    strcmp(name, POL_TIER_HIGH) == 0 ? POL_TIER_HIGH :
	    strcmp(name, POL_TIER_LOW) == 0 || !base ? POL_TIER_LOW : base->base;
	if ((ext && !(t->extends = strdup(ext))) || (base && (r = pol_tier_copy(t, base)) != 0)) {
		pol_tier_free(t);
		return CB_ENOMEM;
	}
	if (!(nt = realloc(x->p->tiers, (x->p->ntiers + 1) * sizeof(*nt)))) {
		pol_tier_free(t);
		return CB_ENOMEM;
	}
	x->p->tiers = nt;
	nt[x->p->ntiers++] = t;
	return apply_tier_keys(x, t, g);
}

static int
apply_root(struct lctx *x, const config_setting_t *root)
{
	int r = 0;

	for (int i = 0; i < config_setting_length(root) && r == 0; i++) {
		const config_setting_t *s = config_setting_get_elem(root, i);
		const char *name = config_setting_name(s);

		if (strcmp(name, "version") == 0) {
			if (config_setting_type(s) != CONFIG_TYPE_INT)
				wrong_type(x, s, "the integer 1");
			else if (config_setting_get_int(s) != 1)
				perr(x, s, "invalid value %d for \"version\" (expected 1)",
				    config_setting_get_int(s));
		} else if (strcmp(name, "defaults") == 0) {
			if (is_group(x, s, "a group { tier = ...; ttl = ...; }"))
				r = apply_defaults(x, s);
		} else if (strcmp(name, "admins") == 0) {
			if (is_group(x, s, "a group { uids = [ ... ]; gids = [ ... ]; }"))
				r = apply_admins(x, s);
		} else if (strcmp(name, "network") == 0) {
			if (is_group(x, s, "a group { allow_domains = [ ... ]; }"))
				r = apply_network(x, s);
		} else if (strcmp(name, "tiers") == 0) {
			if (!is_group(x, s, "a group of tiers { low = { ... }; ... }"))
				continue;
			for (int j = 0; j < config_setting_length(s) && r == 0; j++)
				r = apply_tier(x, config_setting_get_elem(s, j));
		} else {
			unknown_key(x, s, "the policy", "version, defaults, admins, network, tiers");
		}
	}
	return r;
}

/* ---- tier rules on ceilings ------------------------------------------ */

/* Why cap c may not be in the ceiling of built-in tier t, or NULL. */
static const char *
ceiling_violation(const struct pol *p, const struct pol_tier *t, const struct pol_spec *sp,
    const struct cap *c)
{
	if (strcmp(t->name, POL_TIER_LOW) == 0) {
		if (c->op != CAP_PROC_EXEC)
			return "only proc.exec of listed tools: the low tier gets no host files and no network";
		if (strchr(c->res, '*'))
			return "a single program path, no wildcard";
		return NULL;
	}
	if (strcmp(t->name, POL_TIER_MEDIUM) != 0)
		return NULL;
	if (cap_op_is_fs(c->op)) {
		char *ws = NULL;
		struct cap *wc = NULL;
		bool in;

		if (!pol_spec_has_ws(sp->text))
			return "files beneath " POL_WORKSPACE " only";
		if (asprintf(&ws, "%s:" POL_SAMPLE_WS "/**", cap_op_name(c->op)) < 0)
			return "files beneath " POL_WORKSPACE " only";
		in = cap_parse(ws, &wc) == 0 && cap_contains(wc, c);
		cap_free(wc);
		free(ws);
		return in ? NULL : "files beneath " POL_WORKSPACE " only";
	}
	if (c->op == CAP_PROC_EXEC)
		return strchr(c->res, '*') ? "a single program path, no wildcard" : NULL;
	/* net.connect: named hosts (inside the allow list, if any) or single addresses */
	if (c->net.kind == CAP_HOST_IP)
		return c->net.prefix == (c->net.addr.family == AF_INET ? 32u : 128u) ? NULL :
		    "named hosts or single addresses, not address ranges";
	if (c->net.kind == CAP_HOST_ANY)
		return "named hosts (network.allow_domains), not \"*\"";
	if (!p->has_allow)
		return NULL;
	for (size_t i = 0; i < p->nallow; i++)
		if (cap_contains(p->allow[i].cap, c))
			return NULL;
	return "hosts inside network.allow_domains";
}

static void
print_at(struct lctx *x, const struct pol_spec *sp, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
print_at(struct lctx *x, const struct pol_spec *sp, const char *fmt, ...)
{
	va_list ap;

	x->nerr++;
	va_start(ap, fmt);
	pol_vmsg(x->errs, sp->file, sp->line, fmt, ap);
	va_end(ap);
}

static int
validate(struct lctx *x)
{
	struct pol *p = x->p;

	if (!pol_tier_find(p, p->default_tier)) {
		if (x->deftier)
			unknown_tier(x, x->deftier, p->default_tier);
		else
			perr(x, NULL, "unknown default tier \"%s\"", p->default_tier);
	}
	for (size_t i = 0; i < p->ntiers; i++) {
		const struct pol_tier *t = p->tiers[i];

		if (!is_builtin_tier(t->name))
			continue;
		for (size_t j = 0; j < t->ceiling.n; j++) {
			const struct pol_spec *sp = &t->ceiling.v[j];
			struct cap *caps[4];
			size_t n;
			const char *why = NULL;
			int r;

			if ((r = spec_sample(sp->text, caps, &n)) != 0) {
				caps_clear(caps, n);
				if (r == CB_ENOMEM)
					return r;
				continue;	/* reported when read */
			}
			for (size_t k = 0; k < n && !why; k++)
				why = ceiling_violation(p, t, sp, caps[k]);
			caps_clear(caps, n);
			if (why)
				print_at(x, sp, "ceiling wider than tier \"%s\" allows: \"%s\" (expected %s)",
				    t->name, sp->text, why);
		}
	}
	return 0;
}

/* ---- entry points ---------------------------------------------------- */

/* Apply the libconfig text onto p; errors counted in x. */
static int
apply_text(struct lctx *x, const char *text, const char *incdir)
{
	config_t cf;
	int r = 0;

	config_init(&cf);
	if (incdir)
		config_set_include_dir(&cf, incdir);
	x->text = text;
	if (!config_read_string(&cf, text)) {
		pol_msg(x->errs, config_error_file(&cf) ? config_error_file(&cf) : x->file,
		    (unsigned)config_error_line(&cf), "syntax error: %s (expected libconfig syntax: "
		    "name = value; see docs/policy.md)", config_error_text(&cf));
		x->nerr++;
		goto out;
	}
	if ((r = apply_root(x, config_root_setting(&cf))) != 0)
		goto out;
	r = validate(x);
out:
	config_destroy(&cf);
	x->text = NULL;
	return r;
}

int
pol_default_parse(struct pol **out)
{
	struct lctx x = { .errs = stderr, .file = POL_BUILTIN };
	int r;

	*out = NULL;
	if (!(x.p = pol_new()))
		return CB_ENOMEM;
	if ((r = apply_text(&x, pol_default_text, NULL)) == 0 && x.nerr)
		r = CB_EINTERNAL;	/* the built-in text is wrong: a bug */
	if (r == 0) {
		*out = x.p;
		x.p = NULL;
	}
	pol_free(x.p);
	return r;
}

#if __has_include("pol_default_image.h") && !defined(POL_NO_IMAGE)
#include "pol_default_image.h"

/* The built-in policy from the image pol-mkdefault made of its text at
 * build time (policy/mkdefault.c): the same struct the parse gives, copied
 * (a policy file is applied over it, and pol_free frees it), in ≈20 us
 * rather than the ≈300 us of libconfig's lexer and the checks, on the path
 * of every start (docs/performance.md). */
static int
pol_default_copy(struct pol **out)
{
	const struct pol *im = &pdi_pol;
	struct pol *p;
	int r = CB_ENOMEM;

	*out = NULL;
	if (!(p = pol_new()))
		return CB_ENOMEM;
	*p = *im;
	p->default_tier = NULL;
	p->uids = p->gids = NULL;
	p->nuids = p->ngids = 0;
	p->ntiers = 0;
	p->tiers = NULL;
	if (!(p->default_tier = strdup(im->default_tier)) ||
	    (im->nuids && !(p->uids = malloc(im->nuids * sizeof(*p->uids)))) ||
	    (im->ngids && !(p->gids = malloc(im->ngids * sizeof(*p->gids)))) ||
	    !(p->tiers = calloc(im->ntiers, sizeof(*p->tiers))))
		goto out;
	if (im->nuids)
		memcpy(p->uids, im->uids, im->nuids * sizeof(*p->uids));
	if (im->ngids)
		memcpy(p->gids, im->gids, im->ngids * sizeof(*p->gids));
	p->nuids = im->nuids;
	p->ngids = im->ngids;
	for (; p->ntiers < im->ntiers; p->ntiers++) {
		const struct pol_tier *it = &pdi_tiers[p->ntiers];
		struct pol_tier *t;

		if (!(t = pol_tier_new(it->name)))
			goto out;
		p->tiers[p->ntiers] = t;
		/* as apply_tier: the static name of the built-in tier it is */
		t->base = strcmp(it->name, POL_TIER_MEDIUM) == 0 ? POL_TIER_MEDIUM :
		    strcmp(it->name, POL_TIER_HIGH) == 0 ? POL_TIER_HIGH : POL_TIER_LOW;
		if ((it->extends && !(t->extends = strdup(it->extends))) ||
		    pol_tier_copy(t, it) != 0) {
			p->ntiers++;	/* freed with p */
			goto out;
		}
	}
	*out = p;
	p = NULL;
	r = 0;
out:
	pol_free(p);
	return r;
}

int
pol_default(struct pol **out)
{
	return pol_default_copy(out);
}
#else
int
pol_default(struct pol **out)
{
	return pol_default_parse(out);
}
#endif

/*
 * Who may write the policy decides what every sandbox may do, so a policy
 * file is held to the rule key files are: it must belong to root or to the
 * user the broker runs as, and not be writable by group or others.  The
 * same holds for every directory above its real path (a writable directory
 * lets its writers rename another file into its place), except that a
 * directory with the sticky bit (/tmp) protects files it does not own the
 * way a private one does.  The file is judged by the fd it is read from
 * (fstat), the directories by the path; the real path must still name that
 * same file, so a swap between the two is refused too.
 */
static bool
pol_owner_ok(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* May only root or we change what dir holds?  (Sticky: others may add
 * names but not replace ours.) */
static bool
pol_dir_ok(const struct stat *st)
{
	return pol_owner_ok(st->st_uid) && (!(st->st_mode & 022) || (st->st_mode & S_ISVTX));
}

/*
 * Walk path as the kernel resolves it, following each symlink by hand:
 * every directory crossed must be one only root or we may change, and
 * every symlink met must belong to root or us.  realpath() tells where the
 * links lead today, not who could re-point them before the next start or
 * reload: a root-owned policy reached through a symlink that nobody owns,
 * or that sits in a directory nobody may write, is refused.
 */
#define POL_LINK_HOPS 40	/* the kernel's MAXSYMLINKS */
static int
pol_links_safe(const char *path, FILE *errs)
{
	char done[PATH_MAX] = "", todo[PATH_MAX], next[PATH_MAX], target[PATH_MAX];
	unsigned hops = 0;
	struct stat st;
	int n;

	if (path[0] == '/')
		n = snprintf(todo, sizeof(todo), "%s", path);
	else if (getcwd(next, sizeof(next)))
		n = snprintf(todo, sizeof(todo), "%s/%s", next, path);
	else
		n = -1;
	if (n < 0 || (size_t)n >= sizeof(todo))
		goto toolong;
	for (;;) {
		char *p = todo, *comp;
		size_t len;
		ssize_t tl;

		while (*p == '/')
			p++;
		if (!*p)
			return 0;
		comp = p;
		len = strcspn(comp, "/");
		p = comp + len;
		if (len == 1 && comp[0] == '.') {
			memmove(todo, p, strlen(p) + 1);
			continue;
		}
		if (len == 2 && comp[0] == '.' && comp[1] == '.') {
			char *sl = strrchr(done, '/');

			if (sl)
				*sl = '\0';
			memmove(todo, p, strlen(p) + 1);
			continue;
		}
		/* The directory that holds the next name. */
		if (stat(done[0] ? done : "/", &st) != 0) {
			pol_msg(errs, path, 0, "cannot check directory %s: %s", done[0] ? done : "/",
			    strerror(errno));
			return CB_EIO;
		}
		if (!pol_dir_ok(&st)) {
			pol_msg(errs, path, 0, "directory %s on the way to it is owned by uid %u with mode "
			    "%04o (expected owned by root or uid %u and not writable by group or "
			    "others, or sticky)", done[0] ? done : "/", (unsigned)st.st_uid,
			    (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
			return CB_EPERM;
		}
		n = snprintf(next, sizeof(next), "%s/%.*s", done, (int)len, comp);
		if (n < 0 || (size_t)n >= sizeof(next))
			goto toolong;
		if (lstat(next, &st) != 0) {
			pol_msg(errs, path, 0, "cannot check %s: %s", next, strerror(errno));
			return CB_EIO;
		}
		if (!S_ISLNK(st.st_mode)) {
			memcpy(done, next, (size_t)n + 1);
			memmove(todo, p, strlen(p) + 1);
			continue;
		}
		if (!pol_owner_ok(st.st_uid)) {
			pol_msg(errs, path, 0, "symlink %s on the way to it is owned by uid %u (expected "
			    "root or uid %u: its owner could point it elsewhere)", next,
			    (unsigned)st.st_uid, (unsigned)geteuid());
			return CB_EPERM;
		}
		if (++hops > POL_LINK_HOPS) {
			pol_msg(errs, path, 0, "too many symlinks on the way to it");
			return CB_EPERM;
		}
		if ((tl = readlink(next, target, sizeof(target) - 1)) < 0) {
			pol_msg(errs, path, 0, "cannot read symlink %s: %s", next, strerror(errno));
			return CB_EIO;
		}
		target[tl] = '\0';
		n = snprintf(next, sizeof(next), "%s%s", target, p);
		if (n < 0 || (size_t)n >= sizeof(next))
			goto toolong;
		memcpy(todo, next, (size_t)n + 1);
		if (target[0] == '/')
			done[0] = '\0';
	}
toolong:
	pol_msg(errs, path, 0, "path too long to check");
	return CB_EPERM;
}

/* Every directory and symlink on the way may only be changed by root or
 * us (pol_links_safe, which covers every ancestor of the real path too),
 * and the real path still names the file that was read (fst). */
static int
pol_dirs_safe(const char *path, const struct stat *fst, FILE *errs)
{
	char *real = NULL;
	struct stat st;
	int r = 0;

	if ((r = pol_links_safe(path, errs)) != 0)
		return r;
	if (!(real = realpath(path, NULL))) {
		pol_msg(errs, path, 0, "cannot resolve: %s", strerror(errno));
		return CB_EIO;
	}
	if (stat(real, &st) != 0 || st.st_dev != fst->st_dev || st.st_ino != fst->st_ino) {
		pol_msg(errs, path, 0, "changed while it was read (refused)");
		r = CB_EPERM;
	}
	free(real);
	return r;
}

/* Read a whole small file that only root or we can write; CB_ENOENT /
 * CB_EIO / CB_ETOOBIG / CB_EINVAL (NUL) / CB_EPERM (who may write it). */
static int
read_text(const char *path, char **out, FILE *errs)
{
	FILE *f = NULL;
	char *buf = NULL;
	struct stat st;
	size_t n;
	int fd, r = 0;

	*out = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0) {
		r = errno == ENOENT ? CB_ENOENT : CB_EIO;
		pol_msg(errs, path, 0, "cannot open: %s", strerror(errno));
		return r;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		pol_msg(errs, path, 0, "not a regular file (expected a policy file)");
		close(fd);
		return CB_EINVAL;
	}
	if (!pol_owner_ok(st.st_uid) || (st.st_mode & 022)) {
		pol_msg(errs, path, 0, "owned by uid %u with mode %04o: anyone who can write it could "
		    "rewrite ceilings and administrators (expected owned by root or uid %u and not "
		    "writable by group or others: chmod go-w)", (unsigned)st.st_uid,
		    (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
		close(fd);
		return CB_EPERM;
	}
	if ((r = pol_dirs_safe(path, &st, errs)) != 0) {
		close(fd);
		return r;
	}
	if (!(f = fdopen(fd, "r"))) {
		close(fd);
		return CB_ENOMEM;
	}
	if (!(buf = malloc(POL_FILE_MAX + 1))) {
		r = CB_ENOMEM;
		goto out;
	}
	n = fread(buf, 1, POL_FILE_MAX + 1, f);
	if (ferror(f)) {
		pol_msg(errs, path, 0, "cannot read: %s", strerror(errno));
		r = CB_EIO;
	} else if (n > POL_FILE_MAX) {
		pol_msg(errs, path, 0, "too large (expected at most %d bytes)", POL_FILE_MAX);
		r = CB_ETOOBIG;
	} else if (memchr(buf, '\0', n)) {
		pol_msg(errs, path, 0, "contains a NUL byte (expected a text file)");
		r = CB_EINVAL;
	} else {
		buf[n] = '\0';
		*out = buf;
		buf = NULL;
	}
out:
	free(buf);
	fclose(f);
	return r;
}

#define POL_INCLUDE_DEPTH 10	/* libconfig's own limit */

/*
 * libconfig opens @include files itself, by name: before it does, every
 * file the text includes (and what those include) is read through
 * read_text, so it is held to the same owner and mode rule.  The scan
 * follows libconfig 1.5's scanner: a line that starts, after blanks, with
 * @include and a quoted name, relative names resolved in incdir.  A name
 * with a backslash escape is refused rather than guessed at.
 */
static int
check_includes(const char *text, const char *incdir, unsigned depth, FILE *errs)
{
	const char *line = text;
	int r = 0;

	for (; line && *line && r == 0; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		const char *p = line, *q;
		char *name = NULL, *sub = NULL;

		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "@include", 8) != 0)
			continue;
		p += 8;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != '"' || !(q = strpbrk(p + 1, "\"\\\n")) || *q != '"') {
			pol_msg(errs, incdir ? incdir : ".", 0, "an @include line the loader cannot check "
			    "(expected @include \"FILE\" without escapes)");
			return CB_EINVAL;
		}
		if (depth >= POL_INCLUDE_DEPTH) {
			pol_msg(errs, incdir ? incdir : ".", 0, "@include nested too deeply");
			return CB_EINVAL;
		}
		if (asprintf(&name, "%s%s%.*s", p[1] == '/' || !incdir ? "" : incdir,
		    p[1] == '/' || !incdir ? "" : "/", (int)(q - p - 1), p + 1) < 0)
			return CB_ENOMEM;
		if ((r = read_text(name, &sub, errs)) == 0)
			r = check_includes(sub, incdir, depth + 1, errs);
		free(sub);
		free(name);
	}
	return r;
}

int
pol_load(const char *path, struct pol **out, FILE *errs)
{
	struct lctx x = { .errs = errs, .file = path };
	char *text = NULL, *dir = NULL, *slash;
	int r;

	*out = NULL;
	if ((r = pol_default(&x.p)) != 0)
		return r;
	if ((r = read_text(path, &text, errs)) != 0) {
		r = r == CB_ENOMEM ? r : CB_EINVAL;
		goto out;
	}
	/* @include is resolved next to the policy file, not the cwd. */
	if (!(dir = strdup(path))) {
		r = CB_ENOMEM;
		goto out;
	}
	if ((slash = strrchr(dir, '/')))
		slash[slash == dir] = '\0';
	if ((r = check_includes(text, slash ? dir : NULL, 0, errs)) != 0) {
		r = r == CB_ENOMEM ? r : CB_EINVAL;
		goto out;
	}
	if ((r = apply_text(&x, text, slash ? dir : NULL)) != 0)
		goto out;
	if (x.nerr) {
		pol_msg(errs, path, 0, "%d error%s; policy refused", x.nerr, x.nerr == 1 ? "" : "s");
		r = CB_EINVAL;
		goto out;
	}
	*out = x.p;
	x.p = NULL;
out:
	free(text);
	free(dir);
	pol_free(x.p);
	return r;
}
