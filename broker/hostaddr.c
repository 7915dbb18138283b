/*
 * hostaddr.c - the host's own addresses, which net.connect never reaches
 * unless a capability names them: a service bound to 0.0.0.0 on the host
 * must not be exposed to net.connect:*:PORT.
 *
 * Trust domain: broker.  Nothing here comes from an agent: the addresses
 * are the kernel's (getifaddrs) and the change notices are the kernel's
 * (rtnetlink), read from a socket only the kernel can send to.
 *
 * Kept current without polling: a NETLINK_ROUTE socket subscribed to
 * RTMGRP_IPV4_IFADDR and RTMGRP_IPV6_IFADDR tells the broker that some
 * address was added or removed; the notices are not parsed, only counted.
 * Any notice (or a lost one: ENOBUFS) marks the list stale, and the next
 * judgment re-reads it whole with getifaddrs.  Before every judgment the
 * socket is drained without waiting, so a change the kernel made before
 * the judgment is always seen, even when the loop has not yet woken for
 * it: the kernel queues the notice while it changes the address.  Without
 * the socket (it cannot be opened) the list is re-read for every judgment:
 * slower, never stale.
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

struct brk_hostaddr {
	int fd;			/* rtnetlink notices; -1: none, re-read every time */
	struct event *ev;
	bool stale;
	struct cap_addr *a;
	size_t n;
};

/* Read every pending notice; any notice, or a lost one, makes the list
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
			 * back to reading the list every time. */
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
brk_hostaddr_read(struct brk_hostaddr *h)
{
	struct ifaddrs *ifa = NULL;
	struct cap_addr *a = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	if (getifaddrs(&ifa) != 0)
		return CB_EIO;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		struct cap_addr c = { .family = 0 };

		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			c.family = AF_INET;
			memcpy(c.b, &((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, 4);
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			c.family = AF_INET6;
			memcpy(c.b, &((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr, 16);
		} else {
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			void *p = reallocarray(a, nc, sizeof(*a));

			if (!p) {
				r = CB_ENOMEM;
				goto out;
			}
			a = p;
			cap = nc;
		}
		a[n++] = c;
	}
	free(h->a);
	h->a = a;
	h->n = n;
	a = NULL;
out:
	free(a);
	freeifaddrs(ifa);
	return r;
}

int
brk_hostaddr_open(struct brk *b)
{
	struct brk_hostaddr *h = calloc(1, sizeof(*h));
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK,
		.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR };

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
brk_hostaddr_get(struct brk *b, const struct cap_addr **a, size_t *n)
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
		 * getifaddrs waits in the socket for the next drain. */
		h->stale = h->fd < 0;
	}
	*a = h->a;
	*n = h->n;
	return 0;
}
