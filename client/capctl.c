/*
 * capctl.c - the administrator's command line: issue, list and revoke
 * tokens, list and kill sandboxes, approve or deny elevation requests
 * (one by one or with the `watch` prompt), read, follow and verify the
 * audit log, and manage signing keys.
 *
 * Trust domain: an administrator's process.  It speaks to the broker over
 * the admin socket (AF_UNIX SOCK_SEQPACKET, one msgpack map per packet,
 * built and decoded only through wire/); the broker decides whether this
 * peer is an administrator (SO_PEERCRED) and closes the connection without
 * a reply when it is not.  Replies are trusted no further than the broker,
 * but text in them that came from an agent (a request's reason, a
 * sandbox's command line) is shown to a person only through cb_text_fputs,
 * which makes controls, bidi overrides and invisible characters visible,
 * so an agent cannot paint a fake prompt on the approver's terminal or
 * make a request read as another.  --json output is escaped for the same reason.
 *
 * Two commands work without a broker: `keygen` (a local key file) and,
 * with --state DIR, `audit` and `audit verify`, which open the stopped
 * broker's state directory themselves (see ctl_offline_verify).
 *
 * Exit status (docs/capctl.md): 0 done; 1 the operation failed or was
 * refused (also: the audit log is not intact); 2 unknown id (token,
 * sandbox, request, key); 3 permission denied (the broker refused this
 * peer); 4 bad capability; 5 beyond the policy (tier ceiling); 64 usage;
 * 69 no admin socket or broker unavailable; 76 the broker's reply made no
 * sense (protocol error).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "cli/cli.h"
#include "caps/caps.h"
#include "common/common.h"
#include "state/state.h"
#include "wire/wire.h"

/* Exit statuses: capctl's own small numbers, and <sysexits.h> where one
 * names the case (EX_USAGE, EX_UNAVAILABLE, EX_PROTOCOL). */
enum {
	CTL_OK = EX_OK,
	CTL_FAIL = 1,
	CTL_UNKNOWN = 2,
	CTL_PERM = 3,
	CTL_BADCAP = 4,
	CTL_POLICY = 5,
	CTL_USAGE = EX_USAGE,
	CTL_UNAVAIL = EX_UNAVAILABLE,
	CTL_PROTO = EX_PROTOCOL,
};

#ifndef CB_VERSION
#define CB_VERSION "0.1"
#endif

#define CTL_TIMEOUT_MS	60000	/* longest wait for an ordinary reply */
#define CTL_PAGE_MAX	1024	/* most entries one reply may carry */
#define CTL_QUEUE_MAX	64	/* watch: requests shown but not yet answered */

struct ctl {
	const char *sock;	/* admin socket path, or NULL */
	const char *state;	/* --state DIR, or NULL */
	bool json;
	bool json_done;		/* --json: a document is on stdout already */
	char err[512];		/* the last message on stderr, for --json errors */
	int fd;
	bool answered;		/* the broker has replied at least once */
	uint64_t next_id;
	uint8_t *tx, *rx;
	struct wire_dec *dec;
};

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: capctl [--socket PATH | --state DIR] [--json] COMMAND [ARGS]\n"
	    "  issue --sandbox ID --cap CAP... [--ttl S] [--uses N]   prints the token\n"
	    "  revoke TOKEN_ID|TOKEN        revokes it and every token derived from it\n"
	    "  list [--sandbox ID]          issued tokens\n"
	    "  sandboxes                    running sandboxes\n"
	    "  kill SANDBOX_ID              ends a sandbox at once\n"
	    "  pending                      elevation requests awaiting a decision\n"
	    "  approve REQUEST_ID [--ttl S] [--session]\n"
	    "  deny REQUEST_ID [--reason TEXT]\n"
	    "  watch                        prompts for each new request (--json: streams them)\n"
	    "  audit [--sandbox ID] [--since T] [--decision allow|deny] [--op OP]\n"
	    "        [--follow [--from-start]]   the audit log as a table (--json: JSON lines)\n"
	    "  audit verify                 checks the hash chain and signed checkpoints\n"
	    "  keygen [--out FILE]          a new Ed25519 key file (local)\n"
	    "  rotate-key | retire-key KID | status\n");
}

static void
help(void)
{
	usage(stdout);
	printf("\n"
	    "options:\n"
	    "  --socket PATH     the broker's admin socket\n"
	    "  --state DIR       the broker's state directory: DIR/admin.sock; audit and\n"
	    "                    audit verify read DIR directly when no broker answers\n"
	    "                    (default socket: $CAPBROKER_SOCKET)\n"
	    "  --json            machine-readable output, errors included (also after COMMAND)\n"
	    "  --version, --help\n"
	    "command options:\n"
	    "  --sandbox ID      issue: the sandbox the token is bound to; list, audit: only it\n"
	    "  --cap CAP         issue: a capability (repeatable)\n"
	    "  --ttl S           issue: lifetime; approve: a shorter ttl than asked\n"
	    "  --uses N          issue: how many operations the token allows\n"
	    "  --session         approve: also later requests inside it, until the sandbox ends\n"
	    "  --reason TEXT     deny: told to the agent and audited\n"
	    "  --since T         audit: lines from T on: a duration ago (90s, 15m, 2h, 1d) or a\n"
	    "                    time (2026-01-31T12:00:00Z, or epoch seconds)\n"
	    "  --decision D      audit: allow or deny\n"
	    "  --op OP           audit: one operation (fs.read, net.connect, issue, approve...)\n"
	    "  --follow          audit: keep printing new lines as they are written (only new\n"
	    "                    ones unless --from-start)\n"
	    "  --out FILE        keygen: where to write the key (default: KID.key)\n"
	    "exit: 0 done, 1 failed/refused/not intact, 2 unknown id, 3 permission denied,\n"
	    "      4 bad capability, 5 beyond policy, 64 usage, 69 broker unavailable, 76 protocol.\n"
	    "See capctl(1).\n");
}

static int ctl_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The last message capctl printed on stderr, kept for --json: a failure
 * that is not the broker's refusal still ends in one JSON object. */
static char ctl_lasterr[512];

static void ctl_text(FILE *f, const char *s);
static void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
ctl_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctl_lasterr, sizeof(ctl_lasterr), fmt, ap);
	va_end(ap);
	fputs("capctl: ", stderr);
	ctl_text(stderr, ctl_lasterr);
	fputc('\n', stderr);
}

static int
ctl_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctl_lasterr, sizeof(ctl_lasterr), fmt, ap);
	va_end(ap);
	fputs("capctl: ", stderr);
	ctl_text(stderr, ctl_lasterr);
	fprintf(stderr, "\n(capctl --help for usage)\n");
	return CTL_USAGE;
}

/* ---- output ------------------------------------------------------------ */

/* --json: one document, through the tools' one JSON writer (cli/), which
 * keeps the output ASCII and valid whatever bytes an agent chose. */
static void
ctl_json(struct ctl *c, json_t *v)
{
	cb_ignore(cli_json_print(v, stdout));
	c->json_done = true;
}

/* A string that may hold anything (an agent's reason, a path): JSON-safe. */
#define J(s) cli_json_str(s)

/* Text for a person: the one escaper (common/text.c) makes controls,
 * bidi overrides, invisible characters and invalid UTF-8 visible, so an
 * agent's text cannot move the cursor, clear the screen, fake a prompt or
 * read as something else. */
static void
ctl_text(FILE *f, const char *s)
{
	cb_ignore(cb_text_fputs(s, f));
}

static const char *
ctl_time(uint64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t == 0 || !gmtime_r(&tt, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "-");
	return buf;
}

/* ---- the admin connection ---------------------------------------------- */

static int
ctl_socket_path(struct ctl *c, char *buf, size_t len)
{
	const char *env = getenv("CAPBROKER_SOCKET");

	if (c->sock)
		snprintf(buf, len, "%s", c->sock);
	else if (c->state)
		snprintf(buf, len, "%s/admin.sock", c->state);
	else if (env && *env)
		snprintf(buf, len, "%s", env);
	else
		return CB_ENOENT;
	return 0;
}

/* Connect.  Returns an exit code; quiet leaves the message to the caller
 * (commands with an offline fallback). */
