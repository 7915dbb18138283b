/*
 * net_unix_path.c - escape attempt: reach a host unix socket through a path-named connect().
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: medium
 * EXIT: 0
 *
 * In the medium and high tiers connect() goes to the broker, which looks a
 * path-named AF_UNIX address up in the agent's own view (its root or
 * working directory), by its one resolver and with the agent's identity,
 * then connects the agent's socket (broker/notify.c).  The sandbox's own
 * sockets must keep working (absolute and relative paths); nothing may
 * lead the broker's lookup out of the sandbox: a symlink to a host path,
 * /proc/1/root, "..", /proc/self/fd.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "tests/escape/escape.h"

static int
try(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0), r;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	r = connect(s, (struct sockaddr *)&a, sizeof(a));
	if (r != 0) {
		int e = errno;

		close(s);
		errno = e;
		return -1;
	}
	close(s);
	return 0;
}

int
main(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "/tmp/esc.sock");
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 16) != 0 ||
	    chdir("/tmp") != 0)
		return 2;
	esc_true(try("/tmp/esc.sock") == 0, "the sandbox's own socket by absolute path was refused");
	esc_true(try("esc.sock") == 0, "the sandbox's own socket by relative path was refused");
	(void)!symlink("/tmp/esc.sock", "/tmp/link.sock");
	esc_errno(try("/tmp/link.sock"), "connect through a symlink", EACCES, 0);
	(void)!symlink("/run/dbus/system_bus_socket", "/tmp/host.sock");
	esc_errno(try("/tmp/host.sock"), "connect through a symlink to a host path", EACCES, 0);
	esc_errno(try("/proc/1/root/tmp/esc.sock"), "connect through /proc/1/root", EACCES, 0);
	esc_errno(try("/proc/self/fd/3"), "connect through /proc/self/fd", EACCES, 0);
	esc_errno(try("../../run/dbus/system_bus_socket"), "connect with ..", EACCES, ENOENT);
	esc_errno(try("/run/systemd/private"), "connect to a host path", ENOENT, 0);
	return esc_done("path-named unix connects stay in the sandbox's view");
}
