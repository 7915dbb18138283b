/* fuzz_policy.c - libFuzzer target: the policy loader (libconfig + our
 * validation) on arbitrary files.  A policy must load fully or not at all. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	struct pol *p = NULL;
	FILE *f;

	if (!path[0])
		snprintf(path, sizeof(path), "/tmp/fuzz_policy.%d.conf", (int)getpid());
	if (!(f = fopen(path, "w")))
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	if (pol_load(path, &p, NULL) == 0) {
		FILE *out = fopen("/dev/null", "w");

		/* whatever loads must print */
		if (!out || pol_print(p, out) != 0)
			abort();
		fclose(out);
		pol_free(p);
	}
	return 0;
}
