/*
 * net.c - the network rules of a policy: the never-reachable address ranges
 * and the optional domain allow list.  Trust domain: the broker, judging
 * addresses that an agent's net.connect resolved to.
 *
 * The ranges stop server-side request forgery: an agent granted
 * net.connect:*:443 must still not reach the host's own services (on
 * loopback or on any address of its interfaces), the LAN or the cloud
 * metadata service, neither directly nor through an IPv6 form that embeds
 * one of those IPv4 addresses.
 *
 * An address is judged through each of its views: the address itself, and
 * every IPv4 address an IPv6 form carries inside it (NAT64, 6to4, Teredo
 * server and client, IPv4-compatible and -translated).  Each view that
 * falls in a never-reachable range must be named by the granting
 * capability, or the address is refused.
 */
#include "policy/pol_int.h"

#include <arpa/inet.h>
#include <string.h>

struct pol_range {
	uint8_t b[16];
	unsigned prefix;
};

/* IPv4 ranges never reached unless named explicitly. */
static const struct pol_range v4_ranges[] = {
	{ { 0, 0, 0, 0 }, 8 },		/* "this network", 0.0.0.0 unspecified */
	{ { 10, 0, 0, 0 }, 8 },		/* RFC 1918 */
	{ { 100, 64, 0, 0 }, 10 },	/* CGNAT (also 100.100.100.200 metadata) */
	{ { 127, 0, 0, 0 }, 8 },	/* loopback */
	{ { 169, 254, 0, 0 }, 16 },	/* link-local, 169.254.169.254 metadata */
	{ { 172, 16, 0, 0 }, 12 },	/* RFC 1918 */
	{ { 192, 0, 0, 0 }, 24 },	/* IETF protocol assignments */
	{ { 192, 0, 2, 0 }, 24 },	/* documentation (TEST-NET-1) */
	{ { 192, 168, 0, 0 }, 16 },	/* RFC 1918 */
	{ { 198, 18, 0, 0 }, 15 },	/* benchmarking */
	{ { 198, 51, 100, 0 }, 24 },	/* documentation (TEST-NET-2) */
	{ { 203, 0, 113, 0 }, 24 },	/* documentation (TEST-NET-3) */
	{ { 224, 0, 0, 0 }, 4 },	/* multicast */
	{ { 240, 0, 0, 0 }, 4 },	/* reserved, 255.255.255.255 broadcast */
};

static const struct pol_range v6_ranges[] = {
	{ { 0 }, 128 },					/* :: unspecified */
	{ { [15] = 1 }, 128 },				/* ::1 loopback */
	{ { 0x01, 0x00 }, 64 },				/* 100::/64 discard */
	{ { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48 },	/* 64:ff9b:1::/48 local NAT64 */
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32 },		/* 2001:db8::/32 documentation */
	{ { 0x3f, 0xff }, 20 },				/* 3fff::/20 documentation */
	{ { 0xfc }, 7 },				/* unique local (fd00:ec2::254 metadata) */
	{ { 0xfe, 0x80 }, 10 },				/* link-local */
	{ { 0xfe, 0xc0 }, 10 },				/* site-local (deprecated) */
	{ { 0xff }, 8 },				/* multicast */
};

/* IPv6 forms that carry an IPv4 address: an address inside net/prefix has
 * an IPv4 address at bit off, inverted when inv (Teredo obscures its
 * client).  IPv4-mapped ::ffff:0:0/96 is not here: it is turned into the
 * IPv4 address itself first. */
