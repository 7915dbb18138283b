/*
 * stub_seccomp.c - the seccomp layer's rules: a default-deny system call
 * filter per tier, written with libseccomp.
 *
 * Runs at build time: stub_genbpf.c compiles these rules into BPF programs
 * that capbroker-stub embeds (stub_bpf.h) and loads in the agent process as
 * the very last step before the agent's exec (stub_seccomp_load.c).  Building
 * a filter of this size costs about 2 ms, which a sandbox start (target: no
 * slower than bwrap, ~5 ms) cannot afford at run time.
 *
 * Shape (the OpenSSH sandbox-seccomp-filter.c way):
 *   - the architecture is checked first: a call through another ABI (i386
 *     int 0x80, x32) kills the process (SCMP_FLTATR_ACT_BADARCH);
 *   - a list of calls an ordinary program needs is allowed;
 *   - the calls the threat model names are refused with EPERM, so the
 *     failure is clear; clone3 gets ENOSYS so libc falls back to clone,
 *     whose flags a filter can inspect (clone3 passes them in memory);
 *   - anything else fails with ENOSYS, which programs treat as "this
 *     kernel does not have it" and work around.
 * Conditional rules for one call never overlap when their actions differ
 * (libseccomp gives no priority between them), and every comparison looks
 * only at the bits the kernel uses (ioctl's request and clone's flags are
 * 32-bit in the kernel: the upper half of the register is masked out or
 * compared as a whole, never trusted).
 *
 * One exec in the low tier.  execve is refused; execveat is refused except
 * on descriptor STUB_EXEC_FD with AT_EMPTY_PATH, and that one case goes to a
 * user-space supervisor (SECCOMP_RET_USER_NOTIF): pid 1.  Pid 1 lets exactly
 * one such call continue, the stub's own exec of the agent (made before any
 * agent code exists, by a single-threaded process), and then closes the
 * listener, after which every notified call fails with ENOSYS in the kernel.
 * The decision depends on no argument the agent could change between check
 * and use, only on "first call", so SECCOMP_USER_NOTIF_FLAG_CONTINUE is
 * safe here.  Why not the descriptor alone: execveat() ignores the
 * descriptor when the path is absolute, so a filter on the descriptor number
 * cannot tell the agent's exec from execveat(N, "/lib64/ld-linux...", ...).
 * (The descriptor sits at a number above the agent's RLIMIT_NOFILE, so it
 * cannot even name a file after the exec; Landlock limits execute rights to
 * the agent binary and the ELF loader as a second layer.)  The medium and
 * high tiers may exec, but the stub's own exec still goes through pid 1, so
 * that "ready" is only reported once the agent really started.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <linux/fs.h>

#define STUB_WITH_LIBSECCOMP
#include "sandbox-stub/stub_int.h"

/* Calls every tier may make. */
static const char *const allow_common[] = {
	/* files and descriptors */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
	"preadv2", "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range",
	"lseek", "_llseek", "stat", "fstat", "lstat", "newfstatat", "statx", "fstatat64",
	"stat64", "fstat64", "lstat64", "statfs", "fstatfs", "statfs64", "fstatfs64",
	"access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents",
	"getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir",
	"rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat",
	"symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown",
	"fchown", "lchown", "fchownat", "umask", "truncate", "ftruncate", "fallocate",
	"fsync", "fdatasync", "sync_file_range", "flock", "fcntl", "fcntl64", "dup",
	"dup2", "dup3", "pipe", "pipe2", "sendfile", "sendfile64", "splice", "tee",
	"copy_file_range", "fadvise64", "fadvise64_64", "utime", "utimes", "utimensat",
	"futimesat", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
	"flistxattr", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
	"lremovexattr", "fremovexattr", "inotify_init", "inotify_init1",
	"inotify_add_watch", "inotify_rm_watch",
	/* polling and events */
	"poll", "ppoll", "select", "_newselect", "pselect6", "epoll_create",
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"eventfd", "eventfd2", "signalfd", "signalfd4", "timerfd_create",
	"timerfd_settime", "timerfd_gettime",
	/* memory */
	"brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "msync", "mincore",
	"madvise", "mlock", "mlock2", "munlock", "mlockall", "munlockall",
	"get_mempolicy", "set_mempolicy", "mbind", "membarrier", "map_shadow_stack",
	/* sockets: only the broker's socketpair and AF_UNIX made inside */
	"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
	"getsockname", "getpeername", "getsockopt",	/* setsockopt: sockopt_rules */
	/* processes, threads, signals (the pid namespace and Landlock's signal
	 * scope keep these inside the sandbox) */
	"exit", "exit_group", "wait4", "waitid", "kill", "tkill", "tgkill",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigreturn", "rt_sigpending",
	"rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "rt_sigsuspend",
	"sigaltstack", "pause", "restart_syscall", "set_tid_address", "set_robust_list",
	"get_robust_list", "futex", "futex_waitv", "futex_wake", "futex_wait",
	"futex_requeue", "rseq", "arch_prctl", "prctl", "gettid", "getpid", "getppid",
	"getpgrp", "getpgid", "setpgid", "getsid", "setsid", "pidfd_open",
	"pidfd_send_signal", "sched_yield", "sched_getaffinity", "sched_setaffinity",
	"sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
	"sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
	"sched_getattr", "sched_setattr", "getpriority", "setpriority", "ioprio_get",
	"ioprio_set", "getcpu",
	/* identity and limits (no capabilities: these cannot gain anything) */
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
	"getgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid",
	"setresgid", "setgroups", "setfsuid", "setfsgid", "capget", "capset",
	"getrlimit", "ugetrlimit", "setrlimit", "prlimit64", "getrusage", "times",
	"uname", "sysinfo",
	/* time */
	"clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
	"gettimeofday", "time", "alarm", "getitimer", "setitimer", "timer_create",
	"timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
	/* entropy, SysV/POSIX IPC (private IPC namespace) */
	"getrandom", "shmget", "shmat", "shmdt", "shmctl", "semget", "semop",
	"semtimedop", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open",
	"mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	/* further self-restriction is always fine */
	"seccomp", "landlock_create_ruleset", "landlock_add_rule",
	"landlock_restrict_self",
	NULL,
};

