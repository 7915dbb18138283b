/*
 * dns.c - the sandbox's resolver.  In the medium and high tiers the
 * sandbox's resolv.conf names BRK_DNS_ADDR with "options use-vc", so an
 * unmodified program's getaddrinfo() asks over TCP; its connect() there
 * reaches the broker (notify.c), which installs one end of a socketpair in
 * place of the agent's socket and answers the queries on the other end.
 * A name some live net.connect token covers (an exact name, `*.domain`, or
 * `*`) is looked up by the broker, in a worker thread, and answered with
 * the addresses it found, which are remembered (hosts.c) so that a
 * connect() to one of them is judged as that name; any other name gets
 * NXDOMAIN and is never looked up.
 *
 * Trust domain: broker, serving a hostile agent.  Why it is safe:
 *  - Messages are framed here (two-byte length, at most BRK_DNS_MSG_MAX:
 *    checked before anything is copied) and parsed by ldns alone; the
 *    question's name is then rendered by ldns and accepted only as LDH
 *    labels (lowercased), so what is judged and looked up is a plain name.
 *  - The judgment is net.connect's own capability match (cap_match) over
 *    the sandbox's valid tokens inside its ceiling and the policy's domain
 *    allow list: an agent cannot make the broker look up a name no token
 *    covers, so no DNS query for such a name leaves the host.  Every query
 *    for such a name is a denial, audited and charged to the sandbox's
 *    audit budget; every lookup is audited (allowed) before it is made,
 *    and not made when its line cannot be written (SERVFAIL).  Only A and
 *    AAAA questions are judged at all (others: NOTIMP, a denial, no
 *    lookup), and the
 *    name is judged again when its lookup returns: a token revoked
 *    meanwhile teaches the sandbox nothing (NXDOMAIN, a denial).
 *  - The answer only helps the agent find an address.  What counts is the
 *    connect() judgment, against live tokens, of the address the broker
 *    itself looked up for the name (hosts.c); a name never unlocks a
 *    never-reachable range.
 *  - Bounded: BRK_DNS_CONNS connections per sandbox (more: the connect()
 *    waits for one to close, up to 5 s, then EAGAIN: notify.c), one query at a time per connection (reading
 *    pauses while its lookup runs, so at most BRK_DNS_CONNS lookups), an
 *    idle connection closes after BRK_DNS_IDLE_S; answers are cached for
 *    BRK_DNS_TTL_S so a program's A and AAAA queries make one lookup.
 *  - The socketpair carries bytes only: the broker's end refuses
 *    descriptors (brk_unix_norights), so the agent's sendmsg fails; on a
 *    kernel before 6.16 they are dropped by the kernel in the loop's read.
 */
#include "broker/core.h"
#include "broker/budget.h"
#include "broker/dns.h"
#include "broker/notify.h"
#include "broker/ops.h"
#include "broker/tokens.h"
#include "broker/work.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <ldns/ldns.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BRK_DNS_CONNS		8	/* open resolver connections per sandbox */
#define BRK_DNS_IDLE_S		10
#define BRK_DNS_TTL_S		5	/* answers cached (and told) this long */
#define BRK_DNS_ADDRS		16
#define BRK_DNS_OUT_MAX		16384	/* answers not yet read by the agent */

/* One connection to the resolver. */
struct brk_dconn {
	struct brk_dconn *next, **pprev;	/* in b->dconns */
	struct brk_sbx *s;
	struct bufferevent *bev;
	bool busy;			/* a lookup runs for q */
	bool closing;			/* the agent went away during it */
	struct brk_dnsq q;
	struct brk_held *h;		/* the token that covers q's name */
	size_t naddr;
	struct cap_addr addr[BRK_DNS_ADDRS];
	int gai;
};

/* ---- libldns, loaded when first needed ---- */

/* libldns (and the libssl and libcrypto it brings) is loaded the first time
 * a query is parsed (dlopen), not linked: every `capbroker run` paid for it
 * at each start, and only a sandbox that resolves a name through the broker
 * uses it (docs/performance.md).  These are the calls we make, with the
 * header's prototypes. */
