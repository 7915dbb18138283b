/*
 * capctl_tok.c - capctl's token and key commands: issue, revoke, list,
 * keygen, rotate-key, retire-key.
 *
 * Trust domain: an administrator's process.  A capability is checked
 * here (cap_parse) only to say early what is wrong with it; the broker
 * judges it again, with the ceiling.  A listed token's sandbox, issuer and
 * capabilities go to the terminal through the one escaper.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "client/capctl_int.h"

int
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
	const char *sid = NULL, *caps[CAP_MAX_CAPS];
	size_t ncaps = 0;
	uint64_t ttl = 0, uses = 0;
	struct wire_adm_req rq;
	struct wire_adm_rep m;
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
	ctl_begin(c, &rq, WIRE_ADM_ISSUE);
	rq.sandbox = sid;
	memcpy(rq.caps, caps, ncaps * sizeof(caps[0]));
	rq.ncaps = ncaps;
	rq.ttl = ttl;
	rq.has_uses = uses != 0;
	rq.uses = uses;
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
		return r;
	if (c->json) {
		ctl_json(c, json_pack("{s:o,s:o,s:o,s:I}", "token", J(m.token), "id", J(m.tid),
		    "sandbox", J(sid), "exp", (json_int_t)m.exp));
	} else {
		printf("%s\n", m.token);
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

int
ctl_revoke(struct ctl *c, int argc, char **argv)
{
	char hex[2 * CAP_ID_LEN + 1];
	struct wire_adm_req rq;
	struct wire_adm_rep m;
	uint64_t count;
	int r;

	if (argc != 2)
		return ctl_usage("revoke needs one TOKEN_ID");
	if ((r = ctl_token_id(argv[1], hex)) != CTL_OK)
		return r;
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &rq, WIRE_ADM_REVOKE);
	rq.tid = hex;
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
		return r;
	count = m.count;
	/* Committed, and that broker fails closed by now; but its
	 * administrator should look at it (docs/cluster.md). */
	if (m.unconfirmed)
		ctl_err("revoked in the cluster, but broker %s did not confirm within the staleness "
		    "bound (it refuses every token until it catches up)", m.unconfirmed);
	if (c->json) {
		json_t *o = json_pack("{s:b,s:s,s:I}", "ok", 1, "id", hex, "revoked", (json_int_t)count);

		if (o && m.unconfirmed)
			json_object_set_new(o, "unconfirmed", J(m.unconfirmed));
		ctl_json(c, o);
	} else if (count == 0)
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
/* --cluster: the same with the broker that minted it */
#define CTL_LIST_CROW "%-32s  %-8s  %-20s  %-16s  %-5s  %-8s  %-4s  %-10s  %-20s  %s\n"