/* Calls refused with EPERM in every tier: the named attack surface. */
static const char *const deny_eperm[] = {
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	"process_madvise", "kcmp", "mount", "umount", "umount2", "pivot_root", "chroot",
	"open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
	"mount_setattr", "unshare", "setns", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "bpf", "perf_event_open", "userfaultfd", "keyctl",
	"add_key", "request_key", "open_by_handle_at", "name_to_handle_at",
	"kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl",
	"quotactl_fd", "fanotify_init", "lookup_dcookie", "vhangup", "settimeofday",
	"clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm", "modify_ldt",
	"uselib", "sysfs", "ustat", "_sysctl", "memfd_secret", "nfsservctl",
	"move_pages", "migrate_pages", "statmount",
	"listmount", "lsm_set_self_attr", "pkey_alloc",
	NULL,
};

/* ioctl requests allowed (terminal and descriptor basics); compared on the
 * low 32 bits only, which is all the kernel reads. */
static const unsigned long allow_ioctl[] = {
	TCGETS, TCSETS, TCSETSW, TCSETSF, TCGETA, TCSETA, TCSETAW, TCSETAF,
	TIOCGWINSZ, TIOCSWINSZ, TIOCGPGRP, TIOCSPGRP, TIOCSCTTY, TIOCNOTTY, TIOCGSID,
	TIOCOUTQ, TIOCINQ, TCFLSH, TCXONC, TCSBRK, TCSBRKP, TIOCGPTN, TIOCSPTLCK,
	TIOCGPTPEER, TIOCGPKT, TIOCGEXCL, FIONBIO, FIOCLEX, FIONCLEX, FIOASYNC,
	FS_IOC_GETFLAGS, FICLONE,
};
/* Refused with EPERM: terminal input injection and console control. */
static const unsigned long deny_ioctl[] = { TIOCSTI, TIOCLINUX };

#define NS_FLAGS (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
		  CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

static void
rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
    const struct scmp_arg_cmp *cmp)
{
	int nr = seccomp_syscall_resolve_name(name);
	int r;

	if (nr == __NR_SCMP_ERROR)
		return;		/* unknown to this libseccomp: default action */
	r = seccomp_rule_add_array(ctx, action, nr, n, cmp);
	/* -EDOM: not a native call of this architecture (e.g. "stat64"). */
	if (r != 0 && r != -EDOM)
		stub_die(-r, "seccomp rule for %s", name);
}

#define RULE(ctx, act, name, ...) do { \
	const struct scmp_arg_cmp c_[] = { __VA_ARGS__ }; \
	rule((ctx), (act), (name), sizeof(c_) / sizeof(c_[0]), c_); \
} while (0)

