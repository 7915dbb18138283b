/*
 * policy.c - a loaded policy: accessors, binding a tier to a workspace, and
 * the checks the broker makes on every operation and request (ceiling,
 * requestable rules).  Trust domain: the broker.  The capabilities checked
 * here come from agents; they are only compared, through caps.h.
 */
#include "policy/pol_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct pol_irule {
	size_t n;
	struct cap **caps;
	enum pol_approval mode;
	uint64_t max_ttl;
};

struct pol_inst {
	const struct pol_tier *t;
	size_t nceil;
	struct cap **ceil;
	size_t nrules;
	struct pol_irule *rules;
};

/* ---- specs ----------------------------------------------------------- */

bool
pol_spec_has_ws(const char *text)
{
	return strstr(text, POL_WORKSPACE) != NULL;
}

bool
pol_workspace_ok(const char *ws)
{
	/* "/" would turn the medium tier into the high one, and a "*" in the
	 * name would become a wildcard once substituted into a glob. */
	return ws && cap_path_check(ws) == 0 && strcmp(ws, "/") != 0 && !strchr(ws, '*');
}

/*
 * "fs.*:R" is the policy file's shorthand for the four fs operations on R.
 * ${workspace} may only open the resource and be followed by "/" or its end,
 * so that substitution can only ever produce a path beneath the workspace.
 */
int
pol_spec_parse(const char *text, const char *ws, struct cap **out, size_t *n)
{
	static const enum cap_op fs_ops[] = { CAP_FS_READ, CAP_FS_LIST, CAP_FS_WRITE, CAP_FS_DELETE };
	const size_t phlen = strlen(POL_WORKSPACE);
	const char *colon, *res, *ph, *rest;
	char *s = NULL;
	size_t oplen;
	int r = 0;

	if (!(colon = strchr(text, ':')))
		return CB_ECAP_SYNTAX;
	oplen = (size_t)(colon - text);
	res = colon + 1;
	rest = res;
	if ((ph = strstr(text, POL_WORKSPACE))) {
		if (ph != res || strstr(ph + phlen, POL_WORKSPACE) ||
		    (ph[phlen] != '/' && ph[phlen] != '\0'))
			return CB_EINVAL;
		if (!ws)
			return 0;
		rest = ph + phlen;
	}
	if (oplen == 4 && memcmp(text, "fs.*", 4) == 0) {
		for (size_t i = 0; i < 4; i++) {
			if (asprintf(&s, "%s:%s%s", cap_op_name(fs_ops[i]), ph ? ws : "", rest) < 0) {
				s = NULL;
				r = CB_ENOMEM;
				goto out;
			}
			if ((r = cap_parse(s, &out[*n])) != 0)
				goto out;
			(*n)++;
			free(s);
			s = NULL;
		}
	} else {
		if (asprintf(&s, "%.*s:%s%s", (int)oplen, text, ph ? ws : "", rest) < 0) {
			s = NULL;
			r = CB_ENOMEM;
			goto out;
		}
		if ((r = cap_parse(s, &out[*n])) != 0)
			goto out;
		(*n)++;
	}
out:
	free(s);
	return r;
}

/* ---- lifecycle ------------------------------------------------------- */

struct pol *
pol_new(void)
{
	return calloc(1, sizeof(struct pol));
}

struct pol_tier *
pol_tier_new(const char *name)
{
	struct pol_tier *t;

	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	/* Served files' pages may be cached unless a policy says no
	 * (docs/fsrv.md: a revocation drops them before it is acknowledged). */
	t->fs_cache_data = true;
	if (!(t->name = strdup(name))) {
		free(t);
		return NULL;
	}
	return t;
}

void
pol_specv_clear(struct pol_specv *sv)
{
	for (size_t i = 0; i < sv->n; i++) {
		free(sv->v[i].text);
		free(sv->v[i].file);
	}
	free(sv->v);
	sv->v = NULL;
	sv->n = 0;
}

void
pol_strv_clear(struct pol_strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = 0;
}

void
pol_binds_clear(struct pol_tier *t)
{
	for (size_t i = 0; i < t->nbinds; i++) {
		free((char *)t->binds[i].src);
		free((char *)t->binds[i].dst);
	}
	free(t->binds);
	t->binds = NULL;
	t->nbinds = 0;
}

void
pol_rules_clear(struct pol_tier *t)
{
	for (size_t i = 0; i < t->nrules; i++)
		pol_specv_clear(&t->rules[i].caps);
	free(t->rules);
	t->rules = NULL;
	t->nrules = 0;
}

