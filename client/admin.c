/*
 * admin.c - the admin client (see admin.h): connect to a broker's admin
 * socket, send a command, read its reply, and say what a failure means
 * as an exit status and a sentence.
 *
 * Trust domain: an administrator's process.  The broker's replies are
 * trusted no further than the broker: each is bounded before it is
 * decoded (MSG_TRUNC tells us a packet was longer than our buffer), a
 * reply to another id is skipped, and descriptors nobody asked for are
 * closed at once.  Text in a reply is the caller's to show through the
 * one escaper (common/text.c).
 */
#include "client/admin.h"
#include "common/common.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CC_ADM_FDS_MAX	3	/* the most a reply carries (run: the agent's stdio) */

struct cc_adm {
	int fd;
	bool answered;		/* the broker has replied at least once */
	bool refused;		/* the last failure was the broker's refusal */
	uint64_t next_id;
	uint8_t *tx, *rx;
	struct wire_dec *dec;
	char why[CC_ADM_WHY_MAX];
};

static int cc_adm_fail(struct cc_adm *a, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record why the last call failed; returns code. */
static int
cc_adm_fail(struct cc_adm *a, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(a->why, sizeof(a->why), fmt, ap);
	va_end(ap);
	return code;
}

int
cc_adm_new(struct cc_adm **out)
{
	struct cc_adm *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a)
		return CB_ENOMEM;
	a->fd = -1;
	if (!(a->tx = malloc(WIRE_REQ_MAX)) || !(a->rx = malloc(WIRE_REPLY_MAX)) ||
	    wire_dec_new(WIRE_REPLY_MAX, &a->dec) != 0) {
		cc_adm_free(a);
		return CB_ENOMEM;
	}
	*out = a;
	return 0;
}

void
cc_adm_free(struct cc_adm *a)
{
	if (!a)
		return;
	if (a->fd >= 0)
		close(a->fd);
	wire_dec_free(a->dec);
	free(a->tx);
	free(a->rx);
	free(a);
}

const char *
cc_adm_why(const struct cc_adm *a)
{
	return a->why;
}

bool
cc_adm_refused(const struct cc_adm *a)
{
	return a->refused;
}

int
cc_adm_fd(const struct cc_adm *a)
{
	return a->fd;
}

uint64_t
cc_adm_id(const struct cc_adm *a)
{
	return a->next_id;
}

/* Talk only to a broker run by root or by ourselves: a socket another
 * local user serves (say, at a path in /tmp) must not receive our
 * commands (an agent's grants among them), nor answer them. */
static int
cc_adm_check_peer(struct cc_adm *a, const char *path)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	if (getsockopt(a->fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) != 0 ||
	    (cr.uid != 0 && cr.uid != geteuid())) {
		close(a->fd);
		a->fd = -1;
		return cc_adm_fail(a, CC_ADM_PERM, "%s is served by uid %u, not by root or you: refusing",
		    path, (unsigned)cr.uid);
	}
	return CC_ADM_OK;
}

