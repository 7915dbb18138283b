/*
 * policy.h - the broker's policy: tiers, capability ceilings, requestable
 * capabilities and their approval, sandbox binds and limits, network rules,
 * administrators and defaults, read from a libconfig file (docs/policy.md).
 *
 * Trust domain: the broker (trusted).  The policy file comes from the
 * administrator and is trusted to mean what it says, but is parsed strictly:
 * a policy with any error is refused as a whole, never half applied.
 * Capabilities checked against the policy come from agents (hostile); they
 * arrive already parsed by caps/ and are only compared, through caps.h.
 *
 * A struct pol is immutable after loading and may be shared by threads.
 */
#ifndef CB_POLICY_H
#define CB_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "caps/caps.h"

/* The placeholder a ceiling or requestable capability may start its
 * resource with; replaced by the sandbox's workspace directory. */
#define POL_WORKSPACE "${workspace}"

/* Built-in tier names.  Their ceilings are bounded by the tier rules of
 * docs/policy.md; tiers an administrator adds are not. */
#define POL_TIER_LOW	"low"
#define POL_TIER_MEDIUM	"medium"
#define POL_TIER_HIGH	"high"

struct pol;		/* a loaded policy, immutable after load */
struct pol_tier;	/* one tier of a policy; lives as long as its pol */
struct pol_inst;	/* a tier bound to one sandbox's workspace */

enum pol_approval {
	POL_APPROVE_HUMAN,	/* a human must approve (capctl / tty prompt) */
	POL_APPROVE_AUTO,	/* approved at once; only ever within the ceiling */
	POL_APPROVE_NEVER,	/* refused at once */
};

/* When the audit log is fsynced. */
enum pol_fsync {
	POL_FSYNC_ALWAYS,	/* after every line */
	POL_FSYNC_BATCH,	/* after each burst of lines, before replying */
	POL_FSYNC_NEVER,	/* left to the kernel */
};

/* Sandbox resource limits of a tier; every value is at least 1. */
struct pol_limits {
	uint64_t memory;	/* bytes of address space / memory */
	uint64_t processes;	/* RLIMIT_NPROC / pids */
	uint64_t open_files;	/* RLIMIT_NOFILE */
	uint64_t file_size;	/* bytes, RLIMIT_FSIZE */
	uint64_t cpu;		/* seconds of CPU time, RLIMIT_CPU */
	uint64_t wall;		/* seconds of wall clock before the kill */
	uint64_t tmp_size;	/* bytes of the private /tmp */
};

/* A bind mount the sandbox sees directly: src on the host, dst inside. */
struct pol_bind {
	const char *src;
	const char *dst;
	bool rw;
};

/* ---- loading --------------------------------------------------------- */

/* Load the policy file at path over the built-in default (a tier block in
 * the file replaces only the keys it names).  Every error is printed to errs
 * (if not NULL) as "file:line: message (expected ...)"; then the whole load
 * fails with CB_EINVAL.  CB_ENOMEM on allocation failure.  *out is set only
 * on success; the caller frees it with pol_free. */
int pol_load(const char *path, struct pol **out, FILE *errs) CB_WARN_UNUSED;

/* The built-in default policy: the contract's three tiers with safe limits;
 * any capability requestable with human approval for at most an hour. */
int pol_default(struct pol **out) CB_WARN_UNUSED;

void pol_free(struct pol *p);

/* Print p in the file format, with comments; the output loads back into an
 * equal policy (and prints identically).  CB_EIO on a write error. */
int pol_print(const struct pol *p, FILE *out) CB_WARN_UNUSED;

/* ---- global settings ------------------------------------------------- */

const char *pol_default_tier(const struct pol *p);	/* never NULL */
uint64_t pol_default_ttl(const struct pol *p);		/* seconds */
uint64_t pol_request_expiry(const struct pol *p);	/* seconds a request waits */
enum pol_fsync pol_audit_fsync(const struct pol *p);
/* The cluster's database (a libpq connection string), or NULL; and the
 * staleness bound in seconds: how long a broker keeps honouring tokens
 * without hearing from the database (docs/cluster.md). */
const char *pol_cluster(const struct pol *p);
uint64_t pol_cluster_stale(const struct pol *p);

/* The audit budget of each sandbox (docs/audit.md): denials a second it may
 * have audited (sustained) and the burst above that; bytes of audit log a
 * second its operations may cause, allowed or denied, and the burst above
 * that; and how many seconds it may stay throttled before it is stopped.
 * Every value is at least 1. */
struct pol_audit_budget {
	uint64_t rate;
	uint64_t burst;
	uint64_t bytes;
	uint64_t bytes_burst;
	uint64_t throttle_max;
};
const struct pol_audit_budget *pol_audit_budget(const struct pol *p);

/* The warm pool (docs/sandbox.md): how many pre-built sandboxes the broker
 * keeps ready per tier in use, 0 (none: every sandbox is built when asked
 * for) to POL_POOL_MAX. */
