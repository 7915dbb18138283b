/*
 * capcall - the agent's command-line client: one broker operation per run.
 *
 * Runs inside the sandbox as the agent (in the low tier it may be the agent
 * itself, which may neither fork nor exec), so it never forks or execs: it
 * sends one request over $CAPBROKER_FD and relays what comes back.
 *
 * Exit status (the contract's): 0 done; 77 denied (reason on stderr);
 * 64 usage; 69 broker unavailable; 75 request timed out or expired;
 * 1 any other failure (not found, connection refused...); proc.exec exits
 * with the program's status.  See docs/capcall.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "cli/cli.h"
#include "client/capclient.h"
#include "client/mcp.h"

/* The contract's exit statuses, by their <sysexits.h> names: EX_OK 0,
 * EX_USAGE 64, EX_UNAVAILABLE 69 (broker unavailable), EX_TEMPFAIL 75
 * (timed out or expired), EX_NOPERM 77 (denied); 1 for anything else. */
#define EX_FAIL		1
#ifndef CB_VERSION
#define CB_VERSION	"0.1"
#endif

#define CC_BUF		(64 * 1024)
#define CC_JSON_READ_MAX (16u * 1024 * 1024)	/* fs.read --json keeps at most this */

struct opts {
	const char *token;
	bool json;
	const char *op;
	const char *target;	/* what the error message names */
};

static const char *const usage_text =
    "usage: capcall [--token TOKEN] [--json] OPERATION [ARGS...]\n"
    "  fs.read PATH               file content to stdout\n"
    "  fs.write PATH [--append] [--mode OCTAL]   stdin to the file\n"
    "  fs.list DIR | fs.stat PATH | fs.mkdir PATH [--mode OCTAL] | fs.delete PATH\n"
    "  fs.rename SRC DST\n"
    "  net.connect HOST:PORT [--timeout S]   relay stdin/stdout ([v6]:port too)\n"
    "  proc.exec [--timeout S] -- CMD [ARGS...]   exits with the program's status\n"
    "  request CAP [--ttl S] --reason TEXT   ask a human; prints the new token id\n"
    "  tokens | ping\n"
    "  mcp [--poll-ms N]          a Model Context Protocol server on stdin/stdout\n"
    "  derive CAP... [--ttl S] [--uses N] [--aud ID]   prints a narrower token\n"
    "exit: 0 done, 77 denied, 64 usage, 69 broker unavailable, 75 timed out or expired\n";

static const char *const help_text =
    "\noptions (before or after the operation):\n"
    "  --token TOKEN     present this token (default: the first held token that covers\n"
    "                    the request)\n"
    "  --json            print one JSON object on stdout, for errors too\n"
    "  --append          fs.write: append instead of truncating\n"
    "  --mode OCTAL      fs.write, fs.mkdir: permissions of what is created\n"
    "  --timeout S       net.connect: connect timeout; proc.exec: the program's wall clock\n"
    "  --ttl S           request, derive: lifetime asked for (cut to the policy's)\n"
    "  --reason TEXT     request: why, shown to the person who decides\n"
    "  --uses N          derive: how many times the new token may be used\n"
    "  --aud ID          derive: the sandbox the new token is for (default: this one)\n"
    "  --version         print the version;  --help  this text\n"
    "inside a sandbox: CAPBROKER_FD names the broker channel.  See capcall(1).\n";

static void json_fail(const char *op, int err, const char *name, const char *reason, int code);

/* --json anywhere on the command line (before a "--"): a usage error is
 * reported as an object too, whichever option it was found at. */
static bool usage_json;
static const char *usage_op = "";

static int
usage(const char *why)
{
	if (why)
		fprintf(stderr, "capcall: %s\n", why);
	fputs(usage_text, stderr);
	if (usage_json)
		json_fail(usage_op, CB_EINVAL, "usage", why ? why : "usage error", EX_USAGE);
	return EX_USAGE;
}

/* ---- JSON output (one object on stdout) --------------------------------- */

/* The document being built: one object, printed by json_end() through the
 * tools' one JSON writer (cli/), which keeps it ASCII and valid whatever
 * bytes a file name or a program's output holds. */
static json_t *jdoc;

static void
json_begin(const char *op)
{
	json_decref(jdoc);
	jdoc = json_pack("{s:b}", "ok", 1);
	if (op)
		cb_ignore(cli_json_set_str(jdoc, "op", op));
}

static void
json_kstr(const char *k, const char *v)
{
	cb_ignore(cli_json_set_str(jdoc, k, v));
}

static void
json_kint(const char *k, int64_t v)
{
	cb_ignore(json_object_set_new(jdoc, k, json_integer((json_int_t)v)));
}

static void
json_kuint(const char *k, uint64_t v)
{
	cb_ignore(json_object_set_new(jdoc, k, json_integer((json_int_t)v)));
}

