/*
 * tap.c - the TAP producer behind tests/tap.h.
 */
#include "tests/tap.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"

static int t_n, t_failed;

static bool
t_vok(bool cond, const char *fmt, va_list ap)
{
	t_n++;
	if (!cond)
		t_failed++;
	printf("%sok %d - ", cond ? "" : "not ", t_n);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	return cond;
}

bool
t_ok(bool cond, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	t_vok(cond, fmt, ap);
	va_end(ap);
	return cond;
}

bool
t_err(int got, int want, const char *fmt, ...)
{
	va_list ap;
	bool r;

	va_start(ap, fmt);
	r = t_vok(got == want, fmt, ap);
	va_end(ap);
	if (!r)
		printf("#   got %d (%s), want %d (%s)\n", got, cb_errname(got),
		    want, cb_errname(want));
	return r;
}

int
t_done(void)
{
	printf("1..%d\n", t_n);
	return t_failed ? 1 : 0;
}

void
t_rmtmp(const char *dir)
{
	char cmd[4200];

	if (getenv("CB_TEST_KEEP") != NULL)
		return;
	/* dir comes from mkdtemp in the test itself: no quoting needed. */
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
}