static int
ctl_connect(struct ctl *c, bool quiet)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[sizeof(sa.sun_path) + 64];
	int e;

	if (ctl_socket_path(c, path, sizeof(path)) != 0) {
		if (!quiet)
			ctl_err("no admin socket: give --socket PATH or --state DIR, "
			    "or set CAPBROKER_SOCKET");
		return CTL_UNAVAIL;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		ctl_err("admin socket path too long: %s", path);
		return CTL_USAGE;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0) {
		ctl_err("socket: %s", strerror(errno));
		return CTL_FAIL;
	}
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		struct ucred cr;
		socklen_t l = sizeof(cr);

		/* Talk only to a broker run by root or by ourselves: a socket
		 * another local user serves (say, at a path in /tmp) must not
		 * receive our commands, nor answer them. */
		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) != 0 ||
		    (cr.uid != 0 && cr.uid != geteuid())) {
			ctl_err("%s is served by uid %u, not by root or you: refusing",
			    path, (unsigned)cr.uid);
			close(c->fd);
			c->fd = -1;
			return CTL_PERM;
		}
		return CTL_OK;
	}
	e = errno;
	close(c->fd);
	c->fd = -1;
	if (e == EACCES || e == EPERM) {
		ctl_err("permission denied: cannot open the admin socket %s", path);
		return CTL_PERM;
	}
	if (quiet)
		return CTL_UNAVAIL;
	if (e == ECONNREFUSED)
		ctl_err("no broker is listening at %s: the socket is stale, left by a broker that "
		    "has exited (capbroker serve removes it when it starts)", path);
	else if (e == ENOENT)
		ctl_err("no broker at %s (no such socket; is capbroker serve running?)", path);
	else
		ctl_err("no broker at %s: %s", path, strerror(e));
	return CTL_UNAVAIL;
}

static void
ctl_begin(struct ctl *c, struct wire_enc *e, const char *cmd)
{
	wire_enc_init(e, c->tx, WIRE_REQ_MAX);
	wire_map_begin(e, NULL);
	wire_put_u64(e, "id", ++c->next_id);
	wire_put_str(e, "cmd", cmd);
}

static int
ctl_refused(struct ctl *c)
{
	struct wire_msg m;
	const char *why;
	ssize_t n;

	/* A broker that refuses the connection itself (too many connections,
	 * out of descriptors) says why before it hangs up. */
	n = recv(c->fd, c->rx, WIRE_REPLY_MAX, MSG_DONTWAIT | MSG_TRUNC);
	if (n > 0 && (size_t)n <= WIRE_REPLY_MAX && wire_decode(c->dec, c->rx, (size_t)n, &m) == 0 &&
	    wire_get_str(&m, "reason", &why) == 0) {
		ctl_err("the broker refused the connection: %s", why);
		return CTL_UNAVAIL;
	}
	if (!c->answered) {
		ctl_err("permission denied: the broker closed the connection without "
		    "a reply (this user is not one of its administrators)");
		return CTL_PERM;
	}
	ctl_err("the broker closed the connection");
	return CTL_UNAVAIL;
}

static int
ctl_send(struct ctl *c, struct wire_enc *e)
{
	size_t len;

	wire_map_end(e);
	if (wire_enc_finish(e, &len) != 0) {
		ctl_err("request too large");
		return CTL_USAGE;
	}
	if (send(c->fd, c->tx, len, MSG_NOSIGNAL) < 0) {
		if (errno == EPIPE || errno == ECONNRESET)
			return ctl_refused(c);
		ctl_err("send: %s", strerror(errno));
		return CTL_UNAVAIL;
	}
	return CTL_OK;
}

/* Receive one message within timeout_ms (-1: no limit).  CTL_OK and *m, or
 * an exit code (message printed).  *timedout, if given, reports a quiet
 * timeout instead of an error. */
static int
ctl_recv(struct ctl *c, struct wire_msg *m, int timeout_ms, bool *timedout)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	ssize_t n;
	int r;

	if (timedout)
		*timedout = false;
	do {
		r = poll(&p, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r == 0) {
		if (timedout) {
			*timedout = true;
			return CTL_OK;
		}
		ctl_err("the broker did not answer in %d s", timeout_ms / 1000);
		return CTL_UNAVAIL;
	}
	n = recv(c->fd, c->rx, WIRE_REPLY_MAX, MSG_TRUNC);
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return ctl_refused(c);
	if (n < 0) {
		ctl_err("recv: %s", strerror(errno));
		return CTL_UNAVAIL;
	}
	if ((size_t)n > WIRE_REPLY_MAX || wire_decode(c->dec, c->rx, (size_t)n, m) != 0) {
		ctl_err("malformed reply from the broker");
		return CTL_PROTO;
	}
	c->answered = true;
	return CTL_OK;
}

/* A stable name for an exit status, for --json errors. */
static const char *
ctl_exit_name(int code)
{
	switch (code) {
	case CTL_UNKNOWN: return "unknown";
	case CTL_PERM: return "permission-denied";
	case CTL_BADCAP: return "bad-capability";
	case CTL_POLICY: return "exceeds-policy";
	case CTL_USAGE: return "usage";
	case CTL_UNAVAIL: return "unavailable";
	case CTL_PROTO: return "protocol";
	default: return "failed";
	}
}

static int
ctl_exit_for(int err)
{
	if (err <= CB_ECAP_OP && err >= CB_ECAP_TOOLONG)
		return CTL_BADCAP;
	switch (err) {
	case CB_ENOENT:
	case CB_EUNKNOWNTOK:
	case CB_EUNKNOWNKEY:
		return CTL_UNKNOWN;
	case CB_EPERM:
		return CTL_PERM;
	case CB_EPOLICY:
		return CTL_POLICY;
	case CB_EINVAL:
		return CTL_USAGE;
	case CB_EPROTO:
	case CB_EUNKNOWNOP:
		return CTL_PROTO;
	default:
		return CTL_FAIL;
	}
}

/* Report a broker's refusal: a sentence on stderr, and for --json the same
 * as an object on stdout.  Returns the exit code. */
static int
ctl_report_err(struct ctl *c, const struct wire_msg *m)
{
	int64_t err = CB_EINTERNAL;
	const char *name = "error", *reason = "failed";

	cb_ignore(wire_get_i64(m, "err", &err));
	cb_ignore(wire_get_str(m, "name", &name));
	cb_ignore(wire_get_str(m, "reason", &reason));
	fputs("capctl: ", stderr);
	ctl_text(stderr, reason);
	fputc('\n', stderr);
	if (c->json)
		ctl_json(c, json_pack("{s:b,s:o,s:o,s:i}", "ok", 0, "error", J(name), "reason",
		    J(reason), "exit", ctl_exit_for((int)err)));
	return ctl_exit_for((int)err);
}

/* Send the request begun in e and wait for its reply (events a watch
 * connection may interleave are skipped).  CTL_OK with *m holding an ok
 * reply; otherwise the exit code, the refusal reported. */
static int
ctl_call(struct ctl *c, struct wire_enc *e, struct wire_msg *m)
{
	uint64_t want = c->next_id, id;
	bool ok;
	int r;

	if ((r = ctl_send(c, e)) != CTL_OK)
		return r;
	for (;;) {
		if ((r = ctl_recv(c, m, CTL_TIMEOUT_MS, NULL)) != CTL_OK)
			return r;
		if (wire_get_u64(m, "id", &id) != 0)
			continue;	/* an event */
		/* id 0: the broker refused the connection itself (too many
		 * connections, out of descriptors) and says why */
		if (id == 0 && wire_get_bool(m, "ok", &ok) == 0 && !ok) {
			const char *why = "refused";

			cb_ignore(wire_get_str(m, "reason", &why));
			ctl_err("the broker refused the connection: %s", why);
			return CTL_UNAVAIL;
		}
		if (id != want)
			continue;
		break;
	}
	if (wire_get_bool(m, "ok", &ok) != 0) {
		ctl_err("malformed reply from the broker");
		return CTL_PROTO;
	}
	return ok ? CTL_OK : ctl_report_err(c, m);
}

/* For commands whose reply is just ok. */
static int
ctl_done(struct ctl *c, const char *what, const char *id)
{
	if (c->json) {
		ctl_json(c, id ? json_pack("{s:b,s:o}", "ok", 1, "id", J(id)) :
		    json_pack("{s:b}", "ok", 1));
	} else {
		printf("%s", what);
		if (id) {
			putchar(' ');
			ctl_text(stdout, id);
		}
		putchar('\n');
	}
	return CTL_OK;
}

static int
ctl_u64_arg(const char *s, const char *what, uint64_t *v)
{
	char *end;

	errno = 0;
	if (!s || !*s || *s == '-' || *s == '+')
		return ctl_usage("%s needs a positive whole number", what);
	*v = strtoull(s, &end, 10);
	if (*end || errno || *v == 0)
		return ctl_usage("%s needs a positive whole number", what);
	return CTL_OK;
}

/* Per-command option parsing: --json is accepted after the command too. */
#define CTL_JSON_OPT { "json", no_argument, NULL, 'j' }

/* ---- commands ---------------------------------------------------------- */