static void
json_kbool(const char *k, bool v)
{
	cb_ignore(json_object_set_new(jdoc, k, json_boolean(v)));
}

/* Bytes as "key" when they are UTF-8 text, else base64 as "key_base64"
 * (libsodium's encoder, as capcall mcp uses). */
static void
json_kbytes(const char *k, const uint8_t *p, size_t n)
{
	size_t blen = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char kb[64], *out;

	if (cli_utf8_valid(p, n)) {
		cb_ignore(json_object_set_new(jdoc, k, cli_json_strn((const char *)p, n)));
		return;
	}
	snprintf(kb, sizeof(kb), "%s_base64", k);
	if (!(out = malloc(blen)))
		return;
	sodium_bin2base64(out, blen, p, n, sodium_base64_VARIANT_ORIGINAL);
	cb_ignore(json_object_set_new(jdoc, kb, json_string(out)));
	free(out);
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

/* Print the object; a failed write to stdout is a failure of the run. */
static int
json_end(int code)
{
	int r = cli_json_print(jdoc, stdout);

	jdoc = NULL;
	if (r != 0 || fflush(stdout) != 0 || ferror(stdout))
		return EX_FAIL;
	return code;
}

/* --json: a failure is one object too ({"ok":false,...}). */
static void
json_fail(const char *op, int err, const char *name, const char *reason, int code)
{
	json_t *o = json_pack("{s:b,s:o,s:i,s:o,s:o,s:i}", "ok", 0, "op", cli_json_str(op),
	    "err", err, "name", cli_json_str(name), "reason", cli_json_str(reason), "exit", code);

	cb_ignore(cli_json_print(o, stdout));
	fflush(stdout);
}

/* ---- outcome of a failed call --------------------------------------------- */

static bool
is_refusal(int err)
{
	switch (err) {
	case CB_EPERM: case CB_EBADSIG: case CB_EUNKNOWNKEY: case CB_EEXPIRED:
	case CB_ENOTYET: case CB_EAUDIENCE: case CB_EREVOKED: case CB_ESPENT:
	case CB_ENOTCOVERED: case CB_EPOLICY: case CB_ENOTOKEN: case CB_ENARROW:
	case CB_ERETIRED: case CB_EUNKNOWNTOK: case CB_EESCAPE: case CB_EFTYPE:
	case CB_ENETBLOCKED: case CB_EDENIED: case CB_ECLUSTER:
		return true;
	default:
		/* A token that does not even decode is refused as well. */
		return err <= CB_ETOK_PREFIX && err >= CB_ETOK_MALFORMED;
	}
}

/* The exit status for a failed call: the contract's classes. */
static int
exit_for(const struct cc_conn *c, int err)
{
	if ((c && cc_is_broken(c)) || err == CB_ECLOSED || err == CB_EPROTO ||
	    err == CB_EUNKNOWNOP || err == CB_EAUDIT)
		return EX_UNAVAILABLE;
	if (is_refusal(err))
		return EX_NOPERM;
	if (err == CB_EEXPIREDREQ || err == CB_ETIMEDOUT || err == CB_EBUSY || err == CB_ERATE)
		return EX_TEMPFAIL;
	if (err <= CB_ECAP_OP && err >= CB_ECAP_TOOLONG)
		return EX_USAGE;
	/* E2BIG: what was asked cannot be carried (more than WIRE_ARGV_MAX
	 * words, a request over 64 KiB, more input than one request holds):
	 * the command line's fault, as too many arguments are. */
	if (err == CB_ETOOBIG)
		return EX_USAGE;
	return EX_FAIL;
}

/* A refusal that a token could lift: none held covers it (or none is held,
 * the one that did has expired, was revoked or is spent, or it lies past
 * the tier's ceiling, where only an approved request reaches).  The same
 * set as `capcall mcp`'s request hint. */
static bool
is_askable(int err)
{
	return err == CB_ENOTCOVERED || err == CB_ENOTOKEN || err == CB_EPOLICY ||
	    err == CB_EEXPIRED || err == CB_EREVOKED || err == CB_ESPENT;
}

/* The capability the operation needed, as `capcall request` takes it; false
 * where the target names none (no target, a program not named by its
 * absolute path).  fs.stat is asked as fs.read, one of the three that
 * allow it. */
static bool
needed_cap(const struct opts *o, char *buf, size_t size)
{
	static const char *const map[][2] = {
		{ "fs.read", "fs.read" }, { "fs.stat", "fs.read" }, { "fs.list", "fs.list" },
		{ "fs.write", "fs.write" }, { "fs.mkdir", "fs.write" }, { "fs.rename", "fs.write" },
		{ "fs.delete", "fs.delete" }, { "net.connect", "net.connect" },
		{ "proc.exec", "proc.exec" },
	};

	if (!o->op || !o->target || (strcmp(o->op, "net.connect") != 0 && o->target[0] != '/'))
		return false;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(o->op, map[i][0]) == 0)
			return snprintf(buf, size, "%s:%s", map[i][1], o->target) < (int)size;
	return false;
}

