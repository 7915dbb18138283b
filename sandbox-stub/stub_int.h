/*
 * stub_int.h - internals of capbroker-stub shared by its source files.
 *
 * Runs inside the sandbox being built (the stub's trust domain: it starts
 * with the broker's credentials, drops them before creating any namespace,
 * and never runs agent code; the agent only starts after the last layer is
 * in place).  Every setup failure ends the process with status 125 and a
 * one-line reason on the status descriptor: never a weaker sandbox.
 */
#ifndef CB_STUB_INT_H
#define CB_STUB_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox-stub/sandbox.h"

#define STUB_MAX_BINDS		64
#define STUB_MAX_EXEC		256
#define STUB_MAX_ENV		SBX_ENV_MAX
#define STUB_MAX_CGROUPS	2
#define STUB_AGENT_UMASK	022	/* the agent's, whatever the broker's (077) */

/* A pooled sandbox's hand-over (launch.c sends it, stub_main.c reads it):
 * one SEQPACKET message of NUL-terminated strings, the per-exec options and
 * the command.  Its strings: the command's SBX_ARGV_MAX words beside every
 * option it may carry at its maximum (--id, --chdir and their values, the
 * four limits and theirs, "--", and SBX_ENV_MAX --setenv NAME VALUE and
 * --unsetenv NAME).  Its bytes: the command's SBX_ARGV_BYTES and 64 KiB of
 * options, which is also under the 208 KiB (wmem_default) that one
 * AF_UNIX datagram may be on a stock kernel (a larger one is EMSGSIZE). */
#define STUB_HANDOVER_ARGS	(SBX_ARGV_MAX + 15 + 5 * SBX_ENV_MAX)
#define STUB_HANDOVER_MAX	(SBX_ARGV_BYTES + 64 * 1024)

/* Descriptor layout the launcher gives the stub. */
#define STUB_FD_BROKER		SBX_AGENT_FD	/* 3: the agent's socket (optional) */
#define STUB_FD_STATUS		4		/* report: "ready ..." or "fail ..." */
#define STUB_FD_CGROUP0		5		/* cgroup.procs files to join, if any */

/* The agent binary is opened at this descriptor for the one exec; it is
 * above every RLIMIT_NOFILE the agent can have (SBX_NOFILE_MAX), and fixed so
 * that the seccomp filters can be compiled once, at build time. */
#define STUB_EXEC_FD		((int)SBX_NOFILE_MAX)

/* A host object to show inside, as the broker opened it (launch.c): the
 * stub never opens a host path for a bind itself. */
struct stub_src {
	int dirfd;		/* O_PATH: the object if a directory, else its parent */
	int fd;			/* O_PATH: the object itself (what must be shown) */
	const char *name;	/* "." for a directory, else its name in dirfd */
	int tree;		/* its detached clone (stub_capture_sources), or -1 */
};

/* The configuration, parsed from the command line (trusted: it comes from
 * the broker, but every field is still checked before use). */
struct stub_cfg {
	enum sbx_tier tier;
	const char *id;
	char **argv;			/* agent command */
	struct sbx_bind binds[STUB_MAX_BINDS];	/* src is for messages only */
	struct stub_src bsrc[STUB_MAX_BINDS];	/* ... the source is this */
	size_t nbinds;
	struct stub_mnt {		/* detached mounts the broker made */
		int fd;
		const char *dst;
	} mounts[SBX_MOUNTS_MAX];
	size_t nmounts;
	const char *exec_allow[STUB_MAX_EXEC];
	size_t nexec_allow;
	struct sbx_limits lim;		/* defaults applied */
	bool have_broker_fd;
	int ncgroup;			/* cgroup.procs fds at STUB_FD_CGROUP0.. */
	bool in_cgroup;			/* --in-cgroup: started inside it already */
	const char *capcall;		/* non-NULL: capcall_src is set */
	const char *pylib;		/* non-NULL: pylib_src is set */
	const char *hosts;		/* non-NULL: hosts_src is set (/etc/hosts) */
	struct stub_src capcall_src, pylib_src, hosts_src;
	int max_fd;			/* highest descriptor the launcher passed */
	bool pty;
	bool notify;			/* --notify: the listener goes to the broker */
	bool pool;			/* --pool: wait for the hand-over (argv and the
					 * per-exec options) before the agent starts */
	bool hold;			/* --hold: the agent's exec waits for the
					 * broker's "go" (pid1_await_go) */
	bool report_exit;		/* --report-exit: "exit N" on the status socket
					 * when the agent exits */
	bool mount_later;		/* --mount-later: pid 1 attaches the broker's
					 * later mounts (stub_mount_late) */
	const char *fuse_at[SBX_MOUNTS_MAX];	/* --fuse-at: trees pid 1 mounts on
					 * its own /dev/fuse (stub_mount_send_fuse) */
	size_t nfuse;
	int slot_fds[SBX_SLOTS_MAX];	/* --slot-fd: the broker's slots */
	size_t nslot_fds;
	size_t fuse_slots;		/* --fuse-slots: slots pid 1 makes itself */
	const char *chdir;		/* where the agent starts; NULL: /tmp */
	const char *setenv[2 * STUB_MAX_ENV];	/* NAME, VALUE pairs */
	size_t nsetenv;			/* pairs */
	const char *unsetenv[STUB_MAX_ENV];
	size_t nunsetenv;
	pid_t parent_pid;		/* the launcher, for the death check */
	uid_t uid;			/* agent uid and gid, same inside and out */
	gid_t gid;
	int exec_fd;			/* fd number used for the agent's execveat */
};

