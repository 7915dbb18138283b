/*
 * escape.h - helpers for the escape attempts (tests/escape/NAME.c).
 *
 * Each attempt runs as the agent inside a sandbox (the untrusted domain),
 * tries one kind of escape and exits 0 only if every try failed in the
 * specific, expected way; it prints one line saying what it showed.  Any
 * success, or a failure for the wrong reason, prints "ESCAPE: ..." and the
 * attempt exits 1.
 */
#ifndef CB_ESCAPE_H
#define CB_ESCAPE_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int esc_bad;

static inline void __attribute__((format(printf, 1, 2)))
esc_escaped(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("ESCAPE: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	esc_bad++;
}

/* r must be -1 with errno e1 (or e2, if not 0). */
static inline void
esc_errno(long r, const char *what, int e1, int e2)
{
	int e = errno;

	if (r != -1)
		esc_escaped("%s succeeded (returned %ld)", what, r);
	else if (e != e1 && (e2 == 0 || e != e2))
		esc_escaped("%s failed with %s, expected %s", what, strerror(e), strerror(e1));
}

/* A check that must hold. */
static inline void
esc_true(bool cond, const char *what)
{
	if (!cond)
		esc_escaped("%s", what);
}

static inline int __attribute__((format(printf, 1, 2)))
esc_done(const char *fmt, ...)
{
	va_list ap;

	if (esc_bad != 0)
		return 1;
	va_start(ap, fmt);
	printf("held: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	return 0;
}

#endif