#define BRK_LDNS_FUNCS(X) \
	X(ldns_pkt2wire) \
	X(ldns_pkt_free) \
	X(ldns_pkt_get_opcode) \
	X(ldns_pkt_id) \
	X(ldns_pkt_new) \
	X(ldns_pkt_push_rr) \
	X(ldns_pkt_qdcount) \
	X(ldns_pkt_qr) \
	X(ldns_pkt_question) \
	X(ldns_pkt_rd) \
	X(ldns_pkt_set_id) \
	X(ldns_pkt_set_opcode) \
	X(ldns_pkt_set_qr) \
	X(ldns_pkt_set_ra) \
	X(ldns_pkt_set_rcode) \
	X(ldns_pkt_set_rd) \
	X(ldns_rdf2str) \
	X(ldns_rdf_clone) \
	X(ldns_rdf_deep_free) \
	X(ldns_rdf_new_frm_data) \
	X(ldns_rr_clone) \
	X(ldns_rr_free) \
	X(ldns_rr_get_class) \
	X(ldns_rr_get_type) \
	X(ldns_rr_list_rr) \
	X(ldns_rr_list_rr_count) \
	X(ldns_rr_new) \
	X(ldns_rr_owner) \
	X(ldns_rr_push_rdf) \
	X(ldns_rr_set_class) \
	X(ldns_rr_set_owner) \
	X(ldns_rr_set_ttl) \
	X(ldns_rr_set_type) \
	X(ldns_wire2pkt)
static struct {
#define BRK_LDNS_FIELD(f) __typeof__(f) *f;
	BRK_LDNS_FUNCS(BRK_LDNS_FIELD)
#undef BRK_LDNS_FIELD
} brk_ld;
static char brk_ld_why[256];
static int brk_ld_err;
static pthread_once_t brk_ld_once = PTHREAD_ONCE_INIT;
static bool brk_ld_tried;	/* atomic: brk_ld_load has run (brk_ld_err says how) */

static void
brk_ld_load(void)
{
#define BRK_LDNS_SYM(f) { #f, (void **)&brk_ld.f },
	static const struct cb_dl_sym syms[] = { BRK_LDNS_FUNCS(BRK_LDNS_SYM) };
#undef BRK_LDNS_SYM

	/* The soname ldns/ldns.h belongs to (libldns3). */
	brk_ld_err = cb_dl_load("libldns.so.3", syms, sizeof(syms) / sizeof(syms[0]), brk_ld_why,
	    sizeof(brk_ld_why));
	__atomic_store_n(&brk_ld_tried, true, __ATOMIC_RELEASE);
}

/* Has the load been tried (so that brk_dns_lib returns at once)?  Never
 * waits: the loop asks this before anything that would call brk_dns_lib,
 * whose first call waits for dlopen (libldns, libssl, libcrypto: 2 ms and
 * more on a loaded host, all of it on the caller's thread). */
static bool
brk_dns_lib_tried(void)
{
	return __atomic_load_n(&brk_ld_tried, __ATOMIC_ACQUIRE);
}

/* A worker's job: load it (or wait, in pthread_once, for the worker that
 * loads it).  dlopen reads the system's libraries as the broker's own
 * user: a worker's file-system identity is never switched (setfsuid acts
 * per thread), and no name in it comes from an agent. */
static void
brk_dns_lib_job(void *arg)
{
	(void)arg;
	cb_ignore(brk_dns_lib(NULL));
}

static void
brk_dns_lib_loaded(void *arg)
{
	(void)arg;
}

void
brk_dns_preload(struct brk *b)
{
	static bool asked;	/* loop thread only */

	if (asked || brk_dns_lib_tried())
		return;
	/* Not asked again if no worker could start: the first connection
	 * to the resolver then loads it on a worker of its own. */
	asked = true;
	cb_ignore(brk_work(b, brk_dns_lib_job, brk_dns_lib_loaded, NULL));
}

