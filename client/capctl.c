/*
 * capctl.c - the administrator's command line: issue, list and revoke
 * tokens, list and kill sandboxes, approve or deny elevation requests
 * (one by one or with the `watch` prompt), read, follow and verify the
 * audit log, and manage signing keys.
 *
 * This file holds main, the command table, the output helpers and the
 * glue to the admin client (client/admin.c); the commands live by group in
 * capctl_tok.c (tokens, keys), capctl_sbx.c (sandboxes, requests),
 * capctl_watch.c (the approval prompt) and capctl_audit.c.
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
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/capctl_int.h"

#ifndef CB_VERSION
#define CB_VERSION "0.1"
#endif

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: capctl [--socket PATH | --state DIR] [--json] [--cluster] COMMAND [ARGS]\n"
	    "  issue --sandbox ID --cap CAP... [--ttl S] [--uses N]   prints the token\n"
	    "  revoke TOKEN_ID|TOKEN        revokes it and every token derived from it\n"
	    "  list [--sandbox ID] [--cluster]   issued tokens\n"
	    "  sandboxes [--cluster]        running sandboxes\n"
	    "  kill SANDBOX_ID              ends a sandbox at once\n"
	    "  pending                      elevation requests awaiting a decision (in a\n"
	    "                               cluster: every broker's)\n"
	    "  approve REQUEST_ID [--ttl S] [--session]\n"
	    "  deny REQUEST_ID [--reason TEXT]\n"
	    "  watch                        prompts for each new request (--json: streams them)\n"
	    "  audit [--sandbox ID] [--since T] [--decision allow|deny] [--op OP]\n"
	    "        [--follow [--from-start]]   the audit log as a table (--json: JSON lines)\n"
	    "  audit verify [--cluster]     checks the hash chain and signed checkpoints (--cluster:\n"
	    "                               also against the heads the cluster recorded)\n"
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
	    "  --cluster         list, sandboxes: those of every broker of the broker's cluster,\n"
	    "                    with a BROKER column (also after COMMAND)\n"
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

/* The last message capctl printed on stderr, kept for --json: a failure
 * that is not the broker's refusal still ends in one JSON object. */
static char ctl_lasterr[512];

void
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

int
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
void
ctl_json(struct ctl *c, json_t *v)
{
	cb_ignore(cli_json_print(v, stdout));
	c->json_done = true;
}

/* Text for a person: the one escaper (common/text.c) makes controls,
 * bidi overrides, invisible characters and invalid UTF-8 visible, so an
 * agent's text cannot move the cursor, clear the screen, fake a prompt or
 * read as something else. */
void
ctl_text(FILE *f, const char *s)
{
	cb_ignore(cb_text_fputs(s, f));
}

/* A request's reason, free text an agent wrote: escaped and at most
 * CB_TEXT_SHOW_MAX bytes, so a long one cannot wrap into a block that
 * reads as more of the request (`--json` keeps it whole). */
void
ctl_reason(FILE *f, const char *s)
{
	char buf[CB_TEXT_SHOW_SIZE];

	fputs(cb_text_show(buf, sizeof(buf), s, CB_TEXT_SHOW_MAX), f);
}

const char *
ctl_time(uint64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t == 0 || !gmtime_r(&tt, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "-");
	return buf;
}

/* ---- the admin connection (client/admin.c) ------------------------------- */

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

int
ctl_connect(struct ctl *c, bool quiet)
{
	char path[4200];
	int r;

	if (ctl_socket_path(c, path, sizeof(path)) != 0) {
		if (!quiet)
			ctl_err("no admin socket: give --socket PATH or --state DIR, "
			    "or set CAPBROKER_SOCKET");
		return CTL_UNAVAIL;
	}
	r = cc_adm_connect(c->adm, path);
	if (r != CTL_OK && !(quiet && r == CTL_UNAVAIL))
		ctl_err("%s", cc_adm_why(c->adm));
	return r;
}

void
ctl_begin(struct ctl *c, struct wire_adm_req *rq, enum wire_adm_cmd cmd)
{
	cc_adm_begin(c->adm, rq, cmd);
}

int
ctl_send(struct ctl *c, const struct wire_adm_req *rq)
{
	int r = cc_adm_send(c->adm, rq);

	if (r != CTL_OK)
		ctl_err("%s", cc_adm_why(c->adm));
	return r;
}

