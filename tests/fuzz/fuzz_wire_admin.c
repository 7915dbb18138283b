/* fuzz_wire_admin.c - libFuzzer target: admin request decoding. */
#include <stdlib.h>

#include "wire/admin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct wire_dec *d;
	static struct wire_adm_req r;

	if (!d && wire_dec_new(WIRE_REQ_MAX, &d) != 0)
		abort();
	if (wire_adm_decode(d, data, size, &r) == 0) {
		static uint8_t out[WIRE_REQ_MAX + 4096];
		size_t len;

		if (wire_adm_encode(&r, out, sizeof(out), &len) != 0)
			abort();	/* anything we accept we can re-encode */
	}
	return 0;
}