#define POL_POOL_MAX 16
uint64_t pol_pool_size(const struct pol *p);

/* How many names the broker's file server may hold for one sandbox, all
 * its served trees together (docs/fsrv.md): past half of it the kernel
 * is asked to forget the least recently used, at the bound a new name
 * is refused.
 * 1 to POL_SERVED_NAMES_MAX. */
#define POL_SERVED_NAMES_MAX (16u * 1024u * 1024u)
uint64_t pol_served_names(const struct pol *p);

/* Slots a sandbox starts with for trees granted while it runs
 * (`defaults.fs_slots`, docs/sandbox.md): each is a FUSE connection and
 * an empty mount made at the start; later trees past them are read-only
 * to unmodified programs.  0 to POL_FS_SLOTS_MAX (0: no slot). */
#define POL_FS_SLOTS_MAX 16
uint64_t pol_fs_slots(const struct pol *p);
const char *pol_fsync_name(enum pol_fsync f);
const char *pol_approval_name(enum pol_approval a);

/* Does the policy name uid (or gid) as an administrator?  The broker's own
 * uid is always one; that is the broker's check, not the policy's. */
bool pol_admin_uid(const struct pol *p, uid_t uid);
bool pol_admin_gid(const struct pol *p, gid_t gid);

/* ---- tiers ----------------------------------------------------------- */

/* The tier called name, or NULL. */
const struct pol_tier *pol_tier_get(const struct pol *p, const char *name);
size_t pol_tier_count(const struct pol *p);
const struct pol_tier *pol_tier_at(const struct pol *p, size_t i);	/* NULL past the end */

const char *pol_tier_name(const struct pol_tier *t);
/* The built-in tier ("low", "medium" or "high") whose sandbox shape this
 * tier has (fork, exec, what it sees): itself for those three, else the one
 * its extends chain ends at ("low" when it extends nothing).  Never NULL. */
const char *pol_tier_base(const struct pol_tier *t);
/* The workspace the policy gives this tier, or NULL (then the broker uses
 * --workspace or the current directory). */
const char *pol_tier_workspace(const struct pol_tier *t);

/* Does the tier let the kernel cache the data of served files
 * (`fs_cache_data`, docs/policy.md)?  On by default: a revocation drops
 * the cached pages before it is acknowledged.  Off, every read of a
 * served file reaches the broker's check (direct I/O). */
bool pol_tier_fs_cache_data(const struct pol_tier *t);

/* Does the tier let served files be opened with FUSE passthrough
 * (`fs_passthrough`, docs/policy.md)?  Off by default.  Such an open file
 * is read and written by the kernel directly and outlives its token. */
bool pol_tier_fs_passthrough(const struct pol_tier *t);
const struct pol_limits *pol_tier_limits(const struct pol_tier *t);
/* Bind mounts, read-only first; *out points into t. */
size_t pol_tier_binds(const struct pol_tier *t, const struct pol_bind **out);
/* Absolute paths the sandbox may exec directly (medium, high); *out points
 * into t.  capcall is always allowed and is not listed. */
size_t pol_tier_exec(const struct pol_tier *t, const char *const **out);

/* ---- ceilings and requests ------------------------------------------ */

/* Bind tier t to a sandbox's workspace: "${workspace}" in its capabilities
 * becomes workspace.  workspace must be an absolute, clean path other than
 * "/" and without "*" (CB_EINVAL); with workspace NULL, capabilities that
 * name the workspace grant nothing.  CB_ECAP_TOOLONG if a capability grows
 * too long with it, CB_ENOMEM.  t must outlive *out (pol_inst_free).  The
 * broker passes --workspace, else pol_tier_workspace(t), else the cwd. */
int pol_tier_instantiate(const struct pol_tier *t, const char *workspace,
    struct pol_inst **out) CB_WARN_UNUSED;
void pol_inst_free(struct pol_inst *pi);
const struct pol_tier *pol_inst_tier(const struct pol_inst *pi);
/* The instantiated ceiling capabilities (for listing); NULL past the end. */
const struct cap *pol_inst_ceiling(const struct pol_inst *pi, size_t i);

/* Is c inside some ceiling capability (cap_contains)? */
bool pol_inst_within_ceiling(const struct pol_inst *pi, const struct cap *c);

/* May an agent of this tier request c?  Never rules win, wherever they
 * stand: c is refused if it overlaps (cap_intersects) any capability of a
 * never rule, not only if one contains it.  Otherwise the first human or
 * auto rule with a capability containing c decides.  On success *mode and
 * *max_ttl say how it is approved and for how long at most; AUTO is only
 * ever returned for c within the ceiling (beyond it an AUTO rule means
 * HUMAN).  CB_EPOLICY (with *mode = POL_APPROVE_NEVER) when no rule lists c
 * or c overlaps a never rule. */
int pol_inst_requestable(const struct pol_inst *pi, const struct cap *c,
    enum pol_approval *mode, uint64_t *max_ttl) CB_WARN_UNUSED;

