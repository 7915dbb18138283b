/*
 * dispatch.c - the single list of what an agent may ask for, and the
 * reading loop that feeds it: a request the channel decoded goes to its
 * handler here, never from chan.c.
 *
 * Trust domain: broker.  The request was decoded and bounds-checked by
 * wire/ (chan.c refuses what does not decode); an op that is not in the
 * table cannot reach a handler because wire_req_decode knows only these.
 * Here the agent's request meets its tokens: each entry says what it
 * needs, and no handler runs before that was checked, once, here.
 */
#include "broker/core.h"
#include "broker/chan.h"
#include "broker/dispatch.h"
#include "broker/ops.h"
#include "broker/tokens.h"

#include <event2/event.h>
#include <stdio.h>
#include <string.h>

/* What a table entry has the dispatcher check before its handler runs. */
enum brk_dflag {
	BRK_D_PATH = 1 << 0,	/* the resource is q->path: present, well formed, and
				 * never the broker's state (checked once a token
				 * is chosen: it depends on the operation) */
	BRK_D_PATH2 = 1 << 1,	/* ... and q->path2 needs the same operation */
	BRK_D_PROG = 1 << 2,	/* the resource is the program, q->argv[0] */
	BRK_D_HOST = 1 << 3,	/* the resource is q->host:q->port */
	BRK_D_ASYNC = 1 << 4,	/* outlives the handler: one of BRK_INFLIGHT_MAX slots */
	BRK_D_LATER = 1 << 5,	/* the handler picks the token per resolved address */
	BRK_D_JUDGE = 1 << 6,	/* no token needed, but one presented is judged */
};

#define BRK_NEED(op)	(1u << (op))

/* ping needs no token, but one presented with it is judged like any
 * other (BRK_D_JUDGE): an agent testing a token learns at once that it is
 * bad. */
static void
brk_op_ping(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct wire_reply r = { .id = q->id };

	(void)u;
	brk_reply(s, &r, -1);
}

/*
 * The single list of what an agent may ask for, and what each request
 * needs: need is the set of operations a token must grant on the
 * resource (any one of them, tried in enum cap_op order: stat is covered
 * by read, list or write), flags say what the resource is and how the
 * token is found.  An entry with need 0 names its own rule:
 *  - io.*: the handle's token, re-checked on every call (ops_fs.c);
 *  - derive: the parent named, or the first held token containing every
 *    capability asked for (ops_tok.c);
 *  - request: the policy's request rules; it counts its waiting requests
 *    itself, after judging the capability (ops_tok.c);
 *  - tokens, token.add: the sandbox's own table only.
 */
static const struct brk_entry {
	brk_handler *fn;
	uint32_t need;
	unsigned flags;
} brk_table[WIRE_OP_COUNT] = {
	[WIRE_OP_PING] = { brk_op_ping, 0, BRK_D_JUDGE },
	[WIRE_OP_FS_READ] = { brk_fs_read, BRK_NEED(CAP_FS_READ), BRK_D_PATH },
	[WIRE_OP_FS_WRITE] = { brk_fs_write, BRK_NEED(CAP_FS_WRITE), BRK_D_PATH },
	[WIRE_OP_FS_LIST] = { brk_fs_list, BRK_NEED(CAP_FS_LIST), BRK_D_PATH },
	[WIRE_OP_FS_STAT] = { brk_fs_stat,
		BRK_NEED(CAP_FS_READ) | BRK_NEED(CAP_FS_LIST) | BRK_NEED(CAP_FS_WRITE), BRK_D_PATH },
	[WIRE_OP_FS_MKDIR] = { brk_fs_mkdir, BRK_NEED(CAP_FS_WRITE), BRK_D_PATH },
	[WIRE_OP_FS_DELETE] = { brk_fs_delete, BRK_NEED(CAP_FS_DELETE), BRK_D_PATH },
	[WIRE_OP_FS_RENAME] = { brk_fs_rename, BRK_NEED(CAP_FS_WRITE), BRK_D_PATH | BRK_D_PATH2 },
	[WIRE_OP_NET_CONNECT] = { brk_op_net, BRK_NEED(CAP_NET_CONNECT),
		BRK_D_HOST | BRK_D_ASYNC | BRK_D_LATER },
	[WIRE_OP_PROC_EXEC] = { brk_op_proc, BRK_NEED(CAP_PROC_EXEC), BRK_D_PROG | BRK_D_ASYNC },
	[WIRE_OP_REQUEST] = { brk_op_request, 0, 0 },
	[WIRE_OP_TOKENS] = { brk_op_tokens, 0, 0 },
	[WIRE_OP_TOKEN_ADD] = { brk_op_token_add, 0, 0 },
	[WIRE_OP_DERIVE] = { brk_op_derive, 0, 0 },
	[WIRE_OP_IO_READ] = { brk_op_io, 0, 0 },
	[WIRE_OP_IO_WRITE] = { brk_op_io, 0, 0 },
	[WIRE_OP_IO_CLOSE] = { brk_op_io, 0, 0 },
};

/* The resource a request names, as a denial names it. */
struct brk_resource {
	const char *name;
	const char *detail;		/* why it was refused, when it was */
	char hostport[BRK_HOSTRES_MAX];	/* BRK_D_HOST: name points here */
};

