/*
 * dns.h - the sandbox's resolver: DNS over TCP, answered by the broker for
 * the names a live net.connect token covers (dns.c); private to broker/.
 *
 * Trust domain: broker.  Every byte of a query is the agent's and hostile.
 */
#ifndef CB_BROKER_DNS_H
#define CB_BROKER_DNS_H

#include "broker/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The resolver's address inside the sandbox (its resolv.conf names it):
 * a connect() there, port 53, is served by the broker and never reaches
 * the host's 127.0.0.53. */
#define BRK_DNS_ADDR		"127.0.0.53"
#define BRK_DNS_PORT		53
#define BRK_DNS_MSG_MAX		1232	/* a query longer than this closes the connection */
#define BRK_DNS_NAME_MAX	253

/* One question, as the broker understood it. */
struct brk_dnsq {
	uint16_t id;
	uint16_t qtype;			/* LDNS_RR_TYPE_*: A, AAAA, anything else */
	bool rd;
	bool valid_name;		/* name is LDH labels, lowercased, no final dot */
	char name[BRK_DNS_NAME_MAX + 1];
	void *pkt;			/* the parsed query (ldns_pkt), for the answer */
};

/* Load libldns (dlopen; it is not linked) if not yet done.  0, or
 * CB_EUNSUPPORTED with *why (if why is not NULL; static text) saying why it
 * cannot be loaded.  Thread-safe. */
int brk_dns_lib(const char **why) CB_WARN_UNUSED;

/* Start loading libldns on a worker thread, once, if it is not loaded:
 * called when a sandbox that can reach the resolver (medium and high tiers)
 * is spawned, so that the load runs while the sandbox is being built and
 * the agent's first lookup finds it there.  Loop thread only; never waits.
 * A connection that comes before the load ends waits for it unread, on a
 * worker (brk_dns_serve): brk_dns_lib's first call, a dlopen, never runs
 * on the loop. */
void brk_dns_preload(struct brk *b);

/* Parse the DNS message m[0..n) with ldns: one question of class IN in a
 * standard query.  0 with *q filled (free with brk_dns_query_free);
 * CB_EPROTO otherwise (q holds nothing); CB_EUNSUPPORTED without libldns. */
int brk_dns_query_parse(const uint8_t *m, size_t n, struct brk_dnsq *q) CB_WARN_UNUSED;
void brk_dns_query_free(struct brk_dnsq *q);

/* The answer to q: rcode (LDNS_RCODE_*), and the addresses of a of q's
 * family (A: IPv4, AAAA: IPv6, others: none) with TTL ttl.  0 with a
 * malloc'd message in *out (length *outlen), or CB_ENOMEM. */
int brk_dns_answer(const struct brk_dnsq *q, int rcode, const struct cap_addr *a, size_t na,
    uint32_t ttl, uint8_t **out, size_t *outlen) CB_WARN_UNUSED;

/* Is sa (len bytes, a copy the broker judges) the sandbox's resolver? */
bool brk_dns_is_resolver(const struct sockaddr *sa, socklen_t len);

/* Serve DNS over TCP (RFC 7766: two-byte length, then the message) on
 * sock, the broker's end of a socketpair whose other end the agent's
 * connect() to the resolver got; sock is consumed.  0, CB_EBUSY (too many
 * of s's connections open), CB_EUNSUPPORTED (libldns could not be loaded)
 * or CB_ENOMEM.  Never waits for the library: while it is being loaded the
 * connection is accepted and read only once it is there (closed if the
 * load fails). */
int brk_dns_serve(struct brk_sbx *s, int sock) CB_WARN_UNUSED;
/* Has s as many resolver connections as it may (brk_dns_serve would
 * refuse another with CB_EBUSY)? */
bool brk_dns_full(const struct brk_sbx *s);

/* At shutdown, once the workers' completions have run: free every resolver
 * connection no lookup holds.  Each holds its sandbox, and one whose end
 * the loop had not yet seen close (a copy of the agent's socket closed on
 * a worker at the very end: brk_nclose_off) would outlive the loop. */
void brk_dns_end_all(struct brk *b);

#endif