int
ctl_recv(struct ctl *c, struct wire_msg *m, int timeout_ms, bool *timedout)
{
	int r = cc_adm_recv(c->adm, m, timeout_ms, timedout, NULL, 0);

	if (r != CTL_OK)
		ctl_err("%s", cc_adm_why(c->adm));
	return r;
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

/* Report a broker's refusal: a sentence on stderr, and for --json the same
 * as an object on stdout.  Returns the exit code. */
static int
ctl_report_err(struct ctl *c, const struct wire_adm_rep *rp)
{
	fputs("capctl: ", stderr);
	ctl_text(stderr, rp->reason);
	fputc('\n', stderr);
	if (c->json)
		ctl_json(c, json_pack("{s:b,s:o,s:o,s:i}", "ok", 0, "error", J(rp->name), "reason",
		    J(rp->reason), "exit", cc_adm_exit_for(rp->err)));
	return cc_adm_exit_for(rp->err);
}

int
ctl_call(struct ctl *c, const struct wire_adm_req *rq, struct wire_adm_rep *rp)
{
	int r = cc_adm_call(c->adm, rq, rp, NULL, 0);

	if (r == CTL_OK)
		return r;
	if (cc_adm_refused(c->adm))
		return ctl_report_err(c, rp);
	ctl_err("%s", cc_adm_why(c->adm));
	return r;
}

/* For commands whose reply is just ok. */
int
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

int
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

/* ---- commands ---------------------------------------------------------- */

static int
ctl_status(struct ctl *c, int argc, char **argv)
{
	struct wire_adm_req rq;
	struct wire_adm_rep m;
	int r;

	(void)argv;
	if (argc > 1)
		return ctl_usage("status takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &rq, WIRE_ADM_STATUS);
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
		return r;
	if (c->json) {
		/* with how the admin socket fared under pressure (docs/broker.md) */
		json_t *o = json_pack("{s:o,s:I,s:I,s:b,s:I,s:o,s:I,s:I}", "state", J(m.state), "pid",
		    (json_int_t)m.pid, "sandboxes", (json_int_t)m.sandboxes, "audit_healthy",
		    m.audit_healthy, "audit_lines", (json_int_t)m.audit_lines, "policy",
		    J(m.policy), "accept_failures", (json_int_t)m.accept_failures, "admin_refused",
		    (json_int_t)m.admin_refused);

		/* in a cluster (docs/cluster.md) */
		if (o && m.cluster) {
			json_object_set_new(o, "cluster", J(m.cluster));
			json_object_set_new(o, "cluster_fresh", json_boolean(m.cluster_fresh));
			json_object_set_new(o, "cluster_applied", json_integer((json_int_t)m.cluster_applied));
		}
		ctl_json(c, o);
	} else {
		printf("state      ");
		ctl_text(stdout, m.state);
		printf("\npid        %" PRIu64 "\nsandboxes  %" PRIu64 "\naudit      %s, %" PRIu64
		    " lines\npolicy     ", m.pid, m.sandboxes,
		    m.audit_healthy ? "healthy" : "FAILED (denying)", m.audit_lines);
		ctl_text(stdout, m.policy);
		putchar('\n');
		if (m.accept_failures || m.admin_refused)
			printf("admin      %" PRIu64 " failed accepts, %" PRIu64 " connections refused\n",
			    m.accept_failures, m.admin_refused);
		if (m.cluster) {
			printf("cluster    ");
			ctl_text(stdout, m.cluster);
			printf(", %s, change %" PRIu64 " applied\n",
			    m.cluster_fresh ? "fresh" : "STALE (denying)", m.cluster_applied);
		}
	}
	return CTL_OK;
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
		CTL_CLUSTER_OPT,
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl c = { 0 };
	int o, code = CTL_USAGE;
	const char *cmd;

	while ((o = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
		switch (o) {
		case 'S': c.sock = optarg; break;
		case 's': c.state = optarg; break;
		case 'j': c.json = true; break;
		case 'C': c.cluster = true; break;
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
	/* pending shows the cluster's requests in a cluster anyway */
	if (c.cluster && strcmp(cmd, "list") != 0 && strcmp(cmd, "sandboxes") != 0 &&
	    strcmp(cmd, "pending") != 0) {
		ctl_usage("--cluster is for list, sandboxes and pending");
		return CTL_USAGE;
	}
	argc -= optind;
	argv += optind;
	optind = 0;	/* each command parses its own options from argv[1]; 0 makes
			 * glibc start afresh (and permute again) */
	signal(SIGPIPE, SIG_IGN);
	if (cc_adm_new(&c.adm) != 0) {
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
	cc_adm_free(c.adm);
	if (fflush(stdout) != 0 && code == CTL_OK)
		code = CTL_FAIL;
	return code;
}