/* Does a never rule match the concrete operation r (a checked path, or a
 * host, port and resolved address)?  The broker asks this on every
 * operation an elevated token covers, so what an approval allows can never
 * reach what a never rule names: a name whose address falls in a never
 * rule's range, for one. */
bool pol_inst_never_match(const struct pol_inst *pi, const struct cap_req *r);

/* The i-th capability of pi's never rules that names a host by name
 * (net.connect:NAME:PORT), or NULL past the end.  Such a rule means that
 * host, whatever it is called: the broker resolves each of these names,
 * with the resolver and at the moment it resolves a connect's own host,
 * and passes what they resolved to to pol_inst_never_match_net.  A
 * "*.domain" never rule cannot be resolved; it is judged by name only. */
const struct cap *pol_inst_never_name(const struct pol_inst *pi, size_t i);

/* What one never name (pol_inst_never_name) resolved to for one connect. */
struct pol_never_addrs {
	const char *name;		/* the capability's host name */
	bool resolved;			/* false: the lookup failed */
	size_t n;
	const struct cap_addr *a;	/* its addresses, a[0..n) */
};

/* pol_inst_never_match for a connect whose never names were resolved
 * (na[0..nna)): it also matches when r's address, in any of its views
 * (IPv4, mapped, NAT64, 6to4, Teredo...), is one that a never name whose
 * port covers r's port resolved to, in any of that address's views.  A
 * never name that r's port could match but that is missing from na or
 * could not be resolved matches too (fail closed): the broker cannot show
 * that the address is not that host.  pol_inst_never_match(pi, r) is
 * pol_inst_never_match_net(pi, r, NULL, 0). */
bool pol_inst_never_match_net(const struct pol_inst *pi, const struct cap_req *r,
    const struct pol_never_addrs *na, size_t nna);

/* One-shot forms of the two above (they instantiate, check and free; the
 * broker should keep a pol_inst per sandbox instead).  pol_within_ceiling
 * is false on any error; pol_requestable returns CB_EPOLICY, CB_EINVAL
 * (bad workspace) or CB_ENOMEM. */
bool pol_within_ceiling(const struct pol_tier *t, const char *workspace, const struct cap *c);
int pol_requestable(const struct pol_tier *t, const char *workspace, const struct cap *c,
    enum pol_approval *mode, uint64_t *max_ttl) CB_WARN_UNUSED;

/* ---- network --------------------------------------------------------- */

/* An address prefix: one address when prefix is its full length. */
struct pol_net_prefix {
	struct cap_addr a;	/* host bits may be set; only prefix bits count */
	unsigned prefix;
};

/* Is address a in a never-reachable range (loopback, private, CGNAT,
 * link-local incl. 169.254.169.254, multicast, unspecified, broadcast,
 * reserved, documentation; IPv6 ::1, ::, fc00::/7, fe80::/10, fec0::/10,
 * ff00::/8, 2001:db8::/32, 3fff::/20), one of the host's own prefixes
 * (host[0..nhost): its interface addresses, each a full-length prefix, and
 * its local routes), or an IPv6 form carrying such an IPv4 address
 * (IPv4-mapped, -compatible, -translated, NAT64 64:ff9b::/96 and
 * 64:ff9b:1::/48, 6to4, Teredo server and client), that `granting` does not
 * name explicitly?  Explicitly means: granting is an IP or CIDR capability
 * that contains a and, for every never-reachable range a falls in (through
 * any of those forms), fixes that whole range: its own range lies inside it.
 * So net.connect:127.0.0.1:8080 unlocks 127.0.0.1; net.connect:*:* ,
 * 0.0.0.0/0 or a host name resolving to 127.0.0.1 do not; a host address
 * is unlocked only by naming that very address, an address of a local
 * prefix by naming it or a range inside the prefix.  granting may be NULL
 * (nothing unlocked); host may be NULL when nhost is 0. */
bool pol_net_blocked_host(const struct pol *p, const struct cap_addr *a, const struct cap *granting,
    const struct pol_net_prefix *host, size_t nhost);

/* pol_net_blocked_host without host addresses. */
bool pol_net_blocked(const struct pol *p, const struct cap_addr *a, const struct cap *granting);

/* Is host (a DNS name as the agent asked for it) allowed by the policy's
 * optional domain allow list?  Without a list every name is allowed; IP
 * literals are never judged here (pol_net_blocked is). */
bool pol_net_domain_allowed(const struct pol *p, const char *host);

/* ---- commands -------------------------------------------------------- */

/* `capbroker check-policy FILE`: argv[0] is the command name.  Exit status:
 * 0 valid, 1 invalid (every error on stderr), 64 usage. */
int pol_cmd_check(int argc, char **argv);

/* `capbroker show-policy [FILE]`: prints the effective policy (the default
 * without FILE) on stdout.  0, 1 if FILE is invalid, 64 usage. */
int pol_cmd_show(int argc, char **argv);

#endif
