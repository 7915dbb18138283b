/*
 * sandbox.h - the launcher API: start one agent in a fresh sandbox.
 *
 * Runs in the broker (trusted domain).  The launcher never sets up the
 * sandbox in the broker's own address space: it spawns the separate
 * program capbroker-stub (a fresh exec, so no broker memory such as signing
 * keys ever exists inside a sandbox) and hands it the configuration on its
 * command line plus a few file descriptors.  The stub reports on status_fd
 * either "ready" or a one-line reason for failing; the broker's event loop
 * waits for that without blocking.
 *
 * Process tree:  broker -> stub (host pid namespace, already inside the
 * sandbox's user/mount/net/ipc/uts/cgroup namespaces, unprivileged)
 *   -> stub as pid 1 of the sandbox's pid namespace -> the agent (pid 2).
 * Killing the first stub (sbx_kill) kills the whole sandbox: pid 1 has
 * PR_SET_PDEATHSIG(SIGKILL) and the kernel kills every process of a pid
 * namespace when its pid 1 dies.
 *
 * Threads: the stub dies with the *thread* that spawned it (PDEATHSIG
 * semantics), so call sbx_spawn_start() from a thread that lives as long as
 * the sandbox, normally the event loop thread.  Do not set SIGCHLD to
 * SIG_IGN: the caller reaps the stub (waitid on the pidfd).
 */
#ifndef CB_SANDBOX_H
#define CB_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

enum sbx_tier {
	SBX_TIER_LOW,		/* no fork, one exec (the agent's), no binds but system ones */
	SBX_TIER_MEDIUM,	/* fork; exec only capcall and exec_allow; ro binds */
	SBX_TIER_HIGH,		/* fork and exec what it sees; writable binds */
};

/* Built-in defaults, used for every sbx_limits field left 0. */
#define SBX_DEFAULT_MEM_BYTES	(512ULL << 20)	/* cgroup memory, RLIMIT_DATA; RLIMIT_AS is 4x */
#define SBX_DEFAULT_NPROC	64ULL		/* RLIMIT_NPROC and pids.max */
#define SBX_DEFAULT_NOFILE	256ULL		/* RLIMIT_NOFILE (soft = hard) */
#define SBX_DEFAULT_FSIZE_BYTES	(256ULL << 20)	/* RLIMIT_FSIZE */
#define SBX_DEFAULT_CPU_SECS	600ULL		/* RLIMIT_CPU (SIGXCPU, SIGKILL 1 s later) */
#define SBX_DEFAULT_WALL_SECS	3600ULL		/* wall clock: the sandbox exits 124 */
#define SBX_DEFAULT_TMP_BYTES	(64ULL << 20)	/* size of the private /tmp */

#define SBX_NOFILE_MAX		4095ULL		/* larger nofile values are refused */
#define SBX_ID_MAX		64		/* sandbox id: [A-Za-z0-9._-]{1,64} */
#define SBX_AGENT_FD		3		/* CAPBROKER_FD inside the sandbox */
#define SBX_ENV_MAX		64		/* most --setenv, and most --unsetenv */
/* The command a sandbox runs (sbx_config.argv: the program and its
 * arguments): at most SBX_ARGV_MAX words of SBX_ARGV_BYTES bytes in all
 * (each counted with its NUL), whatever else the configuration holds: the
 * launcher's and the stub's own tables are sized for this much command
 * beside every option at its maximum, on the command line and in a pooled
 * sandbox's hand-over alike.  Beyond it: CB_ETOOBIG (sbx_argv_check).
 * The agent protocol's WIRE_ARGV_MAX is the same number (broker/ops_proc.c
 * asserts it); its 64 KiB request keeps an agent's command well under the
 * bytes. */
#define SBX_ARGV_MAX		1024
#define SBX_ARGV_BYTES		(128 * 1024)
#define SBX_ROOT_AGENT_ID	65534		/* the agent's uid and gid when started by root */

/* Exit statuses of the sandbox besides the agent's own. */
#define SBX_EXIT_TIMEOUT	124	/* wall-clock timeout */
#define SBX_EXIT_SETUP		125	/* the sandbox could not be set up */

/* A host path made visible inside the sandbox.  src must be absolute and
 * canonical: the launcher opens it with the caller's (the broker's)
 * credentials through cb_openat2 from "/", following no symlink (resolve one
 * with realpath first if that is meant), refusing kernel file systems, and
 * hands the stub the descriptor (docs/sandbox.md); dst is
 * absolute, without ".", ".." or empty components, and not /, /proc or /dev.
 * writable is honoured only in the high tier (elsewhere refused).
 * as_caller: open src with the file-system identity as_uid/as_gid instead of
 * the caller's (when the caller is root): a non-root client's --ro-bind
 * through a root daemon reaches only what that client may reach. */
