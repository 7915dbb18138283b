/*
 * files_open_by_handle.c - escape attempt: open_by_handle_at / name_to_handle_at are refused.
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
	struct file_handle *fh = calloc(1, sizeof(*fh) + 128);
	int mnt;

	fh->handle_bytes = 128;
	esc_errno(name_to_handle_at(AT_FDCWD, "/etc/passwd", fh, &mnt, 0),
	    "name_to_handle_at", EPERM, 0);
	/* The shocker attack: a guessed handle of the host's root inode. */
	fh->handle_bytes = 8;
	fh->handle_type = 1;
	memset(fh->f_handle, 0, 8);
	fh->f_handle[0] = 2;
	esc_errno(open_by_handle_at(0, fh, O_RDONLY), "open_by_handle_at", EPERM, 0);
	return esc_done("name_to_handle_at and open_by_handle_at: EPERM");
}
