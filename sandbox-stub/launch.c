/*
 * launch.c - the launcher half of the sandbox: spawn capbroker-stub.
 *
 * Runs in the broker (trusted).  Nothing here blocks for long: it creates
 * pipes (and cgroups when it may), spawns the stub with posix_spawn (a fresh
 * exec: no broker memory reaches the sandbox) and returns.  The stub builds
 * the sandbox and reports on status_fd.  The stub's command line is the
 * configuration; see stub_main.c for how each option is checked again there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/fsuid.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "common/common.h"
#include "sandbox-stub/sandbox.h"
#include "sandbox-stub/stub_int.h"
#include "wire/packet.h"

#ifndef CB_LIBEXECDIR
#define CB_LIBEXECDIR "/usr/local/libexec/capbroker"
#endif
#define STUB_NAME "capbroker-stub"
/* The most words build_args writes besides the command, every list at the
 * maximum check_config lets through: the stub itself, --setup-error,
 * --tier, --id, --parent-pid, --broker-fd, --cgroups, --in-cgroup (13);
 * five per bind, two per --exec-allow; four for each of capcall, pylib and
 * hosts; three per mount; --pty, --notify, --report-exit, --mount-later;
 * two per slot, --fuse-slots N, two per --fuse-at; --chdir DIR; three per
 * --setenv and two per --unsetenv; the seven limits with their values;
 * "--" or --pool.  So the command always has its SBX_ARGV_MAX words,
 * whatever the options (before, the options ate into one shared 1024 and
 * a `run` failed from about 985 words on, depending on its binds). */
#define SBX_OPT_WORDS	(13 + 5 * STUB_MAX_BINDS + 2 * STUB_MAX_EXEC + 4 * 3 + \
	3 * SBX_MOUNTS_MAX + 4 + 2 * SBX_SLOTS_MAX + 2 + 2 * SBX_MOUNTS_MAX + 2 + \
	5 * SBX_ENV_MAX + 2 * 7 + 1)
#define SBX_ARGBUF_WORDS	(SBX_OPT_WORDS + SBX_ARGV_MAX)

static const char *const tier_names[] = { "low", "medium", "high" };

const char *
sbx_tier_name(enum sbx_tier t)
{
	if ((unsigned)t >= sizeof(tier_names) / sizeof(tier_names[0]))
		return NULL;
	return tier_names[t];
}

int
sbx_tier_parse(const char *s, enum sbx_tier *out)
{
	for (size_t i = 0; i < sizeof(tier_names) / sizeof(tier_names[0]); i++) {
		if (strcmp(s, tier_names[i]) == 0) {
			*out = (enum sbx_tier)i;
			return 0;
		}
	}
	return CB_EINVAL;
}

/* The places the sandbox builds itself: a bind there would hide what the
 * stub made (its /etc files, /proc, /dev, capcall) or shadow it with a host
 * tree.  Beneath /tmp is allowed: the private tmpfs is mounted first and
 * the binds are attached on it, their mount points created on the stub's
 * own tmpfs, never in a host directory; /tmp itself stays private. */
static const char *const sbx_reserved[] = { "/proc", "/dev", "/etc", "/capbroker" };

const char *
sbx_bind_dst_refusal(const char *d)
{
	if (d == NULL || d[0] != '/')
		return "not an absolute path";
	if (strlen(d) >= PATH_MAX)
		return "too long";
	if (d[1] == '\0')
		return "/ is the sandbox's own root";
	for (const char *s = d; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		if (s[1] == '/' || s[1] == '\0')
			return "empty component (// or a trailing /)";
		if (s[1] == '.' && (s[2] == '/' || s[2] == '\0'))
			return "a . component";
		if (s[1] == '.' && s[2] == '.' && (s[3] == '/' || s[3] == '\0'))
			return "a .. component";
	}
	for (size_t i = 0; i < sizeof(sbx_reserved) / sizeof(sbx_reserved[0]); i++) {
		size_t n = strlen(sbx_reserved[i]);

		if (strncmp(d, sbx_reserved[i], n) == 0 && (d[n] == '\0' || d[n] == '/'))
			return strcmp(sbx_reserved[i], "/etc") == 0 ?
			    "the sandbox builds its own /etc (bind a host tree elsewhere, "
			    "e.g. SRC:/host/etc; /etc/ssl/certs is always there)" :
			    "the sandbox builds /proc, /dev and /capbroker itself";
	}
	if (strcmp(d, "/tmp") == 0)
		return "/tmp is the sandbox's private tmpfs (paths beneath it are allowed)";
	return NULL;
}

bool
sbx_env_name_ok(const char *n)
{
	size_t len;

	if (n == NULL || !((*n >= 'A' && *n <= 'Z') || (*n >= 'a' && *n <= 'z') || *n == '_'))
		return false;
	len = strspn(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
	return n[len] == '\0' && len <= 128;
}

int
sbx_wait_status(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return SBX_EXIT_SETUP;
}

/* $CAPBROKER_STUB, else next to our own executable (the build tree and
 * bin/), else the install location. */
int
sbx_find_stub(char *buf, size_t len, char *tried, size_t triedlen)
{
	const char *env = secure_getenv("CAPBROKER_STUB");
	char self[PATH_MAX];
	ssize_t n;
	char *slash;

	if (tried != NULL && triedlen > 0)
		tried[0] = '\0';
	if (env != NULL && env[0] != '\0') {
		if (tried != NULL)
			snprintf(tried, triedlen, "%s (from $CAPBROKER_STUB)", env);
		if (env[0] != '/' || snprintf(buf, len, "%s", env) >= (int)len)
			return CB_EINVAL;
		return access(buf, X_OK) == 0 ? 0 : CB_ENOENT;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash != NULL) {
			*slash = '\0';
			if (snprintf(buf, len, "%s/%s", self, STUB_NAME) < (int)len &&
			    access(buf, X_OK) == 0)
				return 0;
			if (tried != NULL)
				snprintf(tried, triedlen, "%s/%s and ", self, STUB_NAME);
		}
	}
	if (snprintf(buf, len, "%s/%s", CB_LIBEXECDIR, STUB_NAME) >= (int)len)
		return CB_EINVAL;
	if (tried != NULL) {
		size_t o = strlen(tried);

		snprintf(tried + o, triedlen - o, "%s", buf);
	}
	return access(buf, X_OK) == 0 ? 0 : CB_ENOENT;
}

/* ---------------------------------------------------------------- cgroups */

static int
write_str(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX];
	int fd, rc = 0;
	size_t n = strlen(val);

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd == -1)
		return CB_EIO;
	if (write(fd, val, n) != (ssize_t)n)
		rc = CB_EIO;
	close(fd);
	return rc;
}

/* Remove a sandbox's cgroup directory once its processes are reaped.  The
 * kernel unlinks a dead task from its cgroup only after the task's last
 * switch out, which can come after its parent was told it exited: for that
 * moment rmdir says EBUSY although everything inside has been reaped.  So
 * EBUSY is retried, briefly (SBX_CG_RMDIR_TRIES x SBX_CG_RMDIR_WAIT_NS at
 * most, measured at one or two retries on a loaded 2-core machine); any other
 * error is final.  Called after reaping, so the only process that could still
 * be inside is one on its way out. */
#define SBX_CG_RMDIR_TRIES	200
#define SBX_CG_RMDIR_WAIT_NS	50000L
static int
cgroup_rmdir(const char *dir)
{
	for (int i = 0; i < SBX_CG_RMDIR_TRIES; i++) {
		if (rmdir(dir) == 0 || errno == ENOENT) {
			return 0;
		}
		if (errno != EBUSY)
			return CB_EIO;
		nanosleep(&(struct timespec){ .tv_nsec = SBX_CG_RMDIR_WAIT_NS }, NULL);
	}
	return CB_EBUSY;
}

/* Our own cgroup path for a v1 controller ("4:memory:/a/b"), or "" for v2
 * ("0::/a/b" when ctrl is NULL). */
