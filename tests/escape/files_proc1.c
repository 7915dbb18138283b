/*
 * files_proc1.c - escape attempt: pid 1's root, exe, environ, fds, memory and arguments are closed to the agent.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/types.h>

#include "tests/escape/escape.h"

/* pid 1's command line is world-readable in any /proc: it must not carry the
 * stub's options (the broker's host pid, the sandbox id, the policy's program
 * list, its limits and the host paths of its mounts). */
static void
cmdline_bare(void)
{
	static char buf[1 << 16];
	ssize_t n, i, off = 0;
	int fd = open("/proc/1/cmdline", O_RDONLY);

	if (fd == -1) {
		/* closed is fine too */
		if (errno != EACCES)
			esc_escaped("/proc/1/cmdline: %s, expected it readable or EACCES", strerror(errno));
		return;
	}
	while ((n = read(fd, buf + off, sizeof(buf) - 1 - (size_t)off)) > 0)
		off += n;
	close(fd);
	/* everything after the program's name is NUL */
	for (i = (ssize_t)strnlen(buf, (size_t)off); i < off; i++) {
		if (buf[i] != '\0') {
			buf[off] = '\0';
			esc_escaped("/proc/1/cmdline shows the stub's arguments: %.120s", buf + i);
			return;
		}
	}
}

int
main(void)
{
	char buf[256];

	cmdline_bare();

	esc_errno(open("/proc/1/root/etc/passwd", O_RDONLY), "/proc/1/root", EACCES, 0);
	esc_errno(readlink("/proc/1/exe", buf, sizeof(buf)), "readlink /proc/1/exe", EACCES, 0);
	esc_errno(open("/proc/1/environ", O_RDONLY), "/proc/1/environ", EACCES, 0);
	esc_errno(open("/proc/1/mem", O_RDONLY), "/proc/1/mem", EACCES, 0);
	esc_errno(open("/proc/1/fd/4", O_WRONLY), "/proc/1/fd/4 (status pipe)", EACCES, 0);
	esc_errno(open("/proc/1/ns/user", O_RDONLY), "/proc/1/ns/user", EACCES, 0);
	return esc_done("/proc/1/{root,exe,environ,mem,fd,ns}: EACCES; /proc/1/cmdline: the name alone");
}
