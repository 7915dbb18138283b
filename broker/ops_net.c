/*
 * ops_net.c - net.connect.
 *
 * Trust domain: broker, opening connections for a hostile agent.  Why it is
 * safe:
 *  - The name is resolved once, in a worker thread (the loop never blocks
 *    on DNS), and every address is judged: a token capability must cover
 *    it (a name capability covers the name asked for, an address capability
 *    the address itself) and the policy's never-reachable ranges (loopback,
 *    private, link-local and the metadata address, multicast, documentation,
 *    every address of the host's own interfaces, and the IPv6 forms that
 *    carry any of those: mapped, NAT64, 6to4, Teredo...) refuse it unless
 *    the covering capability names that range explicitly.  The host's
 *    addresses are read as of the judgment (hostaddr.c), so an interface
 *    that came up a moment ago is covered.
 *  - A never rule that names a host means that host by any name or
 *    address: for a connect an elevated token may cover, the worker also
 *    resolves every never rule's host name whose port could match, with
 *    the same resolver at the same moment, and the address connected to is
 *    refused when any of its views (v4, mapped, NAT64, 6to4, Teredo) is one
 *    of theirs.  A never name that cannot be resolved refuses the connect
 *    (fail closed: the broker cannot show the address is not that host);
 *    so does one not looked up at all, as in the mediated connect()
 *    (brk_net_check), which judges in the loop and resolves nothing.
 *  - The broker connects to exactly the address it judged: there is no
 *    second lookup, so DNS rebinding cannot swap the target.
 *  - TCP only; the connect is non-blocking with a timeout; the agent gets
 *    the connected socket and nothing else.
 */
#include "broker/core.h"
#include "broker/budget.h"
#include "broker/chan.h"
#include "broker/hostaddr.h"
#include "broker/ops.h"
#include "broker/tokens.h"
#include "broker/work.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BRK_NET_ADDRS 16
#define BRK_NET_TIMEOUT_MS 10000

/* A never rule's host name, resolved for one connect (the header above). */
struct brk_net_never {
	char name[BRK_HOST_LEN + 1];
	int gai;
	size_t naddr;
	struct cap_addr addr[BRK_NET_ADDRS];
};

struct brk_net {
	struct brk_sbx *s;
	struct wire_req q;		/* scalars only; strings copied below */
	char host[BRK_HOST_LEN + 1];
	char res[BRK_HOSTRES_MAX];
	int port;
	bool presented;
	uint32_t th;
	int gai;
	size_t naddr;
	struct cap_addr addr[BRK_NET_ADDRS];
	int fd;
	struct event *ev;
	struct brk_held *h;
	struct cap_addr chosen;
	bool literal;			/* host is an IP literal: no lookup of it */
	size_t nnever;			/* never names to resolve with it */
	struct brk_net_never *never;
	struct pol_never_addrs *na;	/* what they resolved to, for the policy */
};

static void
brk_net_free(struct brk_net *n)
{
	if (n->ev)
		event_free(n->ev);
	if (n->fd >= 0)
		close(n->fd);
	n->s->inflight--;
	brk_sbx_release(n->s);
	free(n->never);
	free(n->na);
	free(n);
}

size_t
brk_net_lookup(const char *host, struct cap_addr *out, size_t max, int *gai)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		.ai_protocol = IPPROTO_TCP }, *res = NULL;
	size_t n = 0;

	/* No search list for a name with a dot (red-team F7): the resolver
	 * would also ask NAME.<each search domain of the host's resolv.conf>
	 * (first, when NAME has fewer dots than ndots), names no token covers
	 * whose first labels the agent chose under a `*.domain` token.  A
	 * trailing dot would do it too but hides the name from /etc/hosts.
	 * _res is this thread's (glibc), and getaddrinfo() uses it; set
	 * afresh for each lookup since glibc reloads it when resolv.conf
	 * changes.  A single label keeps the search list: only a token naming
	 * it exactly, or `*`, covers it, so its expansions are the
	 * administrator's.  No resolver state, no lookup (fail closed). */
	if (res_init() != 0) {
		*gai = EAI_SYSTEM;
		return 0;
	}
	_res.options &= ~(unsigned long)RES_DNSRCH;
	*gai = getaddrinfo(host, NULL, &hints, &res);
	for (struct addrinfo *a = res; a && n < max; a = a->ai_next) {
		char txt[INET6_ADDRSTRLEN];

		if (a->ai_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, txt, sizeof(txt));
		else if (a->ai_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, txt, sizeof(txt));
		else
			continue;
		/* through cap_addr_parse so IPv4-mapped forms are normalised */
		if (cap_addr_parse(txt, &out[n]) == 0)
			n++;
	}
	if (res)
		freeaddrinfo(res);
	return n;
}

