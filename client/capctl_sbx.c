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

static void
ctl_count(uint64_t v, char *buf, size_t len)
{
	if (v == WIRE_ADM_COUNT_UNKNOWN)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%" PRIu64, v);
}

static void
ctl_sandbox_one(struct ctl *c, const struct wire_adm_sbx *s, json_t *arr)
{
	char tb[32];

	char nt[24], nr[24];

	/* A count another broker did not publish (an earlier version): null,
	 * "-", never a made-up 0. */
	if (c->json) {
		json_t *o = json_pack("{s:o,s:o,s:o,s:o,s:I,s:I,s:o,s:o,s:I}", "id", J(s->id), "tier",
		    J(s->tier), "command", J(s->command), "workspace", J(s->workspace), "started",
		    (json_int_t)s->started, "pid", (json_int_t)s->pid, "tokens",
		    s->tokens == WIRE_ADM_COUNT_UNKNOWN ? json_null() : json_integer((json_int_t)s->tokens),
		    "requests", s->requests == WIRE_ADM_COUNT_UNKNOWN ? json_null() :
		    json_integer((json_int_t)s->requests), "owner", (json_int_t)s->owner);

		if (o && s->broker)
			json_object_set_new(o, "broker", J(s->broker));
		cb_ignore(json_array_append_new(arr, o));
		return;
	}
	ctl_count(s->tokens, nt, sizeof(nt));
	ctl_count(s->requests, nr, sizeof(nr));
	ctl_text(stdout, s->id);
	printf("%*s %-8s %8" PRIu64 " %-20s %6s %8s  ",
	    strlen(s->id) < 20 ? (int)(20 - strlen(s->id)) : 0, "", s->tier, s->pid,
	    ctl_time(s->started, tb, sizeof(tb)), nt, nr);
	if (c->cluster) {
		ctl_text(stdout, s->broker ? s->broker : "-");
		printf("  ");
	}
	ctl_text(stdout, s->command);
	putchar('\n');
}

int
ctl_sandboxes(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = { CTL_JSON_OPT, CTL_CLUSTER_OPT, { NULL, 0, NULL, 0 } };
	struct wire_adm_req rq;
	struct wire_adm_rep m;
	uint64_t offset = 0;
	bool more = true;
	json_t *arr = NULL;
	int o, r;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'j': c->json = true; break;
		case 'C': c->cluster = true; break;
		default: return CTL_USAGE;
		}
	}
	if (optind != argc)
		return ctl_usage("sandboxes takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	if (c->json && !(arr = json_array()))
		return CTL_FAIL;
	/* A --cluster view comes in pages (the broker says "more"). */
	while (more) {
		ctl_begin(c, &rq, WIRE_ADM_SANDBOXES);
		rq.cluster = c->cluster;
		rq.offset = offset;
		if ((r = ctl_call(c, &rq, &m)) != CTL_OK) {
			json_decref(arr);
			return r;
		}
		if (offset == 0 && !c->json)
			printf("%-20s %-8s %8s %-20s %6s %8s  %sCOMMAND\n", "ID", "TIER", "PID",
			    "STARTED", "TOKENS", "REQUESTS", c->cluster ? "BROKER  " : "");
		more = m.more && m.nsbxs > 0;
		offset += m.nsbxs;
		for (size_t i = 0; i < m.nsbxs; i++)
			ctl_sandbox_one(c, &m.sbxs[i], arr);
	}
	if (c->json)
		ctl_json(c, arr);
	return CTL_OK;
}

int
ctl_kill(struct ctl *c, int argc, char **argv)
{
	struct wire_adm_req rq;
	struct wire_adm_rep m;
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
ctl_req_get(const struct wire_adm_elev *e, struct ctl_req *q)
{
	memset(q, 0, sizeof(*q));
	q->rid = e->rid;
	q->ttl = e->ttl;
	q->asked = e->asked;
	q->expires = e->expires;
	snprintf(q->sandbox, sizeof(q->sandbox), "%s", e->sandbox);
	snprintf(q->command, sizeof(q->command), "%s", e->command);
	snprintf(q->cap, sizeof(q->cap), "%s", e->cap);
	snprintf(q->reason, sizeof(q->reason), "%s", e->reason);
	snprintf(q->state, sizeof(q->state), "%s", e->state);
	snprintf(q->broker, sizeof(q->broker), "%s", e->broker ? e->broker : "");
}

json_t *
ctl_req_json(const struct ctl_req *q, const char *event)
{
	json_t *o = json_pack("{s:I,s:o,s:o,s:o,s:o,s:I,s:I,s:I,s:o}", "rid", (json_int_t)q->rid,
	    "sandbox", J(q->sandbox), "command", J(q->command), "cap", J(q->cap), "reason",
	    J(q->reason), "ttl", (json_int_t)q->ttl, "asked", (json_int_t)q->asked, "expires",
	    (json_int_t)q->expires, "state", J(q->state));

	if (o && q->broker[0])
		json_object_set_new(o, "broker", J(q->broker));

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
	struct wire_adm_req rq;
	struct wire_adm_rep m;
	uint64_t offset = 0;
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
		more = m.more && m.nrequests > 0;
		offset += m.nrequests;
		for (size_t i = 0; i < m.nrequests; i++) {
			struct ctl_req q;
			char t1[32], t2[32];

			ctl_req_get(&m.requests[i], &q);
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
			if (q.broker[0]) {
				printf("\n       broker:  ");
				ctl_text(stdout, q.broker);
			}
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
	struct wire_adm_rep m;
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
