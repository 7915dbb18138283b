/* fuzz_mcp.c - libFuzzer target: `capcall mcp`'s JSON-RPC decoder and
 * dispatcher (client/mcp.c) on hostile lines, without a broker.  Every reply
 * must be one line of valid JSON. */
#include <stdlib.h>
#include <string.h>

#include "client/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct cc_mcp *m;
	char *out = NULL;
	json_t *j;

	if (!m && cc_mcp_new(NULL, &m) != 0)
		abort();
	if (cc_mcp_handle(m, (const char *)data, size, &out) != 0)
		abort();
	if (out) {
		if (strchr(out, '\n') || !(j = json_loads(out, 0, NULL)))
			abort();	/* stdout must carry one JSON text a line */
		json_decref(j);
		free(out);
	}
	return 0;
}