int
cc_adm_connect(struct cc_adm *a, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int e;

	a->why[0] = '\0';
	a->refused = false;
	if (a->fd >= 0)
		close(a->fd);	/* a second connect replaces the first */
	a->fd = -1;
	if (strlen(path) >= sizeof(sa.sun_path))
		return cc_adm_fail(a, CC_ADM_USAGE, "admin socket path too long: %s", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((a->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0)
		return cc_adm_fail(a, CC_ADM_FAIL, "socket: %s", strerror(errno));
	if (connect(a->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return cc_adm_check_peer(a, path);
	e = errno;
	close(a->fd);
	a->fd = -1;
	if (e == EACCES || e == EPERM)
		return cc_adm_fail(a, CC_ADM_PERM, "permission denied: cannot open the admin socket %s",
		    path);
	if (e == ECONNREFUSED)
		return cc_adm_fail(a, CC_ADM_UNAVAIL, "no broker is listening at %s: the socket is "
		    "stale, left by a broker that has exited (capbroker serve removes it when it "
		    "starts)", path);
	if (e == ENOENT)
		return cc_adm_fail(a, CC_ADM_UNAVAIL, "no broker at %s (no such socket; is capbroker "
		    "serve running?)", path);
	return cc_adm_fail(a, CC_ADM_UNAVAIL, "no broker at %s: %s", path, strerror(e));
}

void
cc_adm_begin(struct cc_adm *a, struct wire_adm_req *rq, enum wire_adm_cmd cmd)
{
	memset(rq, 0, sizeof(*rq));
	rq->id = ++a->next_id;
	rq->cmd = cmd;
}

/* The broker hung up.  One that refuses the connection itself (too many
 * connections, out of descriptors) says why before it does; one that
 * does not take this peer for an administrator closes without a word. */
static int
cc_adm_hangup(struct cc_adm *a)
{
	struct wire_adm_rep rp;
	ssize_t n;

	n = recv(a->fd, a->rx, WIRE_REPLY_MAX, MSG_DONTWAIT | MSG_TRUNC);
	if (n > 0 && (size_t)n <= WIRE_REPLY_MAX &&
	    wire_adm_rep_decode(a->dec, a->rx, (size_t)n, WIRE_ADM_COUNT, &rp) == 0 && rp.err)
		return cc_adm_fail(a, CC_ADM_UNAVAIL, "the broker refused the connection: %s",
		    rp.reason);
	if (!a->answered)
		return cc_adm_fail(a, CC_ADM_PERM, "permission denied: the broker closed the "
		    "connection without a reply (this user is not one of its administrators)");
	return cc_adm_fail(a, CC_ADM_UNAVAIL, "the broker closed the connection");
}

int
cc_adm_send(struct cc_adm *a, const struct wire_adm_req *rq)
{
	size_t len;

	a->refused = false;
	if (wire_adm_encode(rq, a->tx, WIRE_REQ_MAX, &len) != 0)
		return cc_adm_fail(a, CC_ADM_USAGE, "request too large");
	if (send(a->fd, a->tx, len, MSG_NOSIGNAL) < 0) {
		if (errno == EPIPE || errno == ECONNRESET)
			return cc_adm_hangup(a);
		return cc_adm_fail(a, CC_ADM_UNAVAIL, "send: %s", strerror(errno));
	}
	return CC_ADM_OK;
}

/* Take the descriptors a message carried: up to nfds into fds, in order;
 * the rest are closed, as is everything when the message was cut. */
static void
cc_adm_take_fds(struct wire_packet *pk, int *fds, size_t nfds)
{
	size_t got = 0;

	for (size_t i = 0; i < pk->nfds; i++) {
		if (got < nfds && !pk->trunc && !pk->ctrunc)
			fds[got++] = pk->fds[i];
		else
			close(pk->fds[i]);
	}
	pk->nfds = 0;
}

int
cc_adm_recv(struct cc_adm *a, struct wire_msg *m, int timeout_ms, bool *timedout, int *fds,
    size_t nfds)
{
	struct wire_packet pk;
	struct pollfd p = { .fd = a->fd, .events = POLLIN };
	ssize_t n;
	int r;

	a->refused = false;
	for (size_t i = 0; i < nfds; i++)
		fds[i] = -1;
	if (timedout)
		*timedout = false;
	do {
		r = poll(&p, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r == 0) {
		if (timedout) {
			*timedout = true;
			return CC_ADM_OK;
		}
		return cc_adm_fail(a, CC_ADM_UNAVAIL, "the broker did not answer in %d s",
		    timeout_ms / 1000);
	}
	/* MSG_TRUNC: n is the packet's whole length, so a longer one shows. */
	n = wire_packet_recv(a->fd, a->rx, WIRE_REPLY_MAX, MSG_TRUNC, &pk);
	if (n > 0)
		cc_adm_take_fds(&pk, fds, nfds < CC_ADM_FDS_MAX ? nfds : CC_ADM_FDS_MAX);
	wire_packet_close(&pk);
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return cc_adm_hangup(a);
	if (n < 0)
		return cc_adm_fail(a, CC_ADM_UNAVAIL, "recv: %s", strerror(errno));
	if ((size_t)n > WIRE_REPLY_MAX || wire_decode(a->dec, a->rx, (size_t)n, m) != 0)
		return cc_adm_fail(a, CC_ADM_PROTO, "malformed reply from the broker");
	a->answered = true;
	return CC_ADM_OK;
}

/* Close what a skipped message carried. */
static void
cc_adm_close_fds(int *fds, size_t nfds)
{
	for (size_t i = 0; i < nfds; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

int
cc_adm_reply(struct cc_adm *a, const struct wire_msg *m, enum wire_adm_cmd cmd,
    struct wire_adm_rep *rp)
{
	if (wire_adm_rep_get(m, cmd, rp) != 0)
		return cc_adm_fail(a, CC_ADM_PROTO, "malformed reply from the broker");
	if (!rp->err)
		return CC_ADM_OK;
	a->refused = true;
	return cc_adm_fail(a, cc_adm_exit_for(rp->err), "%s", rp->reason);
}

int
cc_adm_call(struct cc_adm *a, const struct wire_adm_req *rq, struct wire_adm_rep *rp, int *fds,
    size_t nfds)
{
	struct wire_msg m;
	uint64_t id;
	int r;

	memset(rp, 0, sizeof(*rp));
	rp->cmd = rq->cmd;
	if ((r = cc_adm_send(a, rq)) != CC_ADM_OK)
		return r;
	for (;;) {
		if ((r = cc_adm_recv(a, &m, CC_ADM_TIMEOUT_MS, NULL, fds, nfds)) != CC_ADM_OK)
			return r;
		r = wire_adm_msg_id(&m, &id);
		if (r == 0 && id == rq->id)
			break;
		cc_adm_close_fds(fds, nfds);
		/* An event is not our reply; neither is a message that is
		 * neither reply nor event. */
		if (r == CB_EPROTO)
			return cc_adm_fail(a, CC_ADM_PROTO, "malformed reply from the broker");
		/* id 0: the broker refused the connection itself (too many
		 * connections, out of descriptors) and says why.  Any other
		 * id is not our reply. */
		if (r == 0 && id == 0 && wire_adm_rep_get(&m, WIRE_ADM_COUNT, rp) == 0 && rp->err)
			return cc_adm_fail(a, CC_ADM_UNAVAIL, "the broker refused the connection: %s",
			    rp->reason);
	}
	if ((r = cc_adm_reply(a, &m, rq->cmd, rp)) != CC_ADM_OK)
		cc_adm_close_fds(fds, nfds);
	return r;
}

int
cc_adm_exit_for(int err)
{
	if (err <= CB_ECAP_OP && err >= CB_ECAP_TOOLONG)
		return CC_ADM_BADCAP;
	switch (err) {
	case CB_ENOENT:
	case CB_EUNKNOWNTOK:
	case CB_EUNKNOWNKEY:
		return CC_ADM_UNKNOWN;
	case CB_EPERM:
		return CC_ADM_PERM;
	case CB_EPOLICY:
		return CC_ADM_POLICY;
	case CB_EINVAL:
		return CC_ADM_USAGE;
	case CB_EPROTO:
	case CB_EUNKNOWNOP:
		return CC_ADM_PROTO;
	default:
		return CC_ADM_FAIL;
	}
}