void
pol_tier_free(struct pol_tier *t)
{
	if (!t)
		return;
	free(t->name);
	free(t->extends);
	free(t->workspace);
	pol_specv_clear(&t->ceiling);
	pol_strv_clear(&t->exec);
	pol_binds_clear(t);
	pol_rules_clear(t);
	free(t);
}

void
pol_free(struct pol *p)
{
	if (!p)
		return;
	free(p->default_tier);
	free(p->cluster);
	free(p->uids);
	free(p->gids);
	for (size_t i = 0; i < p->nallow; i++) {
		free(p->allow[i].text);
		cap_free(p->allow[i].cap);
	}
	free(p->allow);
	for (size_t i = 0; i < p->ntiers; i++)
		pol_tier_free(p->tiers[i]);
	free(p->tiers);
	free(p);
}

static int
specv_copy(struct pol_specv *dst, const struct pol_specv *src)
{
	if (src->n == 0)
		return 0;
	if (!(dst->v = calloc(src->n, sizeof(*dst->v))))
		return CB_ENOMEM;
	for (; dst->n < src->n; dst->n++) {
		struct pol_spec *d = &dst->v[dst->n];
		const struct pol_spec *s = &src->v[dst->n];

		d->line = s->line;
		d->text = strdup(s->text);
		d->file = strdup(s->file);
		if (!d->text || !d->file) {
			dst->n++;	/* so that clearing frees this one too */
			return CB_ENOMEM;
		}
	}
	return 0;
}

int
pol_tier_copy(struct pol_tier *dst, const struct pol_tier *src)
{
	int r;

	dst->limits = src->limits;
	dst->fs_cache_data = src->fs_cache_data;
	dst->fs_passthrough = src->fs_passthrough;
	if (src->workspace && !(dst->workspace = strdup(src->workspace)))
		return CB_ENOMEM;
	if ((r = specv_copy(&dst->ceiling, &src->ceiling)) != 0)
		return r;
	if (src->exec.n) {
		if (!(dst->exec.v = calloc(src->exec.n, sizeof(char *))))
			return CB_ENOMEM;
		for (; dst->exec.n < src->exec.n; dst->exec.n++)
			if (!(dst->exec.v[dst->exec.n] = strdup(src->exec.v[dst->exec.n])))
				return CB_ENOMEM;
	}
	if (src->nbinds) {
		if (!(dst->binds = calloc(src->nbinds, sizeof(*dst->binds))))
			return CB_ENOMEM;
		for (; dst->nbinds < src->nbinds; dst->nbinds++) {
			struct pol_bind *d = &dst->binds[dst->nbinds];

			d->rw = src->binds[dst->nbinds].rw;
			d->src = strdup(src->binds[dst->nbinds].src);
			d->dst = strdup(src->binds[dst->nbinds].dst);
			if (!d->src || !d->dst) {
				dst->nbinds++;
				return CB_ENOMEM;
			}
		}
	}
	if (src->nrules) {
		if (!(dst->rules = calloc(src->nrules, sizeof(*dst->rules))))
			return CB_ENOMEM;
		for (; dst->nrules < src->nrules; dst->nrules++) {
			struct pol_rule *d = &dst->rules[dst->nrules];

			d->mode = src->rules[dst->nrules].mode;
			d->max_ttl = src->rules[dst->nrules].max_ttl;
			if ((r = specv_copy(&d->caps, &src->rules[dst->nrules].caps)) != 0) {
				dst->nrules++;
				return r;
			}
		}
	}
	return 0;
}

struct pol_tier *
pol_tier_find(struct pol *p, const char *name)
{
	for (size_t i = 0; i < p->ntiers; i++)
		if (strcmp(p->tiers[i]->name, name) == 0)
			return p->tiers[i];
	return NULL;
}

/* ---- accessors ------------------------------------------------------- */

const char *pol_default_tier(const struct pol *p) { return p->default_tier; }
uint64_t pol_default_ttl(const struct pol *p) { return p->default_ttl; }
uint64_t pol_request_expiry(const struct pol *p) { return p->request_expiry; }
uint64_t pol_pool_size(const struct pol *p) { return p->pool_size; }
enum pol_fsync pol_audit_fsync(const struct pol *p) { return p->fsync; }
const char *pol_cluster(const struct pol *p) { return p->cluster; }
uint64_t pol_cluster_stale(const struct pol *p) { return p->cluster_stale; }
const struct pol_audit_budget *pol_audit_budget(const struct pol *p) { return &p->budget; }
uint64_t pol_served_names(const struct pol *p) { return p->served_names; }
uint64_t pol_fs_slots(const struct pol *p) { return p->fs_slots; }

