/*
 * admin.h - the admin client: one connection to a broker's admin socket,
 * used by capctl and by `capbroker run --connect`.
 *
 * Trust domain: an administrator's process (capctl, or the user who runs
 * `capbroker run --connect`).  It talks only to a broker run by root or by
 * the same user (SO_PEERCRED), so a socket another local user serves never
 * receives our commands nor answers them.  Packets are bounded
 * (WIRE_REQ_MAX out, WIRE_REPLY_MAX in) and decoded only through wire/;
 * file descriptors arrive close-on-exec, and any the caller did not ask
 * for are closed.
 *
 * Every function that can fail returns an exit status, the administrator
 * tools' classes (docs/capctl.md): CC_ADM_OK, or the status the failure
 * maps to, with a one-line sentence for a person in cc_adm_why().  When the
 * broker answered with a refusal, cc_adm_refused() is true, the typed
 * reply (wire/admin.h) holds it and the status is cc_adm_exit_for() of its
 * code.
 */
#ifndef CB_CC_ADMIN_H
#define CB_CC_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sysexits.h>

#include "wire/wire.h"

/* The exit statuses of the admin tools: small numbers of capctl's own,
 * and <sysexits.h> where one names the case. */
enum {
	CC_ADM_OK = EX_OK,
	CC_ADM_FAIL = 1,		/* failed or refused */
	CC_ADM_UNKNOWN = 2,		/* unknown token, sandbox, request or key */
	CC_ADM_PERM = 3,		/* the broker refused this peer */
	CC_ADM_BADCAP = 4,		/* bad capability */
	CC_ADM_POLICY = 5,		/* beyond the policy */
	CC_ADM_USAGE = EX_USAGE,
	CC_ADM_UNAVAIL = EX_UNAVAILABLE,	/* no broker, or it went away */
	CC_ADM_PROTO = EX_PROTOCOL,	/* the broker's reply made no sense */
};

#define CC_ADM_TIMEOUT_MS	60000	/* longest wait for an ordinary reply */
#define CC_ADM_WHY_MAX		512

struct cc_adm;

/* A connection not yet connected (buffers allocated).  0 or CB_ENOMEM. */
int cc_adm_new(struct cc_adm **out) CB_WARN_UNUSED;
/* Close the connection; accepts NULL. */
void cc_adm_free(struct cc_adm *a);

/* Connect to the admin socket at path and check who serves it.
 * CC_ADM_UNAVAIL when no broker is there (no socket, a stale one), so a
 * caller with an offline fallback can take it quietly. */
int cc_adm_connect(struct cc_adm *a, const char *path) CB_WARN_UNUSED;

/* The sentence for the last failure ("" if none). */
const char *cc_adm_why(const struct cc_adm *a);
/* True when the last failure was the broker's refusal (ok false). */
bool cc_adm_refused(const struct cc_adm *a);
/* The socket, for poll() (an event stream, such as capctl watch). */
int cc_adm_fd(const struct cc_adm *a);

/* Begin a request of command cmd in rq (cleared, a new id: see
 * cc_adm_id()); the caller sets the fields the command takes
 * (wire/admin.h) and sends it with cc_adm_send() or cc_adm_call(). */
void cc_adm_begin(struct cc_adm *a, struct wire_adm_req *rq, enum wire_adm_cmd cmd);
/* The id of the request begun last. */
uint64_t cc_adm_id(const struct cc_adm *a);

/* Encode and send the request rq. */
int cc_adm_send(struct cc_adm *a, const struct wire_adm_req *rq) CB_WARN_UNUSED;

/*
 * Receive one message within timeout_ms (-1: no limit) into *m (valid
 * until the next receive).  timedout non-NULL: a timeout is not a failure
 * but CC_ADM_OK with *timedout set.  Up to nfds descriptors attached to
 * the message go to fds (the rest stay -1; any more are closed).
 */
int cc_adm_recv(struct cc_adm *a, struct wire_msg *m, int timeout_ms, bool *timedout,
    int *fds, size_t nfds) CB_WARN_UNUSED;

/* Read m as the reply to a command cmd into *rp (wire_adm_rep_get):
 * CC_ADM_OK for an ok reply; a refusal's status (cc_adm_refused() true,
 * *rp the refusal); CC_ADM_PROTO for a malformed one. */
int cc_adm_reply(struct cc_adm *a, const struct wire_msg *m, enum wire_adm_cmd cmd,
    struct wire_adm_rep *rp) CB_WARN_UNUSED;

/* Send the request rq and wait for its reply, skipping events
 * interleaved on the connection (nfds, fds: as cc_adm_recv, for the
 * reply).  CC_ADM_OK with *rp an ok reply of rq's command (strings and
 * lists valid until the next receive); else the failure's status. */
int cc_adm_call(struct cc_adm *a, const struct wire_adm_req *rq, struct wire_adm_rep *rp,
    int *fds, size_t nfds) CB_WARN_UNUSED;

/* The exit status for the broker's error code err (CB_E*). */
int cc_adm_exit_for(int err);

#endif