static int
ctl_status(struct ctl *c, int argc, char **argv)
{
	struct wire_enc e;
	struct wire_msg m;
	const char *state = "", *policy = "";
	uint64_t pid = 0, nsbx = 0, lines = 0, afail = 0, arefused = 0;
	bool healthy = false;
	int r;

	(void)argv;
	if (argc > 1)
		return ctl_usage("status takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &e, "status");
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	cb_ignore(wire_get_str(&m, "state", &state));
	cb_ignore(wire_get_str(&m, "policy", &policy));
	cb_ignore(wire_get_u64(&m, "pid", &pid));
	cb_ignore(wire_get_u64(&m, "sandboxes", &nsbx));
	cb_ignore(wire_get_u64(&m, "audit_lines", &lines));
	cb_ignore(wire_get_bool(&m, "audit_healthy", &healthy));
	cb_ignore(wire_get_u64(&m, "accept_failures", &afail));
	cb_ignore(wire_get_u64(&m, "admin_refused", &arefused));
	if (c->json) {
		/* with how the admin socket fared under pressure (docs/broker.md) */
		ctl_json(c, json_pack("{s:o,s:I,s:I,s:b,s:I,s:o,s:I,s:I}", "state", J(state), "pid",
		    (json_int_t)pid, "sandboxes", (json_int_t)nsbx, "audit_healthy", healthy,
		    "audit_lines", (json_int_t)lines, "policy", J(policy),
		    "accept_failures", (json_int_t)afail, "admin_refused", (json_int_t)arefused));
	} else {
		printf("state      ");
		ctl_text(stdout, state);
		printf("\npid        %" PRIu64 "\nsandboxes  %" PRIu64 "\naudit      %s, %" PRIu64
		    " lines\npolicy     ", pid, nsbx, healthy ? "healthy" : "FAILED (denying)", lines);
		ctl_text(stdout, policy);
		putchar('\n');
		if (afail || arefused)
			printf("admin      %" PRIu64 " failed accepts, %" PRIu64 " connections refused\n",
			    afail, arefused);
	}
	return CTL_OK;
}

static int
ctl_issue(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "sandbox", required_argument, NULL, 's' },
		{ "cap", required_argument, NULL, 'c' },
		{ "ttl", required_argument, NULL, 't' },
		{ "uses", required_argument, NULL, 'u' },
		CTL_JSON_OPT,
		{ NULL, 0, NULL, 0 },
	};
	const char *sid = NULL, *caps[CAP_MAX_CAPS], *token = "", *tid = "";
	size_t ncaps = 0;
	uint64_t ttl = 0, uses = 0, exp = 0;
	struct wire_enc e;
	struct wire_msg m;
	int o, r;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 's': sid = optarg; break;
		case 'c':
			if (ncaps == CAP_MAX_CAPS)
				return ctl_usage("at most %d --cap", CAP_MAX_CAPS);
			caps[ncaps++] = optarg;
			break;
		case 't':
			if ((r = ctl_u64_arg(optarg, "--ttl", &ttl)) != CTL_OK)
				return r;
			if (ttl > CB_DURATION_MAX)
				return ctl_usage("--ttl is at most %u seconds (366 days)", CB_DURATION_MAX);
			break;
		case 'u':
			if ((r = ctl_u64_arg(optarg, "--uses", &uses)) != CTL_OK)
				return r;
			if (uses >= UINT32_MAX)
				return ctl_usage("--uses is too large");
			break;
		case 'j': c->json = true; break;
		default: return CTL_USAGE;
		}
	}
	if (optind != argc)
		return ctl_usage("issue: unexpected argument '%s'", argv[optind]);
	if (!sid || ncaps == 0)
		return ctl_usage("issue needs --sandbox ID and at least one --cap CAP");
	if (!cap_aud_valid(sid, strlen(sid)))
		return ctl_usage("'%s' is not a valid sandbox id", sid);
	/* Say what is wrong with a capability before bothering the broker;
	 * the broker checks again (and the ceiling) anyway. */
	for (size_t i = 0; i < ncaps; i++) {
		struct cap *cp = NULL;

		if ((r = cap_parse(caps[i], &cp)) != 0) {
			fprintf(stderr, "capctl: bad capability '");
			ctl_text(stderr, caps[i]);
			fprintf(stderr, "': %s\n", cb_strerror(r));
			return CTL_BADCAP;
		}
		cap_free(cp);
	}
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &e, "issue");
	wire_put_str(&e, "sandbox", sid);
	wire_arr_begin(&e, "caps");
	for (size_t i = 0; i < ncaps; i++)
		wire_put_str(&e, NULL, caps[i]);
	wire_arr_end(&e);
	if (ttl)
		wire_put_u64(&e, "ttl", ttl);
	if (uses)
		wire_put_u64(&e, "uses", uses);
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	if (wire_get_str(&m, "token", &token) != 0 || wire_get_str(&m, "tid", &tid) != 0) {
		ctl_err("the broker's reply has no token");
		return CTL_PROTO;
	}
	cb_ignore(wire_get_u64(&m, "exp", &exp));
	if (c->json) {
		ctl_json(c, json_pack("{s:o,s:o,s:o,s:I}", "token", J(token), "id", J(tid),
		    "sandbox", J(sid), "exp", (json_int_t)exp));
	} else {
		printf("%s\n", token);
	}
	return CTL_OK;
}

/* A token id in hex, or a whole token whose id we read (no signature
 * check: the broker judges by id). */
static int
ctl_token_id(const char *arg, char hex[2 * CAP_ID_LEN + 1])
{
	uint8_t id[CAP_ID_LEN];
	struct cap_token *t = NULL;

	if (cap_unhex(arg, id, CAP_ID_LEN) == 0) {
		cap_hex(id, CAP_ID_LEN, hex);
		return CTL_OK;
	}
	if (strncmp(arg, "cap1.", 5) == 0 && cap_token_decode(arg, strlen(arg), &t) == 0) {
		cap_hex(t->c.id, CAP_ID_LEN, hex);
		cap_token_free(t);
		return CTL_OK;
	}
	return ctl_usage("'%s' is neither a token id (32 hex digits) nor a token", arg);
}

static int
ctl_revoke(struct ctl *c, int argc, char **argv)
{
	char hex[2 * CAP_ID_LEN + 1];
	struct wire_enc e;
	struct wire_msg m;
	uint64_t count = 0;
	int r;

	if (argc != 2)
		return ctl_usage("revoke needs one TOKEN_ID");
	if ((r = ctl_token_id(argv[1], hex)) != CTL_OK)
		return r;
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &e, "revoke");
	wire_put_str(&e, "tid", hex);
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	cb_ignore(wire_get_u64(&m, "count", &count));
	if (c->json)
		ctl_json(c, json_pack("{s:b,s:s,s:I}", "ok", 1, "id", hex, "revoked", (json_int_t)count));
	else if (count == 0)
		printf("%s was already revoked\n", hex);
	else
		printf("revoked %s (%" PRIu64 " token%s, descendants included)\n", hex, count,
		    count == 1 ? "" : "s");
	return CTL_OK;
}

/* caps arrive one per line; JSON gets an array. */
static json_t *
ctl_json_caps(const char *caps)
{
	char buf[ST_CAPS_MAX + 1];
	char *save = NULL, *tok;
	json_t *a = json_array();

	snprintf(buf, sizeof(buf), "%s", caps);
	for (tok = strtok_r(buf, "\n ", &save); a && tok; tok = strtok_r(NULL, "\n ", &save))
		cb_ignore(json_array_append_new(a, J(tok)));
	return a;
}

/* One row per token, every column filled ("-" when empty) and the
 * capabilities last, so `awk '{print $1, $4}'` works. */
#define CTL_LIST_ROW "%-32s  %-8s  %-20s  %-16s  %-5s  %-8s  %-4s  %-10s  %s\n"

static void
ctl_list_one(struct ctl *c, const struct wire_msg *t, json_t *arr, uint64_t now)
{
	const char *id = "", *parent = NULL, *sbx = "", *caps = "", *by = "";
	uint64_t nbf = 0, exp = 0, uses = 0;
	bool has_uses, revoked = false, elevated = false;
	const char *state;
	char tb[32], ub[24], pb[12];
	static char esbx[CB_ESC_SIZE(CAP_AUD_MAX)], eby[CB_ESC_SIZE(64)], flat[ST_CAPS_MAX + 1],
	    ecaps[CB_ESC_SIZE(ST_CAPS_MAX)];

	cb_ignore(wire_get_str(t, "id", &id));
	cb_ignore(wire_get_str(t, "parent", &parent));
	cb_ignore(wire_get_str(t, "sandbox", &sbx));
	cb_ignore(wire_get_str(t, "caps", &caps));
	cb_ignore(wire_get_str(t, "by", &by));
	cb_ignore(wire_get_u64(t, "nbf", &nbf));
	cb_ignore(wire_get_u64(t, "exp", &exp));
	has_uses = wire_get_u64(t, "uses", &uses) == 0;
	cb_ignore(wire_get_bool(t, "revoked", &revoked));
	cb_ignore(wire_get_bool(t, "elevated", &elevated));
	state = revoked ? "revoked" : exp <= now ? "expired" : has_uses && uses == 0 ? "spent" :
	    "active";
	if (c->json) {
		cb_ignore(json_array_append_new(arr, json_pack("{s:o,s:o,s:o,s:o,s:I,s:I,s:o,s:s,"
		    "s:b,s:b,s:o}", "id", J(id), "parent", parent ? J(parent) : json_null(),
		    "sandbox", J(sbx), "caps", ctl_json_caps(caps), "nbf", (json_int_t)nbf, "exp",
		    (json_int_t)exp, "uses", has_uses ? json_integer((json_int_t)uses) : json_null(),
		    "state", state, "revoked", revoked, "elevated", elevated, "by", J(by))));
		return;
	}
	snprintf(flat, sizeof(flat), "%s", caps);
	for (char *p = flat; *p; p++)
		if (*p == '\n')
			*p = ',';
	snprintf(ub, sizeof(ub), has_uses ? "%" PRIu64 : "-", uses);
	snprintf(pb, sizeof(pb), "%.8s", parent ? parent : "-");
	cb_text_esc(esbx, sizeof(esbx), *sbx ? sbx : "-");
	cb_text_esc(eby, sizeof(eby), *by ? by : "-");
	cb_text_esc(ecaps, sizeof(ecaps), *flat ? flat : "-");
	printf(CTL_LIST_ROW, *id ? id : "-", state, ctl_time(exp, tb, sizeof(tb)), esbx, ub, pb,
	    elevated ? "yes" : "no", eby, ecaps);
}

