/*
 * hostaddr.h - the host's own addresses, never reachable unless named
 * (hostaddr.c); private to broker/.
 */
#ifndef CB_BROKER_HOSTADDR_H
#define CB_BROKER_HOSTADDR_H

#include "broker/core.h"

struct brk_hostaddr;
/* Start watching the host's addresses on the loop (b->base must exist).
 * CB_ENOMEM; a netlink socket that cannot be opened is not an error (the
 * list is then read for every judgment). */
int brk_hostaddr_open(struct brk *b) CB_WARN_UNUSED;
void brk_hostaddr_close(struct brk *b);
/* The prefixes the broker's network namespace delivers to itself, as of
 * now (re-read when the kernel said they changed): every interface address
 * (a full-length prefix) and every route of type local in any routing
 * table.  The array belongs to b and lives until the next call.
 * CB_EIO/CB_ENOMEM/CB_ETOOBIG: unknown; the caller must refuse what it was
 * about to judge. */
int brk_hostaddr_get(struct brk *b, const struct pol_net_prefix **a, size_t *n) CB_WARN_UNUSED;

#endif