/* Report a failed call on stderr (and as JSON on stdout) and pick the exit
 * status.  The broker's reason is printed as it came: it is the one sentence
 * the audit log also holds. */
static int
fail(const struct opts *o, const struct cc_conn *c, int err)
{
	const char *reason = c ? cc_last_reason(c) : "";
	char cap[PATH_MAX + 32];	/* OP:TARGET; a longer one gets no hint */
	int code = exit_for(c, err);

	if (!*reason)
		reason = cb_strerror(err);
	if (code == EX_NOPERM) {
		fprintf(stderr, "capcall: denied: %s\n", reason);
		/* Which token would allow it, and how one is had: the reason
		 * names the operation, not what to do about it. */
		if (is_askable(err) && needed_cap(o, cap, sizeof(cap)))
			fprintf(stderr, "capcall: it needs a token for %s: ask a human with "
			    "`capcall request '%s' --reason TEXT`, or have it granted "
			    "(capbroker run --grant, capctl issue) where the tier's ceiling allows\n",
			    cap, cap);
	} else if (code == EX_UNAVAILABLE) {
		fprintf(stderr, "capcall: broker unavailable: %s\n", reason);
	} else {
		fprintf(stderr, "capcall: %s%s%s: %s\n", o->op, o->target ? " " : "",
		    o->target ? o->target : "", reason);
	}
	if (o->json)
		json_fail(o->op, err, cb_errname(err), reason, code);
	return code;
}

/* A local failure (our own I/O, not the broker's answer). */
static int
fail_local(const struct opts *o, const char *what, int errnum)
{
	fprintf(stderr, "capcall: %s%s%s: %s: %s\n", o->op, o->target ? " " : "",
	    o->target ? o->target : "", what, strerror(errnum));
	if (o->json)
		json_fail(o->op, CB_EIO, "io", strerror(errnum), EX_FAIL);
	return EX_FAIL;
}

static int
connect_broker(const struct opts *o, struct cc_conn **c)
{
	int err = cc_open_env(c);

	if (err == CB_ENOENT)
		fprintf(stderr, "capcall: broker unavailable: %s is not set (not inside a sandbox?)\n",
		    CC_ENV_FD);
	else if (err == CB_EINVAL)
		fprintf(stderr, "capcall: broker unavailable: %s is not a broker channel\n",
		    CC_ENV_FD);
	else if (err)
		fprintf(stderr, "capcall: broker unavailable: %s\n", cb_strerror(err));
	if (err && o->json)
		json_fail(o->op, err, cb_errname(err), "no broker channel", EX_UNAVAILABLE);
	if (err)
		return EX_UNAVAILABLE;
	if (o->token && (err = cc_token_use(*c, o->token)) != 0)
		return fail(o, *c, err);
	return 0;
}

/* ---- argument parsing helpers --------------------------------------------- */

static bool
parse_u64(const char *s, uint64_t max, uint64_t *v)
{
	char *end = NULL;
	unsigned long long u;

	if (!s || !(*s >= '0' && *s <= '9'))
		return false;
	errno = 0;
	u = strtoull(s, &end, 10);
	if (errno || *end || u > max)
		return false;
	*v = u;
	return true;
}

static bool
parse_mode(const char *s, unsigned *mode)
{
	char *end = NULL;
	unsigned long u;

	if (!s || !(*s >= '0' && *s <= '7'))
		return false;
	errno = 0;
	u = strtoul(s, &end, 8);
	if (errno || *end || u > 07777)
		return false;
	*mode = (unsigned)u;
	return true;
}

/* Seconds to milliseconds for the protocol's uint32 timeout. */
static bool
parse_timeout(const char *s, unsigned *ms)
{
	uint64_t v;

	if (!parse_u64(s, UINT32_MAX / 1000, &v) || v == 0)
		return false;
	*ms = (unsigned)(v * 1000);
	return true;
}

/* HOST:PORT or [V6]:PORT.  host points into buf. */
static bool
parse_hostport(const char *s, char *buf, size_t cap, const char **host, uint16_t *port)
{
	const char *colon, *h, *hend;
	uint64_t p;
	size_t hl;

	if (s[0] == '[') {
		h = s + 1;
		if (!(hend = strchr(h, ']')) || hend[1] != ':')
			return false;
		colon = hend + 1;
	} else {
		h = s;
		if (!(colon = strrchr(s, ':')) || memchr(s, ':', (size_t)(colon - s)))
			return false;	/* a bare IPv6 address needs brackets */
		hend = colon;
	}
	hl = (size_t)(hend - h);
	if (hl == 0 || hl >= cap || !parse_u64(colon + 1, 65535, &p) || p == 0)
		return false;
	memcpy(buf, h, hl);
	buf[hl] = '\0';
	*host = buf;
	*port = (uint16_t)p;
	return true;
}