static int
ctl_list(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "sandbox", required_argument, NULL, 's' },
		CTL_JSON_OPT,
		{ NULL, 0, NULL, 0 },
	};
	static struct wire_msg v[CTL_PAGE_MAX];
	const char *sid = NULL;
	uint64_t offset = 0, now = cb_now();
	bool more = true;
	json_t *arr = NULL;
	int o, r;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 's': sid = optarg; break;
		case 'j': c->json = true; break;
		default: return CTL_USAGE;
		}
	}
	if (optind != argc)
		return ctl_usage("list: unexpected argument '%s'", argv[optind]);
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	if (c->json && !(arr = json_array()))
		return CTL_FAIL;
	while (more) {
		struct wire_enc e;
		struct wire_msg m;
		size_t n = 0;

		ctl_begin(c, &e, "list");
		wire_put_u64(&e, "offset", offset);
		if (sid)
			wire_put_str(&e, "sandbox", sid);
		if ((r = ctl_call(c, &e, &m)) != CTL_OK) {
			json_decref(arr);
			return r;
		}
		if (wire_get_maps(&m, "tokens", v, CTL_PAGE_MAX, &n) != 0 ||
		    wire_get_bool(&m, "more", &more) != 0) {
			json_decref(arr);
			ctl_err("malformed list reply");
			return CTL_PROTO;
		}
		if (offset == 0 && !c->json)
			printf(CTL_LIST_ROW, "ID", "STATE", "EXPIRES", "SANDBOX", "USES", "PARENT",
			    "ELEV", "BY", "CAPABILITIES");
		for (size_t i = 0; i < n; i++)
			ctl_list_one(c, &v[i], arr, now);
		offset += n;
		if (n == 0)
			more = false;	/* a broker that says more but sends none */
	}
	if (c->json)
		ctl_json(c, arr);
	return CTL_OK;
}

static int
ctl_sandboxes(struct ctl *c, int argc, char **argv)
{
	static struct wire_msg v[CTL_PAGE_MAX];
	struct wire_enc e;
	struct wire_msg m;
	size_t n = 0;
	json_t *arr = NULL;
	int r;

	(void)argv;
	if (argc > 1)
		return ctl_usage("sandboxes takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &e, "sandboxes");
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	if (wire_get_maps(&m, "sandboxes", v, CTL_PAGE_MAX, &n) != 0) {
		ctl_err("malformed reply");
		return CTL_PROTO;
	}
	if (c->json && !(arr = json_array()))
		return CTL_FAIL;
	if (!c->json)
		printf("%-20s %-8s %8s %-20s %6s %8s  COMMAND\n", "ID", "TIER", "PID", "STARTED",
		    "TOKENS", "REQUESTS");
	for (size_t i = 0; i < n; i++) {
		const char *id = "", *tier = "", *cmd = "", *ws = "";
		uint64_t started = 0, pid = 0, ntok = 0, nreq = 0, owner = 0;
		char tb[32];

		cb_ignore(wire_get_str(&v[i], "id", &id));
		cb_ignore(wire_get_str(&v[i], "tier", &tier));
		cb_ignore(wire_get_str(&v[i], "command", &cmd));
		cb_ignore(wire_get_str(&v[i], "workspace", &ws));
		cb_ignore(wire_get_u64(&v[i], "started", &started));
		cb_ignore(wire_get_u64(&v[i], "pid", &pid));
		cb_ignore(wire_get_u64(&v[i], "tokens", &ntok));
		cb_ignore(wire_get_u64(&v[i], "requests", &nreq));
		cb_ignore(wire_get_u64(&v[i], "owner", &owner));
		if (c->json) {
			cb_ignore(json_array_append_new(arr, json_pack("{s:o,s:o,s:o,s:o,s:I,s:I,s:I,"
			    "s:I,s:I}", "id", J(id), "tier", J(tier), "command", J(cmd), "workspace",
			    J(ws), "started", (json_int_t)started, "pid", (json_int_t)pid, "tokens",
			    (json_int_t)ntok, "requests", (json_int_t)nreq, "owner", (json_int_t)owner)));
			continue;
		}
		ctl_text(stdout, id);
		printf("%*s %-8s %8" PRIu64 " %-20s %6" PRIu64 " %8" PRIu64 "  ",
		    strlen(id) < 20 ? (int)(20 - strlen(id)) : 0, "", tier, pid,
		    ctl_time(started, tb, sizeof(tb)), ntok, nreq);
		ctl_text(stdout, cmd);
		putchar('\n');
	}
	if (c->json)
		ctl_json(c, arr);
	return CTL_OK;
}

static int
ctl_kill(struct ctl *c, int argc, char **argv)
{
	struct wire_enc e;
	struct wire_msg m;
	int r;

	if (argc != 2)
		return ctl_usage("kill needs one SANDBOX_ID");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &e, "kill");
	wire_put_str(&e, "sandbox", argv[1]);
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	return ctl_done(c, "killed", argv[1]);
}

/* An elevation request as the broker describes it (pending and watch). */
struct ctl_req {
	uint64_t rid, ttl, asked, expires;
	char sandbox[CAP_AUD_MAX + 1];
	char command[ST_TEXT_MAX + 1];
	char cap[CAP_STR_MAX + 1];
	char reason[ST_TEXT_MAX + 1];
	char state[16];
};

static void
ctl_req_get(const struct wire_msg *m, struct ctl_req *q)
{
	const char *s;

	memset(q, 0, sizeof(*q));
	cb_ignore(wire_get_u64(m, "rid", &q->rid));
	cb_ignore(wire_get_u64(m, "ttl", &q->ttl));
	cb_ignore(wire_get_u64(m, "asked", &q->asked));
	cb_ignore(wire_get_u64(m, "expires", &q->expires));
	if (wire_get_str(m, "sandbox", &s) == 0)
		snprintf(q->sandbox, sizeof(q->sandbox), "%s", s);
	if (wire_get_str(m, "command", &s) == 0)
		snprintf(q->command, sizeof(q->command), "%s", s);
	if (wire_get_str(m, "cap", &s) == 0)
		snprintf(q->cap, sizeof(q->cap), "%s", s);
	if (wire_get_str(m, "reason", &s) == 0)
		snprintf(q->reason, sizeof(q->reason), "%s", s);
	if (wire_get_str(m, "state", &s) == 0)
		snprintf(q->state, sizeof(q->state), "%s", s);
}

static json_t *
ctl_req_json(const struct ctl_req *q, const char *event)
{
	json_t *o = json_pack("{s:I,s:o,s:o,s:o,s:o,s:I,s:I,s:I,s:o}", "rid", (json_int_t)q->rid,
	    "sandbox", J(q->sandbox), "command", J(q->command), "cap", J(q->cap), "reason",
	    J(q->reason), "ttl", (json_int_t)q->ttl, "asked", (json_int_t)q->asked, "expires",
	    (json_int_t)q->expires, "state", J(q->state));

	/* "event" first, as watch --json has always printed it. */
	if (o && event) {
		json_t *w = json_pack("{s:o}", "event", J(event));

		if (w && json_object_update(w, o) == 0) {
			json_decref(o);
			return w;
		}
		json_decref(w);
	}
	return o;
}

