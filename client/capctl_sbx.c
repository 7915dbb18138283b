/*
 * capctl_sbx.c - capctl's sandbox and request commands: sandboxes, kill,
 * pending, approve and deny.
 *
 * Trust domain: an administrator's process.  A sandbox's command line and
 * a request's capability and reason are an agent's words: they reach the
 * terminal only through ctl_text().
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "client/capctl_int.h"

int
ctl_sandboxes(struct ctl *c, int argc, char **argv)
{
	static struct wire_msg v[CTL_PAGE_MAX];
	struct wire_adm_req rq;
	struct wire_msg m;
	size_t n = 0;
	json_t *arr = NULL;
	int r;

	(void)argv;
	if (argc > 1)
		return ctl_usage("sandboxes takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &rq, WIRE_ADM_SANDBOXES);
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
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

int
ctl_kill(struct ctl *c, int argc, char **argv)
{
	struct wire_adm_req rq;
	struct wire_msg m;
	int r;

	if (argc != 2)
		return ctl_usage("kill needs one SANDBOX_ID");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &rq, WIRE_ADM_KILL);
	rq.sandbox = argv[1];
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
		return r;
	return ctl_done(c, "killed", argv[1]);
}

void
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

json_t *
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

int
ctl_pending(struct ctl *c, int argc, char **argv)
{
	static struct wire_msg v[CTL_PAGE_MAX];
	struct wire_adm_req rq;
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
		ctl_begin(c, &rq, WIRE_ADM_PENDING);
		rq.offset = offset;
		if ((r = ctl_call(c, &rq, &m)) != CTL_OK) {
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
			ctl_reason(stdout, q.reason);
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

int
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
	struct wire_adm_req rq;
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
	ctl_begin(c, &rq, approve ? WIRE_ADM_APPROVE : WIRE_ADM_DENY);
	rq.has_rid = true;
	rq.rid = rid;
	if (ttl)
		rq.ttl = ttl;
	if (session)
		rq.session = true;
	if (reason)
		rq.reason = reason;
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
		return r;
	snprintf(ridtext, sizeof(ridtext), "%" PRIu64, rid);
	return ctl_done(c, approve ? "approved request" : "denied request", ridtext);
}
