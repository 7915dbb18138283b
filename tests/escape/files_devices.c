/*
 * files_devices.c - escape attempt: only null, zero, full, random and urandom exist in /dev.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <dirent.h>

#include "tests/escape/escape.h"

int
main(void)
{
	static const char *const ok[] = { "null", "zero", "full", "random", "urandom",
	    "fd", "stdin", "stdout", "stderr" };
	static const char *const no[] = { "/dev/mem", "/dev/kmem", "/dev/kmsg", "/dev/sda",
	    "/dev/vda", "/dev/tty", "/dev/console", "/dev/port", "/dev/shm", "/dev/net/tun",
	    "/dev/fuse", "/dev/kvm", "/dev/userfaultfd", "/dev/ptmx" };
	DIR *d = opendir("/dev");
	struct dirent *e;

	while (d != NULL && (e = readdir(d)) != NULL) {
		bool found = e->d_name[0] == '.';

		for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
			found |= strcmp(e->d_name, ok[i]) == 0;
		if (!found)
			esc_escaped("/dev/%s exists", e->d_name);
	}
	if (d != NULL)
		closedir(d);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		esc_errno(open(no[i], O_RDONLY), no[i], ENOENT, 0);
	esc_true(write(open("/dev/null", O_WRONLY), "x", 1) == 1, "cannot write /dev/null");
	return esc_done("/dev is minimal; mem, kmsg, disks, tty, kvm: ENOENT");
}