static int
ctl_pending(struct ctl *c, int argc, char **argv)
{
	static struct wire_msg v[CTL_PAGE_MAX];
	struct wire_enc e;
	struct wire_msg m;
	uint64_t offset = 0;
	size_t n = 0;
	bool more = true;
	json_t *arr = NULL;
	int r;

	(void)argv;
	if (argc > 1)
		return ctl_usage("pending takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	if (c->json && !(arr = json_array()))
		return CTL_FAIL;
	if (!c->json)
		printf("%-6s %-20s %6s %-20s %-20s  CAPABILITY / COMMAND / REASON\n", "ID", "SANDBOX",
		    "TTL", "ASKED", "EXPIRES");
	/* The broker pages by size: many long requests never hide the rest. */
	while (more) {
		ctl_begin(c, &e, "pending");
		wire_put_u64(&e, "offset", offset);
		if ((r = ctl_call(c, &e, &m)) != CTL_OK) {
			json_decref(arr);
			return r;
		}
		if (wire_get_maps(&m, "requests", v, CTL_PAGE_MAX, &n) != 0) {
			json_decref(arr);
			ctl_err("malformed reply");
			return CTL_PROTO;
		}
		if (wire_get_bool(&m, "more", &more) != 0 || n == 0)
			more = false;
		offset += n;
		for (size_t i = 0; i < n; i++) {
			struct ctl_req q;
			char t1[32], t2[32];

			ctl_req_get(&v[i], &q);
			if (c->json) {
				cb_ignore(json_array_append_new(arr, ctl_req_json(&q, NULL)));
				continue;
			}
			printf("%-6" PRIu64 " ", q.rid);
			ctl_text(stdout, q.sandbox);
			printf("%*s %5" PRIu64 "s %-20s %-20s  ",
			    strlen(q.sandbox) < 20 ? (int)(20 - strlen(q.sandbox)) : 0, "", q.ttl,
			    ctl_time(q.asked, t1, sizeof(t1)), ctl_time(q.expires, t2, sizeof(t2)));
			ctl_text(stdout, q.cap);
			printf("\n       command: ");
			ctl_text(stdout, q.command);
			printf("\n       reason:  ");
			ctl_text(stdout, q.reason);
			putchar('\n');
		}
	}
	if (c->json)
		ctl_json(c, arr);
	return CTL_OK;
}

static int
ctl_rid_arg(const char *s, uint64_t *rid)
{
	char *end;

	errno = 0;
	if (!s || !*s || *s == '-' || *s == '+')
		return ctl_usage("'%s' is not a request id", s ? s : "");
	*rid = strtoull(s, &end, 10);
	if (*end || errno)
		return ctl_usage("'%s' is not a request id", s);
	return CTL_OK;
}

static int
ctl_decide(struct ctl *c, int argc, char **argv, bool approve)
{
	static const struct option lo[] = {
		{ "ttl", required_argument, NULL, 't' },
		{ "session", no_argument, NULL, 's' },
		{ "reason", required_argument, NULL, 'r' },
		CTL_JSON_OPT,
		{ NULL, 0, NULL, 0 },
	};
	const char *reason = NULL;
	uint64_t rid = 0, ttl = 0;
	bool session = false;
	struct wire_enc e;
	struct wire_msg m;
	char ridtext[24];
	int o, r;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 't':
			if (!approve)
				return ctl_usage("deny takes no --ttl");
			if ((r = ctl_u64_arg(optarg, "--ttl", &ttl)) != CTL_OK)
				return r;
			if (ttl > CB_DURATION_MAX)
				return ctl_usage("--ttl is at most %u seconds (366 days)", CB_DURATION_MAX);
			break;
		case 's':
			if (!approve)
				return ctl_usage("deny takes no --session");
			session = true;
			break;
		case 'r':
			if (approve)
				return ctl_usage("approve takes no --reason");
			reason = optarg;
			break;
		case 'j': c->json = true; break;
		default: return CTL_USAGE;
		}
	}
	if (optind + 1 != argc)
		return ctl_usage("%s needs one REQUEST_ID", approve ? "approve" : "deny");
	if ((r = ctl_rid_arg(argv[optind], &rid)) != CTL_OK)
		return r;
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &e, approve ? "approve" : "deny");
	wire_put_u64(&e, "rid", rid);
	if (ttl)
		wire_put_u64(&e, "ttl", ttl);
	if (session)
		wire_put_bool(&e, "session", true);
	if (reason)
		wire_put_str(&e, "reason", reason);
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	snprintf(ridtext, sizeof(ridtext), "%" PRIu64, rid);
	return ctl_done(c, approve ? "approved request" : "denied request", ridtext);
}

/* ---- watch ------------------------------------------------------------- */

struct ctl_watch {
	struct ctl_req q[CTL_QUEUE_MAX];
	size_t n;
	uint64_t seen[256];	/* rids already queued (pending + events overlap) */
	size_t nseen;
	bool tty_eof;
};

static void
ctl_watch_add(struct ctl *c, struct ctl_watch *w, const struct wire_msg *m)
{
	struct ctl_req q;

	ctl_req_get(m, &q);
	for (size_t i = 0; i < w->nseen && i < 256; i++)
		if (w->seen[i] == q.rid)
			return;
	w->seen[w->nseen++ % 256] = q.rid;
	if (c->json) {
		ctl_json(c, ctl_req_json(&q, "request"));
		fflush(stdout);
		return;
	}
	if (w->n == CTL_QUEUE_MAX) {
		printf("capctl: more than %d requests waiting; request %" PRIu64
		    " is left to `capctl pending`\n", CTL_QUEUE_MAX, q.rid);
		return;
	}
	w->q[w->n++] = q;
}

/* Read whatever the broker sent: events join the queue; a reply to
 * want_id (0: none expected) is returned in *reply. */
static int
ctl_watch_pump(struct ctl *c, struct ctl_watch *w, int timeout_ms, uint64_t want_id,
    struct wire_msg *reply, bool *got)
{
	struct wire_msg m;
	const char *ev;
	uint64_t id;
	bool to;
	int r;

	*got = false;
	if ((r = ctl_recv(c, &m, timeout_ms, &to)) != CTL_OK || to)
		return r;
	if (wire_get_str(&m, "event", &ev) == 0) {
		if (strcmp(ev, "request") == 0)
			ctl_watch_add(c, w, &m);
		return CTL_OK;
	}
	if (want_id && wire_get_u64(&m, "id", &id) == 0 && id == want_id) {
		*reply = m;
		*got = true;
	}
	return CTL_OK;
}

static void
ctl_watch_show(const struct ctl_req *q)
{
	char t[32];
	uint64_t now = cb_now();

	printf("\nrequest %" PRIu64 " from sandbox ", q->rid);
	ctl_text(stdout, q->sandbox);
	printf("\n  command:    ");
	ctl_text(stdout, q->command);
	printf("\n  capability: ");
	ctl_text(stdout, q->cap);
	printf("\n  for:        %" PRIu64 " s\n  reason:     ", q->ttl);
	ctl_text(stdout, q->reason[0] ? q->reason : "(none given)");
	printf("\n  asked:      %s (expires in %" PRIu64 " s)\n", ctl_time(q->asked, t, sizeof(t)),
	    q->expires > now ? q->expires - now : 0);
	printf("Approve? [y]es, [n]o, [s] for this session, or a shorter number of seconds: ");
	fflush(stdout);
}

/* One answer line from stdin, waiting at most until the request expires
 * while still taking in new events.  0: a line; 1: expired; 2: EOF. */