static int
own_cgroup(const char *ctrl, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "re");
	int rc = CB_ENOENT;

	if (f == NULL)
		return CB_EIO;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *a = strchr(line, ':'), *b;

		if (a == NULL || (b = strchr(a + 1, ':')) == NULL)
			continue;
		*b = '\0';
		b[strcspn(b + 1, "\n") + 1] = '\0';
		if ((ctrl == NULL && a[1] == '\0') ||
		    (ctrl != NULL && strcmp(a + 1, ctrl) == 0)) {
			snprintf(out, len, "%s", strcmp(b + 1, "/") == 0 ? "" : b + 1);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* Where the sandboxes' cgroups go, found once per process: the broker's own
 * cgroup does not move under it, and reading /proc/self/cgroup and probing
 * the hierarchy on every start was measurable (docs/performance.md). */
struct cg_host {
	bool v2;			/* unified hierarchy at /sys/fs/cgroup */
	bool ok;			/* the paths below were found */
	bool clone_into;		/* v2 and the kernel has CLONE_INTO_CGROUP */
	char parent[2][240];		/* v2: [0]; v1: memory, pids */
	unsigned long long start;	/* our start time (clock ticks since boot) */
};
static struct cg_host cg_host;
static pthread_once_t cg_host_once = PTHREAD_ONCE_INIT;

/* Field 22 of /proc/PID/stat, the process's start time: with the pid it
 * names one process for good (a pid is reused, the pair is not).  0 when the
 * process is gone. */
static unsigned long long
proc_start_time(const char *pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command name (field 2) may hold anything: count from its end. */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
	    "%*d %*d %llu", &t) != 1)
		return 0;
	return t;
}

static void
cg_host_find(void)
{
	static const char *const ctrl[] = { "memory", "pids" };
	char own[200];

	cg_host.start = proc_start_time("self");
	cg_host.v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
	for (int i = 0; i < (cg_host.v2 ? 1 : 2); i++) {
		if (own_cgroup(cg_host.v2 ? NULL : ctrl[i], own, sizeof(own)) != 0 ||
		    snprintf(cg_host.parent[i], sizeof(cg_host.parent[i]), "/sys/fs/cgroup%s%s%s",
		    cg_host.v2 ? "" : "/", cg_host.v2 ? "" : ctrl[i], own) >=
		    (int)sizeof(cg_host.parent[i]))
			return;
	}
	cg_host.ok = cg_host.start != 0;
	if (cg_host.v2) {
		/* A probe that starts nothing: a descriptor that is no cgroup is
		 * EBADF where the flag is known, EINVAL/E2BIG/ENOSYS where not. */
		struct clone_args ca = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD };
		int fd = open("/", O_PATH | O_CLOEXEC);

		ca.cgroup = (uint64_t)fd;
		cg_host.clone_into = fd >= 0 && syscall(SYS_clone3, &ca, sizeof(ca)) == -1 &&
		    errno == EBADF;
		if (fd >= 0)
			close(fd);
	}
}

/* Create a cgroup for the sandbox with memory and pids limits, and open what
 * the stub writes to join it.  Best effort: only where the broker may (root
 * with v1 controllers, or a delegated v2 subtree); the stub says in its
 * "ready" line whether it joined, and the broker audits it.
 *
 * The name, capbroker.PID.START.N, is ours alone even after our pid is
 * reused, so sbx_cgroup_sweep() can tell a dead broker's leftovers.
 *
 * v1: the stub joins through the controllers' "tasks" file, not
 * "cgroup.procs".  Both move the writer; "cgroup.procs" moves its whole
 * thread group and so takes the kernel's global threadgroup lock for
 * writing, which waits for an RCU grace period (3-17 ms measured here, more
 * than all the rest of a start), while a thread moving only itself skips it.
 * Why this is safe: the stub is single-threaded (a fresh exec that starts no
 * thread, stub_main.c), so moving its one thread moves the process, and every
 * process of the sandbox is forked from it afterwards.
 *
 * v2: a move into a cgroup ("cgroup.procs"; "cgroup.threads" is for threaded
 * cgroups only) pays that grace period too, so where the kernel has
 * CLONE_INTO_CGROUP the stub is not moved at all but created inside
 * (stub_spawn_into, *cgdir the directory; 0.14-0.22 ms against 5.6-20 ms
 * for the write, measured on this host's unified hierarchy). */