const char *
pol_fsync_name(enum pol_fsync f)
{
	switch (f) {
	case POL_FSYNC_ALWAYS: return "always";
	case POL_FSYNC_BATCH: return "batch";
	case POL_FSYNC_NEVER: return "never";
	}
	return "?";
}

const char *
pol_approval_name(enum pol_approval a)
{
	switch (a) {
	case POL_APPROVE_HUMAN: return "human";
	case POL_APPROVE_AUTO: return "auto";
	case POL_APPROVE_NEVER: return "never";
	}
	return "?";
}

bool
pol_admin_uid(const struct pol *p, uid_t uid)
{
	for (size_t i = 0; i < p->nuids; i++)
		if (p->uids[i] == uid)
			return true;
	return false;
}

bool
pol_admin_gid(const struct pol *p, gid_t gid)
{
	for (size_t i = 0; i < p->ngids; i++)
		if (p->gids[i] == gid)
			return true;
	return false;
}

const struct pol_tier *
pol_tier_get(const struct pol *p, const char *name)
{
	return name ? pol_tier_find((struct pol *)p, name) : NULL;
}

size_t pol_tier_count(const struct pol *p) { return p->ntiers; }

const struct pol_tier *
pol_tier_at(const struct pol *p, size_t i)
{
	return i < p->ntiers ? p->tiers[i] : NULL;
}

const char *pol_tier_name(const struct pol_tier *t) { return t->name; }
const char *pol_tier_base(const struct pol_tier *t) { return t->base; }
const char *pol_tier_workspace(const struct pol_tier *t) { return t->workspace; }
bool pol_tier_fs_cache_data(const struct pol_tier *t) { return t->fs_cache_data; }
bool pol_tier_fs_passthrough(const struct pol_tier *t) { return t->fs_passthrough; }
const struct pol_limits *pol_tier_limits(const struct pol_tier *t) { return &t->limits; }

size_t
pol_tier_binds(const struct pol_tier *t, const struct pol_bind **out)
{
	*out = t->binds;
	return t->nbinds;
}

size_t
pol_tier_exec(const struct pol_tier *t, const char *const **out)
{
	*out = (const char *const *)t->exec.v;
	return t->exec.n;
}

/* ---- instances: a tier bound to a workspace -------------------------- */

static void
caps_free(struct cap **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cap_free(v[i]);
	free(v);
}

void
pol_inst_free(struct pol_inst *pi)
{
	if (!pi)
		return;
	caps_free(pi->ceil, pi->nceil);
	for (size_t i = 0; i < pi->nrules; i++)
		caps_free(pi->rules[i].caps, pi->rules[i].n);
	free(pi->rules);
	free(pi);
}

static int
specv_inst(const struct pol_specv *sv, const char *ws, struct cap ***out, size_t *n)
{
	int r;

	/* Each spec yields at most 4 caps (fs.*); +1 keeps calloc(0) away. */
	if (!(*out = calloc(sv->n * 4 + 1, sizeof(struct cap *))))
		return CB_ENOMEM;
	for (size_t i = 0; i < sv->n; i++)
		if ((r = pol_spec_parse(sv->v[i].text, ws, *out, n)) != 0)
			return r;
	return 0;
}

int
pol_tier_instantiate(const struct pol_tier *t, const char *workspace, struct pol_inst **out)
{
	struct pol_inst *pi = NULL;
	int r;

	*out = NULL;
	if (workspace && !pol_workspace_ok(workspace))
		return CB_EINVAL;
	if (!(pi = calloc(1, sizeof(*pi))))
		return CB_ENOMEM;
	pi->t = t;
	if ((r = specv_inst(&t->ceiling, workspace, &pi->ceil, &pi->nceil)) != 0)
		goto out;
	if (!(pi->rules = calloc(t->nrules + 1, sizeof(*pi->rules)))) {
		r = CB_ENOMEM;
		goto out;
	}
	for (; pi->nrules < t->nrules; pi->nrules++) {
		struct pol_irule *ir = &pi->rules[pi->nrules];

		ir->mode = t->rules[pi->nrules].mode;
		ir->max_ttl = t->rules[pi->nrules].max_ttl;
		if ((r = specv_inst(&t->rules[pi->nrules].caps, workspace, &ir->caps, &ir->n)) != 0) {
			pi->nrules++;
			goto out;
		}
	}
	*out = pi;
	pi = NULL;
out:
	pol_inst_free(pi);
	return r;
}

