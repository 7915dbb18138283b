/*
 * test_broker_budget.c - the counts of audit lines the log refused
 * (budget.c, struct brk_unlogged): a count written says when its lines
 * were refused, first and last, and nothing of a count written before.
 * Test code (trusted).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "broker/budget.h"
#include "broker/core.h"
#include "caps/caps.h"
#include "tests/tap.h"

#define SEC	1000000000ull
#define T0	(1000000000ull * SEC)	/* 2001-09-09T01:46:40Z */

static char dir[] = "/tmp/test_broker_budget.XXXXXX";

/* The "first" and "last" of the nth audit.unlogged line of path, "" if
 * there is none. */
static void
unlogged_times(const char *path, int nth, char *first, char *last, size_t len)
{
	char line[4096];
	FILE *f = fopen(path, "r");

	first[0] = last[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		char *a, *z;

		if (!strstr(line, "\"op\":\"audit.unlogged\"") || nth-- > 0)
			continue;
		if ((a = strstr(line, "\"first\":\"")) && (z = strstr(line, "\"last\":\""))) {
			snprintf(first, len, "%.19s", a + 9);
			snprintf(last, len, "%.19s", z + 8);
		}
		break;
	}
	if (f)
		fclose(f);
}

/*
 * The broker's count of a kind is written (its lines refused at T0+100 s),
 * then a sandbox ends with lines refused from T0 to T0+10 s that the log
 * still refuses: they pass to the broker's count, whose next line must
 * say T0 to T0+10 s.  It said T0 to T0+100 s: the last time of the count
 * written before stayed.
 */
static void
test_times_after_write(struct cap_keyring *kr)
{
	static struct brk b;
	static struct brk_sbx s;
	char path[sizeof(dir) + 16], first[32], last[32];

	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	T_ERR(aud_open(path, kr, NULL, &b.aud), 0, "open a log");
	if (!b.aud)
		return;
	b.unlogged.n[BRK_UNL_DENY] = 1;
	b.unlogged.first_ns[BRK_UNL_DENY] = b.unlogged.last_ns[BRK_UNL_DENY] = T0 + 100 * SEC;
	brk_unlogged_tick(&b, false);
	T_OK(b.unlogged.n[BRK_UNL_DENY] == 0, "the broker's count is written");

	s.b = &b;
	s.unlogged.n[BRK_UNL_DENY] = 5;
	s.unlogged.first_ns[BRK_UNL_DENY] = T0;
	s.unlogged.last_ns[BRK_UNL_DENY] = T0 + 10 * SEC;
	{
		struct aud_log *log = b.aud;

		b.aud = NULL;		/* the log refuses the sandbox's count */
		brk_budget_end(&s);
		b.aud = log;
	}
	T_OK(b.unlogged.n[BRK_UNL_DENY] == 5, "a sandbox's count the log refused passes to the broker's");
	brk_unlogged_tick(&b, false);
	T_ERR(aud_close(b.aud), 0, "close the log");

	unlogged_times(path, 0, first, last, sizeof(first));
	T_OK(strcmp(first, "2001-09-09T01:48:20") == 0 && strcmp(last, first) == 0,
	    "the first count: from and to T0+100 s (%s to %s)", first, last);
	unlogged_times(path, 1, first, last, sizeof(first));
	T_OK(strcmp(first, "2001-09-09T01:46:40") == 0,
	    "the second count: from T0, the sandbox's first refusal (%s)", first);
	T_OK(strcmp(last, "2001-09-09T01:46:50") == 0,
	    "... to T0+10 s, its last, not the time of a count written before (%s)", last);
}

int
main(void)
{
	struct cap_keyring *kr = NULL;
	struct cap_key *k = NULL;

	if (mkdtemp(dir) == NULL || cap_keyring_new(&kr) != 0 || cap_key_generate(&k) != 0 ||
	    cap_keyring_add(kr, k, true) != 0)
		return 1;
	test_times_after_write(kr);
	cap_keyring_free(kr);
	t_rmtmp(dir);
	return t_done();
}
