/* fuzz_dns.c - libFuzzer target: the sandbox resolver's query parsing and
 * answer (broker/dns.c), on hostile DNS messages. */
#include <ldns/ldns.h>
#include <stdlib.h>
#include <string.h>

#include "broker/dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct brk_dnsq q;
	struct cap_addr a[2];
	uint8_t *out = NULL;
	size_t n = 0;

	if (size > BRK_DNS_MSG_MAX || brk_dns_query_parse(data, size, &q) != 0)
		return 0;
	if (q.valid_name && (strlen(q.name) > BRK_DNS_NAME_MAX || strchr(q.name, '\\')))
		abort();	/* a plain name is LDH labels only */
	if (cap_addr_parse("192.0.2.1", &a[0]) != 0 || cap_addr_parse("2001:db8::1", &a[1]) != 0)
		abort();
	if (brk_dns_answer(&q, LDNS_RCODE_NOERROR, a, 2, 5, &out, &n) != 0 || n < 12)
		abort();	/* anything parsed can be answered */
	free(out);
	brk_dns_query_free(&q);
	return 0;
}