const struct pol_tier *pol_inst_tier(const struct pol_inst *pi) { return pi->t; }

const struct cap *
pol_inst_ceiling(const struct pol_inst *pi, size_t i)
{
	return i < pi->nceil ? pi->ceil[i] : NULL;
}

static bool
caps_contain(struct cap *const *v, size_t n, const struct cap *c)
{
	for (size_t i = 0; i < n; i++)
		if (v[i]->op == c->op && cap_contains(v[i], c))
			return true;
	return false;
}

bool
pol_inst_within_ceiling(const struct pol_inst *pi, const struct cap *c)
{
	return caps_contain(pi->ceil, pi->nceil, c);
}

/* Do two address capabilities share a host through some view of their
 * ranges (cap_intersects compares each family with itself only)? */
static bool
pol_never_ranges_meet(const struct cap *nc, const struct cap *c)
{
	if (nc->op != CAP_NET_CONNECT || c->op != CAP_NET_CONNECT ||
	    nc->net.kind != CAP_HOST_IP || c->net.kind != CAP_HOST_IP)
		return false;
	if (nc->net.port >= 0 && c->net.port >= 0 && nc->net.port != c->net.port)
		return false;
	return pol_net_ranges_meet(&nc->net.addr, nc->net.prefix, &c->net.addr, c->net.prefix);
}

/* Does c overlap any never rule?  Never rules win wherever they stand in
 * the list: a request that shares a single path (or port of an address or
 * name) with one is refused, not only one the rule contains, so that
 * fs.read:/secret/fil* cannot slip past a never rule for /secret/file. */
static bool
pol_inst_never_meets(const struct pol_inst *pi, const struct cap *c)
{
	for (size_t i = 0; i < pi->nrules; i++) {
		const struct pol_irule *ir = &pi->rules[i];

		if (ir->mode != POL_APPROVE_NEVER)
			continue;
		for (size_t k = 0; k < ir->n; k++)
			if (cap_intersects(ir->caps[k], c) || pol_never_ranges_meet(ir->caps[k], c))
				return true;
	}
	return false;
}

int
pol_inst_requestable(const struct pol_inst *pi, const struct cap *c, enum pol_approval *mode,
    uint64_t *max_ttl)
{
	*mode = POL_APPROVE_NEVER;
	*max_ttl = 0;
	if (pol_inst_never_meets(pi, c))
		return CB_EPOLICY;
	for (size_t i = 0; i < pi->nrules; i++) {
		const struct pol_irule *ir = &pi->rules[i];

		if (ir->mode == POL_APPROVE_NEVER || !caps_contain(ir->caps, ir->n, c))
			continue;
		/* Beyond the ceiling only a human may say yes (contract). */
		*mode = ir->mode;
		if (*mode == POL_APPROVE_AUTO && !pol_inst_within_ceiling(pi, c))
			*mode = POL_APPROVE_HUMAN;
		*max_ttl = ir->max_ttl;
		return 0;
	}
	return CB_EPOLICY;
}

static bool
pol_op_is_fs(enum cap_op op)
{
	return op == CAP_FS_READ || op == CAP_FS_LIST || op == CAP_FS_WRITE || op == CAP_FS_DELETE;
}

/* A never rule names paths, whatever fs operation it is for.  An elevated
 * operation that changes where a file is or what is there (fs.write:
 * create, truncate, mkdir, either name of a rename or link; fs.delete)
 * may not touch a path a never rule names, nor a directory above one:
 * otherwise moving the file (or its directory) to a name no never rule
 * names would let a later elevation read what a never rule protects.  The
 * concrete path is taken as a glob here, so a '*' in a file name only ever
 * widens what is refused. */
static bool
pol_never_moves(const struct cap *nc, const struct cap_req *r)
{
	char sub[PATH_MAX + 4];
	int n;

	if (!pol_op_is_fs(nc->op) || !r->path)
		return false;
	if (cap_path_match(nc->res, r->path))
		return true;
	n = snprintf(sub, sizeof(sub), "%s/**", strcmp(r->path, "/") == 0 ? "" : r->path);
	if (n < 0 || (size_t)n >= sizeof(sub))
		return true;	/* cannot judge: fail closed */
	return cap_path_intersects(nc->res, sub);
}

static unsigned
pol_addr_bits(const struct cap_addr *a)
{
	return a->family == AF_INET ? 32 : 128;
}

