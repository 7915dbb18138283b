/*
 * net.c - the network rules of a policy: the never-reachable address ranges
 * and the optional domain allow list.  Trust domain: the broker, judging
 * addresses that an agent's net.connect resolved to.
 *
 * The ranges stop server-side request forgery: an agent granted
 * net.connect:*:443 must still not reach the host's loopback services, the
 * LAN or the cloud metadata service, neither directly nor through an IPv6
 * form that embeds one of those IPv4 addresses.
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
	{ { 192, 168, 0, 0 }, 16 },	/* RFC 1918 */
	{ { 198, 18, 0, 0 }, 15 },	/* benchmarking */
	{ { 224, 0, 0, 0 }, 4 },	/* multicast */
	{ { 240, 0, 0, 0 }, 4 },	/* reserved, 255.255.255.255 broadcast */
};

static const struct pol_range v6_ranges[] = {
	{ { 0 }, 128 },					/* :: unspecified */
	{ { [15] = 1 }, 128 },				/* ::1 loopback */
	{ { 0x01, 0x00 }, 64 },				/* 100::/64 discard */
	{ { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48 },	/* 64:ff9b:1::/48 local NAT64 */
	{ { 0xfc }, 7 },				/* unique local (fd00:ec2::254 metadata) */
	{ { 0xfe, 0x80 }, 10 },				/* link-local */
	{ { 0xfe, 0xc0 }, 10 },				/* site-local (deprecated) */
	{ { 0xff }, 8 },				/* multicast */
};

/* IPv6 forms that carry an IPv4 address: each IPv4 range above is also
 * never reachable under each of these prefixes. */
static const struct {
	uint8_t b[16];
	unsigned prefix;	/* bits before the IPv4 address */
} v6_embed[] = {
	{ { [10] = 0xff, [11] = 0xff }, 96 },		/* ::ffff:0:0/96 mapped */
	{ { [8] = 0xff, [9] = 0xff }, 96 },		/* ::ffff:0:0:0/96 translated */
	{ { 0x00, 0x64, 0xff, 0x9b }, 96 },		/* 64:ff9b::/96 NAT64 */
	{ { 0 }, 96 },					/* ::/96 compatible */
	{ { 0x20, 0x02 }, 16 },				/* 2002::/16 6to4 */
};

#define NV4 (sizeof(v4_ranges) / sizeof(v4_ranges[0]))
#define NV6 (sizeof(v6_ranges) / sizeof(v6_ranges[0]))
#define NEMB (sizeof(v6_embed) / sizeof(v6_embed[0]))

/* The i-th never-reachable range, over IPv4, native IPv6 and every IPv4
 * range under every embedding prefix.  False past the end. */
static bool
range_at(size_t i, struct cap_addr *net, unsigned *prefix)
{
	memset(net, 0, sizeof(*net));
	if (i < NV4) {
		net->family = AF_INET;
		memcpy(net->b, v4_ranges[i].b, 4);
		*prefix = v4_ranges[i].prefix;
		return true;
	}
	i -= NV4;
	if (i < NV6) {
		net->family = AF_INET6;
		memcpy(net->b, v6_ranges[i].b, 16);
		*prefix = v6_ranges[i].prefix;
		return true;
	}
	i -= NV6;
	if (i < NEMB * NV4) {
		size_t e = i / NV4, v = i % NV4;

		net->family = AF_INET6;
		memcpy(net->b, v6_embed[e].b, 16);
		memcpy(net->b + v6_embed[e].prefix / 8, v4_ranges[v].b, 4);
		*prefix = v6_embed[e].prefix + v4_ranges[v].prefix;
		return true;
	}
	return false;
}

/* Does granting name this range explicitly: an IP capability containing a
 * whose whole range lies inside net/prefix? */
static bool
names_range(const struct cap *g, const struct cap_addr *a, const struct cap_addr *net,
    unsigned prefix)
{
	return g && g->op == CAP_NET_CONNECT && g->net.kind == CAP_HOST_IP &&
	    g->net.addr.family == net->family && g->net.prefix >= prefix &&
	    cap_addr_in(&g->net.addr, net, prefix) &&
	    cap_addr_in(a, &g->net.addr, g->net.prefix);
}

bool
pol_net_blocked(const struct pol *p, const struct cap_addr *addr, const struct cap *granting)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct cap_addr a = *addr, net;
	unsigned prefix;
	bool blocked = false;

	(void)p;	/* the ranges are fixed; the policy only adds allow lists */
	if (a.family != AF_INET && a.family != AF_INET6)
		return true;
	/* One form for IPv4-mapped addresses, as caps.h stores them. */
	if (a.family == AF_INET6 && memcmp(a.b, mapped, 12) == 0) {
		memmove(a.b, a.b + 12, 4);
		memset(a.b + 4, 0, 12);
		a.family = AF_INET;
	}
	for (size_t i = 0; range_at(i, &net, &prefix); i++) {
		if (!cap_addr_in(&a, &net, prefix))
			continue;
		if (names_range(granting, &a, &net, prefix))
			return false;
		blocked = true;
	}
	return blocked;
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
