/*
 * stub_landlock.c - the Landlock layer of the sandbox.
 *
 * Runs in capbroker-stub, in the agent process right before seccomp and the
 * agent's exec, after the new root is in place (all paths below are paths
 * inside the sandbox).  Uses the best ABI the kernel has:
 *   ABI 1+  file system: read everywhere visible, write only beneath /tmp
 *           (and the high tier's writable binds), execute only what the
 *           tier allows; device files other than null/zero/full read-only;
 *   ABI 2+  renames and links only within /tmp (REFER);
 *   ABI 3+  truncate only beneath /tmp;
 *   ABI 4+  no TCP bind or connect at all (no rule grants any port);
 *   ABI 5+  ioctl on device files only for the pty;
 *   ABI 6+  scoped: no signals to, and no abstract unix sockets of,
 *           processes outside the sandbox's Landlock domain (pid 1 included).
 * Without Landlock (ABI 0) the sandbox still starts and the "ready" line says
 * landlock=0 so the broker audits it; namespaces and seccomp carry the load.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "sandbox-stub/stub_int.h"

/* Rights newer than the build host's <linux/landlock.h>. */
#define LL_FS_EXECUTE		(1ULL << 0)
#define LL_FS_WRITE_FILE	(1ULL << 1)
#define LL_FS_READ_FILE		(1ULL << 2)
#define LL_FS_READ_DIR		(1ULL << 3)
#define LL_FS_REMOVE_DIR	(1ULL << 4)
#define LL_FS_REMOVE_FILE	(1ULL << 5)
#define LL_FS_MAKE_CHAR		(1ULL << 6)
#define LL_FS_MAKE_DIR		(1ULL << 7)
#define LL_FS_MAKE_REG		(1ULL << 8)
#define LL_FS_MAKE_SOCK		(1ULL << 9)
#define LL_FS_MAKE_FIFO		(1ULL << 10)
#define LL_FS_MAKE_BLOCK	(1ULL << 11)
#define LL_FS_MAKE_SYM		(1ULL << 12)
#define LL_FS_REFER		(1ULL << 13)	/* ABI 2 */
#define LL_FS_TRUNCATE		(1ULL << 14)	/* ABI 3 */
#define LL_FS_IOCTL_DEV		(1ULL << 15)	/* ABI 5 */
#define LL_NET_BIND_TCP		(1ULL << 0)	/* ABI 4 */
#define LL_NET_CONNECT_TCP	(1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX	(1ULL << 0)	/* ABI 6 */
#define LL_SCOPE_SIGNAL		(1ULL << 1)

/* Rights valid on a file (not only a directory) in a path_beneath rule. */
#define LL_FILE_RIGHTS	(LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | \
			 LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

/* struct landlock_ruleset_attr as of ABI 6; older kernels get a prefix. */
struct stub_ll_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct stub_ll_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

int
stub_landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);

	if (v < 0) {
		/* ENOSYS: not built; EOPNOTSUPP: built but disabled at boot. */
		if (errno == ENOSYS || errno == EOPNOTSUPP)
			return 0;
		stub_die(errno, "probing Landlock");
	}
	return (int)v;
}

static uint64_t
fs_rights(int abi)
{
	uint64_t r = (LL_FS_MAKE_SYM << 1) - 1;		/* ABI 1: bits 0..12 */

	if (abi >= 2)
		r |= LL_FS_REFER;
	if (abi >= 3)
		r |= LL_FS_TRUNCATE;
	if (abi >= 5)
		r |= LL_FS_IOCTL_DEV;
	return r;
}

/* Add a rule for path (or for the already open fd if path is NULL).  A
 * missing optional path is skipped; rights are masked to what the ABI
 * handles and, for non-directories, to what a file can carry. */
static void
add_rule(int ruleset, const char *path, int fd, uint64_t rights, uint64_t handled,
    bool optional)
{
	struct stub_ll_beneath pb;
	struct stat st;
	int own = -1;

	if (path != NULL) {
		own = fd = open(path, O_PATH | O_CLOEXEC);
		if (fd == -1) {
			if (optional && errno == ENOENT)
				return;
			stub_die(errno, "landlock rule %.200s", path);
		}
	}
	if (fstat(fd, &st) == -1)
		stub_die(errno, "landlock rule fstat");
	rights &= handled;
	if (!S_ISDIR(st.st_mode))
		rights &= LL_FILE_RIGHTS;
	pb.allowed_access = rights;
	pb.parent_fd = fd;
	if (rights != 0 && syscall(SYS_landlock_add_rule, ruleset,
	    LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == -1)
		stub_die(errno, "landlock_add_rule %.200s", path != NULL ? path : "(agent)");
	if (own != -1)
		close(own);
}

/* A rule for the root of a slot (a FUSE mount not attached yet): a
 * directory by construction, and not asked (fstat would be a request to a
 * server that has no tree for it yet, and is refused). */
static void
add_slot_rule(int ruleset, int fd, uint64_t rights, uint64_t handled)
{
	struct stub_ll_beneath pb = { .allowed_access = rights & handled, .parent_fd = fd };

	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == -1)
		stub_die(errno, "landlock_add_rule (a slot)");
}