static int
make_cgroups(const struct sbx_config *cfg, struct sbx_proc *p, int fds[STUB_MAX_CGROUPS],
    int *cgdir)
{
	static unsigned seq;
	const struct sbx_limits *l = &cfg->limits;
	char val[32], name[80];
	/* The cgroup holds the sandbox's processes and its /tmp (tmpfs pages
	 * are charged to it), plus slack for the kernel's own per-process use. */
	uint64_t mem = (l->mem_bytes ? l->mem_bytes : SBX_DEFAULT_MEM_BYTES) +
	    (l->tmp_bytes ? l->tmp_bytes : SBX_DEFAULT_TMP_BYTES) + (64ULL << 20);
	uint64_t nproc = l->nproc ? l->nproc : SBX_DEFAULT_NPROC;
	int n = 0;

	if (pthread_once(&cg_host_once, cg_host_find) != 0 || !cg_host.ok)
		return 0;
	/* Atomic: the broker's pool thread spawns beside its loop. */
	snprintf(name, sizeof(name), "capbroker.%d.%llu.%u", (int)getpid(), cg_host.start,
	    __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
	if (cg_host.v2) {
		/* Unified hierarchy: one directory with both controllers. */
		if (snprintf(p->cgroup[0], sizeof(p->cgroup[0]), "%s/%s", cg_host.parent[0],
		    name) >= (int)sizeof(p->cgroup[0]) || mkdir(p->cgroup[0], 0755) == -1) {
			p->cgroup[0][0] = '\0';
			return 0;
		}
		snprintf(val, sizeof(val), "%" PRIu64, mem);
		if (write_str(p->cgroup[0], "memory.max", val) != 0 ||
		    write_str(p->cgroup[0], "memory.swap.max", "0") != 0)
			goto fail;
		snprintf(val, sizeof(val), "%" PRIu64, nproc);
		if (write_str(p->cgroup[0], "pids.max", val) != 0)
			goto fail;
		if (cg_host.clone_into) {
			if ((*cgdir = open(p->cgroup[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
				goto fail;
			return 0;
		}
		n = 1;
	} else {
		for (int i = 0; i < 2; i++) {
			if (snprintf(p->cgroup[i], sizeof(p->cgroup[i]), "%s/%s", cg_host.parent[i],
			    name) >= (int)sizeof(p->cgroup[i]) || mkdir(p->cgroup[i], 0755) == -1) {
				p->cgroup[i][0] = '\0';
				goto fail;
			}
		}
		snprintf(val, sizeof(val), "%" PRIu64, mem);
		if (write_str(p->cgroup[0], "memory.limit_in_bytes", val) != 0)
			goto fail;
		/* Where swap is accounted, cap memory+swap too (else ignore). */
		(void)write_str(p->cgroup[0], "memory.memsw.limit_in_bytes", val);
		snprintf(val, sizeof(val), "%" PRIu64, nproc);
		if (write_str(p->cgroup[1], "pids.max", val) != 0)
			goto fail;
		n = 2;
	}
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", p->cgroup[i],
		    cg_host.v2 ? "cgroup.procs" : "tasks");
		fds[i] = open(path, O_WRONLY | O_CLOEXEC);
		if (fds[i] == -1) {
			for (int j = 0; j < i; j++)
				close(fds[j]);
			goto fail;
		}
	}
	return n;
fail:
	for (int i = 0; i < 2; i++) {
		if (p->cgroup[i][0] != '\0')
			(void)rmdir(p->cgroup[i]);
		p->cgroup[i][0] = '\0';
	}
	return 0;
}

/* The owner named by a sandbox cgroup's name ("capbroker.PID.START.N", or
 * "capbroker.PID.N" before START was added) is gone for good. */
static bool
cgroup_owner_dead(const char *name)
{
	char pid[16], path[32];
	const char *p = name + strlen("capbroker."), *dot = strchr(p, '.');
	unsigned long long start;
	char *end;

	if (dot == NULL || dot == p || (size_t)(dot - p) >= sizeof(pid) ||
	    strspn(p, "0123456789") != (size_t)(dot - p))
		return false;
	memcpy(pid, p, (size_t)(dot - p));
	pid[dot - p] = '\0';
	if (strchr(dot + 1, '.') == NULL) {	/* old name: only a dead pid is sure */
		snprintf(path, sizeof(path), "/proc/%s", pid);
		return access(path, F_OK) != 0;
	}
	errno = 0;
	start = strtoull(dot + 1, &end, 10);
	if (errno != 0 || *end != '.')
		return false;
	return proc_start_time(pid) != start;
}

void
sbx_cgroup_sweep(void)
{
	if (pthread_once(&cg_host_once, cg_host_find) != 0 || !cg_host.ok)
		return;
	for (int i = 0; i < (cg_host.v2 ? 1 : 2); i++) {
		DIR *d = opendir(cg_host.parent[i]);
		struct dirent *e;

		if (d == NULL)
			continue;
		while ((e = readdir(d)) != NULL) {
			char path[PATH_MAX];

			if (e->d_type != DT_DIR || strncmp(e->d_name, "capbroker.", 10) != 0 ||
			    !cgroup_owner_dead(e->d_name))
				continue;
			/* Why this is safe: a cgroup with a process inside is not
			 * removed (EBUSY); an empty one of a dead broker has nothing
			 * left to hold. */
			if (snprintf(path, sizeof(path), "%s/%s", cg_host.parent[i], e->d_name) <
			    (int)sizeof(path))
				(void)rmdir(path);
		}
		closedir(d);
	}
}

/* ------------------------------------------------------------------ spawn */

/* Bind sources, opened here (in the broker, with its credentials) through
 * the one resolver: binds first, then capcall, then the Python client. */
#define SBX_SRC_MAX (STUB_MAX_BINDS + 3)
struct srcfds {
	int dirfd, fd;		/* O_PATH; the same for a directory */
	char name[NAME_MAX + 1];	/* "." for a directory */
	char num[2][16];	/* the descriptor numbers the stub sees */
};

struct argbuf {
	char *argv[SBX_ARGBUF_WORDS + 1];
	size_t n;
	/* --parent-pid, --cgroups, --fuse-slots and the seven limits, and
	 * one per mount and per slot: every number build_args writes. */
	char nums[10 + SBX_MOUNTS_MAX + SBX_SLOTS_MAX][32];
	size_t nnums;
	struct srcfds src[SBX_SRC_MAX];
	size_t nsrc;
	char err[600];		/* a source could not be opened: the stub says this */
};

/* Open the bind source path (absolute, canonical: no symlink is followed
 * anywhere, so a caller that means a symlink's target resolves it first).
 * A directory is passed as itself; a file as its parent plus its name, since
 * a mount can only be cloned from a directory the stub stands in (see
 * stub_mount.c), and the stub checks the clone is the inode opened here. */
static int
open_source(const char *path, struct srcfds *s)
{
	char parent[PATH_MAX];
	const char *base;
	struct stat st;
	int fd, e;

	s->dirfd = s->fd = -1;
	if ((fd = cb_open_abs(path, O_PATH)) < 0 || fstat(fd, &st) != 0)
		goto fail;
	if (S_ISDIR(st.st_mode)) {
		s->dirfd = s->fd = fd;
		snprintf(s->name, sizeof(s->name), ".");
		return 0;
	}
	close(fd);
	fd = -1;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		goto fail;
	}
	base = strrchr(path, '/') + 1;
	if (snprintf(parent, sizeof(parent), "%.*s", (int)(base - path), path) >= (int)sizeof(parent) ||
	    snprintf(s->name, sizeof(s->name), "%s", base) >= (int)sizeof(s->name)) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	if ((s->dirfd = cb_open_abs(parent, O_PATH | O_DIRECTORY)) < 0 ||
	    (s->fd = cb_openat2(s->dirfd, s->name, O_PATH, 0)) < 0 ||
	    fstat(s->fd, &st) != 0)
		goto fail;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		goto fail;
	}
	return 0;
fail:
	e = errno;
	if (fd >= 0)
		close(fd);
	if (s->fd >= 0 && s->fd != s->dirfd)
		close(s->fd);
	if (s->dirfd >= 0)
		close(s->dirfd);
	s->dirfd = s->fd = -1;
	errno = e;
	return CB_EIO;
}

/* open_source with the file-system identity b asks for (as_caller), on this
 * thread only (setfsuid, setfsgid and the raw setgroups system call are
 * per thread), back to ours at once.  As not root: our own identity. */
static int
open_source_as(const struct sbx_bind *b, const char *path, struct srcfds *s)
{
	gid_t groups[64];
	int ngroups, r, e;

	if (b == NULL || !b->as_caller || geteuid() != 0)
		return open_source(path, s);
	if ((ngroups = getgroups(64, groups)) < 0 || syscall(SYS_setgroups, (size_t)0, NULL) != 0) {
		errno = EPERM;
		return CB_EPERM;
	}
	(void)setfsgid(b->as_gid);
	(void)setfsuid(b->as_uid);
	if ((uid_t)setfsuid((uid_t)-1) != b->as_uid || (gid_t)setfsgid((gid_t)-1) != b->as_gid) {
		r = CB_EPERM;
		e = EPERM;
	} else if ((r = open_source(path, s)) != 0) {
		e = errno;
	} else if (faccessat(s->fd, "", R_OK | (s->fd == s->dirfd ? X_OK : 0),
	    AT_EMPTY_PATH | AT_EACCESS) != 0) {
		/* O_PATH checks no permission on the object itself: the caller
		 * must be able to read it (and search it, for a directory). */
		e = errno;
		r = CB_EPERM;
		if (s->fd != s->dirfd)
			close(s->fd);
		close(s->dirfd);
		s->fd = s->dirfd = -1;
	} else {
		e = 0;
	}
	(void)setfsuid(geteuid());
	(void)setfsgid(getegid());
	(void)syscall(SYS_setgroups, (size_t)ngroups, groups);
	errno = e;
	return r;
}

static void
close_sources(struct argbuf *a)
{
	for (size_t i = 0; i < a->nsrc; i++) {
		if (a->src[i].fd >= 0 && a->src[i].fd != a->src[i].dirfd)
			close(a->src[i].fd);
		if (a->src[i].dirfd >= 0)
			close(a->src[i].dirfd);
	}
	a->nsrc = 0;
}

/* Open every source; on the first failure none is passed and the stub is
 * told why instead (so the failure is reported like every setup failure). */
static void
open_sources(const struct sbx_config *cfg, struct argbuf *a)
{
	const char *paths[SBX_SRC_MAX];
	size_t n = 0;

	for (size_t i = 0; i < cfg->nbinds; i++)
		paths[n++] = cfg->binds[i].src;
	if (cfg->capcall_path != NULL)
		paths[n++] = cfg->capcall_path;
	if (cfg->pylib_dir != NULL)
		paths[n++] = cfg->pylib_dir;
	if (cfg->hosts_dir != NULL && cfg->tier != SBX_TIER_LOW)
		paths[n++] = cfg->hosts_dir;
	a->nsrc = 0;
	a->err[0] = '\0';
	for (size_t i = 0; cfg->bind_ids != NULL && i < cfg->nbinds; i++)
		cfg->bind_ids[i] = (struct sbx_src_id){ 0, 0 };
	for (size_t i = 0; i < n; i++) {
		if (open_source_as(i < cfg->nbinds ? &cfg->binds[i] : NULL, paths[i], &a->src[i]) != 0) {
			snprintf(a->err, sizeof(a->err), "bind source %.400s: %s", paths[i],
			    errno == EINVAL ? "not a file or directory" : errno == EACCES ?
			    "Permission denied (or on a kernel file system)" : errno == ELOOP ?
			    "a symlink on the way (give its target)" : strerror(errno));
			close_sources(a);
			return;
		}
		if (cfg->bind_ids != NULL && i < cfg->nbinds) {
			struct stat st;

			if (fstat(a->src[i].fd, &st) == 0)
				cfg->bind_ids[i] = (struct sbx_src_id){ st.st_dev, st.st_ino };
		}
		a->nsrc++;
	}
}

static int
arg(struct argbuf *a, const char *s)
{
	if (a->n >= SBX_ARGBUF_WORDS)
		return CB_ETOOBIG;
	a->argv[a->n++] = (char *)s;
	a->argv[a->n] = NULL;
	return 0;
}

static int
arg_num(struct argbuf *a, const char *opt, uint64_t v)
{
	if (v == 0)
		return 0;
	if (a->nnums == sizeof(a->nums) / sizeof(a->nums[0]))
		return CB_ETOOBIG;
	snprintf(a->nums[a->nnums], sizeof(a->nums[0]), "%" PRIu64, v);
	if (arg(a, opt) != 0)
		return CB_ETOOBIG;
	return arg(a, a->nums[a->nnums++]);
}

int
sbx_argv_check(char *const argv[])
{
	size_t n, bytes = 0;

	if (argv == NULL || argv[0] == NULL || argv[0][0] == '\0')
		return CB_EINVAL;
	for (n = 0; argv[n] != NULL; n++) {
		if (n == SBX_ARGV_MAX)
			return CB_ETOOBIG;
		bytes += strnlen(argv[n], SBX_ARGV_BYTES) + 1;
		if (bytes > SBX_ARGV_BYTES)
			return CB_ETOOBIG;
	}
	return 0;
}

static int
check_config(const struct sbx_config *cfg)
{
	int rc;

	if (cfg == NULL || sbx_tier_name(cfg->tier) == NULL || cfg->id == NULL)
		return CB_EINVAL;
	/* A pooled sandbox gets its command at hand-over, never before. */
	if (cfg->pool ? cfg->argv != NULL || cfg->hold : (rc = sbx_argv_check(cfg->argv)) != 0)
		return cfg->pool ? CB_EINVAL : rc;
	if (strlen(cfg->id) > SBX_ID_MAX || cfg->id[0] == '\0' ||
	    strspn(cfg->id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789._-") != strlen(cfg->id))
		return CB_EINVAL;
	if (cfg->nbinds > STUB_MAX_BINDS || cfg->nexec_allow > STUB_MAX_EXEC)
		return CB_ETOOBIG;
	if ((cfg->nbinds != 0 && cfg->binds == NULL) ||
	    (cfg->nexec_allow != 0 && cfg->exec_allow == NULL))
		return CB_EINVAL;
	for (size_t i = 0; i < cfg->nbinds; i++) {
		const struct sbx_bind *b = &cfg->binds[i];

		if (b->src == NULL || b->src[0] != '/' || sbx_bind_dst_refusal(b->dst) != NULL)
			return CB_EINVAL;
		if (b->writable && cfg->tier != SBX_TIER_HIGH)
			return CB_EPERM;
	}
	for (size_t i = 0; i < cfg->nexec_allow; i++) {
		if (cfg->exec_allow[i] == NULL || cfg->exec_allow[i][0] != '/')
			return CB_EINVAL;
	}
	if (cfg->nmounts > SBX_MOUNTS_MAX || (cfg->nmounts != 0 && cfg->mounts == NULL))
		return CB_EINVAL;
	for (size_t i = 0; i < cfg->nmounts; i++) {
		if (cfg->mounts[i].fd < 0 || sbx_bind_dst_refusal(cfg->mounts[i].dst) != NULL)
			return CB_EINVAL;
		if (cfg->tier == SBX_TIER_LOW)
			return CB_EPERM;
	}
	if (cfg->mount_later && cfg->tier == SBX_TIER_LOW)
		return CB_EPERM;
	if (cfg->nfuse > SBX_MOUNTS_MAX || (cfg->nfuse != 0 && cfg->fuse_dsts == NULL))
		return CB_EINVAL;
	for (size_t i = 0; i < cfg->nfuse; i++) {
		if (sbx_bind_dst_refusal(cfg->fuse_dsts[i]) != NULL)
			return CB_EINVAL;
		if (cfg->tier == SBX_TIER_LOW)
			return CB_EPERM;
	}
	if (cfg->nslots > SBX_SLOTS_MAX || cfg->fuse_slots > SBX_SLOTS_MAX ||
	    (cfg->nslots != 0 && cfg->slot_fds == NULL) || (cfg->nslots && cfg->fuse_slots))
		return CB_EINVAL;
	for (size_t i = 0; i < cfg->nslots; i++)
		if (cfg->slot_fds[i] < 0)
			return CB_EINVAL;
	if ((cfg->nslots || cfg->fuse_slots) && (cfg->tier == SBX_TIER_LOW || !cfg->mount_later))
		return CB_EPERM;
	if (cfg->nsetenv > SBX_ENV_MAX || cfg->nunsetenv > SBX_ENV_MAX)
		return CB_ETOOBIG;
	for (size_t i = 0; i < cfg->nsetenv; i++) {
		if (!sbx_env_name_ok(cfg->setenv[2 * i]) || cfg->setenv[2 * i + 1] == NULL)
			return CB_EINVAL;
	}
	for (size_t i = 0; i < cfg->nunsetenv; i++) {
		if (!sbx_env_name_ok(cfg->unsetenv[i]))
			return CB_EINVAL;
	}
	if (cfg->chdir != NULL && (cfg->chdir[0] != '/' || strlen(cfg->chdir) >= PATH_MAX))
		return CB_EINVAL;
	if (cfg->limits.nofile > SBX_NOFILE_MAX)
		return CB_EINVAL;
	if (cfg->broker_fd < -1)
		return CB_EINVAL;
	return 0;
}

/* "--OPT DIRFD FD NAME" for source i, which the stub sees at fd0, fd0 + 1. */
static int
arg_src(struct argbuf *a, const char *opt, size_t i, int fd0)
{
	struct srcfds *s = &a->src[i];
	int rc = 0;

	snprintf(s->num[0], sizeof(s->num[0]), "%d", fd0);
	snprintf(s->num[1], sizeof(s->num[1]), "%d", fd0 + 1);
	rc |= arg(a, opt);
	rc |= arg(a, s->num[0]);
	rc |= arg(a, s->num[1]);
	rc |= arg(a, s->name);
	return rc;
}

static int
build_args(const struct sbx_config *cfg, const char *stub, int ncg, bool in_cgroup,
    struct argbuf *a)
{
	const struct sbx_limits *l = &cfg->limits;
	int fd0 = STUB_FD_CGROUP0 + ncg;
	size_t i, k = 0;
	int rc = 0;

	a->n = a->nnums = 0;
	rc |= arg(a, stub);
	if (a->err[0] != '\0') {
		rc |= arg(a, "--setup-error");
		rc |= arg(a, a->err);
	}
	rc |= arg(a, "--tier");
	rc |= arg(a, sbx_tier_name(cfg->tier));
	rc |= arg(a, "--id");
	rc |= arg(a, cfg->id);
	rc |= arg_num(a, "--parent-pid", (uint64_t)getpid());
	if (cfg->broker_fd >= 0)
		rc |= arg(a, "--broker-fd");
	rc |= arg_num(a, "--cgroups", (uint64_t)ncg);
	if (in_cgroup)
		rc |= arg(a, "--in-cgroup");
	for (i = 0; i < cfg->nbinds && k < a->nsrc; i++, k++) {
		rc |= arg_src(a, cfg->binds[i].writable ? "--bind-fd" : "--ro-bind-fd", k,
		    fd0 + 2 * (int)k);
		rc |= arg(a, cfg->binds[i].dst);
	}
	for (i = 0; i < cfg->nexec_allow; i++) {
		rc |= arg(a, "--exec-allow");
		rc |= arg(a, cfg->exec_allow[i]);
	}
	if (cfg->capcall_path != NULL && k < a->nsrc) {
		rc |= arg_src(a, "--capcall-fd", k, fd0 + 2 * (int)k);
		k++;
	}
	if (cfg->pylib_dir != NULL && k < a->nsrc) {
		rc |= arg_src(a, "--pylib-fd", k, fd0 + 2 * (int)k);
		k++;
	}
	if (cfg->hosts_dir != NULL && cfg->tier != SBX_TIER_LOW && k < a->nsrc)
		rc |= arg_src(a, "--hosts-fd", k, fd0 + 2 * (int)k);
	/* The mounts' descriptors follow the sources' (sbx_spawn_start). */
	for (i = 0; i < cfg->nmounts && a->err[0] == '\0'; i++) {
		rc |= arg_num(a, "--mount-fd", (uint64_t)(fd0 + 2 * (int)a->nsrc + (int)i));
		rc |= arg(a, cfg->mounts[i].dst);
	}
	if (cfg->want_pty)
		rc |= arg(a, "--pty");
	if (cfg->mediate_connect && cfg->tier != SBX_TIER_LOW)
		rc |= arg(a, "--notify");
	if (cfg->report_exit)
		rc |= arg(a, "--report-exit");
	if (cfg->hold)
		rc |= arg(a, "--hold");
	if (cfg->mount_later)
		rc |= arg(a, "--mount-later");
	/* The slots' descriptors follow the mounts' (sbx_spawn_start). */
	for (i = 0; i < cfg->nslots && a->err[0] == '\0'; i++)
		rc |= arg_num(a, "--slot-fd", (uint64_t)(fd0 + 2 * (int)a->nsrc +
		    (int)cfg->nmounts + (int)i));
	if (cfg->fuse_slots)
		rc |= arg_num(a, "--fuse-slots", (uint64_t)cfg->fuse_slots);
	for (i = 0; i < cfg->nfuse; i++) {
		rc |= arg(a, "--fuse-at");
		rc |= arg(a, cfg->fuse_dsts[i]);
	}
	if (cfg->chdir != NULL) {
		rc |= arg(a, "--chdir");
		rc |= arg(a, cfg->chdir);
	}
	for (i = 0; i < cfg->nsetenv; i++) {
		rc |= arg(a, "--setenv");
		rc |= arg(a, cfg->setenv[2 * i]);
		rc |= arg(a, cfg->setenv[2 * i + 1]);
	}
	for (i = 0; i < cfg->nunsetenv; i++) {
		rc |= arg(a, "--unsetenv");
		rc |= arg(a, cfg->unsetenv[i]);
	}
	rc |= arg_num(a, "--mem", l->mem_bytes);
	rc |= arg_num(a, "--nproc", l->nproc);
	rc |= arg_num(a, "--nofile", l->nofile);
	rc |= arg_num(a, "--fsize", l->fsize_bytes);
	rc |= arg_num(a, "--cpu", l->cpu_secs);
	rc |= arg_num(a, "--timeout", l->wall_secs);
	rc |= arg_num(a, "--tmp-size", l->tmp_bytes);
	if (cfg->pool)
		return arg(a, "--pool") != 0 || rc != 0 ? CB_ETOOBIG : 0;
	rc |= arg(a, "--");
	for (i = 0; cfg->argv[i] != NULL; i++)
		rc |= arg(a, cfg->argv[i]);
	return rc != 0 ? CB_ETOOBIG : 0;
}

/* A copy of fd at 256 or above, so the dup2 actions of the spawn (onto 0..6
 * and the bind sources and mounts after them, at most 5 + 2 + 2 * SBX_SRC_MAX +
 * SBX_MOUNTS_MAX) can never
 * overwrite a source that has not been duplicated yet. */
#define SBX_HIGH_FD 256
static int
high_dup(int fd)
{
	return fcntl(fd, F_DUPFD_CLOEXEC, SBX_HIGH_FD);
}

/* Table sizes are powers of two: the first size that holds SBX_HIGH_FD and
 * the descriptors after it, twice over for a broker's own. */
#define SBX_FD_RESERVE 1023
void
sbx_reserve_fds(void)
{
	int fd = open("/", O_PATH | O_CLOEXEC), hi = -1;

	if (fd == -1)
		return;
	for (int n = SBX_FD_RESERVE; hi == -1 && n > SBX_HIGH_FD; n = n / 2)
		hi = fcntl(fd, F_DUPFD_CLOEXEC, n);
	if (hi != -1)
		close(hi);
	close(fd);
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int
open_pty(int *master, int *slave)
{
	char name[64];

	*master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master == -1)
		return CB_EIO;
	if (grantpt(*master) == -1 || unlockpt(*master) == -1 ||
	    ptsname_r(*master, name, sizeof(name)) != 0)
		return CB_EIO;
	*slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	return *slave == -1 ? CB_EIO : 0;
}

/* The stub's environment: empty (it builds the agent's from scratch). */
static char *const empty_env[] = { NULL };

/* Start the stub with src[i] as its descriptor i (nsrc of them) and
 * nothing else of ours open, every signal unblocked and at its default, in
 * a session of its own, with an empty environment (the stub builds the
 * agent's from scratch).  0 or CB_EIO (errno says why). */
static int
spawn_stub(const char *stub, const int *src, int nsrc, char *const argv[], pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	bool fa_ok = false, attr_ok = false;
	sigset_t mask;
	int rc = CB_EIO;

	if (posix_spawn_file_actions_init(&fa) != 0)
		goto out;
	fa_ok = true;
	for (int i = 0; i < nsrc; i++) {
		if (src[i] != -1 && posix_spawn_file_actions_adddup2(&fa, src[i], i) != 0)
			goto out;
	}
	/* Whatever else the broker has open stays out of the sandbox. */
	if (posix_spawn_file_actions_addclosefrom_np(&fa, nsrc) != 0)
		goto out;
	if (posix_spawnattr_init(&attr) != 0)
		goto out;
	attr_ok = true;
	sigemptyset(&mask);
	if (posix_spawnattr_setsigmask(&attr, &mask) != 0)
		goto out;
	sigfillset(&mask);
	if (posix_spawnattr_setsigdefault(&attr, &mask) != 0 ||
	    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
	    POSIX_SPAWN_SETSID) != 0)
		goto out;
	if ((errno = posix_spawn(pid, stub, &fa, &attr, argv, empty_env)) != 0) {
		*pid = -1;
		goto out;
	}
	rc = 0;
out:
	if (fa_ok)
		posix_spawn_file_actions_destroy(&fa);
	if (attr_ok)
		posix_spawnattr_destroy(&attr);
	return rc;
}

/* The child of stub_spawn_into, between clone3 and exec: a copy of the
 * broker (no shared memory), so only async-signal-safe calls.  Every
 * source is at 256 or above (high_dup), so no dup2 overwrites one not yet
 * copied. */
static void __attribute__((noreturn))
spawn_child(const char *path, const int *src, int nsrc, char *const argv[], char *const envp[])
{
	/* The kernel's own struct: libc's sigaction() refuses its internal
	 * signals (32, 33), which a parent may have left ignored, and an
	 * ignored signal stays ignored across exec (posix_spawn's
	 * POSIX_SPAWN_SETSIGDEF resets them too). */
	struct { void *handler; unsigned long flags; void *restorer; uint64_t mask; } dfl = {
		.handler = SIG_DFL };
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		(void)syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));	/* KILL, STOP: EINVAL */
	if (setsid() == -1)
		_exit(127);
	for (int i = 0; i < nsrc; i++) {
		if (src[i] == -1)
			(void)close(i);
		else if (dup2(src[i], i) == -1)
			_exit(127);
	}
	if (close_range((unsigned)nsrc, ~0U, 0) == -1)
		_exit(127);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	execve(path, argv, envp);
	_exit(127);
}

