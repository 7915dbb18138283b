/*
 * print.c - writing a policy back in the file format (show-policy), so that
 * the effective policy can be saved, read and edited.  The output loads
 * back into an equal policy and prints identically.  Trust domain: the
 * broker / the administrator's terminal.
 */
#include "policy/pol_int.h"

#include <inttypes.h>
#include <string.h>

static void
put_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* libconfig 1.5 truncates integers beyond 32 bits unless they carry L. */
static void
put_int(FILE *f, uint64_t v)
{
	fprintf(f, "%" PRIu64 "%s", v, v > INT32_MAX ? "L" : "");
}

static void
put_bytes(FILE *f, uint64_t v)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && v && v % ((uint64_t)1024 << (10 * (u + 1))) == 0)
		u++;
	if (u < 0) {
		put_int(f, v);
		return;
	}
	fprintf(f, "\"%" PRIu64 "%c\"", v >> (10 * (u + 1)), units[u]);
}

static void
put_list(FILE *f, const char *ind, const char *name, size_t n, const char *(*get)(const void *, size_t),
    const void *arg)
{
	fprintf(f, "%s%s = [", ind, name);
	if (n == 0) {
		fputs(" ];\n", f);
		return;
	}
	fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s  ", ind);
		put_str(f, get(arg, i));
		fputs(i + 1 < n ? ",\n" : "\n", f);
	}
	fprintf(f, "%s];\n", ind);
}

static const char *
spec_at(const void *arg, size_t i)
{
	return ((const struct pol_specv *)arg)->v[i].text;
}

static const char *
str_at(const void *arg, size_t i)
{
	return ((const struct pol_strv *)arg)->v[i];
}

static const char *
domain_at(const void *arg, size_t i)
{
	return ((const struct pol *)arg)->allow[i].text;
}

struct bind_sel {
	const struct pol_tier *t;
	bool rw;
	char buf[8192];
};

/* The i-th bind of the selected kind as "SRC" or "SRC:DST". */
static const char *
bind_at(const void *arg, size_t i)
{
	struct bind_sel *bs = (struct bind_sel *)arg;

	for (size_t k = 0; k < bs->t->nbinds; k++) {
		const struct pol_bind *b = &bs->t->binds[k];

		if (b->rw != bs->rw || i-- != 0)
			continue;
		if (strcmp(b->src, b->dst) == 0)
			snprintf(bs->buf, sizeof(bs->buf), "%s", b->src);
		else
			snprintf(bs->buf, sizeof(bs->buf), "%s:%s", b->src, b->dst);
		return bs->buf;
	}
	return "";
}

static void
put_binds(FILE *f, const struct pol_tier *t, bool rw)
{
	struct bind_sel bs = { .t = t, .rw = rw };
	size_t n = 0;

	for (size_t k = 0; k < t->nbinds; k++)
		n += t->binds[k].rw == rw;
	put_list(f, "    ", rw ? "rw_binds" : "ro_binds", n, bind_at, &bs);
}

static void
put_tier(FILE *f, const struct pol_tier *t)
{
	const struct pol_limits *l = &t->limits;

	fprintf(f, "  %s = {\n", t->name);
	if (t->extends) {
		fputs("    extends = ", f);
		put_str(f, t->extends);
		fputs(";\n", f);
	}
	if (t->workspace) {
		fputs("    workspace = ", f);
		put_str(f, t->workspace);
		fputs(";\n", f);
	}
	put_list(f, "    ", "ceiling", t->ceiling.n, spec_at, &t->ceiling);
	put_list(f, "    ", "exec", t->exec.n, str_at, &t->exec);
	put_binds(f, t, false);
	put_binds(f, t, true);
	fputs(t->fs_cache_data ? "    fs_cache_data = true;\n" : "    fs_cache_data = false;\n", f);
	if (t->fs_passthrough)
		fputs("    fs_passthrough = true;\n", f);
	fputs("    limits = {\n      memory = ", f);
	put_bytes(f, l->memory);
	fputs(";\n      processes = ", f);
	put_int(f, l->processes);
	fputs(";\n      open_files = ", f);
	put_int(f, l->open_files);
	fputs(";\n      file_size = ", f);
	put_bytes(f, l->file_size);
	fputs(";\n      cpu = ", f);
	put_int(f, l->cpu);
	fputs(";\n      wall = ", f);
	put_int(f, l->wall);
	fputs(";\n      tmp_size = ", f);
	put_bytes(f, l->tmp_size);
	fputs(";\n    };\n", f);
	fputs("    requestable = (", f);
	for (size_t i = 0; i < t->nrules; i++) {
		const struct pol_rule *r = &t->rules[i];

		fputs(i ? ",\n      {\n" : "\n      {\n", f);
		put_list(f, "        ", "caps", r->caps.n, spec_at, &r->caps);
		fprintf(f, "        approval = \"%s\";\n        max_ttl = ", pol_approval_name(r->mode));
		put_int(f, r->max_ttl);
		fputs(";\n      }", f);
	}
	fputs(t->nrules ? "\n    );\n" : " );\n", f);
	fputs("  };\n", f);
}