static void
brk_net_resolve(void *arg)
{
	struct brk_net *n = arg;

	if (!n->literal)
		n->naddr = brk_net_lookup(n->host, n->addr, BRK_NET_ADDRS, &n->gai);
	for (size_t i = 0; i < n->nnever; i++) {
		struct brk_net_never *v = &n->never[i];

		v->naddr = brk_net_lookup(v->name, v->addr, BRK_NET_ADDRS, &v->gai);
	}
}

static void
brk_net_fail(struct brk_net *n, int e, const char *detail)
{
	if (!n->s->dead)
		brk_deny(n->s, &n->q, e, n->res, n->h ? n->h->tok->c.id : NULL, detail);
	brk_net_free(n);
}

/* A non-blocking connect() that completed leaves the socket "connecting"
 * to the kernel (SS_CONNECTING) until connect() is called on it again.
 * Handed to an agent so, once its peer resets or closes it (sk_state
 * TCP_CLOSE), the agent's own sendto(MSG_FASTOPEN) takes the kernel's error
 * path for a connecting socket found closed, which disconnects it: an
 * unconnected socket of the broker's network namespace, which the next
 * sendto(MSG_FASTOPEN) connects anywhere (and listen() serves on the
 * host), past every check.  A second connect() to its peer makes it
 * SS_CONNECTED for good: from there only connect(AF_UNSPEC) disconnects,
 * and an agent's connect() never reaches a broker's socket. */
int
brk_net_settle(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &l) != 0)
		return errno;
	if (connect(fd, (struct sockaddr *)&ss, l) != 0 && errno != EISCONN)
		return errno;
	return 0;
}