/* ---- the operations' arguments ------------------------------------------------- */

/* What an operation's options and operands say, parsed before the broker
 * is asked anything: a usage error never needs a broker. */
struct args {
	int argc;		/* operands */
	char **argv;
	unsigned flags, mode;	/* fs.write, fs.mkdir */
	unsigned ms;		/* --timeout, in milliseconds */
	uint64_t ttl;
	const char *reason;
	struct cc_derive d;	/* derive */
	char host[256];		/* net.connect */
	uint16_t port;
};

/* getopt_long for one operation: the global options are accepted here too,
 * so `capcall fs.read PATH --json` works as well as `capcall --json ...`. */
#define GLOBAL_LONGOPTS \
	{ "token", required_argument, NULL, 'T' }, \
	{ "json", no_argument, NULL, 'J' }, \
	{ "version", no_argument, NULL, 'V' }, \
	{ "help", no_argument, NULL, 'h' }
#define LO_END { NULL, 0, NULL, 0 }

static const struct option lo_plain[] = { GLOBAL_LONGOPTS, LO_END };
static const struct option lo_write[] = { GLOBAL_LONGOPTS,
	{ "append", no_argument, NULL, 'a' }, { "mode", required_argument, NULL, 'm' }, LO_END };
static const struct option lo_mode[] = { GLOBAL_LONGOPTS,
	{ "mode", required_argument, NULL, 'm' }, LO_END };
static const struct option lo_timeout[] = { GLOBAL_LONGOPTS,
	{ "timeout", required_argument, NULL, 't' }, LO_END };
static const struct option lo_request[] = { GLOBAL_LONGOPTS,
	{ "ttl", required_argument, NULL, 'L' }, { "reason", required_argument, NULL, 'r' }, LO_END };
static const struct option lo_derive[] = { GLOBAL_LONGOPTS,
	{ "ttl", required_argument, NULL, 'L' }, { "uses", required_argument, NULL, 'u' },
	{ "aud", required_argument, NULL, 'A' }, LO_END };

static int
global_opt(struct opts *o, int ch)
{
	switch (ch) {
	case 'T':
		o->token = optarg;
		return 0;
	case 'J':
		o->json = true;
		return 0;
	case 'h':
		fputs(usage_text, stdout);
		fputs(help_text, stdout);
		exit(0);
	case 'V':
		printf("capcall %s\n", CB_VERSION);
		exit(0);
	default:
		return usage(NULL);
	}
}

#define TTL_USAGE "--ttl takes a positive number of seconds, at most 31622400 (366 days)"

/* One option of an operation (each operation's table lists only its own). */
static int
op_opt(struct opts *o, int ch, struct args *a)
{
	uint64_t v;

	switch (ch) {
	case 'a':
		a->flags = CC_F_CREATE | CC_F_APPEND;
		return 0;
	case 'm':
		if (strcmp(o->op, "fs.write") != 0 && strcmp(o->op, "fs.mkdir") != 0)
			return usage("--mode is for fs.mkdir");
		return parse_mode(optarg, &a->mode) ? 0 : usage("--mode takes an octal mode");
	case 't':
		return parse_timeout(optarg, &a->ms) ? 0 :
		    usage("--timeout takes a positive number of seconds");
	case 'L':
		if (!parse_u64(optarg, CB_DURATION_MAX, &a->ttl) || a->ttl == 0)
			return usage(TTL_USAGE);
		a->d.ttl = a->ttl;
		return 0;
	case 'r':
		a->reason = optarg;
		return 0;
	case 'u':
		if (!parse_u64(optarg, UINT32_MAX, &v) || v == 0)
			return usage("--uses takes a positive count");
		a->d.has_uses = true;
		a->d.uses = (uint32_t)v;
		return 0;
	case 'A':
		a->d.aud = optarg;
		return 0;
	default:
		return global_opt(o, ch);
	}
}

/* ---- relaying bytes ------------------------------------------------------------ */

static int
write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };

			if (poll(&pf, 1, -1) < 0 && errno != EINTR)
				return -1;
			continue;
		}
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Copy in to out until EOF; *what names the side that failed. */
static int
copy_fd(int in, int out, const char **what, uint64_t *total)
{
	static uint8_t buf[CC_BUF];

	*total = 0;
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = { .fd = in, .events = POLLIN };

			if (poll(&pf, 1, -1) < 0 && errno != EINTR) {
				*what = "read";
				return -1;
			}
			continue;
		}
		if (n < 0) {
			*what = "read";
			return -1;
		}
		if (n == 0)
			return 0;
		if (write_all(out, buf, (size_t)n) != 0) {
			*what = "write";
			return -1;
		}
		*total += (uint64_t)n;
	}
}