/* A rule per namespace flag: a clone asking for any of them is refused. */
static void
deny_clone_ns(scmp_filter_ctx ctx)
{
	static const unsigned long f[] = { CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID,
	    CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP };

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		RULE(ctx, SCMP_ACT_ERRNO(EPERM), "clone",
		    SCMP_A0(SCMP_CMP_MASKED_EQ, f[i], f[i]));
}

/* setsockopt.  Every option an unprivileged program may set is allowed,
 * but an IPv6 routing header: IPV6_RTHDR (a segment routing header, type
 * 4, needs no privilege) makes the kernel send the socket's packets to the
 * header's first segment, not to the peer, and resets the cached route.
 * On a socket the broker connected (in the host's network namespace: the
 * mediated connect() and net.connect's) the agent's TCP segments, its
 * payload and the host's source address, went to any address it named:
 * the host's, the LAN's, the metadata service's, never judged (red team).
 * The IPv4 source routes (IP_OPTIONS with LSRR/SSRR) the kernel refuses
 * without CAP_NET_RAW, as it does the IPv6 hop-by-hop and destination
 * options; those are refused here too (EPERM), with the old RFC 2292
 * names.  level and optname are ints to the kernel: compared on the low 32
 * bits, as a set of masked ranges that never overlap (an unknown level or
 * an IPv6 option above 127 falls to the default, ENOSYS). */
static void
sockopt_rules(scmp_filter_ctx ctx)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	static const int levels[] = { SOL_IP, SOL_SOCKET, IPPROTO_TCP, 282 /* SOL_TLS */ };
	/* IPV6_2292HOPOPTS 3, _2292DSTOPTS 4, _2292RTHDR 5, _2292PKTOPTIONS 6,
	 * IPV6_HOPOPTS 54, _RTHDRDSTOPTS 55, _RTHDR 57, _DSTOPTS 59 */
	static const unsigned bad[] = { 3, 4, 5, 6, 54, 55, 57, 59 };
	/* 0..127 less those, as (mask, value) pairs on the low 32 bits */
	static const struct { uint32_t mask, val; } ok6[] = {
		{ 0xffffffff, 0 }, { 0xffffffff, 1 }, { 0xffffffff, 2 }, { 0xffffffff, 7 },
		{ 0xfffffff8, 8 }, { 0xfffffff0, 16 }, { 0xfffffff0, 32 }, { 0xfffffffc, 48 },
		{ 0xfffffffe, 52 }, { 0xffffffff, 56 }, { 0xffffffff, 58 }, { 0xfffffffc, 60 },
		{ 0xffffffc0, 64 },
	};

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		RULE(ctx, SCMP_ACT_ALLOW, "setsockopt",
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, (uint64_t)levels[i]));
	for (size_t i = 0; i < sizeof(ok6) / sizeof(ok6[0]); i++)
		RULE(ctx, SCMP_ACT_ALLOW, "setsockopt",
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, IPPROTO_IPV6),
		    SCMP_A2(SCMP_CMP_MASKED_EQ, ok6[i].mask, ok6[i].val));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		RULE(ctx, eperm, "setsockopt", SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, IPPROTO_IPV6),
		    SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffUL, bad[i]));
}

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL	0x0008U		/* Linux 6.3 */
#define MFD_EXEC	0x0010U
#endif

/* memfd_create.  Landlock's execute right does not cover memfds (they live
 * on an internal mount), so in the medium tier, where exec is limited to a
 * list, a memfd must be created non-executable and sealed so (Linux 6.3+).
 * The low tier cannot exec at all; the high tier may exec what it makes. */
static void
memfd_rules(scmp_filter_ctx ctx, enum sbx_tier tier)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);

	if (tier != SBX_TIER_MEDIUM) {
		rule(ctx, SCMP_ACT_ALLOW, "memfd_create", 0, NULL);
		return;
	}
	RULE(ctx, SCMP_ACT_ALLOW, "memfd_create",
	    SCMP_A1(SCMP_CMP_MASKED_EQ, MFD_NOEXEC_SEAL | MFD_EXEC, MFD_NOEXEC_SEAL));
	RULE(ctx, eperm, "memfd_create", SCMP_A1(SCMP_CMP_MASKED_EQ, MFD_NOEXEC_SEAL, 0));
	RULE(ctx, eperm, "memfd_create", SCMP_A1(SCMP_CMP_MASKED_EQ, MFD_EXEC, MFD_EXEC));
}

