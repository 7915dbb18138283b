/*
 * files_broker_state.c - escape attempt: the broker's state directory and keys are unreachable.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * OPTS: --state @STATEDIR@
 * ARGS: @STATEKEY@ @STATEDIR@
 *
 * run.sh runs it with --state: the key is the signing key of the very broker
 * serving this sandbox, and the directory holds its admin socket and audit log.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "tests/escape/escape.h"

int
main(int argc, char **argv)
{
	struct stat st;
	char dir[4096];

	if (argc < 3)
		return 2;
	esc_errno(open(argv[1], O_RDONLY), argv[1], ENOENT, 0);
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	if (strrchr(dir, '/') == NULL)
		return 2;
	*strrchr(dir, '/') = '\0';
	esc_errno(stat(dir, &st), dir, ENOENT, 0);
	esc_errno(stat(argv[2], &st), argv[2], ENOENT, 0);
	snprintf(dir, sizeof(dir), "%s/admin.sock", argv[2]);
	esc_errno(stat(dir, &st), dir, ENOENT, 0);
	snprintf(dir, sizeof(dir), "%s/audit.jsonl", argv[2]);
	esc_errno(open(dir, O_RDONLY), dir, ENOENT, 0);
	esc_errno(stat("/work/main", &st), "/work/main", ENOENT, 0);
	return esc_done("the serving broker's key %s, state and admin socket: ENOENT", argv[1]);
}
