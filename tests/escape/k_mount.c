/*
 * k_mount.c - escape attempt: mount, umount, pivot_root, chroot and the new mount API are refused.
 *
 * Runs as the agent inside the sandbox (untrusted domain); exits 0 only if
 * the attempt failed in the expected way.  Metadata read by run.sh:
 * TIER: low
 * EXIT: 0
 */
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/syscall.h>

#include "tests/escape/escape.h"

int
main(void)
{
	esc_errno(mount("none", "/tmp", "tmpfs", 0, NULL), "mount tmpfs", EPERM, 0);
	esc_errno(mount("/", "/tmp", NULL, MS_BIND, NULL), "bind mount", EPERM, 0);
	esc_errno(umount2("/proc", MNT_DETACH), "umount /proc", EPERM, 0);
	esc_errno(syscall(SYS_pivot_root, "/tmp", "/tmp"), "pivot_root", EPERM, 0);
	esc_errno(chroot("/tmp"), "chroot", EPERM, 0);
	esc_errno(syscall(SYS_open_tree, AT_FDCWD, "/", 1), "open_tree", EPERM, 0);
	esc_errno(syscall(SYS_fsopen, "tmpfs", 0), "fsopen", EPERM, 0);
	esc_errno(syscall(SYS_move_mount, -1, "", -1, "", 0), "move_mount", EPERM, 0);
	return esc_done("mount family: EPERM");
}
