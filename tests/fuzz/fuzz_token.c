/* fuzz_token.c - libFuzzer target: token text decoding and verification. */
#include <stdlib.h>
#include <string.h>

#include "caps/caps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cap_keyring *kr;
	struct cap_token *t = NULL;
	struct cap_req r = { .op = CAP_FS_READ, .path = "/data/x" };

	if (!kr) {
		uint8_t seed[32];
		struct cap_key *k;

		for (int i = 0; i < 32; i++)
			seed[i] = (uint8_t)(i + 1);
		if (cap_keyring_new(&kr) || cap_key_from_seed(seed, &k) || cap_keyring_add(kr, k, true))
			abort();
	}
	if (cap_token_decode((const char *)data, size, &t) == 0) {
		(void)cap_token_verify(kr, t, 1700000001, "sbx-golden", &r);
		cap_token_free(t);
	}
	return 0;
}