/* ELF interpreters the agent's binary may need (execute right). */
static const char *const stub_ldso[] = {
#if defined(__x86_64__)
	"/usr/lib64/ld-linux-x86-64.so.2",
	"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
#elif defined(__aarch64__)
	"/usr/lib/ld-linux-aarch64.so.1",
	"/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1",
#endif
	NULL,
};

void
stub_landlock_apply(const struct stub_cfg *c, int abi)
{
	const uint64_t rd = LL_FS_READ_FILE | LL_FS_READ_DIR;
	const uint64_t wr = LL_FS_WRITE_FILE | LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE |
	    LL_FS_MAKE_DIR | LL_FS_MAKE_REG | LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO |
	    LL_FS_MAKE_SYM | LL_FS_REFER | LL_FS_TRUNCATE;
	struct stub_ll_attr attr;
	size_t attr_size;
	uint64_t handled;
	int rs;

	if (abi <= 0)
		return;
	memset(&attr, 0, sizeof(attr));
	handled = attr.handled_access_fs = fs_rights(abi);
	attr_size = sizeof(attr.handled_access_fs);
	if (abi >= 4) {
		attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
		attr_size = offsetof(struct stub_ll_attr, scoped);
	}
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
		attr_size = sizeof(attr);
	}
	rs = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (rs == -1)
		stub_die(errno, "landlock_create_ruleset (ABI %d)", abi);

	/* Everything visible is readable: the root holds only what we put in. */
	add_rule(rs, "/", -1, rd | (c->tier == SBX_TIER_HIGH ? LL_FS_EXECUTE : 0),
	    handled, false);
	add_rule(rs, "/tmp", -1, rd | wr | (c->tier == SBX_TIER_HIGH ? LL_FS_EXECUTE : 0),
	    handled, false);
	add_rule(rs, "/dev/null", -1, rd | LL_FS_WRITE_FILE | LL_FS_TRUNCATE, handled, false);
	add_rule(rs, "/dev/zero", -1, rd | LL_FS_WRITE_FILE | LL_FS_TRUNCATE, handled, false);
	add_rule(rs, "/dev/full", -1, rd | LL_FS_WRITE_FILE | LL_FS_TRUNCATE, handled, false);
	if (c->pty) {
		add_rule(rs, "/dev/pts", -1, rd | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV, handled, false);
	}
	for (size_t i = 0; i < c->nbinds; i++) {
		if (c->binds[i].writable)
			add_rule(rs, c->binds[i].dst, -1, rd | wr, handled, false);
	}
	/* Trees the broker serves: it decides every operation there against
	 * live tokens, so Landlock lets them through (never execute, below
	 * the high tier: running a workspace file needs a proc.exec token). */
	for (size_t i = 0; i < c->nmounts; i++)
		add_rule(rs, c->mounts[i].dst, -1, rd | wr |
		    (c->tier == SBX_TIER_HIGH ? LL_FS_EXECUTE : 0), handled, false);
	for (size_t i = 0; i < c->nfuse; i++)
		add_rule(rs, c->fuse_at[i], -1, rd | wr |
		    (c->tier == SBX_TIER_HIGH ? LL_FS_EXECUTE : 0), handled, false);
	/*
	 * Slots: trees granted while the agent runs.  A rule names an inode,
	 * and the kernel's walk up from a path checks every directory of it
	 * up to a mount's root, that root included, then continues above the
	 * mount point (the mount point itself, hidden, is skipped).  So a
	 * rule on a slot's root, made now while the slot is attached nowhere,
	 * holds beneath it wherever pid 1 attaches it later; a mount made
	 * later, whose root no rule names, gets only the read rule of "/".
	 * Nothing else is widened: the slots' superblocks are only ever
	 * mounted at a granted tree's path, and every operation there is the
	 * server's to decide.
	 */
	for (size_t i = 0; i < stub_mount_nslots(); i++)
		if (stub_mount_slot_fd(i) != -1)
			add_slot_rule(rs, stub_mount_slot_fd(i), rd | wr |
			    (c->tier == SBX_TIER_HIGH ? LL_FS_EXECUTE : 0), handled);
	if (c->tier != SBX_TIER_HIGH) {
		/* Low: the agent binary (and the loader its exec needs); seccomp
		 * makes it one exec only.  Medium: also capcall and exec_allow. */
		add_rule(rs, NULL, c->exec_fd, LL_FS_EXECUTE | LL_FS_READ_FILE, handled, false);
		for (size_t i = 0; stub_ldso[i] != NULL; i++)
			add_rule(rs, stub_ldso[i], -1, LL_FS_EXECUTE | LL_FS_READ_FILE, handled, true);
		if (c->tier == SBX_TIER_MEDIUM) {
			add_rule(rs, "/capbroker/bin/capcall", -1, LL_FS_EXECUTE | LL_FS_READ_FILE,
			    handled, true);
			/* A program the host lacks is skipped: the default
			 * list names the tools of ordinary development work,
			 * not all of which every host has. */
			for (size_t i = 0; i < c->nexec_allow; i++)
				add_rule(rs, c->exec_allow[i], -1, LL_FS_EXECUTE | LL_FS_READ_FILE,
				    handled, true);
		}
	}
	if (syscall(SYS_landlock_restrict_self, rs, 0) == -1)
		stub_die(errno, "landlock_restrict_self");
	close(rs);
}
