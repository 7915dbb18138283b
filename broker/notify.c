/*
 * notify.c - mediated connect(): an unmodified program's connect() in the
 * medium and high tiers reaches the broker by seccomp user notification
 * (the stub's filter returns SECCOMP_RET_USER_NOTIF for connect, and pid 1
 * hands the listener over with its "ready" report), and gets the broker's
 * socket if a live net.connect token covers the address.
 *
 * Trust domain: broker, serving a hostile agent.  Why it is safe:
 *  - The call never resumes with the agent's arguments: this file never
 *    answers SECCOMP_USER_NOTIF_FLAG_CONTINUE.  The address is copied out
 *    of the agent's memory once (process_vm_readv), the notification is
 *    then checked to be still pending (SECCOMP_IOCTL_NOTIF_ID_VALID: the
 *    thread has not died and its id was not recycled), and from then on
 *    only the copy is judged and used: another thread that rewrites the
 *    sockaddr after the notification changes nothing.
 *  - The judgment is net.connect's own (brk_net_check in ops_net.c): the
 *    same tokens, ceiling, never rules and host addresses as the explicit
 *    operation.  A mediated connect is judged by address only (the agent
 *    gave no name).
 *  - The broker makes the connection with a socket of its own (in its own
 *    network namespace), to the address it judged, and installs it at the
 *    agent's descriptor number (SECCOMP_IOCTL_NOTIF_ADDFD with
 *    SECCOMP_ADDFD_FLAG_SETFD, which replaces what is there) once it is
 *    connected, then answers 0 (a non-blocking socket too: see
 *    brk_nconn_go for why it never gets one still connecting).  The agent's own
 *    socket lives in the sandbox's empty network namespace and reaches
 *    nothing by itself; it is read (pidfd_getfd) only for its family, its
 *    O_NONBLOCK, its close-on-exec flag and the options it set.
 *  - A socket the broker made (in the host's namespace) is never operated
 *    on for the agent: connect(AF_UNSPEC), which would disconnect it and
 *    let bind/listen/sendto(MSG_FASTOPEN) use it freely, is refused.
 *    Operations on the agent's own AF_UNIX sockets (connect to an abstract
 *    name, AF_UNSPEC) are performed by the broker on that very socket,
 *    whose network namespace (the sandbox's) is checked first: abstract
 *    names are looked up there, never in the host's.
 *  - The loop never waits: reads are of pending notifications only, a
 *    blocking connect is an event with a time limit, and what can block
 *    runs in a worker thread: the copy of the address out of the agent's
 *    memory (its pages may be a served file's, read in by the file server)
 *    and the AF_UNIX connect; at most BRK_NOTIFY_INFLIGHT of these
 *    together per sandbox.  While they are all taken the listener is not
 *    read: the sandbox's further calls wait in the kernel, as they would
 *    behind a slow network, until one ends (brk_notify_put).  They used
 *    to fail with EAGAIN, which a blocking connect() never returns for
 *    TCP and ordinary programs take as fatal: 11 of 64 threads connecting
 *    at once failed (tests/integration/953).
 *  - One audit line per mediated connect() to an address: allowed (before
 *    the broker connects) or denied, with the reason; denials are charged
 *    to the sandbox's audit budget like every other.
 */
#include "broker/core.h"
#include "broker/budget.h"
#include "broker/chan.h"
#include "broker/dns.h"
#include "broker/notify.h"
#include "broker/ops.h"
#include "broker/tokens.h"
#include "broker/work.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL		/* Linux 6.9 */
#endif

#define BRK_NOTIFY_INFLIGHT	32	/* blocking connects waited for, per sandbox */
#define BRK_NOTIFY_TIMEOUT_MS	10000	/* like the explicit net.connect */

struct brk_notify {
	struct brk_sbx *s;
	int fd;				/* the listener; -1 once closed */
	struct event *ev;
	struct event *ev_pause;		/* re-arms ev after an audit-budget wait */
	size_t req_sz, resp_sz;		/* the kernel's sizes (may exceed ours) */
	struct seccomp_notif *req;
	unsigned inflight;
	bool full;			/* not read until a place is free */
	struct brk_nconn *dwait;	/* resolver connects waiting for room */
	struct brk_nconn **dwait_tail;
};

/* One connect() being served. */
struct brk_nconn {
	struct brk_sbx *s;
	uint64_t id;			/* the notification */
	pid_t tid;			/* the calling thread (host pid namespace) */
	int afd;			/* the descriptor number in the agent */
	int agent_sock;			/* the agent's socket (pidfd_getfd) */
	bool nonblock, cloexec;
	int sock;			/* the broker's socket */
	struct event *ev;
	bool counted;			/* in inflight */
	int err;			/* worker result (errno) */
	int startfd;			/* a path-named AF_UNIX connect: the agent's
					 * root or working directory (O_PATH) */
	int lfd;			/* an AF_UNIX connect: the listener's dup, for
					 * its worker to ask if the call still waits */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	union {
		struct sockaddr sa;
		struct sockaddr_un un;
		struct sockaddr_in in4;
		struct sockaddr_in6 in6;
		struct sockaddr_storage ss;
	} addr;				/* the copy that is judged and used */
	socklen_t addrlen;
	struct brk_nconn *dnext;	/* in the notifier's dwait */
	uintptr_t uaddr;		/* where the agent's call has it */
	char res[96];			/* ADDRESS:PORT, for the audit */
};

static struct brk_notify *
brk_nt(struct brk_sbx *s)
{
	return s->notify;
}

/* A place in flight given back: a listener left unread for want of one is
 * read again (unless the audit budget's pause has it: that re-arms it). */
static void
brk_notify_put(struct brk_notify *nt)
{
	if (nt->inflight > 0)
		nt->inflight--;
	if (nt->full && nt->inflight < BRK_NOTIFY_INFLIGHT && nt->fd >= 0 && nt->ev) {
		nt->full = false;
		if (!nt->ev_pause || !evtimer_pending(nt->ev_pause, NULL))
			event_add(nt->ev, NULL);
	}
}

