/*
 * notify.h - mediated connect(): the broker's side of the seccomp user
 * notifications of a sandbox (notify.c).
 *
 * Trust domain: broker.  The listener comes from the sandbox's pid 1 (the
 * stub, before any agent code ran); every notification on it is the
 * agent's and hostile.
 */
#ifndef CB_BROKER_NOTIFY_H
#define CB_BROKER_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct brk;
struct brk_sbx;
struct brk_held;
struct cap_addr;

/* Serve listener (a seccomp user-notification descriptor, consumed even on
 * failure) for sandbox s on the broker's loop: each connect() of the agent
 * is judged against s's live net.connect tokens and, when allowed, made by
 * the broker, whose socket replaces the agent's.  0, CB_ENOMEM or CB_EIO;
 * on failure the listener is closed and the agent's connect() calls fail
 * (ENOSYS). */
int brk_notify_start(struct brk_sbx *s, int listener);

/* Stop serving s: close its listener (pending calls fail with ENOSYS).
 * Called when s is freed; connects still in flight hold s. */
void brk_notify_stop(struct brk_sbx *s);

/* One of s's resolver connections closed (dns.c): a connect() to the
 * resolver that waits for room may go on. */
void brk_notify_dns_room(struct brk_sbx *s);

/* Bind fd, an AF_UNIX socket of the broker's an agent will hold (the
 * channel, the resolver's socketpair end), so that the agent's bind()
 * cannot name an abstract socket in the broker's (the host's) network
 * namespace: an autobind.  0 or errno; on failure do not hand fd over. */
int brk_unix_seal(int fd);
/* Make the broker's end of such a socket refuse descriptors (SO_PASSRIGHTS
 * off): the agent's SCM_RIGHTS fail with EPERM, so no descriptor of the
 * agent's has its last close on the broker's loop.  Nothing on a kernel
 * without the option (before 6.16). */
void brk_unix_norights(int fd);

/* ---- the names a sandbox's tokens grant (hosts.c) ---- */

/* Make the directory shown in sandbox s at /capbroker/net (its file
 * "hosts" is the sandbox's /etc/hosts: localhost only, until the names are
 * resolved).  Its path is in *dir until brk_hosts_close.  CB_EIO,
 * CB_ENOMEM. */
int brk_hosts_open(struct brk_sbx *s, const char **dir);

/* Bring s's hosts file up to date with the names its valid net.connect
 * tokens grant (capabilities naming one host; `*.domain` cannot be listed):
 * when that set changed, the names are looked up again in a worker thread
 * (only names a token grants are ever looked up) and the file is replaced
 * (rename).  Cheap when nothing changed: called after the sandbox starts
 * and every second. */
void brk_hosts_refresh(struct brk_sbx *s);

/* At the broker's start (its state locked): remove the directories a
 * broker killed on the same state left in STATE/net. */
void brk_hosts_sweep(struct brk *b);

/* Remove s's directory and forget its names. */
void brk_hosts_close(struct brk_sbx *s);

/* A mediated connect() to address a, port port, that no capability covers
 * by address: is a a lookup result of a name some valid token grants for
 * port?  The judgment is brk_net_check's with that name.  0 with *out the
 * token and *name the name; otherwise the first refusal (*name the name it
 * concerns), or CB_ENOTCOVERED (*name NULL: no name gave a). */
int brk_hosts_check(struct brk_sbx *s, const struct cap_addr *a, int port,
    struct brk_held **out, const char **name);

/* Remember name's addresses a[0..n), looked up by the broker for a DNS
 * query of s (dns.c), so that a connect() to one of them is judged as
 * that name (brk_hosts_check).  The BRK_HOSTS_LEARNED most recent names
 * are kept. */
void brk_hosts_learn(struct brk_sbx *s, const char *name, const struct cap_addr *a, size_t n);

/* name's addresses (at most max, into out) if it was learned at most
 * max_age_ns ago: *found then true (the count may be 0: no address). */
size_t brk_hosts_recall(struct brk_sbx *s, const char *name, uint64_t max_age_ns,
    struct cap_addr *out, size_t max, bool *found);

#endif
