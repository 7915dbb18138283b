/*
 * test_broker_dns.c - the sandbox resolver's messages (broker/dns.c):
 * what a query must be to be answered, the plain name judged, and the
 * answer (checked by parsing it back with ldns).
 */
#include <arpa/inet.h>
#include <ldns/ldns.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/dns.h"
#include "tests/tap.h"

/* A query for name/type/class as a resolver sends it (ldns builds it). */
static uint8_t *
query(const char *name, ldns_rr_type type, ldns_rr_class cls, uint16_t id, size_t *len)
{
	ldns_pkt *p = NULL;
	uint8_t *w = NULL;

	if (ldns_pkt_query_new_frm_str(&p, name, type, cls, LDNS_RD) != LDNS_STATUS_OK)
		abort();
	ldns_pkt_set_id(p, id);
	if (ldns_pkt2wire(&w, p, len) != LDNS_STATUS_OK)
		abort();
	ldns_pkt_free(p);
	return w;
}

static bool
parses(const char *name, ldns_rr_type type, ldns_rr_class cls, struct brk_dnsq *q)
{
	size_t n;
	uint8_t *m = query(name, type, cls, 0x1234, &n);
	int r = brk_dns_query_parse(m, n, q);

	free(m);
	return r == 0;
}

int
main(void)
{
	struct brk_dnsq q;
	struct cap_addr a[3];
	uint8_t *ans = NULL, junk[12] = { 0 };
	size_t n = 0;
	ldns_pkt *p = NULL;

	T_OK(parses("A.Test.Invalid.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, &q) && q.valid_name &&
	    strcmp(q.name, "a.test.invalid") == 0 && q.id == 0x1234 && q.qtype == LDNS_RR_TYPE_A,
	    "a standard query parses; the name is judged lowercased, without its final dot");
	if (cap_addr_parse("10.1.2.3", &a[0]) != 0 || cap_addr_parse("2001:db8::7", &a[1]) != 0 ||
	    cap_addr_parse("10.1.2.4", &a[2]) != 0)
		abort();
	T_OK(brk_dns_answer(&q, LDNS_RCODE_NOERROR, a, 3, 5, &ans, &n) == 0 &&
	    ldns_wire2pkt(&p, ans, n) == LDNS_STATUS_OK && ldns_pkt_qr(p) && ldns_pkt_id(p) == 0x1234 &&
	    ldns_pkt_ancount(p) == 2 && ldns_pkt_qdcount(p) == 1,
	    "the answer to an A query carries the IPv4 addresses only, with the query's id");
	ldns_pkt_free(p);
	free(ans);
	p = NULL;
	brk_dns_query_free(&q);

	T_OK(parses("a.test.invalid.", LDNS_RR_TYPE_AAAA, LDNS_RR_CLASS_IN, &q) &&
	    brk_dns_answer(&q, LDNS_RCODE_NOERROR, a, 3, 5, &ans, &n) == 0 &&
	    ldns_wire2pkt(&p, ans, n) == LDNS_STATUS_OK && ldns_pkt_ancount(p) == 1,
	    "... to an AAAA query the IPv6 ones");
	ldns_pkt_free(p);
	free(ans);
	p = NULL;
	brk_dns_query_free(&q);

	T_OK(parses("b.other.invalid.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, &q) &&
	    brk_dns_answer(&q, LDNS_RCODE_NXDOMAIN, a, 3, 5, &ans, &n) == 0 &&
	    ldns_wire2pkt(&p, ans, n) == LDNS_STATUS_OK &&
	    ldns_pkt_get_rcode(p) == LDNS_RCODE_NXDOMAIN && ldns_pkt_ancount(p) == 0,
	    "NXDOMAIN carries no address");
	ldns_pkt_free(p);
	free(ans);
	brk_dns_query_free(&q);

	T_OK(parses("a\\032b.test.invalid.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, &q) && !q.valid_name,
	    "a name with a byte outside letters, digits and '-' is not a plain name");
	brk_dns_query_free(&q);
	T_OK(parses("-a.test.invalid.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, &q) && !q.valid_name,
	    "... nor one with a label starting with '-'");
	brk_dns_query_free(&q);
	T_OK(parses("a_b.test.invalid.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, &q) && !q.valid_name,
	    "... nor one with '_'");
	brk_dns_query_free(&q);
	T_OK(!parses("a.test.invalid.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_CH, &q),
	    "a query of another class is not answered");
	T_OK(brk_dns_query_parse(junk, sizeof(junk), &q) != 0, "a query without a question is not");
	T_OK(brk_dns_query_parse(junk, 3, &q) != 0, "nor a truncated header");
	{
		size_t ql;
		uint8_t *m = query("a.test.invalid.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, 1, &ql);

		m[2] |= 0x80;	/* QR: a response */
		T_OK(brk_dns_query_parse(m, ql, &q) != 0, "nor a response");
		m[2] &= 0x7f;
		T_OK(brk_dns_query_parse(m, ql - 1, &q) != 0, "nor a question cut short");
		free(m);
	}
	{
		struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(53) };

		inet_pton(AF_INET, BRK_DNS_ADDR, &in.sin_addr);
		T_OK(brk_dns_is_resolver((struct sockaddr *)&in, sizeof(in)),
		    "the resolver is " BRK_DNS_ADDR " port 53");
		in.sin_port = htons(54);
		T_OK(!brk_dns_is_resolver((struct sockaddr *)&in, sizeof(in)), "... not another port");
	}
	return t_done();
}