int
stub_spawn_into(const char *path, const int *src, int nsrc, char *const argv[],
    char *const envp[], int cgdir, pid_t *pid)
{
	/* CLONE_VFORK: we go on once the child has exec'd (or died), as with
	 * posix_spawn; without CLONE_VM the child has its own copy to run on. */
	struct clone_args ca = { .flags = CLONE_INTO_CGROUP | CLONE_VFORK,
		.exit_signal = SIGCHLD, .cgroup = (uint64_t)cgdir };
	sigset_t all, old;
	long r;
	int err;

	*pid = -1;
	if (cgdir < 0) {
		errno = EBADF;
		return CB_EIO;
	}
	/* No handler of ours may run in the child before it resets them. */
	sigfillset(&all);
	if (pthread_sigmask(SIG_BLOCK, &all, &old) != 0)
		return CB_EIO;
	r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r == 0)
		spawn_child(path, src, nsrc, argv, envp);
	err = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r == -1) {
		errno = err;
		return CB_EIO;
	}
	*pid = (pid_t)r;
	return 0;
}

/* A pidfd for the stub.  One we cannot supervise is not left running: the
 * caller's failure path kills it (give_up), and leaves its pid to be
 * reaped. */
static int
watch_pid(struct sbx_proc *out)
{
	out->pidfd = pidfd_open(out->pid, 0);
	if (out->pidfd == -1)
		return CB_EIO;
	return fcntl(out->pidfd, F_SETFD, FD_CLOEXEC) == -1 ? CB_EIO : 0;
}

