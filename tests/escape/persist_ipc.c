/*
 * persist_ipc.c - escape attempt: SysV IPC objects do not outlive their sandbox.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 * ARGS: check
 * PRE: write
 */
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/msg.h>

#include "tests/escape/escape.h"

int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "write") == 0) {
		esc_true(shmget(0xcab0cab0, 4096, IPC_CREAT | 0600) != -1, "shmget create");
		esc_true(msgget(0xcab0cab0, IPC_CREAT | 0600) != -1, "msgget create");
		return esc_done("shm and msg queue created");
	}
	esc_errno(shmget(0xcab0cab0, 0, 0), "shm of the previous run", ENOENT, 0);
	esc_errno(msgget(0xcab0cab0, 0), "msg queue of the previous run", ENOENT, 0);
	return esc_done("the previous sandbox's shm and msg queue are gone (private IPC namespace)");
}
