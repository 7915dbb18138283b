/*
 * ops.h - the request handlers (ops_*.c), private to broker/.
 *
 * Only the dispatcher (dispatch.c) calls them, after the checks their
 * table entry names: the resource is well formed, and a token that grants
 * the needed operation on it was chosen and passed the check pipeline
 * (time, audience, revocation and uses, coverage, ceiling, signature).
 * What a handler still checks is its own (the root it resolves beneath,
 * its flags).  Before it acts it passes the commit gate, brk_tok_commit.
 * Each replies or denies itself, through chan.c.
 */
#ifndef CB_BROKER_OPS_H
#define CB_BROKER_OPS_H

#include "broker/core.h"

#define BRK_HOST_LEN	253	/* the longest host name asked for (DNS's limit) */
#define BRK_HOSTRES_MAX	(BRK_HOST_LEN + 47)	/* "host:port" as audited */

/* The token(s) the dispatcher chose for a request. */
struct brk_use {
	enum cap_op op;		/* the operation it was chosen for */
	struct brk_held *h;	/* NULL when the entry needs no token */
	size_t capi;		/* h's capability that covers the request */
	struct brk_held *h2;	/* a second name (rename's q->path2): its token */
	size_t capi2;
};

typedef void brk_handler(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u);

/* ops_fs.c */
brk_handler brk_fs_read, brk_fs_write, brk_fs_list, brk_fs_stat, brk_fs_mkdir, brk_fs_delete,
    brk_fs_rename, brk_op_io;
/* (ops_fs.c) Close the kept root fds unused since the last call (the
 * once-a-second tick), or all of them (the broker's end). */
void brk_fs_roots_tick(void);
void brk_fs_roots_drop(void);
/* ops_net.c, ops_proc.c */
brk_handler brk_op_net, brk_op_proc;
/* ops_tok.c */
brk_handler brk_op_tokens, brk_op_token_add, brk_op_derive, brk_op_request;

/* (ops_net.c) May sandbox s connect to address a, port port?  hostname is
 * the name the agent asked for (for name capabilities; the address text
 * when it asked for an address).  presented: the one token to judge, or
 * NULL for every valid held token.  0 with *out the covering token;
 * otherwise the first refusal met (CB_ENOTCOVERED, CB_EPOLICY,
 * CB_ENETBLOCKED, a token's own error, or the host's addresses could not
 * be read), *out the token it concerns or NULL.  Spends nothing and
 * audits nothing: the one judgment of net.connect, shared with the
 * mediated connect() (notify.c, hosts.c). */
int brk_net_check(struct brk_sbx *s, struct brk_held *presented, const char *hostname, int port,
    const struct cap_addr *a, struct brk_held **out) CB_WARN_UNUSED;

/* (ops_net.c) Resolve host (blocking: worker threads only) to at most max
 * addresses, normalised as capabilities see them (IPv4-mapped forms as
 * IPv4).  *gai gets getaddrinfo's result.  The one lookup of net.connect
 * and of the names of the mediated connect() (hosts.c). */
size_t brk_net_lookup(const char *host, struct cap_addr *out, size_t max, int *gai);

/* (ops_net.c) Make a connected socket of the broker's, about to be handed
 * to an agent, connected for good (see there).  0, or an errno: it is no
 * longer connected and must not be handed over. */
int brk_net_settle(int fd) CB_WARN_UNUSED;

/* Kill each running proc.exec child of s shown a grant root that no grant
 * s holds shows now (revoked, expired): brk_fss_refresh_all calls it. */
void brk_proc_recheck(struct brk_sbx *s);

/* Kill the sandbox's running proc.exec children (its channel closed). */
void brk_proc_kill_all(struct brk_sbx *s);
/* The broker is going away: end every proc.exec child of s now (killed,
 * reaped, freed), answered or not.  The caller holds s. */
void brk_proc_end_all(struct brk_sbx *s);


/* (ops_proc.c) A tier's limits as the sandbox takes them: wall is the wall clock to use
 * (already at most the tier's); open files are clamped to what the sandbox
 * allows (stricter, never weaker). */
void brk_sbx_limits(const struct pol_limits *l, uint64_t wall, struct sbx_limits *out);

#endif