int
brk_dns_lib(const char **why)
{
	if (pthread_once(&brk_ld_once, brk_ld_load) != 0)
		brk_ld_err = CB_EINTERNAL;
	if (why)
		*why = brk_ld_err ? brk_ld_why : "";
	return brk_ld_err;
}

/* ---- messages (ldns) ---- */

/* ldns's rendering of a name ("a.Example.com.") to the plain lowercase
 * name, if it is LDH labels of 1..63 (total <= 253); false otherwise
 * (escapes such as "\032" are not LDH, so they never pass). */
static bool
brk_dns_plain(const char *txt, char *out, size_t outlen)
{
	size_t n = strlen(txt), lab = 0;

	if (n && txt[n - 1] == '.')
		n--;
	if (n == 0 || n > BRK_DNS_NAME_MAX || n >= outlen)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)txt[i];

		if (c == '.') {
			if (lab == 0 || out[i - 1] == '-')
				return false;
			lab = 0;
		} else if (isalnum(c) || (c == '-' && lab > 0)) {
			if (++lab > 63)
				return false;
		} else {
			return false;
		}
		out[i] = (char)tolower(c);
	}
	out[n] = '\0';
	return out[n - 1] != '-';
}

int
brk_dns_query_parse(const uint8_t *m, size_t n, struct brk_dnsq *q)
{
	ldns_pkt *p = NULL;
	ldns_rr *qr;
	char *txt = NULL;

	memset(q, 0, sizeof(*q));
	if (brk_dns_lib(NULL) != 0)
		return CB_EUNSUPPORTED;
	if (brk_ld.ldns_wire2pkt(&p, m, n) != LDNS_STATUS_OK || !p)
		return CB_EPROTO;
	if (brk_ld.ldns_pkt_qr(p) || brk_ld.ldns_pkt_get_opcode(p) != LDNS_PACKET_QUERY ||
	    brk_ld.ldns_pkt_qdcount(p) != 1 || brk_ld.ldns_rr_list_rr_count(brk_ld.ldns_pkt_question(p)) != 1 ||
	    !(qr = brk_ld.ldns_rr_list_rr(brk_ld.ldns_pkt_question(p), 0)) ||
	    brk_ld.ldns_rr_get_class(qr) != LDNS_RR_CLASS_IN || !brk_ld.ldns_rr_owner(qr) ||
	    !(txt = brk_ld.ldns_rdf2str(brk_ld.ldns_rr_owner(qr)))) {
		brk_ld.ldns_pkt_free(p);
		return CB_EPROTO;
	}
	q->id = brk_ld.ldns_pkt_id(p);
	q->rd = brk_ld.ldns_pkt_rd(p);
	q->qtype = (uint16_t)brk_ld.ldns_rr_get_type(qr);
	q->valid_name = brk_dns_plain(txt, q->name, sizeof(q->name));
	if (!q->valid_name)
		snprintf(q->name, sizeof(q->name), "%s", txt);	/* for the audit, escaped there */
	free(txt);
	q->pkt = p;
	return 0;
}

void
brk_dns_query_free(struct brk_dnsq *q)
{
	if (q && q->pkt) {
		brk_ld.ldns_pkt_free(q->pkt);
		q->pkt = NULL;
	}
}

