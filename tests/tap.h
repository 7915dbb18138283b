/*
 * tap.h - a tiny TAP producer for the unit tests.  Each check prints
 * "ok N - title" or "not ok N - title"; tests/run.sh counts them.
 */
#ifndef CB_TAP_H
#define CB_TAP_H

#include <stdbool.h>

/* Record one titled assertion.  Returns cond so callers can chain. */
bool t_ok(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Record an assertion that a call returned the expected CB_E* code,
 * printing both names on failure. */
bool t_err(int got, int want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Remove a test's temporary directory tree, unless CB_TEST_KEEP is set
 * (then it stays for a post-mortem). */
void t_rmtmp(const char *dir);

/* Print the plan; the exit status of main (0 iff every check passed). */
int t_done(void);

#define T_OK(c, ...) t_ok((c), __VA_ARGS__)
#define T_ERR(g, w, ...) t_err((g), (w), __VA_ARGS__)

#endif