/* A start that failed after its stub was spawned: kill the stub, close
 * everything but its pid, pidfd and cgroups, and return without waiting
 * for it (the caller reaps it: sbx_spawn_start's contract).  Waiting here
 * would block the caller, the broker's event loop, for as long as the stub
 * takes to die: a process in uninterruptible sleep, or a pid 1 ending its
 * sandbox, can take any time.  Why kill(pid) is safe without a pidfd: the
 * stub is our child and not reaped, so its pid cannot name another
 * process. */
static void
give_up(struct sbx_proc *out)
{
	struct sbx_proc keep = { .pid = out->pid, .pidfd = out->pidfd, .stdin_fd = -1,
		.stdout_fd = -1, .stderr_fd = -1, .status_fd = -1, .notify_fd = -1 };

	if (out->pid <= 0) {
		sbx_proc_close(out);	/* never started: its cgroups go now */
		out->pid = -1;
		return;
	}
	if (out->pidfd < 0 || sbx_kill(out) != 0)
		(void)kill(out->pid, SIGKILL);
	memcpy(keep.cgroup, out->cgroup, sizeof(keep.cgroup));
	out->pidfd = -1;
	memset(out->cgroup, 0, sizeof(out->cgroup));
	sbx_proc_close(out);
	*out = keep;
}

