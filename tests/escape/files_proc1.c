/*
 * files_proc1.c - escape attempt: pid 1's root, exe, environ, fds and memory are closed to the agent.
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
	char buf[256];

	esc_errno(open("/proc/1/root/etc/passwd", O_RDONLY), "/proc/1/root", EACCES, 0);
	esc_errno(readlink("/proc/1/exe", buf, sizeof(buf)), "readlink /proc/1/exe", EACCES, 0);
	esc_errno(open("/proc/1/environ", O_RDONLY), "/proc/1/environ", EACCES, 0);
	esc_errno(open("/proc/1/mem", O_RDONLY), "/proc/1/mem", EACCES, 0);
	esc_errno(open("/proc/1/fd/4", O_WRONLY), "/proc/1/fd/4 (status pipe)", EACCES, 0);
	esc_errno(open("/proc/1/ns/user", O_RDONLY), "/proc/1/ns/user", EACCES, 0);
	return esc_done("/proc/1/{root,exe,environ,mem,fd,ns}: EACCES");
}