static int
ctl_watch_answer(struct ctl *c, struct ctl_watch *w, const struct ctl_req *q, char *line,
    size_t len, int *err)
{
	size_t l = 0;

	*err = CTL_OK;
	for (;;) {
		struct pollfd p[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
			{ .fd = c->fd, .events = POLLIN } };
		uint64_t now = cb_now();
		uint64_t left = q->expires > now ? q->expires - now : 0;
		int timeout = left ? (int)(left < 3600 ? left : 3600) * 1000 + 500 : 0;
		ssize_t n;
		char ch;
		bool got;
		struct wire_msg dummy;

		if (poll(p, 2, timeout) < 0) {
			if (errno == EINTR)
				continue;
			*err = CTL_FAIL;
			return 2;
		}
		if (p[1].revents) {
			if ((*err = ctl_watch_pump(c, w, 0, 0, &dummy, &got)) != CTL_OK)
				return 2;
			continue;
		}
		if (!p[0].revents) {
			if (cb_now() >= q->expires)
				return 1;
			continue;
		}
		/* Byte by byte: what follows the line stays for the next prompt. */
		n = read(STDIN_FILENO, &ch, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return l ? 0 : 2;
		if (ch == '\n') {
			line[l] = '\0';
			return 0;
		}
		if (l + 1 < len)
			line[l++] = ch;
		line[l] = '\0';
	}
}

static int
ctl_watch_decide(struct ctl *c, struct ctl_watch *w, const struct ctl_req *q, const char *line)
{
	struct wire_enc e;
	struct wire_msg m;
	unsigned long long secs = 0;
	bool approve, session = false, got = false, ok = false;
	const char *reason = "failed";
	char *end;
	uint64_t want;
	int r;

	if (strcmp(line, "y") == 0 || strcmp(line, "yes") == 0) {
		approve = true;
	} else if (strcmp(line, "s") == 0 || strcmp(line, "session") == 0) {
		approve = session = true;
	} else if (line[0] >= '1' && line[0] <= '9' && (secs = strtoull(line, &end, 10)) > 0 &&
	    *end == '\0') {
		approve = true;
	} else if (strcmp(line, "n") == 0 || strcmp(line, "no") == 0 || line[0] == '\0') {
		approve = false;
	} else {
		return -1;	/* ask again */
	}
	ctl_begin(c, &e, approve ? "approve" : "deny");
	wire_put_u64(&e, "rid", q->rid);
	if (secs)
		wire_put_u64(&e, "ttl", secs);
	if (session)
		wire_put_bool(&e, "session", true);
	if (!approve)
		wire_put_str(&e, "reason", "refused by the administrator");
	want = c->next_id;
	if ((r = ctl_send(c, &e)) != CTL_OK)
		return r;
	while (!got)
		if ((r = ctl_watch_pump(c, w, CTL_TIMEOUT_MS, want, &m, &got)) != CTL_OK)
			return r;
	cb_ignore(wire_get_bool(&m, "ok", &ok));
	if (!isatty(STDIN_FILENO))
		putchar('\n');	/* no echoed answer ended the prompt's line */
	if (ok) {
		printf("%s request %" PRIu64 "%s\n", approve ? "approved" : "denied", q->rid,
		    session ? " for this session" : "");
	} else {
		cb_ignore(wire_get_str(&m, "reason", &reason));
		printf("request %" PRIu64 " not %s: ", q->rid, approve ? "approved" : "denied");
		ctl_text(stdout, reason);
		putchar('\n');
	}
	fflush(stdout);
	return CTL_OK;
}

static int
ctl_watch(struct ctl *c, int argc, char **argv)
{
	static struct ctl_watch w;
	static struct wire_msg v[CTL_PAGE_MAX];
	struct wire_enc e;
	struct wire_msg m;
	size_t n = 0;
	int r;

	(void)argv;
	if (argc > 1)
		return ctl_usage("watch takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	/* Watch first, then list what is already pending: a request made
	 * in between shows in both and is queued once. */
	ctl_begin(c, &e, "watch");
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	for (uint64_t offset = 0, more = 1; more;) {
		bool mb = false;

		ctl_begin(c, &e, "pending");
		wire_put_u64(&e, "offset", offset);
		if ((r = ctl_call(c, &e, &m)) != CTL_OK)
			return r;
		if (wire_get_maps(&m, "requests", v, CTL_PAGE_MAX, &n) != 0) {
			ctl_err("malformed reply");
			return CTL_PROTO;
		}
		for (size_t i = 0; i < n; i++)
			ctl_watch_add(c, &w, &v[i]);
		more = wire_get_bool(&m, "more", &mb) == 0 && mb && n > 0;
		offset += n;
	}
	if (!c->json) {
		printf("watching for elevation requests (Ctrl-C to stop)\n");
		fflush(stdout);
	}
	for (;;) {
		bool got;
		struct ctl_req q;
		char line[64];
		int a, err;

		if (c->json || w.n == 0 || w.tty_eof) {
			if ((r = ctl_watch_pump(c, &w, -1, 0, &m, &got)) != CTL_OK)
				return r;
			if (!c->json && w.tty_eof) {
				for (size_t i = 0; i < w.n; i++) {
					printf("\nrequest %" PRIu64 " (no one to ask: stdin is closed)",
					    w.q[i].rid);
				}
				w.n = 0;
				fflush(stdout);
			}
			continue;
		}
		q = w.q[0];
		memmove(&w.q[0], &w.q[1], (w.n - 1) * sizeof(w.q[0]));
		w.n--;
		if (q.expires && q.expires <= cb_now())
			continue;
		ctl_watch_show(&q);
		for (;;) {
			a = ctl_watch_answer(c, &w, &q, line, sizeof(line), &err);
			if (err != CTL_OK)
				return err;
			if (a == 1) {
				printf("\n(request %" PRIu64 " expired)\n", q.rid);
				break;
			}
			if (a == 2) {
				printf("\n(stdin closed: request %" PRIu64 " left undecided)\n", q.rid);
				w.tty_eof = true;
				break;
			}
			if ((r = ctl_watch_decide(c, &w, &q, line)) == CTL_OK)
				break;
			if (r > 0)
				return r;
			printf("answer y, n, s or a number of seconds: ");
			fflush(stdout);
		}
		fflush(stdout);
	}
}

/* ---- audit ------------------------------------------------------------- */

/* The state directory: from the broker if one answers, else --state. */
static int
ctl_audit_path(struct ctl *c, char *path, size_t len, bool *online)
{
	struct wire_enc e;
	struct wire_msg m;
	const char *state;
	int r;

	*online = false;
	r = ctl_connect(c, c->state != NULL);
	if (r == CTL_UNAVAIL && c->state) {
		snprintf(path, len, "%s/audit.jsonl", c->state);
		return CTL_OK;
	}
	if (r != CTL_OK)
		return r;
	*online = true;
	ctl_begin(c, &e, "status");
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	if (wire_get_str(&m, "state", &state) != 0) {
		ctl_err("the broker did not say where its state is");
		return CTL_PROTO;
	}
	snprintf(path, len, "%s/audit.jsonl", state);
	return CTL_OK;
}

/* What `capctl audit` shows: every filter given must match. */
struct ctl_afilter {
	const char *sandbox, *decision, *op;
	uint64_t since_ms;		/* 0: from the beginning */
};

/* --since: a duration ago ("90s", "15m", "2h", "3d"), or a time: epoch
 * seconds, or YYYY-MM-DD[THH:MM[:SS]][Z] in UTC.  Milliseconds. */
static int
ctl_since_arg(const char *s, uint64_t *ms)
{
	static const char *const fmts[] = { "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d" };
	unsigned long long v;
	char *end;

	if (s[0] >= '0' && s[0] <= '9') {
		errno = 0;
		v = strtoull(s, &end, 10);
		if (!errno && v < (1ULL << 40)) {
			uint64_t unit = !*end ? 0 : end[1] ? 1 : *end == 's' ? 1 : *end == 'm' ? 60 :
			    *end == 'h' ? 3600 : *end == 'd' ? 86400 : 1;
			uint64_t now = cb_now();

			if (!*end) {
				*ms = v * 1000;	/* epoch seconds */
				return CTL_OK;
			}
			if (!end[1] && strchr("smhd", *end)) {
				*ms = v * unit < now ? (now - v * unit) * 1000 : 1;
				return CTL_OK;
			}
		}
	}
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		struct tm tm;
		const char *p;

		memset(&tm, 0, sizeof(tm));
		if ((p = strptime(s, fmts[i], &tm)) && (!*p || (p[0] == 'Z' && !p[1]))) {
			time_t t = timegm(&tm);

			if (t >= 0) {
				*ms = (uint64_t)t * 1000;
				return CTL_OK;
			}
		}
	}
	return ctl_usage("--since takes a duration (90s, 15m, 2h, 1d) or a time "
	    "(2026-01-31T12:00:00Z, 2026-01-31, epoch seconds), not '%s'", s);
}

/* The audit line's "ts" (2026-01-31T12:00:00.123Z) in milliseconds; 0 if
 * it has none. */
static uint64_t
ctl_ts_ms(const char *ts)
{
	struct tm tm;
	const char *p;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	if (!ts || !(p = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm)) || (t = timegm(&tm)) < 0)
		return 0;
	return (uint64_t)t * 1000 + (p[0] == '.' ? (uint64_t)strtoul(p + 1, NULL, 10) % 1000 : 0);
}

