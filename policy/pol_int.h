/*
 * pol_int.h - the inside of a policy, shared by the files of policy/ only.
 * Trust domain: the broker.
 */
#ifndef CB_POL_INT_H
#define CB_POL_INT_H

#include "policy/policy.h"

/* One capability as the policy file writes it: "fs.*:" stands for the four
 * fs operations and the resource may start with ${workspace}, so the text
 * is kept and parsed again when a tier is bound to a workspace. */
struct pol_spec {
	char *text;
	char *file;		/* where it was written, for messages */
	unsigned line;
};

struct pol_specv {
	size_t n;
	struct pol_spec *v;
};

struct pol_strv {
	size_t n;
	char **v;
};

struct pol_rule {
	struct pol_specv caps;
	enum pol_approval mode;
	uint64_t max_ttl;
};

struct pol_tier {
	char *name;
	char *extends;		/* named tiers: the tier it started from */
	const char *base;	/* static: "low", "medium" or "high" */
	char *workspace;
	struct pol_specv ceiling;
	struct pol_strv exec;
	size_t nbinds;
	struct pol_bind *binds;	/* src/dst malloc'd; read-only ones first */
	struct pol_limits limits;
	size_t nrules;
	struct pol_rule *rules;
	bool fs_cache_data;	/* served files: the kernel may cache their data */
	bool fs_passthrough;	/* served files: FUSE passthrough (unchecked after open) */
};

struct pol_domain {
	char *text;		/* "example.com" or "*.example.com" */
	struct cap *cap;	/* net.connect:TEXT:* */
};

struct pol {
	char *default_tier;
	uint64_t default_ttl;
	uint64_t request_expiry;
	enum pol_fsync fsync;
	struct pol_audit_budget budget;
	uint64_t pool_size;	/* warm pool: sandboxes kept per tier in use */
	char *cluster;		/* libpq connection string; NULL: no cluster */
	uint64_t cluster_stale;	/* seconds a broker serves without the database */
	uint64_t served_names;	/* defaults.served_names */
	uint64_t fs_slots;	/* defaults.fs_slots */
	size_t nuids, ngids;
	uint32_t *uids, *gids;
	bool has_allow;		/* absent list: every domain allowed */
	size_t nallow;
	struct pol_domain *allow;
	size_t ntiers;
	struct pol_tier **tiers;
};

/* Parse one spec for workspace ws (NULL: a spec naming the workspace
 * yields nothing).  Appends up to 4 caps to out[*n].  CB_ECAP_*, CB_ENOMEM,
 * CB_EINVAL (misplaced ${workspace}). */
int pol_spec_parse(const char *text, const char *ws, struct cap **out, size_t *n);
bool pol_spec_has_ws(const char *text);
/* A workspace acceptable for ${workspace}. */
bool pol_workspace_ok(const char *ws);

struct pol *pol_new(void);
struct pol_tier *pol_tier_new(const char *name);
void pol_tier_free(struct pol_tier *t);
/* Deep copy of t's settings (not its name or extends) into dst. */
int pol_tier_copy(struct pol_tier *dst, const struct pol_tier *src);
struct pol_tier *pol_tier_find(struct pol *p, const char *name);

void pol_specv_clear(struct pol_specv *sv);
void pol_strv_clear(struct pol_strv *sv);
void pol_binds_clear(struct pol_tier *t);
void pol_rules_clear(struct pol_tier *t);

/* The built-in default policy text (libconfig). */
extern const char pol_default_text[];
/* That text parsed and checked, as pol_default() did before it copied the
 * image made from it at build time (policy/mkdefault.c); for the image's
 * maker and its test. */
int pol_default_parse(struct pol **out);

/* The addresses an address stands for: itself (an IPv4-mapped address as
 * its IPv4 form), then every IPv4 address an IPv6 form carries (NAT64,
 * compatible, translated, 6to4, Teredo server and client).  At most
 * POL_NET_VIEWS_MAX written to out; returns how many. */
#define POL_NET_VIEWS_MAX 9
size_t pol_net_views(const struct cap_addr *addr, struct cap_addr *out);

/* An address range as one view sees it. */
struct pol_vrange {
	struct cap_addr a;	/* host bits zero */
	unsigned prefix;
};

/* The same for a range a/prefix: the range itself, then for each IPv6 form
 * carrying an IPv4 address (those above and IPv4-mapped) that the range
 * meets, the IPv4 range it holds through that form (every IPv4 address
 * when it holds the whole form).  At most POL_NET_VIEWS_MAX. */
size_t pol_net_range_views(const struct cap_addr *a, unsigned prefix, struct pol_vrange *out);

/* Do two address ranges (a /32 or /128 for one address) share a host: is
 * there an address in each with a view (pol_net_views) in common?  So a
 * never rule's 93.184.216.0/24 meets 64:ff9b::5db8:d822 and
 * [2002:5db8:d822::/48], and a never rule written in a NAT64 form meets
 * the plain IPv4 address. */
bool pol_net_ranges_meet(const struct cap_addr *a, unsigned pa, const struct cap_addr *b, unsigned pb);

#endif
