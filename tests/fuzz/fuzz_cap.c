/* fuzz_cap.c - libFuzzer target: capability parsing, matching, containment. */
#include <stdlib.h>
#include <string.h>

#include "caps/caps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s, *nl;
	struct cap *a = NULL, *b = NULL;

	if (size > 4 * CAP_STR_MAX)
		return 0;
	if (!(s = malloc(size + 1)))
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	/* "CAP\nCAP": exercise containment between two capabilities too */
	nl = strchr(s, '\n');
	if (nl)
		*nl = '\0';
	if (cap_parse(s, &a) == 0) {
		struct cap_req r = { .op = a->op, .path = "/a/b/c", .host = "x.example.com", .port = 443 };
		struct cap *again = NULL;

		(void)cap_match(a, &r);
		/* canonical text must re-parse to itself */
		if (cap_parse(a->text, &again) != 0 || strcmp(again->text, a->text) != 0)
			abort();
		if (!cap_contains(a, again))
			abort();	/* containment is reflexive */
		cap_free(again);
		if (nl && cap_parse(nl + 1, &b) == 0)
			(void)cap_contains(a, b);
	}
	(void)cap_path_check(s);
	cap_free(a);
	cap_free(b);
	free(s);
	return 0;
}