struct sbx_bind {
	const char *src;
	const char *dst;
	bool writable;
	bool as_caller;
	uid_t as_uid;
	gid_t as_gid;
};

/* A detached mount the caller made (the broker's FUSE file server for a
 * granted tree: docs/fsrv.md), attached at dst inside the sandbox by pid 1
 * with move_mount, after the binds.  fd is an fsmount()/open_tree() mount
 * descriptor; the caller keeps it.  dst follows the bind destination rule
 * (sbx_bind_dst_refusal).  Medium and high tiers only; Landlock gives the
 * agent read and write (never execute) beneath it: what it may really do
 * there is decided by the server, per operation. */
struct sbx_mount {
	int fd;
	const char *dst;
};

#define SBX_MOUNTS_MAX		16	/* served trees one sandbox is started with */
#define SBX_SLOTS_MAX		16	/* slots: served trees granted later, writable
					 * by unmodified programs (docs/sandbox.md) */

/* Which object a bind source was when the launcher opened it (0, 0: it
 * could not be opened).  The warm pool compares them: a pooled sandbox
 * shows the objects it was built with, which must still be what the
 * source paths name when it is handed a task. */
struct sbx_src_id {
	dev_t dev;
	ino_t ino;
};

/* The range the stub accepts for each limit (stub_main.c: a value outside
 * it fails the launch, so a launcher mistake is refused rather than
 * applied).  A policy's limits are checked against the same ranges when it
 * is loaded (policy/load.c), so that check-policy refuses what every
 * sandbox start would.  Open files above SBX_NOFILE_MAX are lowered to it
 * by the broker; CPU and wall-clock seconds are bounded tighter by the
 * policy (CB_DURATION_MAX). */
#define SBX_MEM_MIN	(16ULL << 20)
#define SBX_MEM_MAX	(1ULL << 44)
#define SBX_NPROC_MIN	1ULL
#define SBX_NPROC_MAX	(1ULL << 20)
#define SBX_NOFILE_MIN	16ULL
#define SBX_FSIZE_MIN	4096ULL
#define SBX_FSIZE_MAX	(1ULL << 50)
#define SBX_SECS_MAX	(1ULL << 32)
#define SBX_TMP_MIN	(64ULL << 10)
#define SBX_TMP_MAX	(1ULL << 40)

/* Resource limits; 0 means the SBX_DEFAULT_* value. */
struct sbx_limits {
	uint64_t mem_bytes;
	uint64_t nproc;
	uint64_t nofile;
	uint64_t fsize_bytes;
	uint64_t cpu_secs;
	uint64_t wall_secs;
	uint64_t tmp_bytes;
};