/* Report "fail: MSG" (with ": strerror(errno)" when errnum != 0) on the
 * status descriptor and stderr, then _exit(125). */
void stub_die(int errnum, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* In the outer stub, before it drops the broker's credentials: clone every
 * bind source the broker passed as a descriptor into a detached, read-only
 * (unless writable), nosuid, nodev mount tree (src->tree), and close the
 * broker's descriptors.  Dies on any failure. */
void stub_capture_sources(struct stub_cfg *c);

/* Build the new root (stub_mount_setup), then forbid new namespaces and
 * pivot into it (stub_mount_pivot).  Run as pid 1 of the new pid
 * namespace, with full capabilities in the new user namespace only. */
void stub_mount_setup(const struct stub_cfg *c);
void stub_mount_pivot(const struct stub_cfg *c);

/* In pid 1 at a pooled sandbox's hand-over, before the agent exists: give
 * the sandbox its id (c->id) as hostname and in /etc/hostname (the root is
 * made writable for that one write, then read-only again). */
void stub_mount_set_id(const struct stub_cfg *c);
/* In pid 1, right after stub_mount_pivot and before the agent exists: send
 * the broker the /dev/fuse connections of the --fuse-at trees (one "fuse"
 * report carrying them all, in order), and close ours. */
void stub_mount_send_fuse(const struct stub_cfg *c);

/* In pid 1 of a --mount-later sandbox, while it runs: attach the detached
 * mount mnt_fd (the broker's FUSE mount of a tree granted after the start)
 * at dst, creating the missing directories of dst on the new root's own
 * tmpfs only (through a writable clone of it that only pid 1 holds, taken
 * in stub_mount_setup: the root stays read-only for the agent), never
 * through a symlink and never across another mount (/tmp, /proc, /dev, a
 * bind or a served tree: all refused).  Needs CAP_SYS_ADMIN in the
 * sandbox's user namespace.  0, or -1 with the reason in why. */
int stub_mount_late(int mnt_fd, const char *dst, char *why, size_t whylen);

/* The slots of this sandbox (--slot-fd, or --fuse-slots made by
 * stub_mount_setup): detached, empty FUSE mounts held by pid 1 until the
 * broker names a tree for one.  How many, and the mount descriptor of slot
 * i (-1 once attached); the agent-to-be gives each root a Landlock rule. */
size_t stub_mount_nslots(void);
int stub_mount_slot_fd(size_t i);

/* In pid 1 while the agent runs: attach slot i at dst as stub_mount_late
 * does a mount, and let go of the slot whatever the outcome (a slot is
 * used once).  0, or -1 with the reason in why. */
int stub_mount_slot(size_t i, const char *dst, char *why, size_t whylen);

/* Probe the kernel's Landlock ABI (0: none). */
int stub_landlock_abi(void);

/* Restrict the calling process (the agent-to-be) with Landlock at ABI abi
 * (no-op for abi 0).  exec_fd is the agent binary. */
void stub_landlock_apply(const struct stub_cfg *c, int abi);

#ifdef STUB_WITH_LIBSECCOMP
#include <seccomp.h>
/* Build time (stub_genbpf.c): the libseccomp filter of a tier. */
scmp_filter_ctx stub_seccomp_build(enum sbx_tier tier, int exec_fd);
#endif

/* Install the tier's seccomp filter on the calling process.  Must be the
 * last step before execveat(c->exec_fd, "", ..., AT_EMPTY_PATH).  Returns the
 * listener descriptor that pid 1 uses to let exactly that exec through. */
int stub_seccomp_apply(const struct stub_cfg *c);

/* In pid 1: let the agent's one exec continue.  The caller keeps (and
 * closes, or hands to the broker) listener.  Returns 0, or -1 if the agent
 * went away before its exec. */
int stub_seccomp_allow_first_exec(int listener, pid_t agent);

/* The launcher's spawn into a cgroup (launch.c), exported for its unit test:
 * start path with src[i] as descriptor i (nsrc of them; -1: closed) and
 * nothing else of ours open, signals at their defaults and unblocked, in a
 * session of its own, with envp, created inside the cgroup v2 directory
 * cgdir (clone3 CLONE_INTO_CGROUP).  0 and *pid, or CB_EIO (errno). */
int stub_spawn_into(const char *path, const int *src, int nsrc, char *const argv[],
    char *const envp[], int cgdir, pid_t *pid);

#endif
