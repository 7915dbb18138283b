/*
 * slow_audit_shim.c - LD_PRELOAD into a `capbroker serve` by tests 37
 * and 38: while the file $CB_SLOW_AUDIT exists, each write() to a file
 * named audit.jsonl first sleeps $CB_SLOW_AUDIT_MS (default 700) ms, as a
 * log on a slow or busy disk would.  The agent's answer never waits for that write
 * (docs/audit.md); what `capctl audit` shows must.  Test code, never built
 * into the product.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);

static int
is_audit_log(int fd)
{
	char p[64], t[4096];
	ssize_t n;
	static const char name[] = "/audit.jsonl";

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	if ((n = readlink(p, t, sizeof(t) - 1)) < (ssize_t)(sizeof(name) - 1))
		return 0;
	t[n] = '\0';
	return strcmp(t + n - (sizeof(name) - 1), name) == 0;
}

ssize_t
write(int fd, const void *buf, size_t len)
{
	static write_fn real;
	const char *arm = getenv("CB_SLOW_AUDIT"), *ms = getenv("CB_SLOW_AUDIT_MS");
	long d = ms ? atol(ms) : 700;

	if (!real)
		real = (write_fn)dlsym(RTLD_NEXT, "write");
	if (arm && access(arm, F_OK) == 0 && is_audit_log(fd))
		nanosleep(&(struct timespec){ .tv_sec = d / 1000, .tv_nsec = d % 1000 * 1000000 }, NULL);
	return real(fd, buf, len);
}