struct sbx_config {
	enum sbx_tier tier;
	const char *id;			/* sandbox id: hostname, CAPBROKER_SANDBOX */
	char *const *argv;		/* the agent command, NULL-terminated; argv[0]
					 * is a path inside the sandbox, or a name
					 * looked up in the sandbox's PATH */
	const struct sbx_bind *binds;	/* tier binds plus --ro-bind */
	size_t nbinds;
	const char *const *exec_allow;	/* medium: sandbox paths it may exec */
	size_t nexec_allow;
	const struct sbx_mount *mounts;	/* medium, high: served trees */
	size_t nmounts;
	struct sbx_limits limits;
	int broker_fd;			/* agent's end of the SOCK_SEQPACKET pair,
					 * fd SBX_AGENT_FD inside; -1 for none.
					 * The caller keeps ownership. */
	const char *capcall_path;	/* bound ro at /capbroker/bin/capcall, or NULL */
	const char *pylib_dir;		/* bound ro at /capbroker/python, or NULL */
	bool want_pty;			/* stdio is a pseudo-terminal, /dev/pts exists */
	const char *chdir;		/* absolute path inside where the agent
					 * starts, or NULL (/tmp) */
	const char *const *setenv;	/* NAME, VALUE, NAME, VALUE...: added to the
					 * agent's environment (replacing) */
	size_t nsetenv;			/* pairs, at most SBX_ENV_MAX */
	const char *const *unsetenv;	/* NAMEs removed from it */
	size_t nunsetenv;		/* at most SBX_ENV_MAX */
	const char *hosts_dir;		/* medium/high with mediate_connect, or NULL: a
					 * directory shown read-only at /capbroker/net,
					 * whose file "hosts" is the sandbox's /etc/hosts
					 * (the caller rewrites it by rename) */
	bool mediate_connect;		/* medium/high: the caller serves the agent's
					 * connect() (sbx_proc.notify_fd); without it
					 * connect() fails (ENOSYS) in those tiers */
	struct sbx_src_id *bind_ids;	/* optional, nbinds entries: filled by
					 * sbx_spawn_start with what it opened */
	bool report_exit;		/* report the agent's exit status on status_fd
					 * as soon as it exits (sbx_exit_report), before
					 * the sandbox is torn down */
	bool pool;			/* build everything but the agent and wait for
					 * sbx_pool_handover(); argv is NULL then and id
					 * a placeholder (docs/sandbox.md, "The warm
					 * pool") */
	bool hold;			/* build everything, lock the agent, and let
					 * its exec through only on sbx_go(): the
					 * caller records the sandbox meanwhile.  Not
					 * with pool (its hand-over is its go) */
	bool mount_later;		/* medium/high: after "ready", status_fd stays
					 * the caller's channel for more mounts
					 * (sbx_mount_send) */
	const char *const *fuse_dsts;	/* medium/high: trees pid 1 mounts itself, on a
					 * /dev/fuse it opens inside the sandbox's user
					 * namespace (a caller that is not root cannot
					 * make the mount); each connection comes back
					 * in sbx_proc.fuse_fds, in this order, before
					 * "ready" (docs/sandbox.md).  dst as for mounts */
	size_t nfuse;			/* at most SBX_MOUNTS_MAX */
	/* Slots (with mount_later): empty FUSE mounts made before the agent
	 * starts, so that its Landlock rules can give read and write beneath
	 * each (never execute, below the high tier), attached later at a
	 * granted tree's path (sbx_slot_send).  Landlock fixes its rules when
	 * the agent starts, and a rule on a mount's root binds that mount's
	 * root inode wherever it is attached later (docs/sandbox.md).  A
	 * caller that is root makes them itself (slot_fds: detached mounts,
	 * the caller keeps them); one that is not asks pid 1 to make
	 * fuse_slots of them on its own /dev/fuse, and their connections come
	 * back in sbx_proc.fuse_fds after fuse_dsts' ones.  Not both. */
	const int *slot_fds;
	size_t nslots;			/* at most SBX_SLOTS_MAX */
	size_t fuse_slots;		/* at most SBX_SLOTS_MAX */
};

/* What the sandbox reported about its layers (valid after "ready"). */
struct sbx_report {
	int landlock_abi;		/* 0: the kernel has no Landlock (audit it) */
	bool cgroup;			/* memory and pids cgroup applied */
};

struct sbx_proc {
	pid_t pid;		/* the stub, a child of the caller */
	int pidfd;		/* pidfd of the stub: poll for exit, waitid(P_PIDFD) */
	int stdin_fd;		/* write end of the agent's stdin (or the pty master) */
	int stdout_fd;		/* read end of the agent's stdout (or the pty master) */
	int stderr_fd;		/* read end of the agent's stderr (-1 with a pty) */
	int status_fd;		/* readable once the stub reports ready or failure */
	int notify_fd;		/* after "ready": the agent's seccomp listener, whose
				 * notifications are its connect() calls (medium and
				 * high tiers, with mediate_connect), else -1 */
	struct sbx_report report;
	char cgroup[2][320];	/* cgroup directories to remove when closed */
	int fuse_fds[SBX_MOUNTS_MAX + SBX_SLOTS_MAX];	/* sbx_config.fuse_dsts' and
				 * fuse_slots' connections, once
				 * sbx_spawn_finish has read them (nfuse_got): each
				 * checked to be /dev/fuse, non-blocking; the caller
				 * takes them (sets them -1) or sbx_proc_close closes
				 * them */
	size_t nfuse, nfuse_got;
};

/* Validate cfg and spawn the stub.  Does not wait for the sandbox: poll
 * out->status_fd and call sbx_spawn_finish().  All descriptors in *out are
 * close-on-exec and non-blocking; the caller owns them (sbx_proc_close).
 * Returns 0, CB_EINVAL for a bad configuration, CB_ENOENT if the stub is not
 * found, CB_EIO (errno set) when a system call fails.
 *
 * On failure it never waits: when the failure came after the stub was
 * spawned, the stub has been sent SIGKILL and *out keeps its pid (> 0),
 * its pidfd (or -1) and its cgroups, nothing else: the caller reaps it
 * (waitpid, or the broker's brk_reap_later without blocking its loop),
 * then calls sbx_proc_close.  Otherwise out->pid is -1 and nothing is
 * left open. */