static const struct pol_embed {
	uint8_t net[16];
	unsigned prefix;
	unsigned off;
	bool inv;
} v6_embed[] = {
	{ { [8] = 0xff, [9] = 0xff }, 96, 96, false },		/* ::ffff:0:0:0/96 translated */
	{ { 0x00, 0x64, 0xff, 0x9b }, 96, 96, false },		/* 64:ff9b::/96 NAT64 */
	{ { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, 96, false }, /* local NAT64, /96 layout */
	{ { 0 }, 96, 96, false },				/* ::/96 compatible */
	{ { 0x20, 0x02 }, 16, 16, false },			/* 2002::/16 6to4 */
	{ { 0x20, 0x01, 0x00, 0x00 }, 32, 32, false },		/* 2001::/32 Teredo server */
	{ { 0x20, 0x01, 0x00, 0x00 }, 32, 96, true },		/* 2001::/32 Teredo client */
};

#define NV4 (sizeof(v4_ranges) / sizeof(v4_ranges[0]))
#define NV6 (sizeof(v6_ranges) / sizeof(v6_ranges[0]))
#define NEMB (sizeof(v6_embed) / sizeof(v6_embed[0]))

static struct cap_addr
embed_net(const struct pol_embed *e)
{
	struct cap_addr n = { .family = AF_INET6 };

	memcpy(n.b, e->net, 16);
	return n;
}

/* The IPv4 address at e's offset inside the IPv6 address a (off is a
 * multiple of 16: the bytes are whole). */
static struct cap_addr
embed_decode(const struct cap_addr *a, const struct pol_embed *e)
{
	struct cap_addr v = { .family = AF_INET };

	memcpy(v.b, a->b + e->off / 8, 4);
	if (e->inv)
		for (int i = 0; i < 4; i++)
			v.b[i] = (uint8_t)~v.b[i];
	return v;
}

/*
 * Does granting name net/prefix explicitly for address a seen through
 * embedding e (NULL: a itself)?  The capability must be an IP capability
 * of a's family that contains a and fixes every bit of the range: for a
 * itself, its range lies inside net/prefix; through an embedding, it lies
 * inside the embedding's prefix and fixes the embedded IPv4 bits of the
 * range (so naming 64:ff9b::/96 does not name 64:ff9b::127.0.0.1, nor
 * 127.0.0.1 its NAT64 form).
 */
static bool
names_range(const struct cap *g, const struct cap_addr *a, const struct pol_embed *e,
    const struct cap_addr *net, unsigned prefix)
{
	struct cap_addr en, gv;

	if (!g || g->op != CAP_NET_CONNECT || g->net.kind != CAP_HOST_IP ||
	    g->net.addr.family != a->family || !cap_addr_in(a, &g->net.addr, g->net.prefix))
		return false;
	if (!e)
		return g->net.prefix >= prefix && cap_addr_in(&g->net.addr, net, prefix);
	en = embed_net(e);
	if (g->net.prefix < e->prefix || g->net.prefix < e->off + prefix ||
	    !cap_addr_in(&g->net.addr, &en, e->prefix))
		return false;
	gv = embed_decode(&g->net.addr, e);
	return cap_addr_in(&gv, net, prefix);
}

/* Clear the host bits of a beyond prefix. */
static void
pol_net_mask(struct cap_addr *a, unsigned prefix)
{
	unsigned bits = a->family == AF_INET ? 32 : 128;

	for (unsigned i = prefix; i < bits; i++)
		a->b[i / 8] &= (uint8_t)~(0x80 >> (i % 8));
}

/* One form for IPv4-mapped addresses, as caps.h stores them. */
static struct cap_addr
unmap(const struct cap_addr *addr)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct cap_addr a = *addr;

	if (a.family == AF_INET6 && memcmp(a.b, mapped, 12) == 0) {
		memmove(a.b, a.b + 12, 4);
		memset(a.b + 4, 0, 12);
		a.family = AF_INET;
	}
	return a;
}

/* Is the view v (a itself when e is NULL, else the IPv4 address e carries
 * in a) in a never-reachable range or one of the host's prefixes that g
 * does not name? */
static bool
view_blocked(const struct cap_addr *a, const struct pol_embed *e, const struct cap_addr *v,
    const struct cap *g, const struct pol_net_prefix *host, size_t nhost)
{
	const struct pol_range *rs = v->family == AF_INET ? v4_ranges : v6_ranges;
	size_t nr = v->family == AF_INET ? NV4 : NV6;
	unsigned bits = v->family == AF_INET ? 32 : 128;
	struct cap_addr net;

	for (size_t i = 0; i < nr; i++) {
		memset(&net, 0, sizeof(net));
		net.family = v->family;
		memcpy(net.b, rs[i].b, bits / 8);
		if (cap_addr_in(v, &net, rs[i].prefix) && !names_range(g, a, e, &net, rs[i].prefix))
			return true;
	}
	/* The host's own prefixes: an interface address is a range of one
	 * address, named only by a capability that names that very address;
	 * a local route's prefix is named by a capability inside it. */
	for (size_t i = 0; i < nhost; i++) {
		struct cap_addr h = unmap(&host[i].a);
		unsigned hp = host[i].prefix;

		if (h.family != host[i].a.family)	/* an IPv4-mapped prefix */
			hp = hp >= 96 ? hp - 96 : 0;
		if (hp > bits || h.family != v->family)
			continue;
		pol_net_mask(&h, hp);
		if (cap_addr_in(v, &h, hp) && !names_range(g, a, e, &h, hp))
			return true;
	}
	return false;
}