static void
put_ids(FILE *f, const char *name, const uint32_t *v, size_t n)
{
	fprintf(f, "  %s = [", name);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ", " : " ", f);
		put_int(f, v[i]);
	}
	fputs(" ];\n", f);
}

int
pol_print(const struct pol *p, FILE *f)
{
	fputs("# capbroker policy (libconfig syntax); every key is described in docs/policy.md.\n"
	    "version = 1;\n\ndefaults = {\n  tier = ", f);
	put_str(f, p->default_tier);
	fputs(";\n  ttl = ", f);
	put_int(f, p->default_ttl);
	fputs(";\n  request_expiry = ", f);
	put_int(f, p->request_expiry);
	fprintf(f, ";\n  audit_fsync = \"%s\";\n", pol_fsync_name(p->fsync));
	fputs("  # each sandbox's denials: audited per second, burst, seconds throttled before a stop\n"
	    "  audit_budget = ", f);
	put_int(f, p->budget.rate);
	fputs(";\n  audit_burst = ", f);
	put_int(f, p->budget.burst);
	fputs(";\n  # ... and the bytes of audit log its operations cause (allowed or denied)\n"
	    "  audit_bytes = ", f);
	put_bytes(f, p->budget.bytes);
	fputs(";\n  audit_bytes_burst = ", f);
	put_bytes(f, p->budget.bytes_burst);
	fputs(";\n  audit_throttle_max = ", f);
	put_int(f, p->budget.throttle_max);
	fputs(";\n  # proc.exec sandboxes built ahead and kept ready (0: none)\n  pool_size = ", f);
	put_int(f, p->pool_size);
	fputs(";\n  # brokers sharing keys and revocations through PostgreSQL (docs/cluster.md)\n", f);
	if (p->cluster) {
		fputs("  cluster = ", f);
		put_str(f, p->cluster);
		fputs(";\n", f);
	} else {
		fputs("  # cluster = \"host=db.example dbname=capbroker\";\n", f);
	}
	fputs("  cluster_stale = ", f);
	put_int(f, p->cluster_stale);
	fputs(";\n  # names the file server may hold for one sandbox (docs/fsrv.md)\n"
	    "  served_names = ", f);
	put_int(f, p->served_names);
	fputs(";\n  # slots for trees granted while a sandbox runs (docs/sandbox.md; 0: none)\n"
	    "  fs_slots = ", f);
	put_int(f, p->fs_slots);
	fputs(";\n};\n\n", f);
	fputs("# Who may use the admin socket, besides the broker's own user.\nadmins = {\n", f);
	put_ids(f, "uids", p->uids, p->nuids);
	put_ids(f, "gids", p->gids, p->ngids);
	fputs("};\n\n# Loopback, private, link-local (cloud metadata), multicast and reserved\n"
	    "# addresses are never reachable unless a capability names the address.\n"
	    "network = {\n", f);
	if (p->has_allow)
		put_list(f, "  ", "allow_domains", p->nallow, domain_at, p);
	else
		fputs("  # allow_domains = [ \"example.org\", \"*.example.org\" ];  (absent: every domain)\n", f);
	fputs("};\n\ntiers = {\n", f);
	for (size_t i = 0; i < p->ntiers; i++)
		put_tier(f, p->tiers[i]);
	fputs("};\n", f);
	fflush(f);
	return ferror(f) ? CB_EIO : 0;
}