int sbx_spawn_start(const struct sbx_config *cfg, struct sbx_proc *out) CB_WARN_UNUSED;

/* Is argv (NULL-terminated) a command a sandbox can be given: 1 to
 * SBX_ARGV_MAX words of SBX_ARGV_BYTES bytes in all?  0, CB_EINVAL (NULL or
 * empty), CB_ETOOBIG (over either limit).  sbx_spawn_start and
 * sbx_pool_handover check it too; a caller that would spend something (a
 * pooled sandbox) on a command checks it first. */
int sbx_argv_check(char *const argv[]) CB_WARN_UNUSED;

/* Where the stub is: $CAPBROKER_STUB, else capbroker-stub next to the
 * running program, else LIBEXECDIR.  0 with its path in buf, CB_ENOENT (or
 * CB_EINVAL) otherwise; tried (if not NULL) says where it looked. */
int sbx_find_stub(char *buf, size_t len, char *tried, size_t triedlen) CB_WARN_UNUSED;

/* The one-line reason for an sbx_spawn_start() error rc, for people: a
 * missing stub names the paths looked at.  Call it right after the failure
 * (it reads errno). */
void sbx_start_refusal(int rc, char *why, size_t whylen);

/* Read the stub's report from status_fd.  Returns 0 when the agent runs
 * (out->report filled), CB_EBUSY if the report is not complete yet (poll
 * again), or CB_EINTERNAL when the sandbox could not be set up: why then
 * holds the stub's one-line reason and the stub exits with status 125. */
int sbx_spawn_finish(struct sbx_proc *p, char *why, size_t whylen) CB_WARN_UNUSED;

/* A pooled sandbox (started with cfg->pool): read its "pooled" report from
 * status_fd.  0 once it waits for its hand-over (p->report filled),
 * CB_EBUSY if not complete yet, CB_EINTERNAL when it could not be built
 * (why says why). */
int sbx_pool_finish(struct sbx_proc *p, char *why, size_t whylen) CB_WARN_UNUSED;

/* Hand a pooled sandbox (sbx_pool_finish() returned 0) its task: cfg's id,
 * argv, chdir, setenv, unsetenv and the limits nofile, fsize_bytes,
 * cpu_secs and wall_secs (the wall clock starts now).  Everything else is
 * what the sandbox was built with: the caller makes sure cfg's tier,
 * binds, mem_bytes, nproc and tmp_bytes equal those, and that cfg asks for
 * nothing a pooled sandbox never has (a broker channel, a pty, mounts,
 * mediated connects).  Does not block.  Then poll status_fd and call
 * sbx_spawn_finish() as after sbx_spawn_start().  0, CB_EINVAL (cfg),
 * CB_ETOOBIG, CB_EIO (the sandbox is gone: kill and reap it). */
int sbx_pool_handover(struct sbx_proc *p, const struct sbx_config *cfg) CB_WARN_UNUSED;

/* Started with cfg->hold: let the agent start.  Until this is called the
 * sandbox is built (namespaces, mounts, limits, the agent's Landlock and
 * seccomp layers) but no agent code has run, and "ready" does not come;
 * closing status_fd (sbx_proc_close) or sbx_kill instead ends it
 * unstarted.  Call it once, before any sbx_mount_send or sbx_slot_send.
 * Does not block.  0; CB_ECLOSED when the stub is gone already (a set-up
 * failure: its report and exit say why); CB_EIO (errno set) otherwise:
 * kill and reap it. */
int sbx_go(const struct sbx_proc *p) CB_WARN_UNUSED;

/* With cfg->report_exit, after "ready": read the agent's exit report from
 * status_fd.  0 with *status as sbx_wait_status() would give it, CB_EBUSY
 * if it is not there yet, CB_EINTERNAL when the sandbox ended without one
 * (killed, timed out: reap it and use its status instead). */
int sbx_exit_report(struct sbx_proc *p, int *status) CB_WARN_UNUSED;

/* sbx_spawn_start() and sbx_spawn_finish() with a blocking wait between them
 * (for programs without an event loop).  On failure *out is closed. */