static void
brk_net_connected(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_net *n = arg;
	struct wire_reply rp = { .id = n->q.id, .fd = true };
	int err = 0;
	socklen_t l = sizeof(err);

	if (ev & EV_TIMEOUT) {
		brk_net_fail(n, CB_ETIMEDOUT, "connect timed out");
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
		err = errno;
	if (!err)
		err = brk_net_settle(fd);
	if (err) {
		brk_net_fail(n, err == ECONNREFUSED ? CB_ECONNREFUSED : CB_EIO,
		    err == ECONNREFUSED ? NULL : strerror(err));	/* said once */
		return;
	}
	/* The agent gets an ordinary blocking socket. */
	fcntl(n->fd, F_SETFL, 0);
	if (!n->s->dead) {
		brk_reply(n->s, &rp, n->fd);
		n->fd = -1;
	}
	brk_net_free(n);
}

/* One resolved address to judge, and what it is judged against. */
struct brk_net_ask {
	struct brk_held *presented;	/* the token presented, or NULL: any held */
	const char *hostname;
	int port;
	const struct cap_addr *addr;
	const struct pol_net_prefix *host;	/* the host's own addresses */
	size_t nhost;
	/* what the never rules' host names resolved to (pol_inst_never_match_net) */
	const struct pol_never_addrs *na;
	size_t nna;
};

/* Judge one resolved address: some valid token (the presented one, or any
 * held) with a capability inside the ceiling that covers it and that the
 * policy's never-reachable ranges do not refuse.  On failure, the first
 * reason met.  The one judgment of net.connect: the explicit operation
 * and the mediated connect() (notify.c) both come here. */
static int
brk_net_judge(struct brk_sbx *s, const struct brk_net_ask *q, struct brk_held **out)
{
	struct brk_held *presented = q->presented;
	const struct cap_addr *a = q->addr;
	struct cap_req r = { .op = CAP_NET_CONNECT, .host = q->hostname, .port = q->port,
		.addr = a };
	int first = CB_ENOTCOVERED;

	*out = NULL;
	for (size_t i = 0; i < (presented ? 1 : s->nheld); i++) {
		struct brk_held *h = presented ? presented : &s->held[i];
		int e;

		if ((e = brk_tok_check(s, h, NULL, NULL)) != 0) {
			if (first == CB_ENOTCOVERED && presented)
				first = e;
			continue;
		}
		for (size_t j = 0; j < h->tok->c.ncaps; j++) {
			const struct cap *c = h->tok->c.caps[j];

			if (!cap_match(c, &r))
				continue;
			if (!(h->in_ceiling & (1u << j)) ||
			    (h->tok->c.elevated &&
			     pol_inst_never_match_net(s->inst, &r, q->na, q->nna))) {
				if (first == CB_ENOTCOVERED) {
					first = CB_EPOLICY;
					*out = h;
				}
				continue;
			}
			if (pol_net_blocked_host(s->pol->pol, a, c, q->host, q->nhost)) {
				if (first == CB_ENOTCOVERED || first == CB_EPOLICY) {
					first = CB_ENETBLOCKED;
					*out = h;
				}
				continue;
			}
			*out = h;
			return 0;
		}
	}
	return first;
}

int
brk_net_check(struct brk_sbx *s, struct brk_held *presented, const char *hostname, int port,
    const struct cap_addr *a, struct brk_held **out)
{
	const struct pol_net_prefix *host;
	size_t nhost;
	int e;

	*out = NULL;
	if ((e = brk_hostaddr_get(s->b, &host, &nhost)) != 0)
		return e;
	return brk_net_judge(s, &(struct brk_net_ask){ .presented = presented,
	    .hostname = hostname, .port = port, .addr = a, .host = host, .nhost = nhost }, out);
}

/* The first never name that could not be resolved, or NULL. */
static const char *
brk_net_unresolved(const struct brk_net *n)
{
	for (size_t i = 0; i < n->nnever; i++)
		if (!n->na[i].resolved)
			return n->na[i].name;
	return NULL;
}

/* Judge each resolved address of n in turn: the first that passes wins
 * (n->chosen, n->h); otherwise the first refusal, said in detail. */
static int
brk_net_choose(struct brk_net *n, const struct pol_net_prefix *host, size_t nhost, char *detail,
    size_t dlen)
{
	struct brk_sbx *s = n->s;
	const char *un;
	int e = CB_ERESOLVE;

	for (size_t i = 0; i < n->naddr; i++) {
		struct brk_held *h = NULL;
		int r = brk_net_judge(s, &(struct brk_net_ask){
		    .presented = n->presented ? &s->held[n->th] : NULL, .hostname = n->host,
		    .port = n->port, .addr = &n->addr[i], .host = host, .nhost = nhost, .na = n->na,
		    .nna = n->nnever }, &h);
		char at[INET6_ADDRSTRLEN];

		if (r == 0) {
			n->h = h;
			n->chosen = n->addr[i];
			return 0;
		}
		if (i == 0 || e == CB_ERESOLVE) {
			e = r;
			n->h = h;
			un = r == CB_EPOLICY ? brk_net_unresolved(n) : NULL;
			cap_addr_format(&n->addr[i], at, sizeof(at));
			if (un)
				snprintf(detail, dlen,
				    "address %s; a never rule's host %s cannot be resolved", at, un);
			else
				snprintf(detail, dlen, "address %s", at);
		}
	}
	return e;
}

/* Log the allowed connect and start it to n->chosen without blocking the
 * loop; brk_net_connected finishes it (or the timeout fails it). */
static void
brk_net_connect(struct brk_net *n, char *detail, size_t dlen)
{
	struct brk_sbx *s = n->s;
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} sa;
	socklen_t salen;

	memset(&sa, 0, sizeof(sa));
	if (n->chosen.family == AF_INET) {
		sa.v4.sin_family = AF_INET;
		sa.v4.sin_port = htons((uint16_t)n->port);
		memcpy(&sa.v4.sin_addr, n->chosen.b, 4);
		salen = sizeof(sa.v4);
	} else {
		sa.v6.sin6_family = AF_INET6;
		sa.v6.sin6_port = htons((uint16_t)n->port);
		memcpy(&sa.v6.sin6_addr, n->chosen.b, 16);
		salen = sizeof(sa.v6);
	}
	{
		char at[INET6_ADDRSTRLEN];

		cap_addr_format(&n->chosen, at, sizeof(at));
		snprintf(detail, dlen, "connecting to %s", at);
	}
	brk_audit_done(s, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_ALLOW,
	    .op = "net.connect", .resource = n->res, .token_id = n->h->tok->c.id, .actor = "agent",
	    .detail = detail });
	n->fd = socket(n->chosen.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
	if (n->fd < 0) {
		brk_net_fail(n, CB_EIO, strerror(errno));
		return;
	}
	if (connect(n->fd, (struct sockaddr *)&sa, salen) != 0 && errno != EINPROGRESS) {
		brk_net_fail(n, errno == ECONNREFUSED ? CB_ECONNREFUSED : CB_EIO,
		    errno == ECONNREFUSED ? NULL : strerror(errno));
		return;
	}
	{
		unsigned ms = n->q.timeout_ms ? n->q.timeout_ms : BRK_NET_TIMEOUT_MS;
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

		n->ev = event_new(s->b->base, n->fd, EV_WRITE, brk_net_connected, n);
		if (!n->ev || event_add(n->ev, &tv) != 0) {
			brk_net_fail(n, CB_ENOMEM, NULL);
			return;
		}
	}
}