/* One A or AAAA record for the question's owner. */
static ldns_rr *
brk_dns_rr(const ldns_rr *question, const struct cap_addr *a, uint32_t ttl)
{
	ldns_rr *rr = brk_ld.ldns_rr_new();
	ldns_rdf *owner = brk_ld.ldns_rdf_clone(brk_ld.ldns_rr_owner(question));
	ldns_rdf *data = a->family == AF_INET ?
	    brk_ld.ldns_rdf_new_frm_data(LDNS_RDF_TYPE_A, 4, a->b) :
	    brk_ld.ldns_rdf_new_frm_data(LDNS_RDF_TYPE_AAAA, 16, a->b);

	if (!rr || !owner || !data) {
		brk_ld.ldns_rr_free(rr);
		brk_ld.ldns_rdf_deep_free(owner);
		brk_ld.ldns_rdf_deep_free(data);
		return NULL;
	}
	brk_ld.ldns_rr_set_owner(rr, owner);
	brk_ld.ldns_rr_set_type(rr, a->family == AF_INET ? LDNS_RR_TYPE_A : LDNS_RR_TYPE_AAAA);
	brk_ld.ldns_rr_set_class(rr, LDNS_RR_CLASS_IN);
	brk_ld.ldns_rr_set_ttl(rr, ttl);
	if (!brk_ld.ldns_rr_push_rdf(rr, data)) {
		brk_ld.ldns_rr_free(rr);
		brk_ld.ldns_rdf_deep_free(data);
		return NULL;
	}
	return rr;
}

int
brk_dns_answer(const struct brk_dnsq *q, int rcode, const struct cap_addr *a, size_t na,
    uint32_t ttl, uint8_t **out, size_t *outlen)
{
	const ldns_pkt *qp = q->pkt;
	const ldns_rr *question = brk_ld.ldns_rr_list_rr(brk_ld.ldns_pkt_question(qp), 0);
	int family = q->qtype == LDNS_RR_TYPE_A ? AF_INET :
	    q->qtype == LDNS_RR_TYPE_AAAA ? AF_INET6 : AF_UNSPEC;
	ldns_pkt *p = brk_ld.ldns_pkt_new();
	ldns_rr *qc = question ? brk_ld.ldns_rr_clone(question) : NULL;
	int r = CB_ENOMEM;

	*out = NULL;
	*outlen = 0;
	if (!p || !qc || !brk_ld.ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, qc)) {
		brk_ld.ldns_rr_free(qc);
		goto out;
	}
	brk_ld.ldns_pkt_set_id(p, q->id);
	brk_ld.ldns_pkt_set_qr(p, true);
	brk_ld.ldns_pkt_set_opcode(p, LDNS_PACKET_QUERY);
	brk_ld.ldns_pkt_set_rd(p, q->rd);
	brk_ld.ldns_pkt_set_ra(p, true);
	brk_ld.ldns_pkt_set_rcode(p, (uint8_t)rcode);
	for (size_t i = 0; rcode == LDNS_RCODE_NOERROR && i < na; i++) {
		ldns_rr *rr;

		if (a[i].family != family)
			continue;
		if (!(rr = brk_dns_rr(question, &a[i], ttl)) ||
		    !brk_ld.ldns_pkt_push_rr(p, LDNS_SECTION_ANSWER, rr)) {
			brk_ld.ldns_rr_free(rr);
			goto out;
		}
	}
	if (brk_ld.ldns_pkt2wire(out, p, outlen) == LDNS_STATUS_OK && *out)
		r = 0;
out:
	brk_ld.ldns_pkt_free(p);
	return r;
}

bool
brk_dns_is_resolver(const struct sockaddr *sa, socklen_t len)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
	struct in_addr dns;

	return sa->sa_family == AF_INET && len >= (socklen_t)sizeof(*in) &&
	    ntohs(in->sin_port) == BRK_DNS_PORT && inet_pton(AF_INET, BRK_DNS_ADDR, &dns) == 1 &&
	    in->sin_addr.s_addr == dns.s_addr;
}

/* ---- the judgment ---- */

/* Does a valid token of s cover name for some port (a capability naming
 * it, a `*.domain` above it, or `*`), inside the ceiling and the policy's
 * domain allow list?  0 with *out the token, or CB_ENOTCOVERED. */