/* The resource an entry names, checked as a string. */
static int
brk_resource(const struct wire_req *q, unsigned flags, struct brk_resource *r)
{
	int e;

	if (flags & BRK_D_PATH) {
		r->name = q->path;
		return q->path ? cap_path_check(q->path) : CB_EINVAL;
	}
	if (flags & BRK_D_PROG) {
		if (q->argc == 0) {
			r->detail = "argv is empty";
			return CB_EINVAL;
		}
		r->name = q->argv[0];
		if ((e = cap_path_check(q->argv[0])) != 0)
			r->detail = "the program must be an absolute path";
		return e;
	}
	if (flags & BRK_D_HOST) {
		snprintf(r->hostport, sizeof(r->hostport), "%s:%u", q->host ? q->host : "", q->port);
		r->name = r->hostport;
		if (!q->host || !q->host[0] || strlen(q->host) > BRK_HOST_LEN || q->port < 1 ||
		    q->port > 65535) {
			r->detail = "need host and a port 1-65535";
			return CB_EINVAL;
		}
		return 0;
	}
	r->name = wire_op_name(q->op);
	return 0;
}

/* The first of the entry's operations a token grants on path (NULL for a
 * request without one); on failure u->h is the token judged last, if any. */
static int
brk_select(struct brk_sbx *s, const struct wire_req *q, uint32_t need, const char *path,
    struct brk_use *u)
{
	int e = CB_ENOTCOVERED;

	for (enum cap_op op = 0; op < CAP_OP_COUNT; op++) {
		struct cap_req r = { .op = op, .path = path };

		if (!(need & BRK_NEED(op)))
			continue;
		u->op = op;
		e = brk_tok_select(s, q, &r, &u->h, &u->capi);
		if (e != CB_ENOTCOVERED && e != CB_ENOTOKEN)
			break;
	}
	return e;
}

/* Whatever a token says: the broker's state (its signing keys) is never
 * served, nor may a change move or remove a directory that holds it.  The
 * path is checked as a string, which is sound because it is then resolved
 * with no symlink followed.  /proc, /sys and the other kernel file systems
 * are refused by the resolver itself (common/resolve.c). */
static int
brk_not_state(struct brk_sbx *s, enum cap_op op, const char *path)
{
	return brk_path_is_state(s->b, path, op != CAP_FS_READ && op != CAP_FS_LIST) ? CB_EPERM : 0;
}

/* rename's second name: the same operation, on q->path2.  A refusal names
 * the token judged for it (or none). */
static int
brk_select_path2(struct brk_sbx *s, const struct wire_req *q, struct brk_use *u)
{
	struct cap_req r = { .op = u->op, .path = q->path2 };
	int e;

	if (!q->path2)
		e = CB_EINVAL;
	else if ((e = cap_path_check(q->path2)) == 0 &&
	    (e = brk_tok_select(s, q, &r, &u->h2, &u->capi2)) == 0)
		e = brk_not_state(s, u->op, q->path2);
	if (e != 0)
		u->h = u->h2;
	return e;
}

/* Everything the entry names, in order: the resource, a slot, the token,
 * the state's paths.  Then the handler, which acts and replies. */
static void
brk_dispatch(struct brk_sbx *s, const struct wire_req *q)
{
	const struct brk_entry *d = &brk_table[q->op];
	struct brk_use u = { .h = NULL };
	struct brk_held *judged;
	struct brk_resource res = { .name = NULL };
	int e;

	if ((e = brk_resource(q, d->flags, &res)) != 0)
		goto deny;
	if ((d->flags & BRK_D_ASYNC) && s->inflight >= BRK_INFLIGHT_MAX) {
		e = CB_EBUSY;
		goto deny;
	}
	if ((d->flags & BRK_D_JUDGE) && q->tok &&
	    (e = brk_held_present(s, q->tok, NULL, &judged, NULL)) != 0)
		goto deny;
	if (d->need && !(d->flags & BRK_D_LATER)) {
		const char *path = d->flags & (BRK_D_PATH | BRK_D_PROG) ? res.name : NULL;

		if ((e = brk_select(s, q, d->need, path, &u)) != 0)
			goto deny;
		if ((d->flags & BRK_D_PATH) && (e = brk_not_state(s, u.op, q->path)) != 0)
			goto deny;
		if ((d->flags & BRK_D_PATH2) && (e = brk_select_path2(s, q, &u)) != 0)
			goto deny;
	}
	d->fn(s, q, &u);
	return;
deny:
	brk_deny(s, q, e, res.name, u.h ? u.h->tok->c.id : NULL, res.detail);
}

void
brk_dispatch_readable(evutil_socket_t sock, short ev, void *arg)
{
	struct brk_sbx *s = arg;

	(void)ev;
	brk_sbx_hold(s);
	for (int i = 0; i < BRK_BATCH && !s->dead; i++) {
		struct wire_req q;
		enum brk_chan_got g = brk_chan_recv(s, sock, &q);

		if (g == BRK_CHAN_STOP)
			break;
		if (g == BRK_CHAN_REQ)
			brk_dispatch(s, &q);
	}
	brk_chan_batch_end(s);
	brk_sbx_release(s);
}
