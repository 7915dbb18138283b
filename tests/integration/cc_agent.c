/*
 * cc_agent.c - a minimal C agent for 43-client-sandbox.sh (test code, runs
 * inside the sandbox): reads a file through the C client library, lists the
 * sandbox's tokens, and exits 0, 77 when denied (printing the broker's name
 * and reason), 69 when there is no broker, 1 otherwise.
 */
#include <stdio.h>
#include <unistd.h>

#include "client/capclient.h"

int
main(int argc, char **argv)
{
	struct cc_conn *c = NULL;
	struct cc_toklist *l = NULL;
	char buf[4096];
	ssize_t n;
	int fd = -1, err, rc = 1;

	if (argc != 2)
		return 64;
	if ((err = cc_open_env(&c)) != 0) {
		fprintf(stderr, "no broker: %s\n", cb_strerror(err));
		return 69;
	}
	if ((err = cc_tokens(c, &l)) != 0)
		goto out;
	printf("tokens: %zu\n", l->n);
	if ((err = cc_fs_read(c, argv[1], &fd)) != 0)
		goto out;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	rc = 0;
out:
	if (err != 0) {
		fprintf(stderr, "%s: %s\n", cb_errname(err), cc_last_reason(c));
		rc = cc_is_broken(c) ? 69 : (err == CB_ENOTCOVERED || err == CB_ENOTOKEN) ? 77 : 1;
	}
	if (fd >= 0)
		close(fd);
	cc_toklist_free(l);
	cc_close(c);
	return rc;
}
