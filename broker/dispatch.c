/*
 * dispatch.c - the single list of what an agent may ask for, and the
 * reading loop that feeds it: a request the channel decoded goes to its
 * handler here, never from chan.c.
 *
 * Trust domain: broker.  The request was decoded and bounds-checked by
 * wire/ (chan.c refuses what does not decode); an op that is not in the
 * table cannot reach a handler because wire_req_decode knows only these.
 */
#include "broker/broker.h"
#include "broker/chan.h"
#include "broker/dispatch.h"

#include <event2/event.h>

/* ping needs no token, but one presented with it is judged like any
 * other: an agent testing a token learns at once that it is bad. */
static void
brk_op_ping(struct brk_sbx *s, const struct wire_req *q)
{
	struct wire_reply r = { .id = q->id };
	struct brk_held *h;
	int e;

	if (q->tok && (e = brk_held_present(s, q->tok, NULL, &h, NULL)) != 0) {
		brk_deny(s, q, e, "ping", NULL, NULL);
		return;
	}
	brk_reply(s, &r, -1);
}

/*
 * The single list of what an agent may ask for.  Each handler checks its
 * own token requirement (see the comment at each), because the capability
 * needed depends on the request (stat needs read or list, rename needs
 * write on both names).
 */
static const struct {
	void (*fn)(struct brk_sbx *, const struct wire_req *);
} brk_table[WIRE_OP_COUNT] = {
	[WIRE_OP_PING] = { brk_op_ping },
	[WIRE_OP_FS_READ] = { brk_op_fs },
	[WIRE_OP_FS_WRITE] = { brk_op_fs },
	[WIRE_OP_FS_LIST] = { brk_op_fs },
	[WIRE_OP_FS_STAT] = { brk_op_fs },
	[WIRE_OP_FS_MKDIR] = { brk_op_fs },
	[WIRE_OP_FS_DELETE] = { brk_op_fs },
	[WIRE_OP_FS_RENAME] = { brk_op_fs },
	[WIRE_OP_NET_CONNECT] = { brk_op_net },
	[WIRE_OP_PROC_EXEC] = { brk_op_proc },
	[WIRE_OP_REQUEST] = { brk_op_request },
	[WIRE_OP_TOKENS] = { brk_op_tokens },
	[WIRE_OP_TOKEN_ADD] = { brk_op_token_add },
	[WIRE_OP_DERIVE] = { brk_op_derive },
	[WIRE_OP_IO_READ] = { brk_op_io },
	[WIRE_OP_IO_WRITE] = { brk_op_io },
	[WIRE_OP_IO_CLOSE] = { brk_op_io },
};

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
			brk_table[q.op].fn(s, &q);
	}
	brk_chan_batch_end(s);
	brk_sbx_release(s);
}
