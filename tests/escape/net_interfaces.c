/*
 * net_interfaces.c - escape attempt: the network namespace holds only loopback, and it is down.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>

#include "tests/escape/escape.h"

int
main(void)
{
	char buf[4096];
	int fd = open("/proc/self/net/dev", O_RDONLY);
	ssize_t n = fd == -1 ? -1 : read(fd, buf, sizeof(buf) - 1);
	int ifs = 0;

	if (n <= 0) {
		esc_escaped("cannot read /proc/self/net/dev");
		return 1;
	}
	buf[n] = '\0';
	for (char *l = strtok(buf, "\n"); l != NULL; l = strtok(NULL, "\n")) {
		char *colon = strchr(l, ':');

		if (colon == NULL)
			continue;
		*colon = '\0';
		while (*l == ' ')
			l++;
		ifs++;
		if (strcmp(l, "lo") != 0)
			esc_escaped("interface %s exists", l);
	}
	fd = open("/proc/self/net/route", O_RDONLY);
	n = fd == -1 ? -1 : read(fd, buf, sizeof(buf) - 1);
	/* Empty, or the header line only. */
	esc_true(n == 0 || (n > 0 && memchr(buf, '\n', (size_t)n) == buf + n - 1), "a route exists");
	return esc_done("%d interface (lo), no routes", ifs);
}
