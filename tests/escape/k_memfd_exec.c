/*
 * k_memfd_exec.c - escape attempt: a program written to a memfd cannot be run (medium tier).
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Landlock's execute right does not
 * cover memfds, so without the filter's rule this would run any program.
 * Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#define MFD_EXEC 0x0010U
#endif

int
main(void)
{
	/* Should an exec work, the shell says so and exits non-zero. */
	char *const av[] = { "sh", "-c", "echo ESCAPE: exec worked; exit 99", NULL };
	static char buf[1 << 16];
	char path[64];
	int src = open("/bin/sh", O_RDONLY);
	int mfd;
	ssize_t n;

	esc_errno(memfd_create("x", MFD_EXEC), "memfd_create(MFD_EXEC)", EPERM, 0);
	esc_errno(memfd_create("x", MFD_CLOEXEC), "memfd_create without MFD_NOEXEC_SEAL", EPERM, 0);
	mfd = memfd_create("x", MFD_NOEXEC_SEAL);
	if (mfd == -1 || src == -1) {
		esc_escaped("memfd_create(MFD_NOEXEC_SEAL) or open /bin/sh failed: %s", strerror(errno));
		return 1;
	}
	while ((n = read(src, buf, sizeof(buf))) > 0)
		(void)!write(mfd, buf, (size_t)n);
	esc_errno(fchmod(mfd, 0755), "fchmod +x on the sealed memfd", EPERM, 0);
	esc_errno(syscall(SYS_execveat, mfd, "", av, NULL, AT_EMPTY_PATH), "execveat(memfd)", EACCES, 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	esc_errno(execve(path, av, NULL), "execve(/proc/self/fd/N)", EACCES, 0);
	return esc_done("memfds are created non-executable and sealed: exec EACCES");
}