static void
brk_net_resolved(void *arg)
{
	struct brk_net *n = arg;
	struct brk_sbx *s = n->s;
	int e = CB_ERESOLVE;
	char detail[BRK_HOSTRES_MAX + 128] = "";
	const struct pol_net_prefix *host;
	size_t nhost;

	if (s->dead) {
		brk_net_free(n);
		return;
	}
	if (n->gai != 0 || n->naddr == 0) {
		snprintf(detail, sizeof(detail), "%s", n->gai ? gai_strerror(n->gai) : "no address");
		brk_net_fail(n, CB_ERESOLVE, detail);
		return;
	}
	for (size_t i = 0; i < n->nnever; i++) {
		struct brk_net_never *v = &n->never[i];

		n->na[i] = (struct pol_never_addrs){ .name = v->name,
			.resolved = v->gai == 0 && v->naddr > 0, .n = v->naddr, .a = v->addr };
	}
	if ((e = brk_hostaddr_get(s->b, &host, &nhost)) != 0) {
		brk_net_fail(n, e, "the host's own addresses cannot be read");
		return;
	}
	if ((e = brk_net_choose(n, host, nhost, detail, sizeof(detail))) != 0) {
		brk_net_fail(n, e, detail);
		return;
	}
	if ((e = brk_tok_commit(s, n->h)) != 0) {
		brk_net_fail(n, e, NULL);
		return;
	}
	brk_net_connect(n, detail, sizeof(detail));
}

/* Could some capability of h (or of any valid held token when h is NULL)
 * allow host:port once resolved?  Names and wildcards are judged by the
 * name; address capabilities (and "*") by the addresses, later. */
static bool
brk_net_cap_could(const struct cap *c, const char *host, int port)
{
	struct cap_req r = { .op = CAP_NET_CONNECT, .host = host, .port = port };

	if (c->op != CAP_NET_CONNECT || (c->net.port >= 0 && c->net.port != port))
		return false;
	if (c->net.kind == CAP_HOST_IP || c->net.kind == CAP_HOST_ANY)
		return true;
	return cap_match(c, &r);
}

/* Copy into n the host names of the sandbox's never rules whose port could
 * match this connect, to be resolved with it, when an elevated token could
 * cover it (never rules bind only what approvals grant).  The names are the
 * administrator's, not the agent's: looking them up tells no one anything. */
static int
brk_net_never_names(struct brk_net *n, struct brk_held *h)
{
	struct brk_sbx *s = n->s;
	const struct cap *nc;
	bool elevated = false;
	size_t k = 0;

	for (size_t i = 0; i < (h ? 1 : s->nheld); i++)
		elevated |= (h ? h : &s->held[i])->tok->c.elevated;
	if (!elevated)
		return 0;
	for (size_t i = 0; (nc = pol_inst_never_name(s->inst, i)) != NULL; i++)
		if (nc->net.port < 0 || nc->net.port == n->port)
			k++;
	if (k == 0)
		return 0;
	n->never = calloc(k, sizeof(*n->never));
	n->na = calloc(k, sizeof(*n->na));
	if (!n->never || !n->na)
		return CB_ENOMEM;
	for (size_t i = 0; (nc = pol_inst_never_name(s->inst, i)) != NULL; i++)
		if (nc->net.port < 0 || nc->net.port == n->port)
			snprintf(n->never[n->nnever++].name, sizeof(n->never[0].name), "%s", nc->net.name);
	return 0;
}

