/* fuzz_wire_req.c - libFuzzer target: agent request decoding (hostile input). */
#include <stdlib.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct wire_dec *d;
	struct wire_req r;

	if (!d && wire_dec_new(WIRE_REQ_MAX, &d) != 0)
		abort();
	if (wire_req_decode(d, data, size, &r) == 0) {
		uint8_t out[WIRE_REQ_MAX + 4096];
		size_t len;

		if (wire_req_encode(&r, out, sizeof(out), &len) != 0)
			abort();	/* anything we accept we can re-encode */
	}
	return 0;
}