static void
tier_rules(scmp_filter_ctx ctx, enum sbx_tier tier, int exec_fd)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	const char *const net[] = { "connect", "bind", "listen", "accept", "accept4" };

	deny_clone_ns(ctx);
	memfd_rules(ctx, tier);
	if (tier == SBX_TIER_LOW) {
		/* Threads only: CLONE_THREAD set, no namespace flag. */
		RULE(ctx, SCMP_ACT_ALLOW, "clone",
		    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD | NS_FLAGS, CLONE_THREAD));
		RULE(ctx, eperm, "clone", SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
		rule(ctx, eperm, "fork", 0, NULL);
		rule(ctx, eperm, "vfork", 0, NULL);
		rule(ctx, eperm, "execve", 0, NULL);
		RULE(ctx, SCMP_ACT_NOTIFY, "execveat",
		    SCMP_A0(SCMP_CMP_EQ, (uint64_t)exec_fd),
		    SCMP_A4(SCMP_CMP_EQ, AT_EMPTY_PATH));
		RULE(ctx, eperm, "execveat", SCMP_A0(SCMP_CMP_NE, (uint64_t)exec_fd));
		RULE(ctx, eperm, "execveat", SCMP_A4(SCMP_CMP_NE, AT_EMPTY_PATH));
		/* No new connections: the broker's socket is already connected. */
		for (size_t i = 0; i < sizeof(net) / sizeof(net[0]); i++)
			rule(ctx, eperm, net[i], 0, NULL);
	} else {
		RULE(ctx, SCMP_ACT_ALLOW, "clone", SCMP_A0(SCMP_CMP_MASKED_EQ, NS_FLAGS, 0));
		rule(ctx, SCMP_ACT_ALLOW, "fork", 0, NULL);
		rule(ctx, SCMP_ACT_ALLOW, "vfork", 0, NULL);
		/* Which files may run is Landlock's decision (execute right).
		 * The stub's own exec shape still goes to pid 1, which so learns
		 * that the agent really started (the "ready" report). */
		rule(ctx, SCMP_ACT_ALLOW, "execve", 0, NULL);
		RULE(ctx, SCMP_ACT_NOTIFY, "execveat",
		    SCMP_A0(SCMP_CMP_EQ, (uint64_t)exec_fd),
		    SCMP_A4(SCMP_CMP_EQ, AT_EMPTY_PATH));
		RULE(ctx, SCMP_ACT_ALLOW, "execveat", SCMP_A0(SCMP_CMP_NE, (uint64_t)exec_fd));
		RULE(ctx, SCMP_ACT_ALLOW, "execveat", SCMP_A4(SCMP_CMP_NE, AT_EMPTY_PATH));
		/* connect() goes to the broker (broker/notify.c), which checks
		 * the address against the sandbox's net.connect tokens, makes
		 * the connection itself and installs its socket at the agent's
		 * descriptor; it never lets the call resume with the agent's
		 * own arguments.  The rest may run: the sockets that exist
		 * (AF_UNIX, and TCP ones made in the sandbox's empty network
		 * namespace, see inet_rules) reach nothing outside. */
		rule(ctx, SCMP_ACT_NOTIFY, "connect", 0, NULL);
		for (size_t i = 1; i < sizeof(net) / sizeof(net[0]); i++)
			rule(ctx, SCMP_ACT_ALLOW, net[i], 0, NULL);
	}
}

/* socket() in the medium and high tiers: AF_UNIX, and TCP over IPv4 and
 * IPv6 (type SOCK_STREAM with any of SOCK_NONBLOCK/SOCK_CLOEXEC, protocol 0
 * or IPPROTO_TCP) so that an unmodified program has a descriptor to
 * connect().  Such a socket is made in the sandbox's network namespace,
 * which has no interface but a down loopback: by itself it reaches
 * nothing (bind and listen on it serve the sandbox alone), and its
 * connect() is the broker's (above).  Every other family, TCP with another
 * protocol (MPTCP, SCTP...) and the datagram, raw and packet types are
 * refused with EPERM; other type values fall to the default ENOSYS.  The
 * rules never overlap: family and protocol are compared as whole
 * registers, the type on its low four bits (SOCK_TYPE_MASK; the kernel
 * reads the rest as flags and refuses unknown ones). */