static int
brk_net_could_cover(struct brk_sbx *s, struct brk_held *h, const char *host, int port)
{
	for (size_t i = 0; i < (h ? 1 : s->nheld); i++) {
		struct brk_held *k = h ? h : &s->held[i];

		if (!h && brk_tok_check(s, k, NULL, NULL) != 0)
			continue;
		for (size_t j = 0; j < k->tok->c.ncaps; j++)
			if ((k->in_ceiling & (1u << j)) && brk_net_cap_could(k->tok->c.caps[j], host, port))
				return 0;
	}
	return CB_ENOTCOVERED;
}

/* The dispatcher checked the host's length and the port, and that a slot
 * is free; the token is chosen per resolved address (brk_net_judge). */
void
brk_op_net(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct brk_net *n;
	struct cap_addr lit;
	struct brk_held *h = NULL;
	char res[BRK_HOSTRES_MAX];
	int e;

	(void)u;
	snprintf(res, sizeof(res), "%s:%u", q->host, q->port);
	/* A presented token must at least be valid before anything is looked
	 * up; coverage is judged per address once they are known. */
	if (q->tok || q->has_th) {
		uint32_t th = q->th;

		if (q->tok) {
			if ((e = brk_held_present(s, q->tok, NULL, &h, NULL)) != 0) {
				brk_deny(s, q, e, res, h ? h->tok->c.id : NULL, NULL);
				return;
			}
			th = (uint32_t)(h - s->held);
		} else if (th >= s->nheld) {
			brk_deny(s, q, CB_ENOTOKEN, res, NULL, NULL);
			return;
		}
		h = &s->held[th];
		if ((e = brk_tok_check(s, h, NULL, NULL)) != 0) {
			brk_deny(s, q, e, res, h->tok->c.id, NULL);
			return;
		}
	}
	/* The host is an IP literal or a DNS name the capability grammar
	 * accepts (LDH labels, no all-digit last label): nothing else reaches
	 * the resolver. */
	if (cap_addr_parse(q->host, &lit) != 0) {
		char buf[BRK_HOSTRES_MAX];
		struct cap *c = NULL;
		bool name;

		snprintf(buf, sizeof(buf), "net.connect:%s:1", q->host);
		name = cap_parse(buf, &c) == 0 && c->net.kind == CAP_HOST_NAME;
		cap_free(c);
		if (!name) {
			brk_deny(s, q, CB_ECAP_HOST, res, NULL, "not an IP address or a host name");
			return;
		}
	}
	if (cap_addr_parse(q->host, &lit) != 0 && !pol_net_domain_allowed(s->pol->pol, q->host)) {
		brk_deny(s, q, CB_EPOLICY, res, NULL, "host not in the policy's domain allow list");
		return;
	}
	/* No lookup unless a valid token could cover this host and port:
	 * otherwise an agent without any network grant could make the broker
	 * resolve names of its choosing (a DNS side channel). */
	if ((e = brk_net_could_cover(s, h, q->host, (int)q->port)) != 0) {
		brk_deny(s, q, e, res, h ? h->tok->c.id : NULL, NULL);
		return;
	}
	if (!(n = calloc(1, sizeof(*n)))) {
		brk_deny(s, q, CB_ENOMEM, res, NULL, NULL);
		return;
	}
	n->s = s;
	n->q = *q;
	n->q.tok = NULL;
	n->fd = -1;
	n->port = (int)q->port;
	n->presented = h != NULL;
	n->th = h ? (uint32_t)(h - s->held) : 0;
	snprintf(n->host, sizeof(n->host), "%s", q->host);
	snprintf(n->res, sizeof(n->res), "%s", res);
	brk_sbx_hold(s);
	s->inflight++;
	if ((e = brk_net_never_names(n, h)) != 0) {
		brk_net_fail(n, e, NULL);
		return;
	}
	if (cap_addr_parse(q->host, &lit) == 0) {
		/* A literal needs no lookup of its own (its never names may). */
		n->addr[0] = lit;
		n->naddr = 1;
		n->literal = true;
		if (n->nnever == 0) {
			brk_net_resolved(n);
			return;
		}
	}
	if (brk_work(s->b, brk_net_resolve, brk_net_resolved, n) != 0)
		brk_net_fail(n, CB_EBUSY, "no worker thread");
}