/* The broker's ends never block its loop. */
static int
proc_nonblock(const struct sbx_proc *p)
{
	const int fds[] = { p->stdin_fd, p->stdout_fd, p->stderr_fd, p->status_fd };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] != -1 && fcntl(fds[i], F_SETFL, O_NONBLOCK) == -1)
			return CB_EIO;
	return 0;
}

/* The agent's stdio while its sandbox is set up: a pty (master and slave)
 * or three pipes (in, o, e); -1 where there is none. */
struct stdio_ends {
	int master, slave;
	int in[2], o[2], e[2];
};

#define STDIO_ENDS_NONE { -1, -1, { -1, -1 }, { -1, -1 }, { -1, -1 } }

static void
stdio_ends_close(struct stdio_ends *io)
{
	close_fd(&io->in[0]); close_fd(&io->in[1]);
	close_fd(&io->o[0]); close_fd(&io->o[1]);
	close_fd(&io->e[0]); close_fd(&io->e[1]);
	close_fd(&io->master); close_fd(&io->slave);
}

/* The agent's stdio: one pty (all three on its slave) or three pipes.
 * The child's ends go to SRC[0..2]; the caller closes everything. */
static int
make_stdio(const struct sbx_config *cfg, int src[static 3], struct stdio_ends *io)
{
	if (cfg->want_pty) {
		if (open_pty(&io->master, &io->slave) != 0)
			return CB_EIO;
		src[0] = high_dup(io->slave);
		src[1] = high_dup(io->slave);
		src[2] = high_dup(io->slave);
	} else {
		if (pipe2(io->in, O_CLOEXEC) == -1 || pipe2(io->o, O_CLOEXEC) == -1 ||
		    pipe2(io->e, O_CLOEXEC) == -1)
			return CB_EIO;
		src[0] = high_dup(io->in[0]);
		src[1] = high_dup(io->o[1]);
		src[2] = high_dup(io->e[1]);
	}
	return 0;
}

/* The broker's ends of the agent's stdio move into OUT; each one moved is
 * set to -1 so the caller's cleanup does not close it. */
static int
hand_over_stdio(const struct sbx_config *cfg, struct sbx_proc *out, struct stdio_ends *io)
{
	if (cfg->want_pty) {
		out->stdin_fd = io->master;
		out->stdout_fd = fcntl(io->master, F_DUPFD_CLOEXEC, 0);
		io->master = -1;
		if (out->stdout_fd == -1)
			return CB_EIO;
	} else {
		out->stdin_fd = io->in[1];
		out->stdout_fd = io->o[0];
		out->stderr_fd = io->e[0];
		io->in[1] = io->o[0] = io->e[0] = -1;
	}
	return 0;
}

int
sbx_spawn_start(const struct sbx_config *cfg, struct sbx_proc *out)
{
	struct argbuf *a = NULL;
	char stub[PATH_MAX];
	struct stdio_ends io = STDIO_ENDS_NONE;
	int st[2] = { -1, -1 };
	int cg[STUB_MAX_CGROUPS] = { -1, -1 };
	int src[5 + STUB_MAX_CGROUPS + 2 * SBX_SRC_MAX + SBX_MOUNTS_MAX + SBX_SLOTS_MAX];	/* child descriptors, by target number */
	int ncg = 0, nsrc, rc, cgdir = -1;

	memset(out, 0, sizeof(*out));
	out->pid = -1;
	out->pidfd = out->stdin_fd = out->stdout_fd = out->stderr_fd = out->status_fd = out->notify_fd = -1;
	out->nfuse = cfg->nfuse + cfg->fuse_slots;
	for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++)
		src[i] = -1;
	if ((rc = check_config(cfg)) != 0)
		return rc;
	if ((rc = sbx_find_stub(stub, sizeof(stub), NULL, 0)) != 0)
		return rc;
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return CB_ENOMEM;

	rc = CB_EIO;
	/* A socket, not a pipe: the "ready" report may carry the agent's
	 * seccomp listener (SCM_RIGHTS).  SEQPACKET keeps each report one
	 * message, as one write() to a pipe was. */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, st) == -1)
		goto out;
	if (make_stdio(cfg, src, &io) != 0)
		goto out;
	src[3] = cfg->broker_fd >= 0 ? high_dup(cfg->broker_fd) : -1;
	src[4] = high_dup(st[1]);
	ncg = make_cgroups(cfg, out, cg, &cgdir);
	for (int i = 0; i < ncg; i++)
		src[5 + i] = high_dup(cg[i]);
	nsrc = 5 + ncg;
	open_sources(cfg, a);
	for (size_t i = 0; i < a->nsrc; i++) {
		src[nsrc++] = high_dup(a->src[i].dirfd);
		src[nsrc++] = high_dup(a->src[i].fd);
	}
	if (a->err[0] == '\0') {
		for (size_t i = 0; i < cfg->nmounts; i++)
			src[nsrc++] = high_dup(cfg->mounts[i].fd);
		for (size_t i = 0; i < cfg->nslots; i++)
			src[nsrc++] = high_dup(cfg->slot_fds[i]);
	}
	for (int i = 0; i < nsrc; i++) {
		if (src[i] == -1 && !(i == 3 && cfg->broker_fd < 0))
			goto out;
	}
	if ((rc = build_args(cfg, stub, ncg, cgdir >= 0, a)) != 0)
		goto out;

	rc = CB_EIO;
	if ((cgdir >= 0 ? stub_spawn_into(stub, src, nsrc, a->argv, empty_env, cgdir, &out->pid) :
	    spawn_stub(stub, src, nsrc, a->argv, &out->pid)) != 0 || watch_pid(out) != 0)
		goto out;
	if (hand_over_stdio(cfg, out, &io) != 0)
		goto out;
	out->status_fd = st[0];
	st[0] = -1;
	if (proc_nonblock(out) != 0)
		goto out;
	rc = 0;