static void
inet_rules(scmp_filter_ctx ctx)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	static const unsigned long fam[] = { AF_INET, AF_INET6 };
	static const unsigned long bad_types[] = { SOCK_DGRAM, SOCK_RAW, SOCK_RDM,
	    SOCK_SEQPACKET, SOCK_DCCP, SOCK_PACKET };

	RULE(ctx, SCMP_ACT_ALLOW, "socket", SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	for (unsigned long f = 0; f <= AF_INET6; f++) {
		if (f != AF_UNIX && f != AF_INET && f != AF_INET6)
			RULE(ctx, eperm, "socket", SCMP_A0(SCMP_CMP_EQ, f));
	}
	RULE(ctx, eperm, "socket", SCMP_A0(SCMP_CMP_GT, AF_INET6));
	for (size_t i = 0; i < 2; i++) {
		RULE(ctx, SCMP_ACT_ALLOW, "socket", SCMP_A0(SCMP_CMP_EQ, fam[i]),
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM), SCMP_A2(SCMP_CMP_EQ, 0));
		RULE(ctx, SCMP_ACT_ALLOW, "socket", SCMP_A0(SCMP_CMP_EQ, fam[i]),
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM),
		    SCMP_A2(SCMP_CMP_EQ, IPPROTO_TCP));
		for (unsigned long p = 1; p < IPPROTO_TCP; p++)
			RULE(ctx, eperm, "socket", SCMP_A0(SCMP_CMP_EQ, fam[i]),
			    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM), SCMP_A2(SCMP_CMP_EQ, p));
		RULE(ctx, eperm, "socket", SCMP_A0(SCMP_CMP_EQ, fam[i]),
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM),
		    SCMP_A2(SCMP_CMP_GT, IPPROTO_TCP));
		for (size_t t = 0; t < sizeof(bad_types) / sizeof(bad_types[0]); t++)
			RULE(ctx, eperm, "socket", SCMP_A0(SCMP_CMP_EQ, fam[i]),
			    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, bad_types[t]));
	}
}

scmp_filter_ctx
stub_seccomp_build(enum sbx_tier tier, int exec_fd)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	scmp_filter_ctx ctx;
	int r;

	ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (ctx == NULL)
		stub_die(0, "seccomp_init failed");
	/* Native architecture only; anything else is killed, not failed. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) != 0 ||
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1)) != 0 ||
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) != 0)
		stub_die(-r, "seccomp_attr_set");

	for (size_t i = 0; allow_common[i] != NULL; i++)
		rule(ctx, SCMP_ACT_ALLOW, allow_common[i], 0, NULL);
	for (size_t i = 0; deny_eperm[i] != NULL; i++)
		rule(ctx, eperm, deny_eperm[i], 0, NULL);
	/* clone3 is left to the default action, ENOSYS (see above). */

	for (size_t i = 0; i < sizeof(allow_ioctl) / sizeof(allow_ioctl[0]); i++)
		RULE(ctx, SCMP_ACT_ALLOW, "ioctl",
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, allow_ioctl[i]));
	for (size_t i = 0; i < sizeof(deny_ioctl) / sizeof(deny_ioctl[0]); i++)
		RULE(ctx, eperm, "ioctl", SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, deny_ioctl[i]));

	/* AF_UNIX only in the low tier; TCP too above it (inet_rules). */
	if (tier == SBX_TIER_LOW) {
		RULE(ctx, SCMP_ACT_ALLOW, "socket", SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
		RULE(ctx, eperm, "socket", SCMP_A0(SCMP_CMP_NE, AF_UNIX));
	} else {
		inet_rules(ctx);
	}
	sockopt_rules(ctx);
	RULE(ctx, SCMP_ACT_ALLOW, "socketpair", SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	RULE(ctx, eperm, "socketpair", SCMP_A0(SCMP_CMP_NE, AF_UNIX));
	/* personality: the query only. */
	RULE(ctx, SCMP_ACT_ALLOW, "personality", SCMP_A0(SCMP_CMP_EQ, 0xffffffffUL));
	RULE(ctx, eperm, "personality", SCMP_A0(SCMP_CMP_NE, 0xffffffffUL));
	/* mknod: regular files, fifos and sockets; never devices. */
	static const unsigned ok_types[] = { 0, S_IFREG, S_IFIFO, S_IFSOCK };
	static const unsigned bad_types[] = { S_IFCHR, S_IFBLK, S_IFDIR, S_IFLNK };
	for (size_t i = 0; i < 4; i++) {
		RULE(ctx, SCMP_ACT_ALLOW, "mknod", SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, ok_types[i]));
		RULE(ctx, SCMP_ACT_ALLOW, "mknodat", SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, ok_types[i]));
		RULE(ctx, eperm, "mknod", SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, bad_types[i]));
		RULE(ctx, eperm, "mknodat", SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, bad_types[i]));
	}
	tier_rules(ctx, tier, exec_fd);
	return ctx;
}