/* Could never capability nc (a host name) stand for the connect r, once
 * nc's name is resolved: same port, an address to compare? */
static bool
pol_never_name_could(const struct cap *nc, const struct cap_req *r)
{
	return nc->op == CAP_NET_CONNECT && r->op == CAP_NET_CONNECT && r->addr &&
	    nc->net.kind == CAP_HOST_NAME && (nc->net.port < 0 || nc->net.port == r->port);
}

/* Is r's address, in any of its views, an address never name nc resolved
 * to?  A name missing from na, or one that could not be resolved, counts
 * as a match: the broker cannot show that the address is not that host. */
static bool
pol_never_name_addr(const struct cap *nc, const struct cap_req *r, const struct pol_never_addrs *na,
    size_t nna)
{
	if (!pol_never_name_could(nc, r))
		return false;
	for (size_t i = 0; i < nna; i++) {
		if (strcmp(na[i].name, nc->net.name) != 0)
			continue;
		if (!na[i].resolved)
			return true;
		for (size_t j = 0; j < na[i].n; j++)
			if (pol_net_ranges_meet(r->addr, pol_addr_bits(r->addr), &na[i].a[j],
			    pol_addr_bits(&na[i].a[j])))
				return true;
		return false;
	}
	return true;
}

/* Does never capability nc meet the connect r through any address r's
 * address stands for?  A never rule for 93.184.216.0/24 must also stop
 * 64:ff9b::5db8:d822 (NAT64), ::5db8:d822 and the 6to4 and Teredo forms,
 * which reach the same IPv4 host where a gateway translates them, and a
 * never rule written in one of those forms the IPv4 address itself. */
static bool
pol_never_views(const struct cap *nc, const struct cap_req *r)
{
	if (nc->op != CAP_NET_CONNECT || r->op != CAP_NET_CONNECT || !r->addr ||
	    nc->net.kind != CAP_HOST_IP)
		return cap_match(nc, r);
	if (r->port < 1 || r->port > 65535 || (nc->net.port >= 0 && nc->net.port != r->port))
		return false;
	return pol_net_ranges_meet(r->addr, pol_addr_bits(r->addr), &nc->net.addr, nc->net.prefix);
}

const struct cap *
pol_inst_never_name(const struct pol_inst *pi, size_t i)
{
	for (size_t k = 0; k < pi->nrules; k++) {
		const struct pol_irule *ir = &pi->rules[k];

		if (ir->mode != POL_APPROVE_NEVER)
			continue;
		for (size_t j = 0; j < ir->n; j++)
			if (ir->caps[j]->op == CAP_NET_CONNECT && ir->caps[j]->net.kind == CAP_HOST_NAME &&
			    i-- == 0)
				return ir->caps[j];
	}
	return NULL;
}

bool
pol_inst_never_match_net(const struct pol_inst *pi, const struct cap_req *r,
    const struct pol_never_addrs *na, size_t nna)
{
	bool moves = r->op == CAP_FS_WRITE || r->op == CAP_FS_DELETE;

	for (size_t i = 0; i < pi->nrules; i++) {
		const struct pol_irule *ir = &pi->rules[i];

		if (ir->mode != POL_APPROVE_NEVER)
			continue;
		for (size_t k = 0; k < ir->n; k++)
			if (pol_never_views(ir->caps[k], r) ||
			    pol_never_name_addr(ir->caps[k], r, na, nna) ||
			    (moves && pol_never_moves(ir->caps[k], r)))
				return true;
	}
	return false;
}

bool
pol_inst_never_match(const struct pol_inst *pi, const struct cap_req *r)
{
	return pol_inst_never_match_net(pi, r, NULL, 0);
}

bool
pol_within_ceiling(const struct pol_tier *t, const char *workspace, const struct cap *c)
{
	struct pol_inst *pi = NULL;
	bool ok;

	if (pol_tier_instantiate(t, workspace, &pi) != 0)
		return false;
	ok = pol_inst_within_ceiling(pi, c);
	pol_inst_free(pi);
	return ok;
}

int
pol_requestable(const struct pol_tier *t, const char *workspace, const struct cap *c,
    enum pol_approval *mode, uint64_t *max_ttl)
{
	struct pol_inst *pi = NULL;
	int r;

	*mode = POL_APPROVE_NEVER;
	*max_ttl = 0;
	if ((r = pol_tier_instantiate(t, workspace, &pi)) != 0)
		return r;
	r = pol_inst_requestable(pi, c, mode, max_ttl);
	pol_inst_free(pi);
	return r;
}