int sbx_spawn(const struct sbx_config *cfg, struct sbx_proc *out,
    char *why, size_t whylen) CB_WARN_UNUSED;

/* With sbx_config.mount_later, once the sandbox runs: ask pid 1 to attach
 * the detached mount mnt_fd at dst (the rule of sbx_bind_dst_refusal; its
 * missing directories are made on the sandbox's own root only, never across
 * another mount or through a symlink).  Does not block and does not wait:
 * pid 1 answers later on status_fd, read with sbx_mount_answer().  The
 * caller keeps mnt_fd.  0, CB_EINVAL (bad dst), CB_EBUSY (the socket is
 * full: try later), CB_EIO (errno set). */
int sbx_mount_send(const struct sbx_proc *p, int mnt_fd, const char *dst) CB_WARN_UNUSED;

/* With slots (sbx_config.slot_fds or fuse_slots), once the sandbox runs:
 * ask pid 1 to attach slot number slot (0-based, in the order given) at
 * dst, as sbx_mount_send does a mount.  A slot is attached once; pid 1
 * lets go of it whatever the answer.  Answered as sbx_mount_send.
 * 0, CB_EINVAL, CB_EBUSY, CB_EIO. */
int sbx_slot_send(const struct sbx_proc *p, unsigned slot, const char *dst) CB_WARN_UNUSED;

/* Read one answer of pid 1 to sbx_mount_send or sbx_slot_send (non-blocking).  0 with the
 * destination in dst (dstlen bytes) and *ok saying whether it is attached
 * (if not, why says why, printable); CB_EBUSY when nothing is there yet;
 * CB_ECLOSED once pid 1 is gone (stop reading). */
int sbx_mount_answer(const struct sbx_proc *p, char *dst, size_t dstlen, bool *ok, char *why,
    size_t whylen) CB_WARN_UNUSED;

/* Kill the whole sandbox now.  The caller still reaps the stub (waitid on
 * pidfd).  Returns 0 or CB_EIO. */
int sbx_kill(struct sbx_proc *p);

/* Map the stub's waitpid()/waitid() status to the sandbox's exit code: the
 * agent's exit status, 128+N if the agent (or the stub) died of signal N,
 * 124 on the wall-clock timeout, 125 if setup failed. */
int sbx_wait_status(int wstatus);

/* Close every descriptor of p and remove its cgroups (call it once the stub
 * has been reaped, or the cgroup directories stay).  Accepts a p that
 * sbx_spawn_start() failed on (every descriptor -1), a NULL p, or one that
 * was closed already. */
void sbx_proc_close(struct sbx_proc *p);

/* Grow this process's descriptor table now past the numbers the launcher
 * uses for a start (256 and up).  The kernel waits for an RCU grace period
 * whenever it grows the table of a process with more than one thread
 * (expand_fdtable), 8-20 ms measured on the development VM: left to the
 * first sbx_spawn_start() of a broker, whose audit writer thread runs by
 * then, that wait was the largest single cost of `capbroker run`.  Call it
 * once while the process has one thread (brk_new does).  Best effort. */
void sbx_reserve_fds(void);

/* Remove the empty sandbox cgroups that brokers which died without cleaning
 * up (kill -9, a crash) left beside ours: a cgroup named after a process that
 * no longer exists.  Never touches a live broker's, nor one with a process
 * inside.  Reads our cgroup directories: call it off the start path (the
 * broker does on its first tick). */
void sbx_cgroup_sweep(void);

/* Why dst may not be a bind destination inside a sandbox, or NULL when it
 * may: it must be absolute and canonical (no ".", "..", "//", trailing
 * "/"), not / or /tmp itself, and not under /proc, /dev, /etc or
 * /capbroker.  The one rule: the stub, the launcher, `run --ro-bind` and
 * the policy loader (so check-policy) all ask this function.  The reason
 * is a static string. */
const char *sbx_bind_dst_refusal(const char *dst);

/* Is name an environment variable name the sandbox accepts for setenv and
 * unsetenv: [A-Za-z_][A-Za-z0-9_]*, at most 128 bytes.  One rule for
 * `run --setenv`, the launcher and the stub. */
bool sbx_env_name_ok(const char *name);

/* A short name for a tier ("low", "medium", "high"); NULL if invalid. */
const char *sbx_tier_name(enum sbx_tier t);

/* Parse a tier name; 0 or CB_EINVAL. */
int sbx_tier_parse(const char *s, enum sbx_tier *out) CB_WARN_UNUSED;

#endif
