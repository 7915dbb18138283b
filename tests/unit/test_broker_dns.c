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
		/* Hostile messages an agent can write by hand (red team). */
		static const uint8_t self_ptr[] = { 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
			0xc0, 12, 0, 1, 0, 1 };		/* the name points at itself */
		static const uint8_t two_ptr[] = { 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
			1, 'a', 0xc0, 16, 0xc0, 12, 0, 1, 0, 1 };	/* a -> b -> a */
		static const uint8_t nul_label[] = { 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
			3, 'a', 0, 'b', 7, 'i', 'n', 'v', 'a', 'l', 'i', 'd', 0, 0, 1, 0, 1 };
		static const uint8_t many_q[] = { 0, 1, 1, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0,
			1, 'a', 0, 0, 1, 0, 1 };		/* says 65535 questions, has one */
		static const uint8_t many_an[] = { 0, 1, 1, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			1, 'a', 0, 0, 1, 0, 1, 0xc0, 12 };	/* 3 x 65535 records, one cut short */
		uint8_t two_q[12 + 2 * 7] = { 0, 1, 1, 0, 0, 2 };
		uint8_t deep[12 + 2 * 130 + 5] = { 0, 1, 1, 0, 0, 1 };
		size_t k = 12;

		T_OK(brk_dns_query_parse(self_ptr, sizeof(self_ptr), &q) != 0,
		    "a name whose compression pointer points at itself is refused");
		T_OK(brk_dns_query_parse(two_ptr, sizeof(two_ptr), &q) != 0,
		    "... as is a loop of two pointers");
		T_OK(brk_dns_query_parse(nul_label, sizeof(nul_label), &q) != 0 || !q.valid_name,
		    "a label with a NUL byte is never a plain name");
		brk_dns_query_free(&q);
		T_OK(brk_dns_query_parse(many_q, sizeof(many_q), &q) != 0,
		    "a count of 65535 questions over one is refused");
		T_OK(brk_dns_query_parse(many_an, sizeof(many_an), &q) != 0,
		    "huge record counts over a message cut short are refused");
		for (int i = 0; i < 2; i++) {
			memcpy(two_q + 12 + 7 * i, (const uint8_t[]){ 1, (uint8_t)('a' + i), 0, 0, 1, 0, 1 }, 7);
		}
		T_OK(brk_dns_query_parse(two_q, sizeof(two_q), &q) != 0, "two questions are refused");
		/* 130 labels "a": 260 bytes of name, beyond 255 (RFC 1035) */
		for (int i = 0; i < 130; i++) {
			deep[k++] = 1;
			deep[k++] = 'a';
		}
		memcpy(deep + k, (const uint8_t[]){ 0, 0, 1, 0, 1 }, 5);
		T_OK(brk_dns_query_parse(deep, sizeof(deep), &q) != 0 || !q.valid_name,
		    "a name longer than 255 bytes is never a plain name");
		brk_dns_query_free(&q);
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