static const char *
ctl_jstr(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static bool
ctl_afilter_match(const struct ctl_afilter *f, const json_t *o)
{
	const char *op = ctl_jstr(o, "op") ? ctl_jstr(o, "op") : ctl_jstr(o, "ev");
	const char *v;

	if (f->sandbox && (!(v = ctl_jstr(o, "sandbox")) || strcmp(v, f->sandbox) != 0))
		return false;
	if (f->decision && (!(v = ctl_jstr(o, "decision")) || strcmp(v, f->decision) != 0))
		return false;
	if (f->op && (!op || strcmp(op, f->op) != 0))
		return false;
	return !f->since_ms || ctl_ts_ms(ctl_jstr(o, "ts")) >= f->since_ms;
}

#define CTL_AUD_HEADER "%-24s  %-16s  %-8s  %-16s  %-32s  %s\n"

/* One line of the table.  Every field an agent could have chosen (the
 * resource, the reason, the detail) goes through the one escaper. */
static void
ctl_audit_row(const json_t *o)
{
	const char *op = ctl_jstr(o, "op") ? ctl_jstr(o, "op") : ctl_jstr(o, "ev");
	const char *why = ctl_jstr(o, "reason") ? ctl_jstr(o, "reason") : ctl_jstr(o, "detail");
	const char *actor = ctl_jstr(o, "actor");
	static char sbx[CB_ESC_SIZE(CAP_AUD_MAX)], res[CB_ESC_SIZE(4096)], rsn[CB_ESC_SIZE(4096)];
	char opb[CB_ESC_SIZE(64)];
	char ts[32];

	snprintf(ts, sizeof(ts), "%s", ctl_jstr(o, "ts") ? ctl_jstr(o, "ts") : "-");
	cb_text_esc(sbx, sizeof(sbx), ctl_jstr(o, "sandbox") ? ctl_jstr(o, "sandbox") : "-");
	cb_text_esc(opb, sizeof(opb), op ? op : "-");
	cb_text_esc(res, sizeof(res), ctl_jstr(o, "resource") ? ctl_jstr(o, "resource") : "-");
	cb_text_esc(rsn, sizeof(rsn), why ? why : "");
	printf("%-24s  %-16s  %-8s  %-16s  %-32s  %s", ts, sbx,
	    ctl_jstr(o, "decision") ? ctl_jstr(o, "decision") : "-", opb, res, rsn);
	if (actor && strcmp(actor, "agent") != 0) {
		printf("%s(by ", *rsn ? " " : "");
		ctl_text(stdout, actor);
		putchar(')');
	}
	/* A coalesced line (docs/audit.md) stands for count more denials. */
	if (json_integer_value(json_object_get(o, "count")) > 0) {
		printf("%s(%" JSON_INTEGER_FORMAT " more, ", *rsn ? " " : "",
		    json_integer_value(json_object_get(o, "count")));
		ctl_text(stdout, ctl_jstr(o, "first") ? ctl_jstr(o, "first") : "-");
		fputs(" to ", stdout);
		ctl_text(stdout, ctl_jstr(o, "last") ? ctl_jstr(o, "last") : "-");
		putchar(')');
	}
	putchar('\n');
}


/* The four hex digits at s, as a number (through caps' one hex decoder). */
static bool
ctl_hex_u16(const char *s, unsigned *v)
{
	char hex[5];
	uint8_t b[2];

	memcpy(hex, s, 4);
	hex[4] = '\0';
	if (cap_unhex(hex, b, sizeof(b)) != 0)
		return false;
	*v = (unsigned)b[0] << 8 | b[1];
	return true;
}

/* Parse one audit line.  The log writes a byte that is not valid UTF-8 as
 * a lone low surrogate (\udcXX, Python's surrogateescape), which keeps the
 * exact bytes but which jansson refuses; without this an agent could keep
 * its own lines out of every view by putting one such byte in a path.  A
 * line jansson refuses is read again with each lone surrogate shown as
 * U+FFFD.  (--json still prints the line itself, byte for byte.) */
static json_t *
ctl_audit_load(const char *line, size_t len)
{
	json_t *o = json_loadb(line, len, 0, NULL);
	char *t;
	size_t i = 0, n = 0;
	bool high = false;

	if (o || !(t = malloc(len + 1)))
		return o;
	while (i < len) {
		unsigned v;

		if (line[i] != '\\' || i + 1 >= len) {
			t[n++] = line[i++];
			high = false;
			continue;
		}
		if (line[i + 1] == 'u' && i + 6 <= len && ctl_hex_u16(line + i + 2, &v)) {
			if (v >= 0xdc00 && v <= 0xdfff && !high) {
				memcpy(t + n, "\\ufffd", 6);
			} else {
				memcpy(t + n, line + i, 6);
			}
			high = v >= 0xd800 && v <= 0xdbff;
			n += 6;
			i += 6;
			continue;
		}
		t[n++] = line[i++];	/* the escape and the character it escapes */
		t[n++] = line[i++];
		high = false;
	}
	o = json_loadb(t, n, 0, NULL);
	free(t);
	return o;
}

static int
ctl_audit_print(struct ctl *c, bool follow, bool from_start, const struct ctl_afilter *flt)
{
	struct aud_follow *f = NULL;
	char path[4200];
	const char *line;
	size_t len;
	uint64_t n = 0;
	bool online;
	int r;

	if ((r = ctl_audit_path(c, path, sizeof(path), &online)) != CTL_OK)
		return r;
	/* --follow: what happens from now on, unless --from-start. */
	if ((r = aud_follow_open(path, !follow || from_start, &f)) != 0) {
		ctl_err("cannot read %s: %s", path,
		    errno ? strerror(errno) : cb_strerror(r));
		return errno == EACCES ? CTL_PERM : CTL_FAIL;
	}
	if (!c->json)
		printf(CTL_AUD_HEADER, "TIME", "SANDBOX", "DECISION", "OPERATION", "RESOURCE",
		    "REASON");
	if (follow)
		fflush(stdout);	/* the header now, not with the first new line */
	for (;;) {
		json_t *o;

		r = aud_follow_next(f, follow ? -1 : 0, &line, &len);
		if (r == CB_ETIMEDOUT && !follow)
			break;
		if (r != 0) {
			ctl_err("reading %s: %s", path, cb_strerror(r));
			aud_follow_free(f);
			return CTL_FAIL;
		}
		n++;
		if (!(o = ctl_audit_load(line, len)) || !json_is_object(o)) {
			fprintf(stderr, "capctl: %s: line %" PRIu64 " is not a JSON object (torn?)\n",
			    path, n);
			json_decref(o);
			continue;
		}
		/* --json: the line itself, byte for byte (it is the log's). */
		if (ctl_afilter_match(flt, o)) {
			if (c->json) {
				fwrite(line, 1, len, stdout);
				putchar('\n');
			} else {
				ctl_audit_row(o);
			}
		}
		json_decref(o);
		if (follow)
			fflush(stdout);
	}
	aud_follow_free(f);
	return CTL_OK;
}

static int
ctl_verify_print(struct ctl *c, bool intact, const char *problem, uint64_t line, uint64_t lines,
    uint64_t checkpoints, uint64_t unsealed, const char *what, const char *path, bool offline)
{
	if (c->json) {
		ctl_json(c, json_pack("{s:b,s:o,s:I,s:I,s:I,s:I,s:o,s:o,s:b}", "intact", intact,
		    "problem", J(problem), "line", (json_int_t)line, "lines", (json_int_t)lines,
		    "checkpoints", (json_int_t)checkpoints, "unsealed", (json_int_t)unsealed, "what",
		    J(what), "path", J(path), "offline", offline));
		return intact ? CTL_OK : CTL_FAIL;
	}
	if (intact) {
		printf("intact: ");
		ctl_text(stdout, path);
		printf(": %" PRIu64 " lines, %" PRIu64 " checkpoints, %" PRIu64
		    " lines after the last checkpoint\n", lines, checkpoints, unsealed);
		if (strcmp(problem, "torn") == 0) {
			printf("note: the last line is torn (a crash mid-write), not tampering: ");
			ctl_text(stdout, what);
			putchar('\n');
		}
		return CTL_OK;
	}
	printf("NOT INTACT (%s) at line %" PRIu64 ": ", problem, line);
	ctl_text(stdout, what);
	printf("\n  log: ");
	ctl_text(stdout, path);
	printf("\n");
	return CTL_FAIL;
}

/*
 * Offline verification of a stopped broker's state directory.  The state
 * module is the only reader of state.db, so we open it with st_open: it
 * takes the state lock (a running broker holds it: CB_EBUSY, and then the
 * broker should have answered on its socket) and gives us every public key
 * ever used and the last checkpoint the broker recorded.  It refuses a
 * directory without a state.db rather than create one.  Side effect of
 * st_open: pending requests whose time has passed are marked expired, as
 * the broker itself would on its next start.
 */
static int
ctl_offline_verify(struct ctl *c)
{
	char path[4200], db[4200];
	struct st *st = NULL;
	struct cap_keyring *kr = NULL;
	struct aud_head head, *hp = NULL;
	struct aud_report rep;
	struct stat sb;
	int r, code = CTL_FAIL;

	snprintf(db, sizeof(db), "%s/state.db", c->state);
	snprintf(path, sizeof(path), "%s/audit.jsonl", c->state);
	if (stat(db, &sb) != 0) {
		ctl_err("no broker at %s/admin.sock and no state in %s", c->state,
		    c->state);
		return CTL_UNAVAIL;
	}
	if ((r = st_open(c->state, &st)) != 0) {
		ctl_err("cannot open the state in %s: %s%s", c->state,
		    cb_strerror(r), r == CB_EBUSY ? " (a broker holds it but does not answer)" : "");
		return r == CB_EBUSY ? CTL_UNAVAIL : errno == EACCES ? CTL_PERM : CTL_FAIL;
	}
	if ((r = st_audit_keyring(st, &kr)) != 0) {
		ctl_err("cannot read the keys: %s", cb_strerror(r));
		goto out;
	}
	memset(&head, 0, sizeof(head));
	if (st_get_audit_head(st, head.log_id, &head.seq, head.hash) == 0)
		hp = &head;
	memset(&rep, 0, sizeof(rep));
	/* the state must hold every decision the log records */
	r = aud_verify_state(path, kr, hp, st_dseq(st), &rep);
	if (r != 0 && r != CB_EAUDIT) {
		ctl_err("cannot read %s: %s", path, cb_strerror(r));
		if (r == CB_ENOENT && c->json)
			ctl_json(c, json_pack("{s:b,s:s}", "intact", 0, "problem", "missing"));
		else if (r == CB_ENOENT)
			printf("NOT INTACT (missing): the audit log is gone\n");
		goto out;
	}
	code = ctl_verify_print(c, r == 0, aud_problem_name(rep.problem), rep.line, rep.lines,
	    rep.checkpoints, rep.unsealed, rep.what, path, true);
out:
	cap_keyring_free(kr);
	st_close(st);
	return code;
}

static int
ctl_audit_verify(struct ctl *c)
{
	struct wire_enc e;
	struct wire_msg m;
	const char *problem = "unknown", *what = "", *path = "";
	uint64_t line = 0, lines = 0, checkpoints = 0, unsealed = 0;
	bool intact = false;
	int r;

	r = ctl_connect(c, c->state != NULL);
	if (r == CTL_UNAVAIL && c->state)
		return ctl_offline_verify(c);
	if (r != CTL_OK)
		return r;
	ctl_begin(c, &e, "audit-verify");
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	if (wire_get_bool(&m, "intact", &intact) != 0) {
		ctl_err("malformed audit-verify reply");
		return CTL_PROTO;
	}
	cb_ignore(wire_get_str(&m, "problem", &problem));
	cb_ignore(wire_get_str(&m, "what", &what));
	cb_ignore(wire_get_str(&m, "path", &path));
	cb_ignore(wire_get_u64(&m, "line", &line));
	cb_ignore(wire_get_u64(&m, "lines", &lines));
	cb_ignore(wire_get_u64(&m, "checkpoints", &checkpoints));
	cb_ignore(wire_get_u64(&m, "unsealed", &unsealed));
	return ctl_verify_print(c, intact, problem, line, lines, checkpoints, unsealed, what, path,
	    false);
}

static int
ctl_audit(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "from-start", no_argument, NULL, 'F' },
		{ "sandbox", required_argument, NULL, 's' },
		{ "since", required_argument, NULL, 'S' },
		{ "decision", required_argument, NULL, 'd' },
		{ "op", required_argument, NULL, 'o' },
		CTL_JSON_OPT,
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_afilter flt = { 0 };
	bool follow = false, from_start = false;
	int o, r;

	while ((o = getopt_long(argc, argv, "f", lo, NULL)) != -1) {
		switch (o) {
		case 'f': follow = true; break;
		case 'F': from_start = true; break;
		case 's': flt.sandbox = optarg; break;
		case 'o': flt.op = optarg; break;
		case 'd':
			if (strcmp(optarg, "allow") != 0 && strcmp(optarg, "deny") != 0)
				return ctl_usage("--decision takes allow or deny, not '%s'", optarg);
			flt.decision = optarg;
			break;
		case 'S':
			if ((r = ctl_since_arg(optarg, &flt.since_ms)) != CTL_OK)
				return r;
			break;
		case 'j': c->json = true; break;
		default: return CTL_USAGE;
		}
	}
	if (optind < argc && strcmp(argv[optind], "verify") == 0) {
		if (follow || from_start || flt.sandbox || flt.op || flt.decision || flt.since_ms ||
		    optind + 1 != argc)
			return ctl_usage("audit verify takes no arguments");
		return ctl_audit_verify(c);
	}
	if (optind != argc)
		return ctl_usage("audit: unexpected argument '%s'", argv[optind]);
	if (from_start && !follow)
		return ctl_usage("--from-start goes with --follow (without it, audit prints the whole log)");
	return ctl_audit_print(c, follow, from_start, &flt);
}

