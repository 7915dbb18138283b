/* fuzz_wire_reply.c - libFuzzer target: reply decoding (the client's side). */
#include <stdlib.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct wire_dec *d;
	struct wire_reply r;

	if (!d && wire_dec_new(WIRE_REPLY_MAX, &d) != 0)
		abort();
	(void)wire_reply_decode(d, data, size, &r);
	return 0;
}