out:
	for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++)
		close_fd(&src[i]);
	for (int i = 0; i < STUB_MAX_CGROUPS; i++)
		close_fd(&cg[i]);
	close_fd(&cgdir);
	stdio_ends_close(&io);
	close_fd(&st[0]); close_fd(&st[1]);
	if (a != NULL)
		close_sources(a);
	free(a);
	if (rc != 0) {
		int saved = errno;

		give_up(out);
		errno = saved;
	}
	return rc;
}

/* Receive one report from the stub; an attached descriptor (the seccomp
 * listener, only ever sent with "ready") goes to *fd, anything beyond one
 * is closed. */
static ssize_t
recv_report(int sock, char *buf, size_t len, int *fd)
{
	struct wire_packet pk;
	ssize_t n;

	*fd = -1;
	do
		n = wire_packet_recv(sock, buf, len, MSG_DONTWAIT, &pk);
	while (n == -1 && errno == EINTR);
	if (n < 0)
		return n;
	if (pk.nfds > 0) {
		*fd = pk.fds[0];
		pk.fds[0] = pk.fds[--pk.nfds];
	}
	wire_packet_close(&pk);
	return n;
}

/* Is fd an open /dev/fuse (the character device 10, 229, whatever its
 * name)?  A device number cannot be faked without CAP_MKNOD on the host,
 * and the kernel dispatches by it: such a descriptor is a FUSE connection. */
static bool
is_dev_fuse(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 10 &&
	    minor(st.st_rdev) == 229;
}

/* The "fuse" reports (sbx_config.fuse_dsts, then fuse_slots): exactly the
 * connections asked for, in order, in as few packets as a packet's
 * descriptors allow (WIRE_PACKET_FDS), each /dev/fuse.  Everything from the
 * sandbox's side is checked: anything else (an empty report, one too many)
 * fails the start.  The descriptors are made non-blocking, so that a stub
 * reading its own copy can never leave the caller's server waiting in
 * read(). */
static int
take_fuse(struct sbx_proc *p, struct wire_packet *pk, char *why, size_t whylen)
{
	if (pk->trunc || pk->ctrunc || pk->nfds == 0 || pk->nfds > p->nfuse - p->nfuse_got) {
		if (why != NULL)
			snprintf(why, whylen, "the sandbox sent a bad file-server report "
			    "(%zu connections, %zu asked for)", pk->nfds, p->nfuse);
		return CB_EINTERNAL;
	}
	for (size_t i = 0; i < pk->nfds; i++) {
		if (!is_dev_fuse(pk->fds[i]) || fcntl(pk->fds[i], F_SETFL, O_RDWR | O_NONBLOCK) == -1) {
			if (why != NULL)
				snprintf(why, whylen, "the sandbox sent a file-server connection "
				    "that is not /dev/fuse");
			return CB_EINTERNAL;
		}
	}
	for (size_t i = 0; i < pk->nfds; i++)
		p->fuse_fds[p->nfuse_got + i] = pk->fds[i];
	p->nfuse_got += pk->nfds;
	pk->nfds = 0;
	return 0;
}

/* Read one report: 0 when it is WANT ("ready" or "pooled") with its
 * figures, CB_EBUSY when none is there yet (or the "fuse" report came:
 * p->fuse_fds), CB_EINTERNAL otherwise (why says the stub's reason).  A
 * descriptor (the listener) is taken with "ready" only. */
static int
read_report(struct sbx_proc *p, const char *want, char *why, size_t whylen)
{
	struct wire_packet pk;
	char buf[640];
	ssize_t n;
	int abi, cg, fd = -1, r;

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	/* ECONNRESET, once: a held stub that failed before it read our "go"
	 * closed with it unread, and the kernel reports that ahead of the
	 * report queued before it (and clears it): read again. */
	for (int reset = 0;;) {
		n = wire_packet_recv(p->status_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT, &pk);
		if (n != -1 || !(errno == EINTR || (errno == ECONNRESET && !reset++)))
			break;
	}
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return CB_EBUSY;
	if (n <= 0) {
		wire_packet_close(&pk);
		if (why != NULL)
			snprintf(why, whylen, "sandbox stub exited without a report");
		return CB_EINTERNAL;
	}
	/* The stub writes its report with one write() shorter than PIPE_BUF. */
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (p->nfuse != 0 && strcmp(buf, "fuse") == 0 && strcmp(want, "ready") == 0) {
		r = take_fuse(p, &pk, why, whylen);
		wire_packet_close(&pk);
		return r == 0 ? CB_EBUSY : r;
	}
	if (pk.nfds > 0) {
		fd = pk.fds[0];
		pk.fds[0] = pk.fds[--pk.nfds];
	}
	wire_packet_close(&pk);
	if ((strcmp(want, "ready") == 0 ?
	    sscanf(buf, "ready landlock=%d cgroup=%d", &abi, &cg) :
	    sscanf(buf, "pooled landlock=%d cgroup=%d", &abi, &cg)) == 2) {
		p->report.landlock_abi = abi;
		p->report.cgroup = (cg == 1);
		close_fd(&p->notify_fd);
		if (strcmp(want, "ready") == 0)
			p->notify_fd = fd;
		else
			close_fd(&fd);
		return 0;
	}
	close_fd(&fd);
	if (why != NULL) {
		const char *msg = strncmp(buf, "fail ", 5) == 0 ? buf + 5 : buf;

		snprintf(why, whylen, "%s", msg);
		/* The line came from the sandbox side: keep it printable. */
		for (char *s = why; *s != '\0'; s++) {
			if ((unsigned char)*s < 0x20 || *s == 0x7f)
				*s = '?';
		}
	}
	return CB_EINTERNAL;
}

int
sbx_spawn_finish(struct sbx_proc *p, char *why, size_t whylen)
{
	return read_report(p, "ready", why, whylen);
}

int
sbx_exit_report(struct sbx_proc *p, int *status)
{
	char buf[64];
	ssize_t n;
	int fd, code;

	n = recv_report(p->status_fd, buf, sizeof(buf) - 1, &fd);
	close_fd(&fd);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return CB_EBUSY;
	if (n <= 0)
		return CB_EINTERNAL;
	buf[n] = '\0';
	if (sscanf(buf, "exit %d", &code) != 1 || code < 0 || code > 255)
		return CB_EINTERNAL;
	*status = code;
	return 0;
}

int
sbx_pool_finish(struct sbx_proc *p, char *why, size_t whylen)
{
	return read_report(p, "pooled", why, whylen);
}

/* The hand-over: the per-exec options and the command as NUL-terminated
 * strings in one SEQPACKET message on the status socket, which the stub
 * reads with its command line's own option table (stub_main.c). */