static int
brk_dns_covered(struct brk_sbx *s, const char *name, struct brk_held **out)
{
	*out = NULL;
	if (!pol_net_domain_allowed(s->pol->pol, name))
		return CB_EPOLICY;
	for (size_t i = 0; i < s->nheld; i++) {
		struct brk_held *h = &s->held[i];

		if (brk_tok_check(s, h, NULL, NULL) != 0)
			continue;
		for (size_t j = 0; j < h->tok->c.ncaps; j++) {
			const struct cap *c = h->tok->c.caps[j];
			struct cap_req r = { .op = CAP_NET_CONNECT, .host = name,
				.port = c->op == CAP_NET_CONNECT && c->net.port > 0 ? c->net.port : 1 };

			if (c->op != CAP_NET_CONNECT || c->net.kind == CAP_HOST_IP ||
			    !(h->in_ceiling & (1u << j)) || !cap_match(c, &r))
				continue;
			*out = h;
			return 0;
		}
	}
	return CB_ENOTCOVERED;
}

/* ---- connections ---- */

static void brk_dconn_read(struct bufferevent *bev, void *arg);

static void
brk_dconn_free(struct brk_dconn *d)
{
	if (d->bev)
		bufferevent_free(d->bev);	/* closes the socket */
	brk_dns_query_free(&d->q);
	if (d->pprev) {
		*d->pprev = d->next;
		if (d->next)
			d->next->pprev = d->pprev;
	}
	d->s->dns_conns--;
	brk_notify_dns_room(d->s);
	brk_sbx_release(d->s);
	free(d);
}

/* Answer d's query; false: the connection is to close. */
static bool
brk_dconn_reply(struct brk_dconn *d, int rcode, const struct cap_addr *a, size_t na)
{
	uint8_t *m = NULL, len[2];
	size_t n = 0;
	bool ok;

	if (brk_dns_answer(&d->q, rcode, a, na, BRK_DNS_TTL_S, &m, &n) != 0 || n > 0xffff) {
		free(m);
		return false;
	}
	len[0] = (uint8_t)(n >> 8);
	len[1] = (uint8_t)n;
	ok = bufferevent_write(d->bev, len, 2) == 0 && bufferevent_write(d->bev, m, n) == 0;
	free(m);
	return ok;
}

static void
brk_dconn_lookup(void *arg)
{
	struct brk_dconn *d = arg;

	d->naddr = brk_net_lookup(d->q.name, d->addr, BRK_DNS_ADDRS, &d->gai);
}

static void
brk_dconn_looked_up(void *arg)
{
	struct brk_dconn *d = arg;
	struct brk_sbx *s = d->s;
	bool ok;
	int e;

	d->busy = false;
	if (d->closing || s->dead) {
		brk_dconn_free(d);
		return;
	}
	/* The lookup took time (a slow resolver: seconds): the token that
	 * covered the name then may have been revoked or expired since.
	 * Judged again, as a query now, before the sandbox learns anything:
	 * what a revoked token asked for is never taught (hosts.c) nor
	 * answered.  d->h is not used: s->held may have moved meanwhile. */
	if ((e = brk_dns_covered(s, d->q.name, &d->h)) != 0) {
		brk_budget_deny(s, e, "net.resolve", d->q.name, NULL,
		    "DNS query: no live token covers the name any more after its lookup; not answered");
		ok = brk_dconn_reply(d, LDNS_RCODE_NXDOMAIN, NULL, 0);
	} else {
		brk_hosts_learn(s, d->q.name, d->addr, d->naddr);
		ok = brk_dconn_reply(d, d->naddr ? LDNS_RCODE_NOERROR : LDNS_RCODE_NXDOMAIN,
		    d->addr, d->naddr);
	}
	brk_dns_query_free(&d->q);
	if (!ok) {
		brk_dconn_free(d);
		return;
	}
	bufferevent_enable(d->bev, EV_READ);
	brk_dconn_read(d->bev, d);	/* a query that waited in the buffer */
}

/* The library a connection waited for is loaded (or cannot be): serve it,
 * or close it (its agent sees the connection end, as with a resolver that
 * went away; later connections are refused, brk_dns_serve). */