static bool
brk_notify_valid(int lfd, uint64_t id)
{
	return lfd >= 0 && ioctl(lfd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Answer notification id with error -err (0: success, val 0).  Never
 * CONTINUE.  A notification that went away (the thread was interrupted or
 * died) cannot be answered: nothing to do. */
static void
brk_notify_answer(struct brk_notify *nt, uint64_t id, int err)
{
	struct seccomp_notif_resp *r;

	if (!nt || nt->fd < 0 || !(r = calloc(1, nt->resp_sz)))
		return;
	r->id = id;
	r->error = err ? -err : 0;
	r->val = 0;
	r->flags = 0;
	(void)ioctl(nt->fd, SECCOMP_IOCTL_NOTIF_SEND, r);
	free(r);
}

/*
 * The close of the broker's copy of an agent's AF_UNIX socket, on a
 * worker: the agent can close its own copy while the broker holds this one
 * (from another thread, while its connect() is pending), and the last
 * close of an AF_UNIX socket releases what is queued on it, descriptors
 * sent with SCM_RIGHTS included, in the closing thread.  A TCP socket
 * queued there with SO_LINGER and unsent data towards a peer that reads
 * nothing waited its linger on the loop (up to 2^31 s): every sandbox and
 * capctl unserved (red team, tests/integration/951-notify-unix-queued-
 * linger.sh).  brk_close_agent's cleared linger is the socket's own, not
 * that of those queued on it.  Counted among the sandbox's connects in
 * flight (its place passed on, or one taken: brk_nconn_judge saw to it
 * that there is one), so an agent holding such closes stalls only its own
 * connects.
 */
struct brk_nclose {
	struct brk_sbx *s;
	int fd;
};

/*
 * That close is cut short too (red team: a worker held for the agent's
 * linger, up to 2^31 s, after the sandbox ended, without bound across
 * sandboxes).  A socket's linger waits interruptibly (sk_stream_wait_close
 * gives up once a signal is pending): each lingering socket the close
 * releases stops waiting at the first signal and is left to the kernel to
 * finish (an orphan, within the kernel's own limits), as a linger of 0
 * would.
 */
#define BRK_NCLOSE_CUT_NS (20 * 1000000L)

static void
brk_nclose_work(void *arg)
{
	struct brk_cut k;

	(void)brk_work_cut_start(&k, BRK_NCLOSE_CUT_NS);
	brk_close_agent(((struct brk_nclose *)arg)->fd);
	brk_work_cut_stop(&k);
}

static void
brk_nclose_done(void *arg)
{
	struct brk_nclose *k = arg;
	struct brk_notify *nt = brk_nt(k->s);

	if (nt)
		brk_notify_put(nt);
	brk_sbx_release(k->s);
	free(k);
}

/* Close c's copy of the agent's socket off the loop if it is an AF_UNIX
 * one: true if handed to a worker. */
static bool
brk_nclose_off(struct brk_nconn *c, struct brk_notify *nt)
{
	struct brk_nclose *k;
	int domain = 0;
	socklen_t l = sizeof(domain);

	if (getsockopt(c->agent_sock, SOL_SOCKET, SO_DOMAIN, &domain, &l) != 0 ||
	    domain != AF_UNIX || !nt || (!c->counted && nt->inflight >= BRK_NOTIFY_INFLIGHT) ||
	    !(k = malloc(sizeof(*k))))
		return false;
	*k = (struct brk_nclose){ .s = c->s, .fd = c->agent_sock };
	brk_sbx_hold(c->s);
	if (brk_work(c->s->b, brk_nclose_work, brk_nclose_done, k) != 0) {
		brk_sbx_release(c->s);
		free(k);
		return false;
	}
	if (c->counted)
		c->counted = false;	/* its place is the close's now */
	else
		nt->inflight++;
	c->agent_sock = -1;
	return true;
}

static void
brk_nconn_free(struct brk_nconn *c)
{
	struct brk_notify *nt = brk_nt(c->s);

	if (c->ev)
		event_free(c->ev);
	/* Both may be the agent's by now (installed, or its own socket): the
	 * last close of either may be ours. */
	brk_close_agent(c->sock);
	if (c->agent_sock >= 0 && !brk_nclose_off(c, nt))
		brk_close_agent(c->agent_sock);
	if (c->startfd >= 0)
		close(c->startfd);
	if (c->lfd >= 0)
		close(c->lfd);
	if (c->counted && nt)
		brk_notify_put(nt);
	brk_sbx_release(c->s);
	free(c);
}

/* Is the agent's socket in the sandbox's own network namespace (made
 * there by the agent), rather than one the broker made and handed over?
 * Judged against the namespace of the calling thread, opened while its
 * call is still pending (so the thread id names that thread). */
static bool
brk_agent_netns(const struct brk_nconn *c, int lfd)
{
	char p[64];
	int ns, sk;
	struct stat a, b;
	bool same = false;

	snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)c->tid);
	if ((ns = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	if (!brk_notify_valid(lfd, c->id)) {
		close(ns);
		return false;
	}
	if ((sk = ioctl(c->agent_sock, SIOCGSKNS)) >= 0) {
		if (fstat(ns, &a) == 0 && fstat(sk, &b) == 0)
			same = a.st_dev == b.st_dev && a.st_ino == b.st_ino;
		close(sk);
	}
	close(ns);
	return same;
}

/* The close-on-exec flag of the agent's descriptor, from its fdinfo
 * ("flags:" is octal and carries O_CLOEXEC for the descriptor). */
static bool
brk_agent_cloexec(pid_t tid, int afd)
{
	char p[64], buf[512];
	unsigned long fl = 0;
	ssize_t n;
	const char *f;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/fdinfo/%d", (int)tid, afd);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if ((f = strstr(buf, "flags:")) == NULL || sscanf(f + 6, "%lo", &fl) != 1)
		return true;	/* unknown: the safer guess */
	return (fl & O_CLOEXEC) != 0;
}

/* Options the agent set on its socket, carried to the broker's: each one
 * whose value differs from a fresh socket's.  Buffer sizes read back
 * doubled (socket(7)) and are halved again. */
static const struct brk_sockopt {
	int level, name;
} brk_sockopts[] = {
	{ SOL_SOCKET, SO_KEEPALIVE }, { SOL_SOCKET, SO_REUSEADDR },
	{ SOL_SOCKET, SO_LINGER }, { SOL_SOCKET, SO_RCVTIMEO_NEW },
	{ SOL_SOCKET, SO_SNDTIMEO_NEW }, { SOL_SOCKET, SO_PRIORITY },
	{ SOL_SOCKET, SO_OOBINLINE }, { SOL_SOCKET, SO_RCVLOWAT },
	{ SOL_SOCKET, SO_RCVBUF }, { SOL_SOCKET, SO_SNDBUF },
	{ IPPROTO_TCP, TCP_NODELAY }, { IPPROTO_TCP, TCP_KEEPIDLE },
	{ IPPROTO_TCP, TCP_KEEPINTVL }, { IPPROTO_TCP, TCP_KEEPCNT },
	{ IPPROTO_TCP, TCP_USER_TIMEOUT }, { IPPROTO_TCP, TCP_MAXSEG },
	{ IPPROTO_TCP, TCP_CORK }, { IPPROTO_TCP, TCP_NOTSENT_LOWAT },
	{ IPPROTO_TCP, TCP_SYNCNT },
	{ IPPROTO_IP, IP_TOS }, { IPPROTO_IP, IP_TTL },
	{ IPPROTO_IPV6, IPV6_TCLASS }, { IPPROTO_IPV6, IPV6_UNICAST_HOPS },
	{ IPPROTO_IPV6, IPV6_V6ONLY },
};
#define BRK_NSOCKOPTS	(sizeof(brk_sockopts) / sizeof(brk_sockopts[0]))
#define BRK_SOCKOPT_MAX	32

/* A fresh socket's value of each option, per family (0: IPv4, 1: IPv6),
 * read once from the broker's first fresh socket of that family: the
 * loop thread alone copies options, and this halves the getsockopt calls
 * of a mediated connect (the profile's largest share, docs/performance.md). */
static struct brk_sockopt_dflt {
	bool have;
	bool ok[BRK_NSOCKOPTS];
	socklen_t len[BRK_NSOCKOPTS];
	uint8_t v[BRK_NSOCKOPTS][BRK_SOCKOPT_MAX];
} brk_sockopt_dflt[2];

static bool
brk_sockopt_skip(const struct brk_sockopt *o, int family)
{
	return (o->level == IPPROTO_IP && family != AF_INET) ||
	    (o->level == IPPROTO_IPV6 && family != AF_INET6);
}

static void
brk_copy_opts(int from, int to, int family)
{
	struct brk_sockopt_dflt *d = &brk_sockopt_dflt[family == AF_INET6];
	uint8_t a[BRK_SOCKOPT_MAX];

	if (!d->have) {
		/* "to" is still fresh: its values are the defaults */
		for (size_t i = 0; i < BRK_NSOCKOPTS; i++) {
			d->len[i] = sizeof(d->v[i]);
			d->ok[i] = !brk_sockopt_skip(&brk_sockopts[i], family) &&
			    getsockopt(to, brk_sockopts[i].level, brk_sockopts[i].name, d->v[i],
			    &d->len[i]) == 0;
		}
		d->have = true;
	}
	for (size_t i = 0; i < BRK_NSOCKOPTS; i++) {
		const struct brk_sockopt *o = &brk_sockopts[i];
		socklen_t la = sizeof(a);

		if (!d->ok[i] || getsockopt(from, o->level, o->name, a, &la) != 0 ||
		    (la == d->len[i] && memcmp(a, d->v[i], la) == 0))
			continue;
		if (o->level == SOL_SOCKET && (o->name == SO_RCVBUF || o->name == SO_SNDBUF) &&
		    la == sizeof(int)) {
			int v;

			memcpy(&v, a, sizeof(v));
			v /= 2;
			memcpy(a, &v, sizeof(v));
		}
		(void)setsockopt(to, o->level, o->name, a, la);	/* best effort */
	}
}

/* Install the broker's connected socket at the agent's descriptor and
 * answer 0. */
static void
brk_nconn_install(struct brk_nconn *c)
{
	struct brk_notify *nt = brk_nt(c->s);
	struct seccomp_notif_addfd add = { .id = c->id, .flags = SECCOMP_ADDFD_FLAG_SETFD,
		.srcfd = (uint32_t)c->sock, .newfd = (uint32_t)c->afd,
		.newfd_flags = c->cloexec ? O_CLOEXEC : 0 };
	int e;

	/* connected for good before the agent has it (brk_net_settle) */
	if ((e = brk_net_settle(c->sock)) != 0) {
		brk_notify_answer(nt, c->id, e);
		return;
	}
	if (!c->nonblock && fcntl(c->sock, F_SETFL, 0) != 0) {
		brk_notify_answer(nt, c->id, EIO);
		return;
	}
	/* Fails (ENOENT) when the thread was interrupted meanwhile: its
	 * restarted call is a new notification, and this socket is dropped. */
	if (!nt || nt->fd < 0 || ioctl(nt->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0) {
		if (nt && errno != ENOENT)
			brk_notify_answer(nt, c->id, errno == EMFILE ? EMFILE : EIO);
		return;
	}
	brk_notify_answer(nt, c->id, 0);
}

static void
brk_nconn_connected(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_nconn *c = arg;
	int err = 0;
	socklen_t l = sizeof(err);

	if (c->s->dead) {
		brk_nconn_free(c);
		return;
	}
	if (ev & EV_TIMEOUT)
		err = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
		err = errno;
	if (err)
		brk_notify_answer(brk_nt(c->s), c->id, err);
	else
		brk_nconn_install(c);
	brk_nconn_free(c);
}

/* Judged and allowed: connect, without ever waiting on the loop.  The
 * socket is installed only once connected, even for a non-blocking agent
 * (whose connect() then returns 0 at once rather than EINPROGRESS): a
 * socket still in SYN_SENT would be disconnected by the agent's shutdown()
 * (inet_shutdown), and an unconnected socket of the host's namespace could
 * then listen() on the host or connect anywhere by sendto(MSG_FASTOPEN),
 * past the broker. */
static void
brk_nconn_go(struct brk_nconn *c, int family)
{
	struct brk_notify *nt = brk_nt(c->s);
	struct timeval tv = { BRK_NOTIFY_TIMEOUT_MS / 1000, 0 }, st;
	socklen_t l = sizeof(st);

	c->sock = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
	if (c->sock < 0) {
		brk_notify_answer(nt, c->id, errno);
		goto done;
	}
	brk_copy_opts(c->agent_sock, c->sock, family);
	if (connect(c->sock, &c->addr.sa, c->addrlen) == 0) {
		brk_nconn_install(c);
		goto done;
	}
	if (errno != EINPROGRESS) {
		brk_notify_answer(nt, c->id, errno);
		goto done;
	}
	/* Often already made by now (a loopback or near peer: the handshake
	 * ran within connect()); then no event and no loop round trip. */
	{
		struct pollfd p = { .fd = c->sock, .events = POLLOUT };

		if (poll(&p, 1, 0) == 1) {
			brk_nconn_connected(c->sock, EV_WRITE, c);
			return;
		}
	}
	if (nt->inflight >= BRK_NOTIFY_INFLIGHT) {
		brk_notify_answer(nt, c->id, EAGAIN);
		goto done;
	}
	/* It waits as long as the agent's SO_SNDTIMEO says (as the kernel's
	 * connect would), within the broker's own limit. */
	if (getsockopt(c->agent_sock, SOL_SOCKET, SO_SNDTIMEO_OLD, &st, &l) == 0 &&
	    (st.tv_sec || st.tv_usec) && timercmp(&st, &tv, <))
		tv = st;
	c->ev = event_new(c->s->b->base, c->sock, EV_WRITE, brk_nconn_connected, c);
	if (!c->ev || event_add(c->ev, &tv) != 0) {
		brk_notify_answer(nt, c->id, ENOMEM);
		goto done;
	}
	nt->inflight++;
	c->counted = true;
	return;
done:
	brk_nconn_free(c);
}

/* An AF_UNIX socket of the broker's that an agent will hold (the channel,
 * the resolver's socketpair end) is bound before it is handed over: made
 * here, it belongs to the broker's network namespace (the host's), where
 * abstract names live, and a socketpair end has no address, so the
 * agent's own bind() (allowed above the low tier, for its sockets) named
 * an abstract socket in the host's namespace: it squatted a host service's
 * name (X11's @/tmp/.X11-unix/X1, a daemon's control socket) before that
 * service started, and learned from EADDRINUSE which names the host has.
 * Once bound, bind() is EINVAL.  An autobind (the kernel picks an unused
 * five-hex-digit name; nothing listens there, a connect to it is refused)
 * rather than a path, which would need a directory and leave an inode;
 * listen() stays EINVAL on a connected socket.  0 or errno (fail closed:
 * the socket is not handed over). */
int
brk_unix_seal(int fd)
{
	sa_family_t fam = AF_UNIX;

	return bind(fd, (struct sockaddr *)&fam, sizeof(fam)) == 0 ? 0 : errno;
}

#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83	/* Linux 6.16, asm-generic/socket.h */
#endif

/* The broker's end of a socket whose other end an agent holds (the
 * channel, the resolver's socketpair) takes no descriptors: the agent's
 * sendmsg(SCM_RIGHTS) fails with EPERM.  A descriptor that did arrive was
 * closed by the broker, on its loop, or dropped by the kernel in the
 * loop's own read: either way its last close ran there, and the last close
 * of a TCP socket with the agent's SO_LINGER and unsent data to a peer
 * that reads nothing waits the linger time, up to 2^31 s: every sandbox
 * and the admin socket unserved meanwhile (red team,
 * tests/integration/911-chan-fd-linger.sh).  A kernel before 6.16 has no
 * such option (ENOPROTOOPT): there descriptors still arrive as before
 * (docs/threat-model.md). */
void
brk_unix_norights(int fd)
{
	int off = 0;

	(void)setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &off, sizeof(off));
}

/* A connect() to the sandbox's resolver (dns.c): the agent's socket is
 * replaced by one end of a socketpair whose other end the broker serves.
 * Nothing is looked up or granted by the connect itself, so it has no
 * audit line: each query is judged and audited. */
/*
 * A resolver connection past the sandbox's BRK_DNS_CONNS waits for one of
 * them to close, for up to BRK_NDNS_WAIT_S (then EAGAIN), holding one of
 * its places in flight.  It used to fail at once with EAGAIN, and glibc
 * takes that as "temporary failure in name resolution": 48 of 64 threads
 * calling getaddrinfo at once failed (tests/integration/954).  Resolver
 * connections are short (glibc opens one per lookup) and an idle one
 * closes after BRK_DNS_IDLE_S, so the wait is short too.
 */
#define BRK_NDNS_WAIT_S 5

static void brk_nconn_dns(struct brk_nconn *c);

static void
brk_nconn_dns_unwait(struct brk_notify *nt, struct brk_nconn *c)
{
	struct brk_nconn **pp = &nt->dwait;

	while (*pp && *pp != c)
		pp = &(*pp)->dnext;
	if (*pp)
		*pp = c->dnext;
	if (nt->dwait_tail == &c->dnext)
		nt->dwait_tail = pp;
	c->dnext = NULL;
	if (c->ev)
		event_free(c->ev);
	c->ev = NULL;
}

static void
brk_nconn_dns_expire(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_nconn *c = arg;
	struct brk_notify *nt = brk_nt(c->s);

	(void)fd;
	(void)ev;
	brk_nconn_dns_unwait(nt, c);
	brk_notify_answer(nt, c->id, EAGAIN);
	brk_nconn_free(c);
}

/* true: c waits (or was answered and freed: none can wait); false: there
 * is room, go on. */
static bool
brk_nconn_dns_wait(struct brk_nconn *c)
{
	struct brk_notify *nt = brk_nt(c->s);
	struct timeval tv = { BRK_NDNS_WAIT_S, 0 };

	if (!brk_dns_full(c->s))
		return false;
	if ((!c->counted && nt->inflight >= BRK_NOTIFY_INFLIGHT) ||
	    !(c->ev = evtimer_new(c->s->b->base, brk_nconn_dns_expire, c)) ||
	    evtimer_add(c->ev, &tv) != 0) {
		brk_notify_answer(nt, c->id, EAGAIN);
		brk_nconn_free(c);
		return true;
	}
	if (!c->counted) {
		nt->inflight++;
		c->counted = true;
	}
	if (!nt->dwait_tail)
		nt->dwait_tail = &nt->dwait;
	*nt->dwait_tail = c;
	nt->dwait_tail = &c->dnext;
	return true;
}

void
brk_notify_dns_room(struct brk_sbx *s)
{
	struct brk_notify *nt = brk_nt(s);
	struct brk_nconn *c;

	while (nt && (c = nt->dwait) && !brk_dns_full(s)) {
		brk_nconn_dns_unwait(nt, c);
		if (nt->fd < 0 || s->dead || !brk_notify_valid(nt->fd, c->id))
			brk_nconn_free(c);	/* its caller is gone */
		else
			brk_nconn_dns(c);
	}
}

static void
brk_nconn_dns(struct brk_nconn *c)
{
	struct brk_notify *nt = brk_nt(c->s);
	struct seccomp_notif_addfd add = { .id = c->id, .flags = SECCOMP_ADDFD_FLAG_SETFD,
		.newfd = (uint32_t)c->afd, .newfd_flags = c->cloexec ? O_CLOEXEC : 0 };
	int sp[2], e;

	if (brk_nconn_dns_wait(c))
		return;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (c->nonblock ? SOCK_NONBLOCK : 0), 0,
	    sp) != 0) {
		brk_notify_answer(nt, c->id, errno == EMFILE || errno == ENFILE ? errno : ENOMEM);
		goto out;
	}
	if ((e = brk_unix_seal(sp[0])) != 0) {
		close(sp[0]);
		close(sp[1]);
		brk_notify_answer(nt, c->id, e == ENOSPC ? EAGAIN : ENOMEM);
		goto out;
	}
	brk_unix_norights(sp[1]);
	if ((e = brk_dns_serve(c->s, sp[1])) != 0) {
		close(sp[0]);
		brk_notify_answer(nt, c->id, e == CB_EBUSY ? EAGAIN :
		    e == CB_EUNSUPPORTED ? ECONNREFUSED : ENOMEM);
		goto out;
	}
	add.srcfd = (uint32_t)sp[0];
	/* ENOENT: the thread was interrupted; the broker's end then reads
	 * EOF and its connection ends. */
	if (ioctl(nt->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0) {
		if (errno != ENOENT)
			brk_notify_answer(nt, c->id, errno == EMFILE ? EMFILE : EIO);
	} else {
		brk_notify_answer(nt, c->id, 0);
	}
	close(sp[0]);
out:
	brk_nconn_free(c);
}

/* A connect() to an IPv4 or IPv6 address: the judgment, its audit line,
 * then the broker's own connect. */
static void
brk_nconn_inet(struct brk_nconn *c, int family)
{
	struct brk_sbx *s = c->s;
	struct brk_notify *nt = brk_nt(s);
	struct cap_addr a;
	struct brk_held *h = NULL;
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	char txt[INET6_ADDRSTRLEN], host[64];
	int port, e;

	/* A socket already connected or connecting answers as the kernel
	 * would; it is never connected again under the agent. */
	if (getsockopt(c->agent_sock, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0 &&
	    ti.tcpi_state != TCP_CLOSE) {
		brk_notify_answer(nt, c->id, ti.tcpi_state == TCP_SYN_SENT ? EALREADY : EISCONN);
		goto out;
	}
	if (c->addr.sa.sa_family != family) {
		brk_notify_answer(nt, c->id, c->addr.sa.sa_family == AF_UNSPEC ? EOPNOTSUPP :
		    EAFNOSUPPORT);
		goto out;
	}
	if (family == AF_INET) {
		if (c->addrlen < sizeof(c->addr.in4)) {
			brk_notify_answer(nt, c->id, EINVAL);
			goto out;
		}
		c->addrlen = sizeof(c->addr.in4);
		if (s->hosts && brk_dns_is_resolver(&c->addr.sa, c->addrlen)) {
			brk_nconn_dns(c);
			return;
		}
		inet_ntop(AF_INET, &c->addr.in4.sin_addr, txt, sizeof(txt));
		port = ntohs(c->addr.in4.sin_port);
	} else {
		/* 24: the RFC 2133 size, without sin6_scope_id (the kernel's
		 * SIN6_LEN_RFC2133) */
		if (c->addrlen < 24) {
			brk_notify_answer(nt, c->id, EINVAL);
			goto out;
		}
		if (c->addrlen < sizeof(c->addr.in6))
			c->addr.in6.sin6_scope_id = 0;
		c->addrlen = sizeof(c->addr.in6);
		c->addr.in6.sin6_flowinfo = 0;
		inet_ntop(AF_INET6, &c->addr.in6.sin6_addr, txt, sizeof(txt));
		port = ntohs(c->addr.in6.sin6_port);
	}
	/* Through cap_addr_parse, as a resolved address is: IPv4-mapped
	 * forms are judged as the IPv4 address they carry. */
	if (cap_addr_parse(txt, &a) != 0) {
		brk_notify_answer(nt, c->id, EINVAL);
		goto out;
	}
	cap_addr_format(&a, host, sizeof(host));
	snprintf(c->res, sizeof(c->res), a.family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);
	e = brk_net_check(s, NULL, host, port, &a, &h);
	if (e != 0) {
		/* An address the broker looked up for a name a token grants
		 * (the sandbox's /etc/hosts, hosts.c) is judged as that name. */
		struct brk_held *hn = NULL;
		const char *name = NULL;
		int en = brk_hosts_check(s, &a, port, &hn, &name);

		if (en == 0 || (e == CB_ENOTCOVERED && name)) {
			e = en;
			h = hn;
			snprintf(c->res, sizeof(c->res), "%s:%d", name, port);
		}
	}
	if (e == 0)
		e = brk_tok_commit(s, h);	/* room in the log, a use spent */
	if (e != 0) {
		/* EACCES: refused by the broker, whatever the network would
		 * have said (ECONNREFUSED and the like are the network's). */
		brk_budget_deny(s, e, "net.connect", c->res, h ? h->tok->c.id : NULL,
		    "mediated connect()");
		brk_notify_answer(nt, c->id, EACCES);
		goto out;
	}
	brk_audit_done(s, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_ALLOW,
	    .op = "net.connect", .resource = c->res, .token_id = h->tok->c.id, .actor = "agent",
	    .detail = "mediated connect()" });
	brk_nconn_go(c, family);
	return;
out:
	brk_nconn_free(c);
}

/* The file-system identity of the calling thread only (raw system calls:
 * glibc's wrappers would change every thread of the broker): a root broker
 * takes the agent's (nobody, no groups) to look up and connect to a path
 * the agent named, so it reaches only what the agent could.  An
 * unprivileged broker already is the agent's uid.  0, or -1 (nothing
 * changed) when the groups cannot be kept. */
struct brk_fsid {
	bool on;
	int uid, gid, ngroups;
	gid_t groups[64];
};

static int
brk_fsid_agent(struct brk_fsid *f)
{
	f->on = false;
	if (geteuid() != 0)
		return 0;
	f->ngroups = (int)syscall(SYS_getgroups, 64, f->groups);
	if (f->ngroups < 0 || syscall(SYS_setgroups, 0, NULL) != 0)
		return -1;
	f->gid = (int)syscall(SYS_setfsgid, SBX_ROOT_AGENT_ID);
	f->uid = (int)syscall(SYS_setfsuid, SBX_ROOT_AGENT_ID);
	f->on = true;
	return 0;
}

static void
brk_fsid_back(const struct brk_fsid *f)
{
	if (!f->on)
		return;
	syscall(SYS_setfsuid, f->uid);
	syscall(SYS_setfsgid, f->gid);
	if (syscall(SYS_setgroups, f->ngroups, f->groups) != 0)
		abort();	/* a worker must never keep another identity */
}

/* AF_UNIX connects run here, off the loop: one to a full listener may
 * wait (the agent's socket is used as it is, blocking or not), and a path
 * may cross the sandbox's file server, which the broker serves.  A path
 * is looked up in the agent's view (its root or working directory, as of
 * the call) by the one resolver (no symlink, no "..", no magic link, no
 * kernel file system) with the agent's file-system identity; the agent's
 * socket is then connected to what was found, through the broker's
 * /proc/self/fd. */
/*
 * The connect itself.  A blocking one to a full listener waits, as the
 * kernel's would, for as long as the agent's SO_SNDTIMEO says (then
 * EAGAIN) or until the listener accepts or closes; but only while its
 * caller waits.  A caller killed or interrupted meanwhile was left with a
 * worker that waited on, holding one of the sandbox's places in flight
 * (32 such, and every further connect() of the sandbox waited: the
 * listener is not read while they are all taken).  So the wait is cut
 * every BRK_NUNIX_CUT_NS, and taken up again only while the notification
 * is still pending and within the agent's time limit (to within a cut).
 * An interrupted connect leaves an AF_UNIX socket unconnected: the retry
 * is the same call.
 */
#define BRK_NUNIX_CUT_NS (100 * 1000000L)

static int
brk_nconn_unix_connect(const struct brk_nconn *c, const struct sockaddr *a, socklen_t len)
{
	struct timeval st = { 0, 0 };
	socklen_t l = sizeof(st);
	uint64_t end = 0;
	struct brk_cut k;
	int err;

	if (getsockopt(c->agent_sock, SOL_SOCKET, SO_SNDTIMEO_OLD, &st, &l) == 0 &&
	    (st.tv_sec > 0 || st.tv_usec > 0))
		end = cb_mono_ns() + (uint64_t)st.tv_sec * 1000000000u + (uint64_t)st.tv_usec * 1000u;
	(void)brk_work_cut_start(&k, BRK_NUNIX_CUT_NS);
	for (;;) {
		err = connect(c->agent_sock, a, len) == 0 ? 0 : errno;
		if (err != EINTR || !k.on)
			break;
		if (c->lfd < 0 || !brk_notify_valid(c->lfd, c->id))
			break;		/* nobody waits for it: EINTR, unanswered */
		if (end && cb_mono_ns() >= end) {
			err = EAGAIN;	/* the kernel's answer to a timed-out wait */
			break;
		}
	}
	brk_work_cut_stop(&k);
	return err;
}

static void
brk_nconn_unix_work(void *arg)
{
	struct brk_nconn *c = arg;
	struct sockaddr_un via = { .sun_family = AF_UNIX };
	struct brk_fsid f;
	const char *rel = c->path;
	int fd;

	if (c->startfd < 0) {
		c->err = brk_nconn_unix_connect(c, &c->addr.sa, c->addrlen);
		return;
	}
	if (brk_fsid_agent(&f) != 0) {
		c->err = EACCES;
		return;
	}
	while (*rel == '/')
		rel++;
	fd = cb_openat2(c->startfd, *rel ? rel : ".", O_PATH, 0);
	if (fd < 0) {
		/* ELOOP/EXDEV: a symlink or a way out; said as the kernel would
		 * for a path it cannot use */
		c->err = errno == ELOOP || errno == EXDEV ? EACCES : errno;
	} else {
		snprintf(via.sun_path, sizeof(via.sun_path), "/proc/self/fd/%d", fd);
		c->err = brk_nconn_unix_connect(c, (struct sockaddr *)&via, sizeof(via));
		close(fd);
	}
	brk_fsid_back(&f);
}

static void
brk_nconn_unix_done(void *arg)
{
	struct brk_nconn *c = arg;

	if (!c->s->dead)
		brk_notify_answer(brk_nt(c->s), c->id, c->err);
	brk_nconn_free(c);
}

/* The agent's own AF_UNIX socket.  An abstract name is looked up in the
 * socket's network namespace (checked to be the sandbox's), so the broker
 * may connect that very socket; AF_UNSPEC dissolves a datagram
 * association; a path name is looked up in the agent's view
 * (brk_nconn_unix_work). */
static void
brk_nconn_unix(struct brk_nconn *c)
{
	struct brk_notify *nt = brk_nt(c->s);
	bool abstract = c->addr.sa.sa_family == AF_UNIX &&
	    c->addrlen > offsetof(struct sockaddr_un, sun_path) && c->addr.un.sun_path[0] == '\0';

	if (!brk_agent_netns(c, nt->fd)) {
		brk_notify_answer(nt, c->id, EACCES);
		goto out;
	}
	if (c->addr.sa.sa_family == AF_UNSPEC) {
		brk_notify_answer(nt, c->id, connect(c->agent_sock, &c->addr.sa, c->addrlen) == 0 ?
		    0 : errno);
		goto out;
	}
	if (c->addr.sa.sa_family != AF_UNIX) {
		brk_notify_answer(nt, c->id, EINVAL);
		goto out;
	}
	if (!abstract) {
		size_t n = c->addrlen - offsetof(struct sockaddr_un, sun_path);
		char p[64];

		memcpy(c->path, c->addr.un.sun_path, n < sizeof(c->path) - 1 ? n : sizeof(c->path) - 1);
		if (c->path[0] == '\0') {
			brk_notify_answer(nt, c->id, EINVAL);
			goto out;
		}
		/* The agent's root or working directory, opened while its call
		 * is pending: the thread id names that thread. */
		snprintf(p, sizeof(p), "/proc/%d/%s", (int)c->tid, c->path[0] == '/' ? "root" : "cwd");
		if ((c->startfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
		    !brk_notify_valid(nt->fd, c->id)) {
			brk_notify_answer(nt, c->id, EACCES);
			goto out;
		}
	}
	/* A worker blocked on a full listener is held until its caller is
	 * gone (brk_nconn_unix_connect), and by then the agent may have asked
	 * again: without this bound an agent that kills and retries would
	 * pile up broker threads faster than they end. */
	if (nt->inflight >= BRK_NOTIFY_INFLIGHT ||
	    (c->lfd = fcntl(nt->fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
	    brk_work(c->s->b, brk_nconn_unix_work, brk_nconn_unix_done, c) != 0) {
		brk_notify_answer(nt, c->id, EAGAIN);
		goto out;
	}
	nt->inflight++;
	c->counted = true;
	return;
out:
	brk_nconn_free(c);
}

/* The copied address judged: the call still pending, the agent's socket
 * read for what it is, then dispatched on its family. */
static void
brk_nconn_judge(struct brk_notify *nt, struct brk_nconn *c)
{
	int pidfd = -1, domain, type, proto, err = 0;
	socklen_t l = sizeof(int);

	if (c->addrlen < sizeof(sa_family_t)) {
		err = EINVAL;
		goto answer;
	}
	/* From here on c->addr is what counts.  The read of it was of this
	 * very call's thread only if the notification is still pending; so
	 * is the descriptor table read below. */
	/* A place for the close of the copy taken next, should it be an
	 * AF_UNIX socket's (brk_nclose_off): none left, none is taken. */
	if (!c->counted && nt->inflight >= BRK_NOTIFY_INFLIGHT) {
		err = EAGAIN;
		goto answer;
	}
	if ((pidfd = (int)syscall(SYS_pidfd_open, c->tid, PIDFD_THREAD)) < 0 ||
	    !brk_notify_valid(nt->fd, c->id))
		goto drop;
	if ((c->agent_sock = (int)syscall(SYS_pidfd_getfd, pidfd, c->afd, 0)) < 0) {
		err = errno == EBADF ? EBADF : EPERM;
		goto answer;
	}
	if (getsockopt(c->agent_sock, SOL_SOCKET, SO_DOMAIN, &domain, &l) != 0 ||
	    getsockopt(c->agent_sock, SOL_SOCKET, SO_TYPE, &type, &l) != 0 ||
	    getsockopt(c->agent_sock, SOL_SOCKET, SO_PROTOCOL, &proto, &l) != 0) {
		err = ENOTSOCK;
		goto answer;
	}
	c->nonblock = (fcntl(c->agent_sock, F_GETFL) & O_NONBLOCK) != 0;
	c->cloexec = brk_agent_cloexec(c->tid, c->afd);
	close(pidfd);
	pidfd = -1;
	if (!brk_notify_valid(nt->fd, c->id))
		goto drop;
	if (domain == AF_UNIX) {
		brk_nconn_unix(c);
		return;
	}
	if ((domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM &&
	    proto == IPPROTO_TCP) {
		brk_nconn_inet(c, domain);
		return;
	}
	err = EOPNOTSUPP;
answer:
	brk_notify_answer(nt, c->id, err);
drop:
	if (pidfd >= 0)
		close(pidfd);
	brk_nconn_free(c);
}

/*
 * The address is copied out of the agent's memory here, on a worker, never
 * on the loop: the agent chooses the pages, and a page of a file mapped
 * from its served trees is read in by the sandbox's file server, which may
 * itself be waiting for the loop (its audit queue full, its budget
 * spent).  On the loop that read was a deadlock that no timeout ended:
 * every sandbox and the admin socket stopped being served (red team,
 * tests/integration/910-net-mediated-mapped-addr.sh).  The call stays
 * pending meanwhile; a killed caller's read fails or completes, and the
 * notification is checked to be valid after it, as before.
 */
static void
brk_nconn_read_work(void *arg)
{
	struct brk_nconn *c = arg;
	struct iovec local = { .iov_base = &c->addr, .iov_len = c->addrlen };
	struct iovec remote = { .iov_base = (void *)c->uaddr, .iov_len = c->addrlen };

	c->err = process_vm_readv(c->tid, &local, 1, &remote, 1, 0) == (ssize_t)c->addrlen ?
	    0 : EFAULT;
}

static void
brk_nconn_read_done(void *arg)
{
	struct brk_nconn *c = arg;
	struct brk_notify *nt = brk_nt(c->s);

	if (c->counted && nt)
		brk_notify_put(nt);
	c->counted = false;
	if (c->s->dead || !nt || nt->fd < 0) {
		brk_nconn_free(c);
		return;
	}
	if (c->err) {
		brk_notify_answer(nt, c->id, c->err);
		brk_nconn_free(c);
		return;
	}
	brk_nconn_judge(nt, c);
}

/* One notification: take what the agent passed (its address is read off
 * the loop, brk_nconn_read_work), then judge it. */
static void
brk_notify_one(struct brk_notify *nt, const struct seccomp_notif *req)
{
	struct brk_nconn *c = NULL;
	int64_t len;

	/* The filter notifies connect() only (execveat at the stub's exec
	 * descriptor went to pid 1 before the agent ran): anything else is
	 * refused, as the kernel does once nobody listens. */
	if (req->data.nr != SYS_connect) {
		brk_notify_answer(nt, req->id, ENOSYS);
		return;
	}
	len = (int32_t)req->data.args[2];	/* the kernel reads an int */
	if (len < 0 || len > (int64_t)sizeof(struct sockaddr_storage)) {
		brk_notify_answer(nt, req->id, EINVAL);
		return;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		brk_notify_answer(nt, req->id, ENOMEM);
		return;
	}
	c->s = nt->s;
	brk_sbx_hold(c->s);
	c->id = req->id;
	c->tid = (pid_t)req->pid;
	c->afd = (int)(int32_t)req->data.args[0];
	c->agent_sock = c->sock = c->startfd = c->lfd = -1;
	c->addrlen = (socklen_t)len;
	c->uaddr = (uintptr_t)req->data.args[1];
	if (c->tid <= 0 || c->afd < 0) {
		brk_notify_answer(nt, c->id, c->afd < 0 ? EBADF : EPERM);
		brk_nconn_free(c);
		return;
	}
	if (len == 0) {
		brk_nconn_judge(nt, c);
		return;
	}
	/* Counted with the connects waited for: a caller whose read never
	 * ends holds one of its sandbox's places, not a place of another. */
	if (nt->inflight >= BRK_NOTIFY_INFLIGHT ||
	    brk_work(c->s->b, brk_nconn_read_work, brk_nconn_read_done, c) != 0) {
		brk_notify_answer(nt, c->id, EAGAIN);
		brk_nconn_free(c);
		return;
	}
	nt->inflight++;
	c->counted = true;
}

static void brk_notify_close(struct brk_notify *nt);

static void
brk_notify_resume(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_notify *nt = arg;

	(void)fd;
	(void)ev;
	if (nt->fd >= 0 && nt->ev)
		event_add(nt->ev, NULL);
}

/* The sandbox's audit budget governs its connect() calls as it governs
 * its requests (budget.c): while it is throttled the listener is not read
 * (the calls wait in the kernel), and a sandbox throttled too long is
 * stopped.  false: stop reading now. */
static bool
brk_notify_budget(struct brk_notify *nt)
{
	struct timeval wait;
	char why[256];

	switch (brk_budget_check(nt->s, &wait, why, sizeof(why))) {
	case BRK_BUDGET_OK:
		return true;
	case BRK_BUDGET_WAIT:
		event_del(nt->ev);
		evtimer_add(nt->ev_pause, &wait);
		return false;
	case BRK_BUDGET_STOP:
		/* Its line before the stop (as chan.c): refused for now, the
		 * listener waits and the next check tries again. */
		if (brk_audit_sbx(nt->s, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .op = "sandbox.channel-closed", .actor = "broker", .detail = why }) != 0 &&
		    aud_healthy(nt->s->b->aud)) {
			wait = (struct timeval){ 0, 100000 };
			event_del(nt->ev);
			evtimer_add(nt->ev_pause, &wait);
			return false;
		}
		nt->s->close_noted = true;
		brk_sbx_kill(nt->s, "broker");
		brk_notify_close(nt);
		return false;
	}
	return false;
}

static void
brk_notify_readable(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_notify *nt = arg;
	struct brk_sbx *s = nt->s;

	(void)ev;
	/* nt lives as long as s does: s is held while we use nt. */
	brk_sbx_hold(s);
	/* One notification per poll: a receive with nothing pending would
	 * block, and a wakeup says only that one was pending. */
	for (int i = 0; i < BRK_BATCH && nt->fd >= 0 && !s->dead; i++) {
		struct pollfd p = { .fd = (int)fd, .events = POLLIN };

		if (nt->inflight >= BRK_NOTIFY_INFLIGHT) {
			event_del(nt->ev);
			nt->full = true;
			break;
		}
		if (!brk_notify_budget(nt) || poll(&p, 1, 0) != 1)
			break;
		if (p.revents & (POLLHUP | POLLERR)) {
			/* every task of the filter is gone */
			brk_notify_close(nt);
			break;
		}
		memset(nt->req, 0, nt->req_sz);
		if (ioctl((int)fd, SECCOMP_IOCTL_NOTIF_RECV, nt->req) != 0) {
			if (errno == ENOENT || errno == EINTR)
				continue;	/* the caller went away meanwhile */
			brk_notify_close(nt);
			break;
		}
		brk_notify_one(nt, nt->req);
	}
	brk_sbx_release(s);
}

static void
brk_notify_close(struct brk_notify *nt)
{
	if (nt->ev_pause) {
		event_free(nt->ev_pause);
		nt->ev_pause = NULL;
	}
	if (nt->ev) {
		event_free(nt->ev);
		nt->ev = NULL;
	}
	if (nt->fd >= 0)
		close(nt->fd);
	nt->fd = -1;
}

int
brk_notify_start(struct brk_sbx *s, int listener)
{
	struct brk_notify *nt = NULL;
	struct seccomp_notif_sizes sz;
	int r = CB_ENOMEM;

	if (s->notify) {
		close(listener);
		return CB_EINVAL;
	}
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) != 0) {
		r = CB_EIO;
		goto out;
	}
	if (!(nt = calloc(1, sizeof(*nt))))
		goto out;
	nt->s = s;
	nt->fd = listener;
	listener = -1;
	nt->req_sz = sz.seccomp_notif > sizeof(*nt->req) ? sz.seccomp_notif : sizeof(*nt->req);
	nt->resp_sz = sz.seccomp_notif_resp > sizeof(struct seccomp_notif_resp) ?
	    sz.seccomp_notif_resp : sizeof(struct seccomp_notif_resp);
	if (!(nt->req = calloc(1, nt->req_sz)))
		goto out;
	nt->ev = event_new(s->b->base, nt->fd, EV_READ | EV_PERSIST, brk_notify_readable, nt);
	nt->ev_pause = evtimer_new(s->b->base, brk_notify_resume, nt);
	if (!nt->ev || !nt->ev_pause || event_add(nt->ev, NULL) != 0)
		goto out;
	s->notify = nt;
	return 0;
out:
	if (listener >= 0)
		close(listener);
	if (nt) {
		brk_notify_close(nt);
		free(nt->req);
		free(nt);
	}
	return r;
}

void
brk_notify_stop(struct brk_sbx *s)
{
	struct brk_notify *nt = s->notify;
	struct brk_nconn *c;

	if (!nt)
		return;
	/* Only at the broker's end, its sandboxes freed whoever holds them (a
	 * resolver connection busy past the drain kept the waiters): they go
	 * with s, without releasing it or their places. */
	while ((c = nt->dwait)) {
		brk_nconn_dns_unwait(nt, c);
		brk_close_agent(c->sock);
		brk_close_agent(c->agent_sock);
		if (c->startfd >= 0)
			close(c->startfd);
		if (c->lfd >= 0)
			close(c->lfd);
		free(c);
	}
	brk_notify_close(nt);
	free(nt->req);
	free(nt);
	s->notify = NULL;
}
