/*
 * cc_int.h - internals shared by the client library's files (not installed).
 *
 * Agent side: everything here runs in the sandboxed agent's process.
 */
#ifndef CB_CC_INT_H
#define CB_CC_INT_H

#include "client/capclient.h"
#include "wire/wire.h"

#define CC_REASON_MAX	1024

/* One request in flight; pkt/fd hold its reply once it has arrived. */
struct cc_slot {
	uint32_t id;
	bool arrived;
	bool discard;		/* caller gave up: drop the reply on arrival */
	uint8_t *pkt;		/* malloc'd copy of the reply packet */
	size_t len;
	int fd;			/* attached fd or -1 */
};

struct cc_conn {
	int fd;
	bool broken;
	uint32_t next_id;
	char *tok;		/* presented token text, or NULL */
	bool has_th;
	uint32_t th;
	int last_err;
	char reason[CC_REASON_MAX];
	uint8_t *tx;		/* WIRE_REQ_MAX */
	uint8_t *rx;		/* WIRE_REPLY_MAX: the packet being received */
	uint8_t *held;		/* packet the last cc_recv() decoded from */
	struct wire_dec *dec;
	struct cc_slot slots[CC_MAX_INFLIGHT];
	size_t nslots;
	unsigned timeout_ms, request_timeout_ms;	/* 0: no limit */
	uint64_t deadline;	/* CLOCK_MONOTONIC ns the current call gives up at; 0: none */
	/* Whether a reply has lately been there already when a call began to
	 * wait for it, and a count that makes every CC_EARLY_PROBE-th wait
	 * look first anyway: see cc_look_first() in conn.c. */
	int8_t early;
	uint8_t probe;
};

/* Send r and wait for its reply (the synchronous path every operation
 * takes).  Returns the broker's code or a channel error; records both for
 * cc_last_*().  fd: see cc_recv(); when fd is non-NULL and the reply says an
 * fd is attached but none came, CB_EPROTO. */
int cc_call(struct cc_conn *c, struct wire_req *r, struct wire_reply *rep, int *fd);

/* Record a local failure (bad argument...) as the last error. */
int cc_fail(struct cc_conn *c, int err, const char *why);

#endif