int
sbx_pool_handover(struct sbx_proc *p, const struct sbx_config *cfg)
{
	struct sbx_config c;
	struct argbuf *a = NULL;
	const struct sbx_limits *l;
	char *msg = NULL;
	size_t len = 0, i;
	int rc;

	if (p == NULL || cfg == NULL || cfg->pool || p->status_fd < 0)
		return CB_EINVAL;
	if ((rc = check_config(cfg)) != 0)
		return rc;
	if (cfg->broker_fd >= 0 || cfg->want_pty || cfg->nmounts != 0 || cfg->mediate_connect)
		return CB_EINVAL;
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return CB_ENOMEM;
	c = *cfg;
	l = &c.limits;
	rc = 0;
	rc |= arg(a, "--id");
	rc |= arg(a, c.id);
	if (c.chdir != NULL) {
		rc |= arg(a, "--chdir");
		rc |= arg(a, c.chdir);
	}
	for (i = 0; i < c.nsetenv; i++) {
		rc |= arg(a, "--setenv");
		rc |= arg(a, c.setenv[2 * i]);
		rc |= arg(a, c.setenv[2 * i + 1]);
	}
	for (i = 0; i < c.nunsetenv; i++) {
		rc |= arg(a, "--unsetenv");
		rc |= arg(a, c.unsetenv[i]);
	}
	rc |= arg_num(a, "--nofile", l->nofile);
	rc |= arg_num(a, "--fsize", l->fsize_bytes);
	rc |= arg_num(a, "--cpu", l->cpu_secs);
	rc |= arg_num(a, "--timeout", l->wall_secs);
	rc |= arg(a, "--");
	for (i = 0; c.argv[i] != NULL; i++)
		rc |= arg(a, c.argv[i]);
	if (rc != 0) {
		rc = CB_ETOOBIG;
		goto out;
	}
	for (i = 0; i < a->n; i++)
		len += strlen(a->argv[i]) + 1;
	if (len > STUB_HANDOVER_MAX || a->n > STUB_HANDOVER_ARGS) {
		rc = CB_ETOOBIG;
		goto out;
	}
	if ((msg = malloc(len)) == NULL) {
		rc = CB_ENOMEM;
		goto out;
	}
	len = 0;
	for (i = 0; i < a->n; i++) {
		size_t k = strlen(a->argv[i]) + 1;

		memcpy(msg + len, a->argv[i], k);
		len += k;
	}
	/* EMSGSIZE: a host whose AF_UNIX send buffer (wmem_default) is below
	 * STUB_HANDOVER_MAX: too big for this sandbox; the caller may start a
	 * fresh one, whose command line has no such bound. */
	if (send(p->status_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
		rc = errno == EMSGSIZE ? CB_ETOOBIG : CB_EIO;
out:
	free(msg);
	free(a);
	return rc;
}

/* The word a held sandbox waits for (stub_main.c, pid1_await_go): one
 * SEQPACKET message, the first the broker sends on the status socket. */
int
sbx_go(const struct sbx_proc *p)
{
	if (p == NULL || p->status_fd < 0)
		return CB_EINVAL;
	if (send(p->status_fd, "go", 2, MSG_DONTWAIT | MSG_NOSIGNAL) == 2)
		return 0;
	return errno == EPIPE || errno == ECONNRESET ? CB_ECLOSED : CB_EIO;
}

int
sbx_mount_send(const struct sbx_proc *p, int mnt_fd, const char *dst)
{
	char msg[PATH_MAX + 8];
	int n;

	if (sbx_bind_dst_refusal(dst) != NULL || mnt_fd < 0 ||
	    (n = snprintf(msg, sizeof(msg), "mount %s", dst)) >= (int)sizeof(msg))
		return CB_EINVAL;
	if (wire_packet_send(p->status_fd, msg, (size_t)n, &mnt_fd, 1,
	    MSG_DONTWAIT | MSG_NOSIGNAL) == n)
		return 0;
	return errno == EAGAIN || errno == EWOULDBLOCK ? CB_EBUSY : CB_EIO;
}

int
sbx_slot_send(const struct sbx_proc *p, unsigned slot, const char *dst)
{
	char msg[PATH_MAX + 32];
	int n;

	if (sbx_bind_dst_refusal(dst) != NULL || slot >= SBX_SLOTS_MAX ||
	    (n = snprintf(msg, sizeof(msg), "slot %u %s", slot, dst)) >= (int)sizeof(msg))
		return CB_EINVAL;
	if (wire_packet_send(p->status_fd, msg, (size_t)n, NULL, 0,
	    MSG_DONTWAIT | MSG_NOSIGNAL) == n)
		return 0;
	return errno == EAGAIN || errno == EWOULDBLOCK ? CB_EBUSY : CB_EIO;
}

int
sbx_mount_answer(const struct sbx_proc *p, char *dst, size_t dstlen, bool *ok, char *why,
    size_t whylen)
{
	char buf[PATH_MAX + 320];
	const char *d, *r = "";
	size_t dl;
	ssize_t n;
	int fd;

	*ok = false;
	dst[0] = why[0] = '\0';
	n = recv_report(p->status_fd, buf, sizeof(buf) - 1, &fd);
	close_fd(&fd);		/* pid 1 never sends one here */
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return CB_EBUSY;
	if (n <= 0)
		return CB_ECLOSED;
	buf[n] = '\0';
	/* From the sandbox's side: "ok DST" or "fail DST: reason", kept
	 * printable for the audit log. */
	for (char *s = buf; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
	if (strncmp(buf, "ok ", 3) == 0) {
		*ok = true;
		d = buf + 3;
		dl = strlen(d);
	} else {
		d = strncmp(buf, "fail ", 5) == 0 ? buf + 5 : buf;
		r = strstr(d, ": ");
		dl = r ? (size_t)(r - d) : strlen(d);
		r = r ? r + 2 : "no reason given";
	}
	snprintf(dst, dstlen, "%.*s", (int)(dl < dstlen ? dl : dstlen - 1), d);
	snprintf(why, whylen, "%s", r);
	return 0;
}

void
sbx_start_refusal(int rc, char *why, size_t whylen)
{
	char path[PATH_MAX], tried[2 * PATH_MAX + 64];

	if (rc == CB_ENOENT && sbx_find_stub(path, sizeof(path), tried, sizeof(tried)) != 0)
		snprintf(why, whylen, "cannot start the sandbox: the sandbox helper %s was not found "
		    "(looked for %s)", STUB_NAME, tried);
	else if (rc == CB_ETOOBIG)
		snprintf(why, whylen, "cannot start the sandbox: %s (a command of at most %d words "
		    "and %d bytes; at most %d binds, %d allowed programs, %d --setenv and %d "
		    "--unsetenv)", cb_strerror(rc), SBX_ARGV_MAX, SBX_ARGV_BYTES, STUB_MAX_BINDS,
		    STUB_MAX_EXEC, SBX_ENV_MAX, SBX_ENV_MAX);
	else
		snprintf(why, whylen, "cannot start the sandbox: %s%s%s", cb_strerror(rc),
		    rc == CB_EIO ? ": " : "", rc == CB_EIO ? strerror(errno) : "");
}

int
sbx_spawn(const struct sbx_config *cfg, struct sbx_proc *out, char *why, size_t whylen)
{
	struct pollfd pfd;
	int rc;

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	if ((rc = sbx_spawn_start(cfg, out)) != 0) {
		if (why != NULL)
			sbx_start_refusal(rc, why, whylen);
		/* No event loop here to keep serving: wait for the stub. */
		if (out->pid > 0)
			while (waitpid(out->pid, NULL, 0) == -1 && errno == EINTR)
				;
		sbx_proc_close(out);
		return rc;
	}
	for (;;) {
		pfd = (struct pollfd){ .fd = out->status_fd, .events = POLLIN };
		if (poll(&pfd, 1, -1) == -1 && errno != EINTR) {
			rc = CB_EIO;
			break;
		}
		if ((rc = sbx_spawn_finish(out, why, whylen)) != CB_EBUSY)
			break;
	}
	if (rc != 0) {
		sbx_kill(out);
		waitpid(out->pid, NULL, 0);
		sbx_proc_close(out);
	}
	return rc;
}

int
sbx_kill(struct sbx_proc *p)
{
	if (p->pidfd < 0)
		return CB_EINVAL;
	if (pidfd_send_signal(p->pidfd, SIGKILL, NULL, 0) == -1 && errno != ESRCH)
		return CB_EIO;
	return 0;
}

void
sbx_proc_close(struct sbx_proc *p)
{
	if (p == NULL)
		return;
	close_fd(&p->pidfd);
	close_fd(&p->stdin_fd);
	close_fd(&p->stdout_fd);
	close_fd(&p->stderr_fd);
	close_fd(&p->status_fd);
	close_fd(&p->notify_fd);
	for (size_t i = 0; i < p->nfuse_got; i++)
		close_fd(&p->fuse_fds[i]);
	p->nfuse_got = 0;
	for (int i = 0; i < 2; i++) {
		if (p->cgroup[i][0] != '\0')
			(void)cgroup_rmdir(p->cgroup[i]);
		p->cgroup[i][0] = '\0';
	}
}
