/*
 * hostaddr.c - the host's own addresses, which net.connect never reaches
 * unless a capability names them: a service bound to 0.0.0.0 on the host
 * must not be exposed to net.connect:*:PORT.
 *
 * Trust domain: broker.  Nothing here comes from an agent: the addresses
 * are the kernel's (getifaddrs, and a route dump over rtnetlink) and the
 * change notices are the kernel's (rtnetlink), read from sockets only the
 * kernel can send to (nl_pid 0 is checked on the dump).
 *
 * The host answers for more than its interface addresses: every prefix of
 * a route of type `local` (RTN_LOCAL) is delivered to the host's own
 * sockets, whole - 127.0.0.0/8, a prefix on `lo`, `ip route add local
 * N/len` ("AnyIP").  So the set is the interface addresses (each a prefix
 * of full length) and every RTN_LOCAL route of every routing table (a
 * policy routing rule may send a lookup to any table, so the `local` table
 * alone is not enough).
 *
 * Kept current without polling: a NETLINK_ROUTE socket subscribed to
 * address and route notices (IPv4 and IPv6) tells the broker that
 * something changed; the notices are not parsed, only counted.  Any notice
 * (or a lost one: ENOBUFS) marks the set stale, and the next judgment
 * re-reads it whole.  Before every judgment the socket is drained without
 * waiting, so a change the kernel made before the judgment is always seen,
 * even when the loop has not yet woken for it: the kernel queues the
 * notice while it makes the change.  Without the socket (it cannot be
 * opened) the set is re-read for every judgment: slower, never stale.
 */
#include "broker/core.h"
#include "broker/hostaddr.h"

#include <errno.h>
#include <event2/event.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BRK_NL_BUF	8192	/* one read of rtnetlink notices */

#ifndef NETLINK_GET_STRICT_CHK
#define NETLINK_GET_STRICT_CHK 12
#endif

/* The most prefixes kept; a route dump longer than this fails the read
 * (and so the judgment) rather than leave a prefix out. */
#define BRK_HOSTADDR_MAX 65536
/* A receive buffer larger than any one datagram of a dump (the kernel
 * fills at most 32 KiB); MSG_TRUNC still catches a longer one. */
#define BRK_HOSTADDR_BUF 65536

struct brk_hostaddr {
	int fd;			/* rtnetlink notices; -1: none, re-read every time */
	struct event *ev;
	bool stale;
	struct pol_net_prefix *a;
	size_t n;
};

/* A set being read: grows by doubling up to BRK_HOSTADDR_MAX. */
struct brk_hostaddr_set {
	struct pol_net_prefix *a;
	size_t n, cap;
};

/* Read every pending notice; any notice, or a lost one, makes the set
 * stale. */
static void
brk_hostaddr_drain(struct brk_hostaddr *h)
{
	char buf[BRK_NL_BUF];

	if (h->fd < 0) {
		h->stale = true;
		return;
	}
	for (;;) {
		ssize_t n = recv(h->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0 || (n < 0 && errno == ENOBUFS)) {
			h->stale = true;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			/* A broken socket cannot tell us anything more: fall
			 * back to reading the set every time. */
			event_del(h->ev);
			close(h->fd);
			h->fd = -1;
			h->stale = true;
		}
		return;
	}
}

static void
brk_hostaddr_notice(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	brk_hostaddr_drain(arg);
}

static int
brk_hostaddr_add(struct brk_hostaddr_set *set, int family, const void *addr, unsigned prefix)
{
	struct pol_net_prefix *p;

	if (set->n == set->cap) {
		size_t nc = set->cap ? 2 * set->cap : 16;
		void *na;

		if (set->cap >= BRK_HOSTADDR_MAX)
			return CB_ETOOBIG;
		if (!(na = reallocarray(set->a, nc, sizeof(*set->a))))
			return CB_ENOMEM;
		set->a = na;
		set->cap = nc;
	}
	p = &set->a[set->n++];
	memset(p, 0, sizeof(*p));
	p->a.family = family;
	memcpy(p->a.b, addr, family == AF_INET ? 4 : 16);
	p->prefix = prefix;
	return 0;
}

static int
brk_hostaddr_ifaddrs(struct brk_hostaddr_set *set)
{
	struct ifaddrs *ifa = NULL;
	int r = 0;

	if (getifaddrs(&ifa) != 0)
		return CB_EIO;
	for (struct ifaddrs *i = ifa; i && r == 0; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			r = brk_hostaddr_add(set, AF_INET,
			    &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, 32);
		else if (i->ifa_addr->sa_family == AF_INET6)
			r = brk_hostaddr_add(set, AF_INET6,
			    &((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr, 128);
	}
	freeifaddrs(ifa);
	return r;
}

/* One RTM_NEWROUTE of a dump: keep it when it is of type local. */
static int
brk_hostaddr_route(struct brk_hostaddr_set *set, const struct nlmsghdr *nh)
{
	const struct rtmsg *rt = NLMSG_DATA(nh);
	int len = (int)nh->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*rt));
	static const uint8_t any[16];
	const void *dst = any;
	unsigned bits;

	if (len < 0)
		return CB_EIO;
	if (rt->rtm_type != RTN_LOCAL || (rt->rtm_family != AF_INET && rt->rtm_family != AF_INET6))
		return 0;
	bits = rt->rtm_family == AF_INET ? 32 : 128;
	if (rt->rtm_dst_len > bits)
		return CB_EIO;
	for (const struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == RTA_DST) {
			if (RTA_PAYLOAD(a) != bits / 8)
				return CB_EIO;
			dst = RTA_DATA(a);
		}
	/* No RTA_DST: a local default route, every address is the host's. */
	return brk_hostaddr_add(set, rt->rtm_family, dst, rt->rtm_dst_len);
}