static void
ctl_list_one(struct ctl *c, const struct wire_adm_token *t, json_t *arr, uint64_t now)
{
	const char *id = t->id, *parent = t->parent, *sbx = t->sandbox, *caps = t->caps;
	const char *by = t->by;
	uint64_t nbf = t->nbf, exp = t->exp, uses = t->uses;
	bool has_uses = t->has_uses, revoked = t->revoked, elevated = t->elevated;
	const char *state;
	char tb[32], ub[24], pb[12];
	static char esbx[CB_ESC_SIZE(CAP_AUD_MAX)], eby[CB_ESC_SIZE(64)], flat[ST_CAPS_MAX + 1],
	    ecaps[CB_ESC_SIZE(ST_CAPS_MAX)];

	state = revoked ? "revoked" : exp <= now ? "expired" : has_uses && uses == 0 ? "spent" :
	    "active";
	if (c->json) {
		json_t *o = json_pack("{s:o,s:o,s:o,s:o,s:I,s:I,s:o,s:s,s:b,s:b,s:o}", "id", J(id),
		    "parent", parent ? J(parent) : json_null(), "sandbox", J(sbx), "caps",
		    ctl_json_caps(caps), "nbf", (json_int_t)nbf, "exp", (json_int_t)exp, "uses",
		    has_uses ? json_integer((json_int_t)uses) : json_null(), "state", state,
		    "revoked", revoked, "elevated", elevated, "by", J(by));

		if (o && t->broker)
			json_object_set_new(o, "broker", J(t->broker));
		cb_ignore(json_array_append_new(arr, o));
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
	if (c->cluster) {	/* the broker before the capabilities, which stay last */
		static char ebr[CB_ESC_SIZE(256)];

		cb_text_esc(ebr, sizeof(ebr), t->broker ? t->broker : "-");
		printf(CTL_LIST_CROW, *id ? id : "-", state, ctl_time(exp, tb, sizeof(tb)), esbx, ub,
		    pb, elevated ? "yes" : "no", eby, ebr, ecaps);
		return;
	}
	printf(CTL_LIST_ROW, *id ? id : "-", state, ctl_time(exp, tb, sizeof(tb)), esbx, ub, pb,
	    elevated ? "yes" : "no", eby, ecaps);
}

int
ctl_list(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "sandbox", required_argument, NULL, 's' },
		CTL_JSON_OPT,
		CTL_CLUSTER_OPT,
		{ NULL, 0, NULL, 0 },
	};
	const char *sid = NULL;
	uint64_t offset = 0, now = cb_now();
	bool more = true;
	json_t *arr = NULL;
	int o, r;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 's': sid = optarg; break;
		case 'j': c->json = true; break;
		case 'C': c->cluster = true; break;
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
		struct wire_adm_req rq;
		struct wire_adm_rep m;

		ctl_begin(c, &rq, WIRE_ADM_LIST);
		rq.offset = offset;
		rq.cluster = c->cluster;
		if (sid)
			rq.sandbox = sid;
		if ((r = ctl_call(c, &rq, &m)) != CTL_OK) {
			json_decref(arr);
			return r;
		}
		more = m.more;
		if (offset == 0 && !c->json && c->cluster)
			printf(CTL_LIST_CROW, "ID", "STATE", "EXPIRES", "SANDBOX", "USES", "PARENT",
			    "ELEV", "BY", "BROKER", "CAPABILITIES");
		else if (offset == 0 && !c->json)
			printf(CTL_LIST_ROW, "ID", "STATE", "EXPIRES", "SANDBOX", "USES", "PARENT",
			    "ELEV", "BY", "CAPABILITIES");
		for (size_t i = 0; i < m.ntokens; i++)
			ctl_list_one(c, &m.tokens[i], arr, now);
		offset += m.ntokens;
		if (m.ntokens == 0)
			more = false;	/* a broker that says more but sends none */
	}
	if (c->json)
		ctl_json(c, arr);
	return CTL_OK;
}

/* ---- signing keys --------------------------------------------------------- */

int
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

int
ctl_rotate(struct ctl *c, int argc, char **argv)
{
	struct wire_adm_req rq;
	struct wire_adm_rep m;
	int r;

	(void)argv;
	if (argc > 1)
		return ctl_usage("rotate-key takes no arguments");
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &rq, WIRE_ADM_ROTATE_KEY);
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
		return r;
	if (c->json) {
		ctl_json(c, json_pack("{s:b,s:o}", "ok", 1, "kid", J(m.kid)));
	} else {
		printf("now signing with key ");
		ctl_text(stdout, m.kid);
		printf("; older keys verify until retired\n");
	}
	return CTL_OK;
}

int
ctl_retire(struct ctl *c, int argc, char **argv)
{
	struct wire_adm_req rq;
	struct wire_adm_rep m;
	uint8_t kid[CAP_KID_LEN];
	int r;

	if (argc != 2)
		return ctl_usage("retire-key needs one KID");
	if (cap_unhex(argv[1], kid, CAP_KID_LEN) != 0)
		return ctl_usage("'%s' is not a key id (16 hex digits)", argv[1]);
	if ((r = ctl_connect(c, false)) != CTL_OK)
		return r;
	ctl_begin(c, &rq, WIRE_ADM_RETIRE_KEY);
	rq.kid = argv[1];
	if ((r = ctl_call(c, &rq, &m)) != CTL_OK)
		return r;
	return ctl_done(c, "retired key", argv[1]);
}