bool
pol_net_blocked_host(const struct pol *p, const struct cap_addr *addr, const struct cap *granting,
    const struct pol_net_prefix *host, size_t nhost)
{
	struct cap_addr a;

	(void)p;	/* the ranges are fixed; the policy only adds allow lists */
	if (addr->family != AF_INET && addr->family != AF_INET6)
		return true;
	a = unmap(addr);
	if (view_blocked(&a, NULL, &a, granting, host, nhost))
		return true;
	if (a.family != AF_INET6)
		return false;
	for (size_t i = 0; i < NEMB; i++) {
		struct cap_addr en = embed_net(&v6_embed[i]), v;

		if (!cap_addr_in(&a, &en, v6_embed[i].prefix))
			continue;
		v = embed_decode(&a, &v6_embed[i]);
		if (view_blocked(&a, &v6_embed[i], &v, granting, host, nhost))
			return true;
	}
	return false;
}

size_t
pol_net_views(const struct cap_addr *addr, struct cap_addr *out)
{
	struct cap_addr a = unmap(addr);
	size_t n = 0;

	out[n++] = a;
	if (a.family != AF_INET6)
		return n;
	for (size_t i = 0; i < NEMB && n < POL_NET_VIEWS_MAX; i++) {
		struct cap_addr en = embed_net(&v6_embed[i]);

		if (cap_addr_in(&a, &en, v6_embed[i].prefix))
			out[n++] = embed_decode(&a, &v6_embed[i]);
	}
	return n;
}

/* ::ffff:0:0/96: for single addresses unmap() does this; a range wider
 * than /96 can hold the whole mapped form and must be viewed through it. */
static const struct pol_embed v6_mapped = { { [10] = 0xff, [11] = 0xff }, 96, 96, false };

/* The IPv4 addresses range a/p holds through embedding e, as one IPv4
 * range in *out; false when a/p holds no address of e's form.  A range
 * holding the whole form holds every IPv4 address through it; a range
 * inside the form fixes the embedded bits its prefix covers (a Teredo
 * client's inverted: still a prefix, of the inverted bits). */
static bool
range_embed(const struct cap_addr *a, unsigned p, const struct pol_embed *e, struct pol_vrange *out)
{
	struct cap_addr en = embed_net(e);
	unsigned k;

	if (a->family != AF_INET6)
		return false;
	if (p <= e->prefix) {
		if (!cap_addr_in(&en, a, p))
			return false;
		out->a = (struct cap_addr){ .family = AF_INET };
		out->prefix = 0;
		return true;
	}
	if (!cap_addr_in(a, &en, e->prefix))
		return false;
	k = p <= e->off ? 0 : p - e->off > 32 ? 32 : p - e->off;
	out->a = embed_decode(a, e);
	pol_net_mask(&out->a, k);
	out->prefix = k;
	return true;
}

size_t
pol_net_range_views(const struct cap_addr *a, unsigned prefix, struct pol_vrange *out)
{
	struct cap_addr u = unmap(a);
	size_t n = 0;

	/* an IPv4-mapped single address (caps stores ranges already unmapped) */
	if (u.family != a->family)
		prefix = prefix >= 96 ? prefix - 96 : 0;
	out[n].a = u;
	out[n++].prefix = prefix;
	if (range_embed(&u, prefix, &v6_mapped, &out[n]))
		n++;
	for (size_t i = 0; i < NEMB && n < POL_NET_VIEWS_MAX; i++)
		if (range_embed(&u, prefix, &v6_embed[i], &out[n]))
			n++;
	return n;
}

bool
pol_net_ranges_meet(const struct cap_addr *a, unsigned pa, const struct cap_addr *b, unsigned pb)
{
	struct pol_vrange va[POL_NET_VIEWS_MAX], vb[POL_NET_VIEWS_MAX];
	size_t na = pol_net_range_views(a, pa, va), nb = pol_net_range_views(b, pb, vb);

	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++) {
			const struct pol_vrange *x = &va[i], *y = &vb[j];

			/* two ranges of one family overlap iff the wider holds
			 * the other's base */
			if (x->a.family == y->a.family &&
			    (x->prefix <= y->prefix ? cap_addr_in(&y->a, &x->a, x->prefix) :
			    cap_addr_in(&x->a, &y->a, y->prefix)))
				return true;
		}
	return false;
}

bool
pol_net_blocked(const struct pol *p, const struct cap_addr *addr, const struct cap *granting)
{
	return pol_net_blocked_host(p, addr, granting, NULL, 0);
}

bool
pol_net_domain_allowed(const struct pol *p, const char *host)
{
	struct cap_addr a;
	struct cap_req r = { .op = CAP_NET_CONNECT, .host = host, .port = 1 };

	if (!p->has_allow)
		return true;
	if (cap_addr_parse(host, &a) == 0)
		return true;
	for (size_t i = 0; i < p->nallow; i++)
		if (cap_match(p->allow[i].cap, &r))
			return true;
	return false;
}