/* Every RTN_LOCAL route of family's tables, by one RTM_GETROUTE dump.
 * With strict checking (Linux 4.20+) the kernel sends only local routes;
 * older kernels send every route and the filter here does the same.  A
 * dump that fails, is cut short or changed while it ran (NLM_F_DUMP_INTR)
 * is an error: the set would be unknown. */
static int
brk_hostaddr_routes(struct brk_hostaddr_set *set, unsigned char family)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
	} req = {
		.nh = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETROUTE,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.rt = { .rtm_family = family, .rtm_type = RTN_LOCAL },
	};
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	char *buf = malloc(BRK_HOSTADDR_BUF);
	int one = 1, fd = -1, r = CB_EIO;
	bool done = false;

	if (!buf)
		return CB_ENOMEM;
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		goto out;
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof(one));
	if (sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) != (ssize_t)sizeof(req))
		goto out;
	while (!done) {
		struct sockaddr_nl from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, buf, BRK_HOSTADDR_BUF, MSG_TRUNC, (struct sockaddr *)&from, &fl);
		int len;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || n > BRK_HOSTADDR_BUF || from.nl_pid != 0)
			goto out;	/* truncated, or not the kernel: unknown */
		len = (int)n;
		for (const struct nlmsghdr *nh = (void *)buf; NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len)) {
			if (nh->nlmsg_seq != req.nh.nlmsg_seq)
				continue;
			if (nh->nlmsg_type == NLMSG_DONE) {
				int st = 0;

				/* the dump's own status follows: a dump that
				 * failed part way ends with a negative one */
				if (nh->nlmsg_len >= NLMSG_LENGTH(sizeof(st)))
					memcpy(&st, NLMSG_DATA(nh), sizeof(st));
				if (st < 0)
					goto out;
				done = true;
				break;
			}
			if (nh->nlmsg_type == NLMSG_ERROR || (nh->nlmsg_flags & NLM_F_DUMP_INTR))
				goto out;	/* failed, or changed during the dump */
			if (nh->nlmsg_type == RTM_NEWROUTE && (r = brk_hostaddr_route(set, nh)) != 0)
				goto out;
		}
	}
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return r;
}

static int
brk_hostaddr_read(struct brk_hostaddr *h)
{
	struct brk_hostaddr_set set = { 0 };
	int r;

	if ((r = brk_hostaddr_ifaddrs(&set)) != 0 || (r = brk_hostaddr_routes(&set, AF_INET)) != 0 ||
	    (r = brk_hostaddr_routes(&set, AF_INET6)) != 0)
		goto out;
	free(h->a);
	h->a = set.a;
	h->n = set.n;
	set.a = NULL;
out:
	free(set.a);
	return r;
}

int
brk_hostaddr_open(struct brk *b)
{
	struct brk_hostaddr *h = calloc(1, sizeof(*h));
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK,
		.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE |
		    RTMGRP_IPV6_ROUTE };

	if (!h)
		return CB_ENOMEM;
	h->stale = true;
	h->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (h->fd >= 0 && bind(h->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(h->fd);
		h->fd = -1;
	}
	if (h->fd >= 0) {
		h->ev = event_new(b->base, h->fd, EV_READ | EV_PERSIST, brk_hostaddr_notice, h);
		if (!h->ev || event_add(h->ev, NULL) != 0) {
			if (h->ev)
				event_free(h->ev);
			close(h->fd);
			free(h);
			return CB_ENOMEM;
		}
	}
	b->hostaddr = h;
	return 0;
}

void
brk_hostaddr_close(struct brk *b)
{
	struct brk_hostaddr *h = b->hostaddr;

	if (!h)
		return;
	if (h->ev)
		event_free(h->ev);
	if (h->fd >= 0)
		close(h->fd);
	free(h->a);
	free(h);
	b->hostaddr = NULL;
}

int
brk_hostaddr_get(struct brk *b, const struct pol_net_prefix **a, size_t *n)
{
	struct brk_hostaddr *h = b->hostaddr;
	int r;

	*a = NULL;
	*n = 0;
	if (!h)
		return CB_EINTERNAL;
	brk_hostaddr_drain(h);
	if (h->stale) {
		if ((r = brk_hostaddr_read(h)) != 0)
			return r;	/* the caller refuses: an unknown host is not judged */
		/* Fresh until the next notice: one that arrives during
		 * the read waits in the socket for the next drain. */
		h->stale = h->fd < 0;
	}
	*a = h->a;
	*n = h->n;
	return 0;
}
