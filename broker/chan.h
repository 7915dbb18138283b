/*
 * chan.h - a sandbox's channel (chan.c), private to broker/: reading one
 * packet, the reply queue, the rate.  The channel calls no handler: the
 * dispatcher pulls requests from it, and a channel that must close is
 * reported through brk.chan_closed.
 */
#ifndef CB_BROKER_CHAN_H
#define CB_BROKER_CHAN_H

#include <event2/util.h>

#include "broker/core.h"

/* Close a descriptor an agent holds or held (one handed over, the copy of
 * the agent's socket a mediated connect takes, one the agent sent), never
 * waiting: see chan.c. */
void brk_close_agent(int fd);
/* Send a reply (with an optional fd, which is consumed). */
void brk_reply(struct brk_sbx *s, const struct wire_reply *r, int fd);
/* Reply with an error and audit the denial. */
void brk_deny(struct brk_sbx *s, const struct wire_req *q, int err, const char *resource,
    const uint8_t *tid, const char *detail);

enum brk_chan_got {
	BRK_CHAN_REQ,	/* a decoded request, for the dispatcher */
	BRK_CHAN_NEXT,	/* a bad packet, already answered: read on */
	BRK_CHAN_STOP,	/* nothing more now: empty, stalled or closed */
};

/* Read and decode one packet (see chan.c for what is refused on the way). */
enum brk_chan_got brk_chan_recv(struct brk_sbx *s, evutil_socket_t sock, struct wire_req *q);
/* After a batch of reads: close a channel that sent too much garbage. */
void brk_chan_batch_end(struct brk_sbx *s);
/* Event callbacks: the socket can take queued replies; a rate stall ended. */
void brk_chan_writable(evutil_socket_t sock, short ev, void *arg);
void brk_chan_rate_resume(evutil_socket_t fd, short ev, void *arg);
/* Free the replies still queued (and close their fds). */
void brk_chan_drop_queue(struct brk_sbx *s);

#endif