/* ---- operations ------------------------------------------------------------------
 *
 * Each returns the exit status, or a negative CB_E* code when a call to the
 * broker failed (run_op() reports it: fail()).  The connection is run_op()'s,
 * opened before and closed after; *cp may be closed early and set to NULL. */

/* fs.read --json: the whole content (at most CC_JSON_READ_MAX) in one object. */
static int
read_json(struct opts *o, int fd)
{
	uint8_t *buf = malloc(CC_BUF), *nb;
	size_t len = 0, cap = CC_BUF;
	bool trunc = false;
	int rc;

	if (!buf)
		return fail_local(o, "read", ENOMEM);
	for (;;) {
		ssize_t n;

		if (len == cap) {
			if (cap >= CC_JSON_READ_MAX) {
				trunc = true;
				break;
			}
			if (!(nb = realloc(buf, cap * 2))) {
				rc = fail_local(o, "read", ENOMEM);
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = fail_local(o, "read", errno);
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	json_begin(o->op);
	json_kstr("path", o->target);
	json_kuint("size", len);
	json_kbool("trunc", trunc);
	json_kbytes("data", buf, len);
	rc = json_end(EX_OK);
out:
	free(buf);
	return rc;
}

static int
op_fs_read(struct opts *o, struct cc_conn **cp, struct args *a)
{
	const char *what = NULL;
	uint64_t total;
	int fd = -1, rc;

	(void)a;
	if ((rc = cc_fs_read(*cp, o->target, &fd)) != 0)
		return rc;
	if (o->json)
		rc = read_json(o, fd);
	else
		rc = copy_fd(fd, STDOUT_FILENO, &what, &total) == 0 ? EX_OK :
		    fail_local(o, what, errno);
	close(fd);
	return rc;
}

static int
op_fs_write(struct opts *o, struct cc_conn **cp, struct args *a)
{
	const char *what = NULL;
	uint64_t total = 0;
	int fd = -1, rc;

	if ((rc = cc_fs_write(*cp, o->target, a->flags, a->mode, &fd)) != 0)
		return rc;
	if (copy_fd(STDIN_FILENO, fd, &what, &total) != 0) {
		rc = fail_local(o, what, errno);
		close(fd);
		return rc;
	}
	/* close() can report a failed write-back: it is the last chance. */
	if (close(fd) != 0)
		return fail_local(o, "close", errno);
	if (!o->json)
		return EX_OK;
	json_begin(o->op);
	json_kstr("path", o->target);
	json_kuint("bytes", total);
	return json_end(EX_OK);
}

/* What a command printed on stdout reached it: else a failure. */
static int
flushed(void)
{
	return (fflush(stdout) == 0 && !ferror(stdout)) ? EX_OK : EX_FAIL;
}

static int
op_fs_list(struct opts *o, struct cc_conn **cp, struct args *a)
{
	struct cc_dir *d = NULL;
	int rc;

	(void)a;
	if ((rc = cc_fs_list(*cp, o->target, &d)) != 0)
		return rc;
	if (o->json) {
		json_t *ents = json_array();

		json_begin(o->op);
		json_kstr("path", o->target);
		for (size_t i = 0; ents && i < d->n; i++)
			cb_ignore(json_array_append_new(ents, json_pack("{s:o,s:s}", "name",
			    cli_json_str(d->ents[i].name), "type", type_name(d->ents[i].type))));
		cb_ignore(json_object_set_new(jdoc, "entries", ents));
		json_kbool("trunc", d->trunc);
		cc_dir_free(d);
		return json_end(EX_OK);
	}
	/* A name is whatever bytes the file system holds: shown through the
	 * one escaper, as capctl shows an agent's text, so a name cannot move
	 * the cursor, fake a line or hide itself. */
	for (size_t i = 0; i < d->n; i++) {
		cb_ignore(cb_text_fputs(d->ents[i].name, stdout));
		printf("%s\n", d->ents[i].type == 'd' ? "/" : d->ents[i].type == 'l' ? "@" : "");
	}
	if (d->trunc)
		fprintf(stderr, "capcall: fs.list %s: listing truncated by the broker\n", o->target);
	cc_dir_free(d);
	return flushed();
}

static int
op_fs_stat(struct opts *o, struct cc_conn **cp, struct args *a)
{
	struct cc_stat st;
	int rc;

	(void)a;
	if ((rc = cc_fs_stat(*cp, o->target, &st)) != 0)
		return rc;
	if (o->json) {
		json_begin(o->op);
		json_kstr("path", o->target);
		json_kstr("type", type_name(st.type));
		json_kuint("size", st.size);
		json_kuint("mode", st.mode);
		json_kuint("mtime", st.mtime);
		return json_end(EX_OK);
	}
	printf("type %s\nsize %" PRIu64 "\nmode %04o\nmtime %" PRIu64 "\n",
	    type_name(st.type), st.size, (unsigned)st.mode, st.mtime);
	return flushed();
}

/* fs.mkdir, fs.delete, fs.rename: nothing to print on success. */
static int
op_fs_simple(struct opts *o, struct cc_conn **cp, struct args *a)
{
	bool is_rename = strcmp(o->op, "fs.rename") == 0;
	int rc;

	if (strcmp(o->op, "fs.mkdir") == 0)
		rc = cc_fs_mkdir(*cp, o->target, a->mode);
	else if (is_rename)
		rc = cc_fs_rename(*cp, o->target, a->argv[1]);
	else
		rc = cc_fs_delete(*cp, o->target);
	if (rc != 0 || !o->json)
		return rc;
	json_begin(o->op);
	json_kstr("path", o->target);
	if (is_rename)
		json_kstr("path2", a->argv[1]);
	return json_end(EX_OK);
}

/*
 * Relay stdin to the socket and the socket to stdout until both directions
 * have closed.  The socket is ours and non-blocking, so neither direction
 * can stall the other; stdin and stdout are shared with whoever started us
 * and stay as they are (we only poll them).
 */
struct relay_buf {
	uint8_t b[CC_BUF];
	size_t off, len;
};

static int
relay(int sock, const char **what)
{
	static struct relay_buf up, down;	/* up: stdin->sock, down: sock->stdout */
	bool in_open = true, sock_in_open = true, shut_wr = false;
	int fl;

	if ((fl = fcntl(sock, F_GETFL)) < 0 || fcntl(sock, F_SETFL, fl | O_NONBLOCK) < 0) {
		*what = "fcntl";
		return -1;
	}
	while ((in_open || up.len) || (sock_in_open || down.len)) {
		struct pollfd p[3] = {
			{ .fd = -1 }, { .fd = sock }, { .fd = -1 },
		};
		ssize_t n;

		if (!in_open && !up.len && !shut_wr) {
			shutdown(sock, SHUT_WR);
			shut_wr = true;
		}
		if (in_open && !up.len) {
			p[0].fd = STDIN_FILENO;
			p[0].events = POLLIN;
		}
		if (up.len)
			p[1].events |= POLLOUT;
		if (sock_in_open && !down.len)
			p[1].events |= POLLIN;
		if (down.len) {
			p[2].fd = STDOUT_FILENO;
			p[2].events = POLLOUT;
		}
		/* Nothing wanted from the socket now: leave it out, or its
		 * POLLHUP would spin us while stdout is slow. */
		if (!p[1].events)
			p[1].fd = -1;
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			*what = "poll";
			return -1;
		}
		if (p[0].revents) {
			n = read(STDIN_FILENO, up.b, sizeof(up.b));
			if (n > 0) {
				up.off = 0;
				up.len = (size_t)n;
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				in_open = false;
			}
		}
		if (p[1].revents & (POLLOUT | POLLERR | POLLHUP) && up.len) {
			n = send(sock, up.b + up.off, up.len, MSG_NOSIGNAL);
			if (n > 0) {
				up.off += (size_t)n;
				up.len -= (size_t)n;
			} else if (n < 0 && errno != EINTR && errno != EAGAIN) {
				/* The peer stopped reading: drop what stdin has left. */
				up.len = 0;
				in_open = false;
				shut_wr = true;
			}
		}
		if (p[1].revents & (POLLIN | POLLERR | POLLHUP) && sock_in_open && !down.len) {
			n = recv(sock, down.b, sizeof(down.b), 0);
			if (n > 0) {
				down.off = 0;
				down.len = (size_t)n;
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				sock_in_open = false;
			}
		}
		/* Nobody reads our output any more: the relay is over. */
		if (p[2].revents && down.len) {
			if (write_all(STDOUT_FILENO, down.b + down.off, down.len) != 0) {
				*what = "write";
				return -1;
			}
			down.len = 0;
		}
	}
	return 0;
}

static int
check_net(struct opts *o, struct args *a)
{
	const char *h;

	if (!parse_hostport(o->target, a->host, sizeof(a->host), &h, &a->port))
		return usage("expected HOST:PORT or [IPV6]:PORT with a port from 1 to 65535");
	return 0;
}

static int
op_net_connect(struct opts *o, struct cc_conn **cp, struct args *a)
{
	const char *what = NULL;
	int fd = -1, rc;

	if ((rc = cc_net_connect(*cp, a->host, a->port, a->ms, &fd)) != 0)
		return rc;
	/* The broker channel is not needed while relaying. */
	cc_close(*cp);
	*cp = NULL;
	rc = relay(fd, &what) == 0 ? EX_OK : fail_local(o, what, errno);
	close(fd);
	return rc;
}

/* The program's status as ours.  The broker reports it as a shell does
 * (0-255, 128+N for signal N); a negative -N is taken as signal N too, and
 * anything else out of range as a plain failure. */
static int
exec_status(int32_t st)
{
	if (st >= 0 && st <= 255)
		return st;
	if (st < 0 && st >= -64)
		return 128 - st;
	return EX_FAIL;
}

static int
op_proc_exec(struct opts *o, struct cc_conn **cp, struct args *a)
{
	struct cc_exec *x = NULL;
	int rc;

	if ((rc = cc_proc_exec(*cp, (const char *const *)a->argv, a->ms, &x)) != 0)
		return rc;
	if (o->json) {
		json_begin(o->op);
		json_kstr("cmd", o->target);
		json_kint("status", x->status);
		json_kbytes("stdout", x->out, x->out_len);
		json_kbytes("stderr", x->err, x->err_len);
		json_kbool("trunc", x->trunc);
		rc = json_end(exec_status(x->status));
	} else if (write_all(STDOUT_FILENO, x->out, x->out_len) != 0 ||
	    write_all(STDERR_FILENO, x->err, x->err_len) != 0) {
		rc = fail_local(o, "write", errno);
	} else {
		if (x->trunc)
			fprintf(stderr, "capcall: proc.exec %s: output truncated by the broker\n",
			    o->target);
		rc = exec_status(x->status);
	}
	cc_exec_free(x);
	return rc;
}

static int
check_request(struct opts *o, struct args *a)
{
	(void)o;
	if (!a->reason || !*a->reason)
		return usage("request needs --reason TEXT: a human reads it to decide");
	return 0;
}

static int
op_request(struct opts *o, struct cc_conn **cp, struct args *a)
{
	struct cc_grant *g = NULL;
	int rc;

	if ((rc = cc_request(*cp, o->target, a->ttl, a->reason, &g)) != 0)
		return rc;
	if (o->json) {
		json_begin(o->op);
		json_kstr("cap", o->target);
		json_kstr("tid", g->tid);
		if (g->has_th)
			json_kuint("th", g->th);
		json_kstr("token", g->token);
		rc = json_end(EX_OK);
	} else {
		printf("%s\n", g->tid);
		rc = flushed();
	}
	cc_grant_free(g);
	return rc;
}

/* One held token as JSON.  The broker sends the capabilities space-
 * separated; capabilities contain no spaces (the grammar forbids them). */
static json_t *
token_json(const struct cc_tokinfo *t)
{
	json_t *caps = json_array(), *tj;

	for (const char *p = t->caps, *e; caps && *p; p = *e ? e + 1 : e) {
		e = strchr(p, ' ');
		if (!e)
			e = p + strlen(p);
		if (e > p)
			cb_ignore(json_array_append_new(caps, cli_json_strn(p, (size_t)(e - p))));
	}
	tj = json_pack("{s:I,s:o,s:o,s:I}", "th", (json_int_t)t->th, "id", cli_json_str(t->id),
	    "caps", caps, "exp", (json_int_t)t->exp);
	if (tj && t->has_uses)
		cb_ignore(json_object_set_new(tj, "uses", json_integer(t->uses)));
	if (tj)
		cb_ignore(json_object_set_new(tj, "elevated", json_boolean(t->elevated)));
	return tj;
}

static void
token_row(const struct cc_tokinfo *t)
{
	time_t exp = (time_t)t->exp;
	struct tm tm;
	char when[32] = "?", uses[16] = "-";

	if (gmtime_r(&exp, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (t->has_uses)
		snprintf(uses, sizeof(uses), "%" PRIu32, t->uses);
	printf("%-6" PRIu32 " %-32s %-20s %-6s %s%s\n", t->th, t->id, when, uses, t->caps,
	    t->elevated ? " (elevated)" : "");
}

static int
op_tokens(struct opts *o, struct cc_conn **cp, struct args *a)
{
	struct cc_toklist *l = NULL;
	int rc;

	(void)a;
	if ((rc = cc_tokens(*cp, &l)) != 0)
		return rc;
	if (o->json) {
		json_t *toks = json_array();

		json_begin(o->op);
		for (size_t i = 0; toks && i < l->n; i++)
			cb_ignore(json_array_append_new(toks, token_json(&l->toks[i])));
		cb_ignore(json_object_set_new(jdoc, "tokens", toks));
		rc = json_end(EX_OK);
	} else {
		if (l->n)
			printf("%-6s %-32s %-20s %-6s %s\n", "TH", "ID", "EXPIRES", "USES", "CAPS");
		for (size_t i = 0; i < l->n; i++)
			token_row(&l->toks[i]);
		rc = flushed();
	}
	cc_toklist_free(l);
	return rc;
}

static int
op_derive(struct opts *o, struct cc_conn **cp, struct args *a)
{
	struct cc_grant *g = NULL;
	int rc;

	a->d.caps = (const char *const *)a->argv;
	a->d.ncaps = (size_t)a->argc;
	if ((rc = cc_token_derive(*cp, &a->d, &g)) != 0)
		return rc;
	if (o->json) {
		json_begin(o->op);
		json_kstr("tid", g->tid);
		json_kstr("token", g->token);
		rc = json_end(EX_OK);
	} else {
		printf("%s\n", g->token);
		rc = flushed();
	}
	cc_grant_free(g);
	return rc;
}

static int
op_ping(struct opts *o, struct cc_conn **cp, struct args *a)
{
	int rc;

	(void)a;
	if ((rc = cc_ping(*cp)) != 0)
		return rc;
	return o->json ? (json_begin(o->op), json_end(EX_OK)) : EX_OK;
}

/* ---- the operations' table ----------------------------------------------------- */

/*
 * Each operation: its options, how many operands it takes (at most -1: no
 * limit) and the sentence when the count is wrong (NULL: "OP takes N
 * arguments", without the usage text), a check before the broker is asked
 * (or NULL), and the function.  run_op() parses, connects, maps a broker's
 * refusal to the exit status and closes, once for all of them.
 */
static const struct op {
	const char *name;
	const struct option *lo;
	bool stop;		/* options end at the first operand (proc.exec's program) */
	int min, max;
	const char *arity_why;
	int (*check)(struct opts *, struct args *);
	int (*fn)(struct opts *, struct cc_conn **, struct args *);
} ops[] = {
	{ "fs.read", lo_plain, false, 1, 1, NULL, NULL, op_fs_read },
	{ "fs.write", lo_write, false, 1, 1, "fs.write takes one path", NULL, op_fs_write },
	{ "fs.list", lo_plain, false, 1, 1, NULL, NULL, op_fs_list },
	{ "fs.stat", lo_plain, false, 1, 1, NULL, NULL, op_fs_stat },
	{ "fs.mkdir", lo_mode, false, 1, 1, "one path expected", NULL, op_fs_simple },
	{ "fs.delete", lo_mode, false, 1, 1, "one path expected", NULL, op_fs_simple },
	{ "fs.rename", lo_mode, false, 2, 2, "fs.rename takes SRC DST", NULL, op_fs_simple },
	{ "net.connect", lo_timeout, false, 1, 1, "net.connect takes HOST:PORT", check_net,
	    op_net_connect },
	{ "proc.exec", lo_timeout, true, 1, -1, "proc.exec takes -- CMD [ARGS...]", NULL,
	    op_proc_exec },
	{ "request", lo_request, false, 1, 1, "request takes one capability", check_request,
	    op_request },
	{ "tokens", lo_plain, false, 0, 0, NULL, NULL, op_tokens },
	{ "derive", lo_derive, false, 1, -1, "derive takes at least one capability", NULL,
	    op_derive },
	{ "ping", lo_plain, false, 0, 0, NULL, NULL, op_ping },
};

/* Parse op's arguments (argv[0] is its name), then run it on a connection
 * of its own.  Returns the exit status. */
static int
run_op(struct opts *o, const struct op *op, int argc, char **argv)
{
	struct args a = { .flags = CC_F_CREATE | CC_F_TRUNC };
	struct cc_conn *c = NULL;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, op->stop ? "+h" : "h", op->lo, NULL)) != -1)
		if ((rc = op_opt(o, ch, &a)) != 0)
			return rc;
	a.argc = argc - optind;
	a.argv = argv + optind;
	if (a.argc < op->min || (op->max >= 0 && a.argc > op->max)) {
		if (op->arity_why)
			return usage(op->arity_why);
		fprintf(stderr, "capcall: %s takes %d argument%s\n", o->op, op->min,
		    op->min == 1 ? "" : "s");
		return EX_USAGE;
	}
	if (a.argc > 0)
		o->target = a.argv[0];
	if (op->check && (rc = op->check(o, &a)) != 0)
		return rc;
	if ((rc = connect_broker(o, &c)) == 0 && (rc = op->fn(o, &c, &a)) < 0)
		rc = fail(o, c, rc);
	cc_close(c);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = { GLOBAL_LONGOPTS, { NULL, 0, NULL, 0 } };
	struct opts o = { 0 };
	int ch, rc;

	/* A reader that went away is an error we report, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		usage_json |= strcmp(argv[i], "--json") == 0;
	/* "+": global options end at the operation's name. */
	while ((ch = getopt_long(argc, argv, "+h", lo, NULL)) != -1)
		if ((rc = global_opt(&o, ch)) != 0)
			return rc;
	if (optind >= argc)
		return usage("no operation given");
	o.op = usage_op = argv[optind];
	if (strcmp(o.op, "mcp") == 0)
		return cc_mcp_main(argc - optind, argv + optind);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (strcmp(o.op, ops[i].name) != 0)
			continue;
		/* Let the operation parse its own arguments from its name on;
		 * optind 0 makes getopt start afresh (its "+" mode included). */
		argc -= optind;
		argv += optind;
		optind = 0;
		return run_op(&o, &ops[i], argc, argv);
	}
	fprintf(stderr, "capcall: unknown operation '%s'\n", o.op);
	return usage(NULL);
}