static void
brk_dconn_lib_loaded(void *arg)
{
	struct brk_dconn *d = arg;

	d->busy = false;
	if (d->closing || d->s->dead || brk_dns_lib(NULL) != 0) {
		brk_dconn_free(d);
		return;
	}
	if (bufferevent_enable(d->bev, EV_READ) != 0) {
		brk_dconn_free(d);
		return;
	}
	brk_dconn_read(d->bev, d);	/* a query that waited in the buffer */
}

/* One query: refused, answered from the cache, or looked up (d->busy). */
static bool
brk_dconn_query(struct brk_dconn *d)
{
	struct brk_sbx *s = d->s;
	struct cap_addr a[BRK_DNS_ADDRS];
	size_t na;
	bool found = false;
	int e;

	/* Only A and AAAA are answered (all a lookup finds): any other type
	 * (MX, TXT, ANY, HTTPS...) is NOTIMP, "does not support the requested
	 * kind of query" (RFC 1035), before any judgment or lookup: no name
	 * leaves the host for a question the answer could not carry.  Not
	 * NXDOMAIN, which says the name does not exist (a resolver may then
	 * forget its addresses too, RFC 2308).  A denial like any other:
	 * audited, coalesced and charged to the sandbox's audit budget. */
	if (d->q.qtype != LDNS_RR_TYPE_A && d->q.qtype != LDNS_RR_TYPE_AAAA) {
		char why[80];

		snprintf(why, sizeof(why), "DNS query of type %u: only A and AAAA are answered; "
		    "not looked up", (unsigned)d->q.qtype);
		brk_budget_deny(s, CB_EUNSUPPORTED, "net.resolve", d->q.name, NULL, why);
		return brk_dconn_reply(d, LDNS_RCODE_NOTIMPL, NULL, 0);
	}
	e = d->q.valid_name ? brk_dns_covered(s, d->q.name, &d->h) : CB_EINVAL;
	if (e != 0) {
		brk_budget_deny(s, e, "net.resolve", d->q.name, NULL,
		    "DNS query: no live token covers the name; not looked up");
		return brk_dconn_reply(d, LDNS_RCODE_NXDOMAIN, NULL, 0);
	}
	na = brk_hosts_recall(s, d->q.name, (uint64_t)BRK_DNS_TTL_S * 1000000000ull, a,
	    BRK_DNS_ADDRS, &found);
	if (found)
		return brk_dconn_reply(d, na ? LDNS_RCODE_NOERROR : LDNS_RCODE_NXDOMAIN, a, na);
	/* Audited before the lookup, as a connect is before the broker
	 * connects (room in the log, as brk_tok_commit asks): no line, no
	 * query leaves the host (fail closed), and the refusal is a denial
	 * like any other (it had no line at all before). */
	if (!aud_room(s->b->aud) ||
	    brk_audit_sbx(s, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_ALLOW,
	    .op = "net.resolve", .resource = d->q.name, .token_id = d->h->tok->c.id,
	    .actor = "agent", .detail = "DNS query: looked up by the broker" }) != 0) {
		brk_budget_deny(s, CB_EAUDIT, "net.resolve", d->q.name, d->h->tok->c.id,
		    "DNS query: the audit log cannot take its line; not looked up");
		return brk_dconn_reply(d, LDNS_RCODE_SERVFAIL, NULL, 0);
	}
	if (brk_work(s->b, brk_dconn_lookup, brk_dconn_looked_up, d) != 0)
		return brk_dconn_reply(d, LDNS_RCODE_SERVFAIL, NULL, 0);
	d->busy = true;
	bufferevent_disable(d->bev, EV_READ);
	return true;
}