/* ---- keys -------------------------------------------------------------- */

static int
ctl_keygen(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "out", required_argument, NULL, 'o' },
		CTL_JSON_OPT,
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL;
	struct cap_key *k = NULL;
	uint8_t kid[CAP_KID_LEN], pk[32];
	char kidhex[2 * CAP_KID_LEN + 1], pkhex[65], def[64];
	int o, r;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'o': out = optarg; break;
		case 'j': c->json = true; break;
		default: return CTL_USAGE;
		}
	}
	if (optind != argc)
		return ctl_usage("keygen: unexpected argument '%s'", argv[optind]);
	if ((r = cap_key_generate(&k)) != 0) {
		ctl_err("cannot generate a key: %s", cb_strerror(r));
		return CTL_FAIL;
	}
	cap_key_id(k, kid);
	cap_key_public(k, pk);
	cap_hex(kid, CAP_KID_LEN, kidhex);
	cap_hex(pk, 32, pkhex);
	if (!out) {
		snprintf(def, sizeof(def), "%s.key", kidhex);
		out = def;
	}
	/* Created exclusively, 0600, fsynced: an existing file is never
	 * overwritten. */
	r = cap_key_save(k, out);
	cap_key_free(k);
	if (r != 0) {
		ctl_err("cannot write %s: %s", out,
		    r == CB_EEXIST ? "it already exists" : errno ? strerror(errno) : cb_strerror(r));
		return CTL_FAIL;
	}
	if (c->json) {
		ctl_json(c, json_pack("{s:s,s:s,s:o}", "kid", kidhex, "public", pkhex, "file", J(out)));
	} else {
		printf("key %s written to ", kidhex);
		ctl_text(stdout, out);
		printf(" (mode 0600)\npublic key %s\n", pkhex);
	}
	return CTL_OK;
}

static int
ctl_rotate(struct ctl *c, int argc, char **argv)
{
	struct wire_enc e;
	struct wire_msg m;
	const char *kid = "";
	int r;

	(void)argv;
	if (argc > 1)
		return ctl_usage("rotate-key takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &e, "rotate-key");
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	cb_ignore(wire_get_str(&m, "kid", &kid));
	if (c->json) {
		ctl_json(c, json_pack("{s:b,s:o}", "ok", 1, "kid", J(kid)));
	} else {
		printf("now signing with key ");
		ctl_text(stdout, kid);
		printf("; older keys verify until retired\n");
	}
	return CTL_OK;
}

static int
ctl_retire(struct ctl *c, int argc, char **argv)
{
	struct wire_enc e;
	struct wire_msg m;
	uint8_t kid[CAP_KID_LEN];
	int r;

	if (argc != 2)
		return ctl_usage("retire-key needs one KID");
	if (cap_unhex(argv[1], kid, CAP_KID_LEN) != 0)
		return ctl_usage("'%s' is not a key id (16 hex digits)", argv[1]);
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &e, "retire-key");
	wire_put_str(&e, "kid", argv[1]);
	if ((r = ctl_call(c, &e, &m)) != CTL_OK)
		return r;
	return ctl_done(c, "retired key", argv[1]);
}

/* ---- main -------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(struct ctl *, int, char **);
} ctl_cmds[] = {
	{ "status", ctl_status },
	{ "issue", ctl_issue },
	{ "revoke", ctl_revoke },
	{ "list", ctl_list },
	{ "sandboxes", ctl_sandboxes },
	{ "kill", ctl_kill },
	{ "pending", ctl_pending },
	{ "approve", NULL },
	{ "deny", NULL },
	{ "watch", ctl_watch },
	{ "audit", ctl_audit },
	{ "keygen", ctl_keygen },
	{ "rotate-key", ctl_rotate },
	{ "retire-key", ctl_retire },
};

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "state", required_argument, NULL, 's' },
		CTL_JSON_OPT,
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl c = { .fd = -1 };
	int o, code = CTL_USAGE;
	const char *cmd;

	while ((o = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
		switch (o) {
		case 'S': c.sock = optarg; break;
		case 's': c.state = optarg; break;
		case 'j': c.json = true; break;
		case 'h': help(); return CTL_OK;
		case 'V': printf("capctl %s\n", CB_VERSION); return CTL_OK;
		default: usage(stderr); return CTL_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return CTL_USAGE;
	}
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	optind = 0;	/* each command parses its own options from argv[1]; 0 makes
			 * glibc start afresh (and permute again) */
	signal(SIGPIPE, SIG_IGN);
	if (!(c.tx = malloc(WIRE_REQ_MAX)) || !(c.rx = malloc(WIRE_REPLY_MAX)) ||
	    wire_dec_new(WIRE_REPLY_MAX, &c.dec) != 0) {
		ctl_err("out of memory");
		code = CTL_FAIL;
		goto out;
	}
	if (strcmp(cmd, "approve") == 0 || strcmp(cmd, "deny") == 0) {
		code = ctl_decide(&c, argc, argv, cmd[0] == 'a');
		goto out;
	}
	for (size_t i = 0; i < sizeof(ctl_cmds) / sizeof(ctl_cmds[0]); i++) {
		if (strcmp(ctl_cmds[i].name, cmd) == 0 && ctl_cmds[i].fn) {
			code = ctl_cmds[i].fn(&c, argc, argv);
			goto out;
		}
	}
	ctl_err("unknown command '%s'", cmd);
	usage(stderr);
	code = CTL_USAGE;
out:
	/* --json: every failure ends in one object on stdout, not only the
	 * broker's refusals (which print theirs in ctl_report_err). */
	if (c.json && code != CTL_OK && !c.json_done)
		ctl_json(&c, json_pack("{s:b,s:s,s:o,s:i}", "ok", 0, "error", ctl_exit_name(code),
		    "reason", J(ctl_lasterr[0] ? ctl_lasterr : "failed"), "exit", code));
	if (c.fd >= 0)
		close(c.fd);
	wire_dec_free(c.dec);
	free(c.tx);
	free(c.rx);
	if (fflush(stdout) != 0 && code == CTL_OK)
		code = CTL_FAIL;
	return code;
}
