/*
 * capctl_audit.c - `capctl audit` (the log as a table or JSON lines, with
 * filters, --follow) and `capctl audit verify`, through a running broker
 * or, with --state DIR, from a stopped broker's state directory.
 *
 * Trust domain: an administrator's process.  Every audit line is parsed by
 * jansson; fields an agent could have chosen are shown through the one
 * escaper, and --json prints the log's own bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "audit/audit.h"
#include "client/capctl_int.h"

/* The state directory: from the broker if one answers, else --state. */
static int
ctl_audit_path(struct ctl *c, char *path, size_t len, bool *online)
{
	struct wire_adm_req rq;
	struct wire_adm_rep m;
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
	ctl_begin(c, &rq, WIRE_ADM_STATUS);
	rq.flush = true;	/* every decision made so far is in the file we read */
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
		return r;
	snprintf(path, len, "%s/audit.jsonl", m.state);
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
	/* A coalesced line (docs/audit.md) stands for count more denials; an
	 * audit.unlogged line for count lines the log refused. */
	if (json_integer_value(json_object_get(o, "count")) > 0) {
		printf("%s(%" JSON_INTEGER_FORMAT " %s, ", *rsn ? " " : "",
		    json_integer_value(json_object_get(o, "count")),
		    op && strcmp(op, "audit.unlogged") == 0 ? "not logged" : "more");
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

/* audit verify --cluster: the check against the cluster's record, and
 * every broker's recorded head with its age. */
static json_t *
ctl_verify_cluster_json(const struct wire_adm_rep *v)
{
	json_t *heads = json_array();

	for (size_t i = 0; heads && i < v->nheads; i++) {
		const struct wire_adm_head *h = &v->heads[i];

		json_array_append_new(heads, json_pack("{s:o,s:o,s:I,s:I,s:b}", "broker",
		    J(h->broker), "log", J(h->log), "line", (json_int_t)(h->seq + 1), "age_ms",
		    (json_int_t)h->age_ms, "live", h->live));
	}
	return json_pack("{s:b,s:o,s:o,s:o}", "intact", v->cluster_intact, "problem",
	    J(v->cluster_problem ? v->cluster_problem : ""), "what",
	    J(v->cluster_what ? v->cluster_what : ""), "heads", heads ? heads : json_array());
}

static void
ctl_verify_cluster_print(const struct wire_adm_rep *v)
{
	if (v->cluster_intact)
		printf("cluster: ");
	else
		printf("cluster: NOT INTACT (%s): ", v->cluster_problem ? v->cluster_problem : "?");
	ctl_text(stdout, v->cluster_what ? v->cluster_what : "");
	putchar('\n');
	for (size_t i = 0; i < v->nheads; i++) {
		const struct wire_adm_head *h = &v->heads[i];

		printf("  ");
		ctl_text(stdout, h->broker);
		printf("  log %.32s  line %" PRIu64 "  recorded %" PRIu64 ".%01" PRIu64 " s ago  %s\n",
		    h->log, h->seq + 1, h->age_ms / 1000u, h->age_ms % 1000u / 100u,
		    h->live ? "live" : "not live");
	}
}

/* A verification's report, the broker's (its audit-verify reply) or our
 * own offline one in the same shape. */
static int
ctl_verify_print(struct ctl *c, const struct wire_adm_rep *v, bool offline)
{
	bool intact = v->intact;
	const char *problem = v->problem, *what = v->what, *path = v->path;
	uint64_t line = v->line, lines = v->lines, checkpoints = v->checkpoints;
	uint64_t unsealed = v->unsealed;

	if (c->json) {
		json_t *o = json_pack("{s:b,s:o,s:I,s:I,s:I,s:I,s:o,s:o,s:b}", "intact", intact,
		    "problem", J(problem), "line", (json_int_t)line, "lines", (json_int_t)lines,
		    "checkpoints", (json_int_t)checkpoints, "unsealed", (json_int_t)unsealed, "what",
		    J(what), "path", J(path), "offline", offline);

		if (o && v->checked_cluster)
			json_object_set_new(o, "cluster", ctl_verify_cluster_json(v));
		ctl_json(c, o);
		return intact ? CTL_OK : CTL_FAIL;
	}
	if (v->checked_cluster)
		ctl_verify_cluster_print(v);
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
	code = ctl_verify_print(c, &(struct wire_adm_rep){ .intact = r == 0,
	    .problem = aud_problem_name(rep.problem), .line = rep.line, .lines = rep.lines,
	    .checkpoints = rep.checkpoints, .unsealed = rep.unsealed, .what = rep.what,
	    .path = path }, true);
out:
	cap_keyring_free(kr);
	st_close(st);
	return code;
}

static int
ctl_audit_verify(struct ctl *c, bool cluster)
{
	struct wire_adm_req rq;
	struct wire_adm_rep m;
	int r;

	r = ctl_connect(c, c->state != NULL);
	/* The cluster's record is read by the broker's link: offline, only
	 * the local check. */
	if (r == CTL_UNAVAIL && c->state && cluster) {
		ctl_err("audit verify --cluster needs the running broker (its link reads the "
		    "cluster's record); `capctl --state DIR audit verify` checks the log alone");
		return CTL_UNAVAIL;
	}
	if (r == CTL_UNAVAIL && c->state)
		return ctl_offline_verify(c);
	if (r != CTL_OK)
		return r;
	ctl_begin(c, &rq, WIRE_ADM_AUDIT_VERIFY);
	rq.cluster = cluster;
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
		return r;
	return ctl_verify_print(c, &m, false);
}

int
ctl_audit(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "from-start", no_argument, NULL, 'F' },
		{ "sandbox", required_argument, NULL, 's' },
		{ "since", required_argument, NULL, 'S' },
		{ "decision", required_argument, NULL, 'd' },
		{ "op", required_argument, NULL, 'o' },
		{ "cluster", no_argument, NULL, 'c' },
		CTL_JSON_OPT,
		{ NULL, 0, NULL, 0 },
	};
	struct ctl_afilter flt = { 0 };
	bool follow = false, from_start = false, cluster = false;
	int o, r;

	while ((o = getopt_long(argc, argv, "f", lo, NULL)) != -1) {
		switch (o) {
		case 'f': follow = true; break;
		case 'F': from_start = true; break;
		case 's': flt.sandbox = optarg; break;
		case 'c': cluster = true; break;
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
			return ctl_usage("audit verify takes no arguments but --cluster");
		return ctl_audit_verify(c, cluster);
	}
	if (cluster)
		return ctl_usage("--cluster goes with audit verify");
	if (optind != argc)
		return ctl_usage("audit: unexpected argument '%s'", argv[optind]);
	if (from_start && !follow)
		return ctl_usage("--from-start goes with --follow (without it, audit prints the whole log)");
	return ctl_audit_print(c, follow, from_start, &flt);
}