static void
brk_dconn_read(struct bufferevent *bev, void *arg)
{
	struct brk_dconn *d = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[2], *m;
	size_t len;

	while (!d->busy && !d->s->dead && evbuffer_get_length(in) >= 2) {
		bool ok;

		/* an agent that asks without reading its answers is cut off */
		if (evbuffer_get_length(bufferevent_get_output(bev)) > BRK_DNS_OUT_MAX)
			goto close;

		evbuffer_copyout(in, hdr, 2);
		len = (size_t)hdr[0] << 8 | hdr[1];
		if (len == 0 || len > BRK_DNS_MSG_MAX)
			goto close;
		if (evbuffer_get_length(in) < len + 2)
			return;
		evbuffer_drain(in, 2);
		if (!(m = evbuffer_pullup(in, (ssize_t)len)))
			goto close;
		ok = brk_dns_query_parse(m, len, &d->q) == 0;
		evbuffer_drain(in, len);
		if (!ok)
			goto close;		/* not a query we answer */
		ok = brk_dconn_query(d);
		if (!d->busy)
			brk_dns_query_free(&d->q);
		if (!ok)
			goto close;
	}
	if (!d->s->dead)
		return;
close:
	if (d->busy) {
		d->closing = true;	/* freed when its lookup ends */
		bufferevent_disable(bev, EV_READ | EV_WRITE);
		return;
	}
	brk_dconn_free(d);
}

static void
brk_dconn_event(struct bufferevent *bev, short what, void *arg)
{
	struct brk_dconn *d = arg;

	(void)what;	/* EOF, an error or the idle timeout: all end it */
	if (d->busy) {
		d->closing = true;
		bufferevent_disable(bev, EV_READ | EV_WRITE);
		return;
	}
	brk_dconn_free(d);
}

void
brk_dns_end_all(struct brk *b)
{
	struct brk_dconn *d = b->dconns, *next;

	for (; d; d = next) {
		next = d->next;
		if (!d->busy)
			brk_dconn_free(d);
	}
}

bool
brk_dns_full(const struct brk_sbx *s)
{
	return s->dns_conns >= BRK_DNS_CONNS;
}

int
brk_dns_serve(struct brk_sbx *s, int sock)
{
	struct timeval idle = { BRK_DNS_IDLE_S, 0 };
	struct brk_dconn *d;

	if (s->dns_conns >= BRK_DNS_CONNS) {
		close(sock);
		return CB_EBUSY;
	}
	/* A broker without libldns refuses the connection instead of serving
	 * a dead one, once the load has been tried (brk_dns_preload, or
	 * below: never on the loop). */
	if (brk_dns_lib_tried() && brk_dns_lib(NULL) != 0) {
		close(sock);
		return CB_EUNSUPPORTED;
	}
	if (!(d = calloc(1, sizeof(*d)))) {
		close(sock);
		return CB_ENOMEM;
	}
	d->s = s;
	brk_sbx_hold(s);
	s->dns_conns++;
	d->next = s->b->dconns;
	if (d->next)
		d->next->pprev = &d->next;
	d->pprev = &s->b->dconns;
	s->b->dconns = d;
	if (evutil_make_socket_nonblocking(sock) != 0 ||
	    !(d->bev = bufferevent_socket_new(s->b->base, sock, BEV_OPT_CLOSE_ON_FREE))) {
		close(sock);
		brk_dconn_free(d);
		return CB_ENOMEM;
	}
	bufferevent_setcb(d->bev, brk_dconn_read, NULL, brk_dconn_event, d);
	bufferevent_set_timeouts(d->bev, &idle, &idle);
	/* a query is small: never buffer more than one and its length */
	bufferevent_setwatermark(d->bev, EV_READ, 0, BRK_DNS_MSG_MAX + 2);
	if (!brk_dns_lib_tried()) {
		/* Still loading (the preload is on a worker), or never asked
		 * for: the connection waits for it, unread, on a worker of its
		 * own; the loop does not. */
		if (brk_work(s->b, brk_dns_lib_job, brk_dconn_lib_loaded, d) != 0) {
			brk_dconn_free(d);
			return CB_ENOMEM;
		}
		d->busy = true;
		return 0;
	}
	if (bufferevent_enable(d->bev, EV_READ) != 0) {
		brk_dconn_free(d);
		return CB_ENOMEM;
	}
	return 0;
}
