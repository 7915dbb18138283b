/*
 * stub_main.c - capbroker-stub: builds one sandbox and runs the agent in it.
 *
 * Trust domain: started by the broker (trusted input on the command line,
 * still checked), it gives up the broker's credentials before it creates any
 * namespace, then becomes the sandbox.  It never runs agent code itself.
 *
 * Three processes, top to bottom (see docs/sandbox.md):
 *
 *   outer stub  child of the broker, in the host pid namespace.  Joins the
 *               cgroups, drops root (to nobody) if it has it, creates the user
 *               namespace and all the others, maps its own uid, forks pid 1
 *               and relays pid 1's exit status.  It holds no descriptor after
 *               the fork.
 *   pid 1       builds the new root and pivots into it, forks the agent,
 *               reports "ready", then reaps, enforces the wall clock and
 *               kills everything when the agent exits, the broker hangs up
 *               or the outer stub dies.
 *   agent       pid 2: limits, capabilities, no_new_privs, Landlock, seccomp
 *               (last), then execveat() of the agent binary.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sysexits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "sandbox-stub/stub_int.h"
#include "wire/packet.h"

#define STUB_NOBODY		SBX_ROOT_AGENT_ID	/* the agent's uid and gid when started as root */
#ifndef CB_VERSION
#define CB_VERSION		"0.1"
#endif

static const char *stub_stage = "stub";
static int stub_errpipe = -1;	/* agent: tells pid 1 that it failed */

void
stub_die(int errnum, const char *fmt, ...)
{
	char msg[512];
	char line[600];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (errnum != 0)
		n = snprintf(line, sizeof(line), "fail %s: %s: %s\n", stub_stage, msg,
		    strerror(errnum));
	else
		n = snprintf(line, sizeof(line), "fail %s: %s\n", stub_stage, msg);
	if (n < 0)
		_exit(SBX_EXIT_SETUP);
	if ((size_t)n >= sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	/* One write: the broker reads the reason as one line (< PIPE_BUF). */
	(void)!write(STUB_FD_STATUS, line, (size_t)n);
	if (stub_errpipe != -1)
		(void)!write(stub_errpipe, "F", 1);
	_exit(SBX_EXIT_SETUP);
}

/* ---------------------------------------------------------------- options */

static uint64_t
parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long v;

	if (s[0] < '0' || s[0] > '9')
		stub_die(0, "%s: not a number: %.40s", opt, s);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		stub_die(0, "%s: out of range [%" PRIu64 ", %" PRIu64 "]: %.40s", opt,
		    min, max, s);
	return v;
}

static bool
path_ok(const char *p)
{
	size_t n = strlen(p);

	return p[0] == '/' && n < PATH_MAX;
}

static bool
id_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SBX_ID_MAX)
		return false;
	for (; *s != '\0'; s++) {
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
			return false;
	}
	return true;
}

/* A usage error is said on stderr (the stub may have been started by
 * hand) as well as on the status pipe the launcher reads, and exits 64
 * like every other program's. */
static void
usage_die(void)
{
	static const char msg[] = "usage: capbroker-stub --tier T --id ID --parent-pid PID "
	    "[options] -- CMD [ARGS...] (started by capbroker, not by hand)";

	fprintf(stderr, "capbroker-stub: %s\n", msg);
	(void)!dprintf(STUB_FD_STATUS, "fail %s: %s\n", stub_stage, msg);
	_exit(EX_USAGE);
}

enum {
	OPT_TIER = 256, OPT_ID, OPT_PARENT, OPT_BROKER_FD, OPT_CGROUPS, OPT_IN_CGROUP, OPT_RO_BIND,
	OPT_BIND, OPT_EXEC_ALLOW, OPT_CAPCALL, OPT_PYLIB, OPT_PTY, OPT_MEM,
	OPT_NPROC, OPT_NOFILE, OPT_FSIZE, OPT_CPU, OPT_WALL, OPT_TMP, OPT_CHDIR,
	OPT_SETENV, OPT_UNSETENV, OPT_SETUP_ERROR, OPT_NOTIFY, OPT_HOSTS, OPT_MOUNT,
	OPT_POOL, OPT_REPORT_EXIT, OPT_HOLD,
	OPT_MOUNT_LATER, OPT_FUSE_AT, OPT_SLOT_FD, OPT_FUSE_SLOTS,
};

/* "DIRFD FD NAME" of a bind source the broker opened: DIRFD and FD are
 * descriptors it passed (above the fixed ones), NAME is "." (the source is
 * the directory DIRFD) or one path component inside DIRFD. */
static void
parse_src(struct stub_cfg *c, int argc, char **argv, const char *opt, struct stub_src *src)
{
	const char *name;

	if (optind + 1 >= argc)
		stub_die(0, "%s needs DIRFD FD NAME", opt);
	src->dirfd = (int)parse_u64(opt, optarg, STUB_FD_CGROUP0, 1 << 20);
	src->fd = (int)parse_u64(opt, argv[optind++], STUB_FD_CGROUP0, 1 << 20);
	name = argv[optind++];
	if (name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, "..") == 0)
		stub_die(0, "%s: bad name: %.200s", opt, name);
	src->name = name;
	src->tree = -1;
	if (src->dirfd > c->max_fd)
		c->max_fd = src->dirfd;
	if (src->fd > c->max_fd)
		c->max_fd = src->fd;
}

/* The whole option list in one table: anything not in it is a usage
 * error. */
static const struct option stub_opts[] = {
	{ "tier", required_argument, NULL, OPT_TIER },
	{ "id", required_argument, NULL, OPT_ID },
	{ "parent-pid", required_argument, NULL, OPT_PARENT },
	{ "broker-fd", no_argument, NULL, OPT_BROKER_FD },
	{ "cgroups", required_argument, NULL, OPT_CGROUPS },
	{ "in-cgroup", no_argument, NULL, OPT_IN_CGROUP },
	{ "ro-bind-fd", required_argument, NULL, OPT_RO_BIND },
	{ "bind-fd", required_argument, NULL, OPT_BIND },
	{ "exec-allow", required_argument, NULL, OPT_EXEC_ALLOW },
	{ "mount-fd", required_argument, NULL, OPT_MOUNT },
	{ "mount-later", no_argument, NULL, OPT_MOUNT_LATER },
	{ "fuse-at", required_argument, NULL, OPT_FUSE_AT },
	{ "slot-fd", required_argument, NULL, OPT_SLOT_FD },
	{ "fuse-slots", required_argument, NULL, OPT_FUSE_SLOTS },
	{ "capcall-fd", required_argument, NULL, OPT_CAPCALL },
	{ "pylib-fd", required_argument, NULL, OPT_PYLIB },
	{ "setup-error", required_argument, NULL, OPT_SETUP_ERROR },
	{ "pty", no_argument, NULL, OPT_PTY },
	{ "notify", no_argument, NULL, OPT_NOTIFY },
	{ "pool", no_argument, NULL, OPT_POOL },
	{ "report-exit", no_argument, NULL, OPT_REPORT_EXIT },
	{ "hold", no_argument, NULL, OPT_HOLD },
	{ "hosts-fd", required_argument, NULL, OPT_HOSTS },
	{ "mem", required_argument, NULL, OPT_MEM },
	{ "nproc", required_argument, NULL, OPT_NPROC },
	{ "nofile", required_argument, NULL, OPT_NOFILE },
	{ "fsize", required_argument, NULL, OPT_FSIZE },
	{ "cpu", required_argument, NULL, OPT_CPU },
	{ "timeout", required_argument, NULL, OPT_WALL },
	{ "tmp-size", required_argument, NULL, OPT_TMP },
	{ "chdir", required_argument, NULL, OPT_CHDIR },
	{ "setenv", required_argument, NULL, OPT_SETENV },
	{ "unsetenv", required_argument, NULL, OPT_UNSETENV },
	{ NULL, 0, NULL, 0 },
};

/* "--ro-bind-fd/--bind-fd DIRFD FD NAME DST": the destination is checked
 * here, before any mount, so a refused one fails the whole launch. */
static void
parse_bind(struct stub_cfg *c, int argc, char **argv, bool writable)
{
	const char *why;

	if (c->nbinds == STUB_MAX_BINDS)
		stub_die(0, "too many binds (max %d)", STUB_MAX_BINDS);
	parse_src(c, argc, argv, "--ro-bind-fd/--bind-fd", &c->bsrc[c->nbinds]);
	if (optind >= argc)
		stub_die(0, "--ro-bind-fd/--bind-fd need DIRFD FD NAME DST");
	c->binds[c->nbinds].dst = argv[optind++];
	c->binds[c->nbinds].src = c->binds[c->nbinds].dst;
	c->binds[c->nbinds].writable = writable;
	if ((why = sbx_bind_dst_refusal(c->binds[c->nbinds].dst)) != NULL)
		stub_die(0, "bind destination %.200s refused: %s",
		    c->binds[c->nbinds].dst, why);
	c->nbinds++;
}

/* "--mount-fd FD DST": a detached mount (the broker's file server for a
 * granted tree), attached by pid 1 after the binds. */
static void
parse_mount(struct stub_cfg *c, int argc, char **argv)
{
	const char *why;

	if (c->nmounts == SBX_MOUNTS_MAX)
		stub_die(0, "too many --mount-fd (max %d)", SBX_MOUNTS_MAX);
	if (optind >= argc)
		stub_die(0, "--mount-fd needs FD DST");
	c->mounts[c->nmounts].fd = (int)parse_u64("--mount-fd", optarg,
	    STUB_FD_CGROUP0, 1 << 20);
	c->mounts[c->nmounts].dst = argv[optind++];
	if ((why = sbx_bind_dst_refusal(c->mounts[c->nmounts].dst)) != NULL)
		stub_die(0, "mount destination %.200s refused: %s",
		    c->mounts[c->nmounts].dst, why);
	if (c->mounts[c->nmounts].fd > c->max_fd)
		c->max_fd = c->mounts[c->nmounts].fd;
	c->nmounts++;
}

/* "--fuse-at DST": a tree the broker serves on a /dev/fuse that pid 1
 * opens and mounts itself (a broker that is not root). */
static void
parse_fuse_at(struct stub_cfg *c, const char *dst)
{
	const char *why;

	if (c->nfuse == SBX_MOUNTS_MAX)
		stub_die(0, "too many --fuse-at (max %d)", SBX_MOUNTS_MAX);
	if ((why = sbx_bind_dst_refusal(dst)) != NULL)
		stub_die(0, "file server destination %.200s refused: %s", dst, why);
	c->fuse_at[c->nfuse++] = dst;
}

/* "--setenv NAME VALUE" and "--unsetenv NAME": names are checked here so
 * the agent's environment never holds a malformed entry. */
static void
parse_env_opt(struct stub_cfg *c, int argc, char **argv, int o)
{
	if (o == OPT_UNSETENV) {
		if (c->nunsetenv == STUB_MAX_ENV)
			stub_die(0, "too many --unsetenv (max %d)", STUB_MAX_ENV);
		if (!sbx_env_name_ok(optarg))
			stub_die(0, "--unsetenv: bad variable name: %.40s", optarg);
		c->unsetenv[c->nunsetenv++] = optarg;
		return;
	}
	if (c->nsetenv == STUB_MAX_ENV)
		stub_die(0, "too many --setenv (max %d)", STUB_MAX_ENV);
	if (optind >= argc)
		stub_die(0, "--setenv needs NAME and VALUE");
	if (!sbx_env_name_ok(optarg))
		stub_die(0, "--setenv: bad variable name: %.40s", optarg);
	c->setenv[2 * c->nsetenv] = optarg;
	c->setenv[2 * c->nsetenv + 1] = argv[optind++];
	c->nsetenv++;
}

/* The resource-limit options; false if O is not one of them. Each has its
 * own bounds so a launcher mistake is refused rather than applied. */
static bool
parse_limit_opt(struct stub_cfg *c, int o)
{
	switch (o) {
	case OPT_MEM:
		c->lim.mem_bytes = parse_u64("--mem", optarg, SBX_MEM_MIN, SBX_MEM_MAX);
		return true;
	case OPT_NPROC:
		c->lim.nproc = parse_u64("--nproc", optarg, SBX_NPROC_MIN, SBX_NPROC_MAX);
		return true;
	case OPT_NOFILE:
		c->lim.nofile = parse_u64("--nofile", optarg, SBX_NOFILE_MIN, SBX_NOFILE_MAX);
		return true;
	case OPT_FSIZE:
		c->lim.fsize_bytes = parse_u64("--fsize", optarg, SBX_FSIZE_MIN, SBX_FSIZE_MAX);
		return true;
	case OPT_CPU:
		c->lim.cpu_secs = parse_u64("--cpu", optarg, 1, SBX_SECS_MAX);
		return true;
	case OPT_WALL:
		c->lim.wall_secs = parse_u64("--timeout", optarg, 1, SBX_SECS_MAX);
		return true;
	case OPT_TMP:
		c->lim.tmp_bytes = parse_u64("--tmp-size", optarg, SBX_TMP_MIN, SBX_TMP_MAX);
		return true;
	default:
		return false;
	}
}

/* Options that only make sense in some tiers are refused in the others,
 * so a launcher mistake never silently widens or narrows the sandbox. */
static void
check_tier_options(const struct stub_cfg *c)
{
	for (size_t i = 0; i < c->nbinds; i++) {
		if (c->binds[i].writable && c->tier != SBX_TIER_HIGH)
			stub_die(0, "writable bind %.200s refused below the high tier",
			    c->binds[i].dst);
	}
	if (c->nmounts != 0 && c->tier == SBX_TIER_LOW)
		stub_die(0, "--mount-fd refused in the low tier");
	if (c->mount_later && c->tier == SBX_TIER_LOW)
		stub_die(0, "--mount-later refused in the low tier");
	if (c->nfuse != 0 && c->tier == SBX_TIER_LOW)
		stub_die(0, "--fuse-at refused in the low tier");
	if ((c->nslot_fds != 0 || c->fuse_slots != 0) && !c->mount_later)
		stub_die(0, "--slot-fd and --fuse-slots need --mount-later");
	if (c->nslot_fds != 0 && c->fuse_slots != 0)
		stub_die(0, "--slot-fd and --fuse-slots exclude each other");
	if (c->nexec_allow != 0 && c->tier != SBX_TIER_MEDIUM)
		stub_die(0, "--exec-allow applies to the medium tier only");
	if (c->notify && c->tier == SBX_TIER_LOW)
		stub_die(0, "--notify applies to the medium and high tiers only");
	if (c->hosts != NULL && c->tier == SBX_TIER_LOW)
		stub_die(0, "--hosts-fd applies to the medium and high tiers only");
}

/* A limit the launcher did not give gets the documented default. */
static void
default_limits(struct stub_cfg *c)
{
#define DEF(f, v) do { if (c->lim.f == 0) c->lim.f = (v); } while (0)
	DEF(mem_bytes, SBX_DEFAULT_MEM_BYTES);
	DEF(nproc, SBX_DEFAULT_NPROC);
	DEF(nofile, SBX_DEFAULT_NOFILE);
	DEF(fsize_bytes, SBX_DEFAULT_FSIZE_BYTES);
	DEF(cpu_secs, SBX_DEFAULT_CPU_SECS);
	DEF(wall_secs, SBX_DEFAULT_WALL_SECS);
	DEF(tmp_bytes, SBX_DEFAULT_TMP_BYTES);
#undef DEF
}

/* The options that only switch something on; false for any other. */
static bool
parse_flag_opt(struct stub_cfg *c, int o)
{
	switch (o) {
	case OPT_BROKER_FD:
		c->have_broker_fd = true;
		return true;
	case OPT_IN_CGROUP:
		/* The launcher started us in the sandbox's cgroup (clone3
		 * CLONE_INTO_CGROUP): nothing to join. */
		c->in_cgroup = true;
		return true;
	case OPT_MOUNT_LATER:
		c->mount_later = true;
		return true;
	case OPT_PTY:
		c->pty = true;
		return true;
	case OPT_NOTIFY:
		c->notify = true;
		return true;
	case OPT_POOL:
		c->pool = true;
		return true;
	case OPT_REPORT_EXIT:
		c->report_exit = true;
		return true;
	case OPT_HOLD:
		c->hold = true;
		return true;
	default:
		return false;
	}
}

static void
parse_slot_fd(struct stub_cfg *c, const char *arg)
{
	int fd;

	if (c->nslot_fds == SBX_SLOTS_MAX)
		stub_die(0, "too many --slot-fd (max %d)", SBX_SLOTS_MAX);
	fd = (int)parse_u64("--slot-fd", arg, STUB_FD_CGROUP0, 1 << 20);
	if (fd > c->max_fd)
		c->max_fd = fd;
	c->slot_fds[c->nslot_fds++] = fd;
}

static void
parse_exec_allow(struct stub_cfg *c, const char *arg)
{
	if (c->nexec_allow == STUB_MAX_EXEC)
		stub_die(0, "too many --exec-allow (max %d)", STUB_MAX_EXEC);
	if (!path_ok(arg))
		stub_die(0, "--exec-allow must be absolute: %.200s", arg);
	c->exec_allow[c->nexec_allow++] = arg;
}

static void
parse_args(int argc, char **argv, struct stub_cfg *c)
{
	bool have_tier = false, have_parent = false;
	int o;

	memset(c, 0, sizeof(*c));
	c->max_fd = STUB_FD_CGROUP0 - 1;
	opterr = 0;
	/* "+": stop at the first non-option, so "--ro-bind SRC DST" can take
	 * its second argument from argv[optind]. */
	while ((o = getopt_long(argc, argv, "+", stub_opts, NULL)) != -1) {
		if (parse_limit_opt(c, o) || parse_flag_opt(c, o))
			continue;
		switch (o) {
		case OPT_TIER:
			if (sbx_tier_parse(optarg, &c->tier) != 0)
				stub_die(0, "--tier: unknown tier: %.20s", optarg);
			have_tier = true;
			break;
		case OPT_ID:
			if (!id_ok(optarg))
				stub_die(0, "--id: want [A-Za-z0-9._-]{1,%d}", SBX_ID_MAX);
			c->id = optarg;
			break;
		case OPT_PARENT:
			c->parent_pid = (pid_t)parse_u64("--parent-pid", optarg, 1, INT_MAX);
			have_parent = true;
			break;
		case OPT_CGROUPS:
			c->ncgroup = (int)parse_u64("--cgroups", optarg, 0, STUB_MAX_CGROUPS);
			break;
		case OPT_RO_BIND:
		case OPT_BIND:
			parse_bind(c, argc, argv, o == OPT_BIND);
			break;
		case OPT_MOUNT:
			parse_mount(c, argc, argv);
			break;
		case OPT_FUSE_AT:
			parse_fuse_at(c, optarg);
			break;
		case OPT_SLOT_FD:
			parse_slot_fd(c, optarg);
			break;
		case OPT_FUSE_SLOTS:
			c->fuse_slots = (size_t)parse_u64("--fuse-slots", optarg, 1, SBX_SLOTS_MAX);
			break;
		case OPT_EXEC_ALLOW:
			parse_exec_allow(c, optarg);
			break;
		case OPT_CAPCALL:
			parse_src(c, argc, argv, "--capcall-fd", &c->capcall_src);
			c->capcall = "/capbroker/bin/capcall";
			break;
		case OPT_PYLIB:
			parse_src(c, argc, argv, "--pylib-fd", &c->pylib_src);
			c->pylib = "/capbroker/python";
			break;
		case OPT_SETUP_ERROR:
			/* The launcher could not open a source: say so the one way
			 * every setup failure is said. */
			stub_die(0, "%.400s", optarg);
		case OPT_HOSTS:
			parse_src(c, argc, argv, "--hosts-fd", &c->hosts_src);
			c->hosts = "/capbroker/net";
			break;
		case OPT_CHDIR:
			if (!path_ok(optarg))
				stub_die(0, "--chdir must be absolute: %.200s", optarg);
			c->chdir = optarg;
			break;
		case OPT_SETENV:
		case OPT_UNSETENV:
			parse_env_opt(c, argc, argv, o);
			break;
		default:
			usage_die();
		}
	}
	if (!have_tier || !have_parent || c->id == NULL)
		usage_die();
	/* A pooled sandbox gets its command at hand-over, never before;
	 * the hand-over is its word to start, so it is never held too. */
	if (c->pool != (optind >= argc) || (c->pool && c->hold))
		usage_die();
	if (!c->pool && argv[optind][0] == '\0')
		stub_die(0, "empty command");
	c->argv = c->pool ? NULL : &argv[optind];
	check_tier_options(c);
	default_limits(c);
	/* The agent's exec descriptor sits at a number its RLIMIT_NOFILE can
	 * never reach: see stub_seccomp.c for the "one exec" rule. */
	c->exec_fd = STUB_EXEC_FD;
}

/* The options a pooled sandbox's hand-over may carry: what differs from
 * one exec to the next.  Everything else (tier, binds, cgroups, memory,
 * processes, /tmp) was built into the sandbox before anyone asked for it,
 * from the broker's command line, and stays; an option of that kind in a
 * hand-over is refused rather than silently ignored. */
static void
parse_handover(struct stub_cfg *c, int argc, char **argv)
{
	int o;

	optind = 0;	/* glibc: start over, with a new vector */
	opterr = 0;
	while ((o = getopt_long(argc, argv, "+", stub_opts, NULL)) != -1) {
		switch (o) {
		case OPT_ID:
			if (!id_ok(optarg))
				stub_die(0, "--id: want [A-Za-z0-9._-]{1,%d}", SBX_ID_MAX);
			c->id = optarg;
			break;
		case OPT_NOFILE:
		case OPT_FSIZE:
		case OPT_CPU:
		case OPT_WALL:
			(void)parse_limit_opt(c, o);
			break;
		case OPT_CHDIR:
			if (!path_ok(optarg))
				stub_die(0, "--chdir must be absolute: %.200s", optarg);
			c->chdir = optarg;
			break;
		case OPT_SETENV:
		case OPT_UNSETENV:
			parse_env_opt(c, argc, argv, o);
			break;
		default:
			stub_die(0, "option not allowed at hand-over: %.40s",
			    optind > 0 && optind <= argc ? argv[optind - 1] : "?");
		}
	}
	if (optind >= argc || argv[optind][0] == '\0')
		stub_die(0, "hand-over without a command");
	c->argv = &argv[optind];
}

/* ------------------------------------------------------------- outer stub */

static void
check_fds(const struct stub_cfg *c)
{
	if (fcntl(STUB_FD_STATUS, F_GETFD) == -1)
		_exit(SBX_EXIT_SETUP);	/* nowhere to report to */
	if (fcntl(STUB_FD_STATUS, F_SETFD, FD_CLOEXEC) == -1)
		stub_die(errno, "status fd");
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) == -1)
			stub_die(errno, "stdio fd %d", fd);
	}
	if (c->have_broker_fd) {
		int type;
		socklen_t len = sizeof(type);

		if (getsockopt(STUB_FD_BROKER, SOL_SOCKET, SO_TYPE, &type, &len) == -1)
			stub_die(errno, "broker fd");
		if (type != SOCK_SEQPACKET)
			stub_die(0, "broker fd is not a SOCK_SEQPACKET socket");
	}
	for (int i = 0; i < c->ncgroup; i++) {
		if (fcntl(STUB_FD_CGROUP0 + i, F_SETFD, FD_CLOEXEC) == -1)
			stub_die(errno, "cgroup fd %d", i);
	}
	/* The bind sources follow the cgroup descriptors. */
	for (int fd = STUB_FD_CGROUP0 + c->ncgroup; fd <= c->max_fd; fd++) {
		if (fcntl(fd, F_SETFD, FD_CLOEXEC) == -1)
			stub_die(errno, "bind source fd %d", fd);
	}
	/* Anything else the broker leaked must not reach the sandbox. */
	if (close_range((unsigned)(c->max_fd < STUB_FD_CGROUP0 + c->ncgroup ?
	    STUB_FD_CGROUP0 + c->ncgroup : c->max_fd + 1), ~0U, 0) == -1)
		stub_die(errno, "close_range");
}

static void
write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t n = strlen(text);

	if (fd == -1)
		stub_die(errno, "open %s", path);
	if (write(fd, text, n) != (ssize_t)n)
		stub_die(errno, "write %s", path);
	close(fd);
}

/* Lose the broker's credentials for good.  As root, become nobody (the
 * contract: the agent never runs as root on the host); otherwise stay the
 * invoking user.  Done before any namespace exists, so nothing the sandbox
 * later owns was ever created with host privileges. */
static void
drop_host_privileges(struct stub_cfg *c)
{
	uid_t ruid, euid, suid;
	gid_t rgid, egid, sgid;

	if (getresuid(&ruid, &euid, &suid) == -1 || getresgid(&rgid, &egid, &sgid) == -1)
		stub_die(errno, "getresuid");
	if (euid == 0) {
		if (setgroups(0, NULL) == -1 ||
		    setresgid(STUB_NOBODY, STUB_NOBODY, STUB_NOBODY) == -1 ||
		    setresuid(STUB_NOBODY, STUB_NOBODY, STUB_NOBODY) == -1)
			stub_die(errno, "dropping root");
	} else if (ruid != euid || euid != suid || rgid != egid || egid != sgid) {
		stub_die(0, "refusing to run set-uid or set-gid");
	}
	c->uid = getuid();
	c->gid = getgid();
	if (c->uid == 0 || geteuid() == 0)
		stub_die(0, "still root after dropping privileges");
}

static void
join_cgroups(const struct stub_cfg *c)
{
	for (int i = 0; i < c->ncgroup; i++) {
		/* "0" is the writer itself; the descriptor was opened by the broker.
		 * On v1 it is "tasks", which moves this thread alone: that is the
		 * whole stub, which must start no thread before this line. */
		if (write(STUB_FD_CGROUP0 + i, "0\n", 2) != 2)
			stub_die(errno, "joining cgroup %d", i);
		close(STUB_FD_CGROUP0 + i);
	}
}

static void
set_pdeathsig(pid_t parent)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
		stub_die(errno, "PR_SET_PDEATHSIG");
	/* The launcher may have died before the line above. */
	if (getppid() != parent)
		stub_die(0, "launcher exited");
}

static void
create_namespaces(const struct stub_cfg *c)
{
	char map[64];

	/* One call: the user namespace is created first and owns the others.
	 * The network namespace is the outer stub's after the fork (main). */
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
	    CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) == -1)
		stub_die(errno, "unshare (user namespaces disabled?)");
	/* Writing our own maps needs /proc/self to be ours: dumpable. */
	if (prctl(PR_SET_DUMPABLE, 1) == -1)
		stub_die(errno, "PR_SET_DUMPABLE");
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)c->uid, (unsigned)c->uid);
	write_file("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)c->gid, (unsigned)c->gid);
	write_file("/proc/self/gid_map", map);
	/* From here on nobody of the same uid may ptrace us or open our /proc. */
	if (prctl(PR_SET_DUMPABLE, 0) == -1)
		stub_die(errno, "PR_SET_DUMPABLE");
}

static int
exit_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return SBX_EXIT_SETUP;
}

static void pid1_main(struct stub_cfg *c, int outer_pidfd, int netready)
    __attribute__((noreturn));
static void pid1_supervise(const struct stub_cfg *c, int sfd, int outer_pidfd, pid_t agent,
    uint64_t deadline) __attribute__((noreturn));
static void drop_capabilities_bounding(void);
static void drop_capabilities_all(void);
static int send_with_fd(int sock, const void *buf, size_t len, int fd);

/* The stub's own argument strings (main's argv): the configuration is parsed
 * from a copy (copy_args), so that pid 1 can clear these (hide_args). */
static char **arg_strings;
static int arg_count;

/* Parse a copy on the heap: the configuration keeps pointers into what it
 * parses, and pid 1 clears the originals. */
static char **
copy_args(int argc, char **argv)
{
	char **copy;
	int i;

	if ((copy = calloc((size_t)argc + 1, sizeof(*copy))) == NULL)
		stub_die(ENOMEM, "arguments");
	for (i = 0; i < argc; i++)
		if ((copy[i] = strdup(argv[i])) == NULL)
			stub_die(ENOMEM, "arguments");
	arg_strings = argv;
	arg_count = argc;
	return copy;
}

/* Any process in the sandbox may read /proc/1/cmdline: the broker's host
 * pid, the sandbox id, the policy's program list, its limits and the host
 * paths of the mounts have no business there.  pid 1 clears its copy of
 * the argument area (copy-on-write since the fork: the outer stub's, which
 * host tools such as ps and pgrep show, is untouched), leaving the
 * program's base name followed by NULs (the kernel reads [arg_start,
 * arg_end) as it is while its last byte stays NUL).  The agent's argv
 * (after "--") lives on in the parsed copy. */
static void
hide_args(void)
{
	const char *base;
	size_t n;
	int i;

	if (arg_count == 0)
		return;
	base = strrchr(arg_strings[0], '/');
	base = base != NULL ? base + 1 : arg_strings[0];
	n = strlen(base);
	memmove(arg_strings[0], base, n);
	explicit_bzero(arg_strings[0] + n, strlen(arg_strings[0] + n));
	for (i = 1; i < arg_count; i++)
		explicit_bzero(arg_strings[i], strlen(arg_strings[i]));
}

int
main(int argc, char **argv)
{
	struct stub_cfg c;
	pid_t child;
	int outer_pidfd, netready[2], self, netns, st;

	/* The two options every program takes; the stub is started by the
	 * broker, never by hand, so this is all it says to a person. */
	if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "--help") == 0)) {
		printf(strcmp(argv[1], "--version") == 0 ? "capbroker-stub %s\n" :
		    "capbroker-stub builds one sandbox for capbroker (version %s); it is started by "
		    "capbroker, not by hand: see capbroker-stub(1)\n", CB_VERSION);
		return 0;
	}
	argv = copy_args(argc, argv);
	parse_args(argc, argv, &c);
	check_fds(&c);
	join_cgroups(&c);
	/* With the broker's credentials still: the sources were opened with
	 * them, and cloning one needs to search it (see stub_mount.c). */
	stub_capture_sources(&c);
	drop_host_privileges(&c);
	/* After the credential change: it clears the parent-death signal. */
	set_pdeathsig(c.parent_pid);
	create_namespaces(&c);

	/* Before the fork, so that pid 1 and the agent inherit the emptied
	 * bounding set (each still drops it, finding nothing to drop). */
	drop_capabilities_bounding();
	outer_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (outer_pidfd == -1)
		stub_die(errno, "pidfd_open");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, netready) == -1)
		stub_die(errno, "socketpair");
	/* Opened now: pid 1's pivot_root moves this process's root too (one
	 * mount namespace), and the sandbox's /proc does not show it. */
	if ((self = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
		stub_die(errno, "/proc/self");
	child = fork();
	if (child == -1)
		stub_die(errno, "fork");
	if (child == 0) {
		close(self);
		close(netready[1]);
		pid1_main(&c, outer_pidfd, netready[0]);
	}

	/* The network namespace (most of the namespaces' cost: its loopback
	 * device and sysctls) is made here, on another CPU if there is one,
	 * while pid 1 builds the file system; pid 1 joins it before the
	 * agent process exists (pid1_join_net).  By a descriptor: the kernel
	 * lets no one join through the pidfd of a process that is not
	 * dumpable.  If this fails, we say why and exit, and pid 1 dies with
	 * us (its parent-death signal).  A pid 1 already gone (a setup step
	 * of its own failed, and it said why) is relayed below as always. */
	close(netready[0]);
	if (unshare(CLONE_NEWNET) == -1)
		stub_die(errno, "unshare (network namespace)");
	if ((netns = openat(self, "ns/net", O_RDONLY | O_CLOEXEC)) == -1)
		stub_die(errno, "/proc/self/ns/net");
	if (send_with_fd(netready[1], "n", 1, netns) != 0 && errno != EPIPE &&
	    errno != ECONNRESET)
		stub_die(errno, "passing pid 1 its network namespace");
	close(netns);
	close(self);
	close(netready[1]);

	/* Outer stub: hold nothing the sandbox could use (no descriptor, no
	 * capability in the sandbox's user namespace), relay the status. */
	if (close_range(0, ~0U, 0) == -1)
		_exit(SBX_EXIT_SETUP);
	drop_capabilities_all();
	while (waitpid(child, &st, 0) == -1) {
		if (errno != EINTR)
			_exit(SBX_EXIT_SETUP);
	}
	_exit(exit_code(st));
}

/* ------------------------------------------------------------------ pid 1 */

/* Split "#!interp [arg]" the way the kernel does (binfmt_script): the
 * interpreter up to the first blank, one optional argument to the end of the
 * line with trailing blanks removed.  buf is NUL-terminated. */
static bool
parse_shebang(char *buf, char **interp, char **arg)
{
	char *p, *nl;

	if (buf[0] != '#' || buf[1] != '!')
		return false;
	nl = strchr(buf, '\n');
	if (nl == NULL)
		stub_die(0, "script interpreter line too long");
	*nl = '\0';
	for (p = nl - 1; p > buf + 1 && (*p == ' ' || *p == '\t'); p--)
		*p = '\0';
	for (p = buf + 2; *p == ' ' || *p == '\t'; p++)
		;
	if (*p == '\0')
		stub_die(0, "script has an empty interpreter line");
	*interp = p;
	for (; *p != '\0' && *p != ' ' && *p != '\t'; p++)
		;
	*arg = NULL;
	if (*p != '\0') {
		*p++ = '\0';
		for (; *p == ' ' || *p == '\t'; p++)
			;
		if (*p != '\0')
			*arg = p;
	}
	return true;
}

/* Resolve name in the sandbox's PATH like execvp() would. */
static char *
find_in_path(const char *name, char *buf, size_t len)
{
	static const char *const dirs[] = { "/capbroker/bin", "/usr/local/bin", "/usr/bin", "/bin" };

	if (strchr(name, '/') != NULL) {
		if (snprintf(buf, len, "%s", name) >= (int)len)
			stub_die(0, "command path too long");
		return buf;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (snprintf(buf, len, "%s/%s", dirs[i], name) >= (int)len)
			continue;
		if (access(buf, X_OK) == 0)
			return buf;
	}
	stub_die(0, "command not found in the sandbox: %.200s", name);
}

/* Move fd to exactly number want (above the agent's future RLIMIT_NOFILE:
 * our own soft limit is raised for it, within the hard one). */
static void
place_fd(int fd, int want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		stub_die(errno, "getrlimit");
	if (rl.rlim_cur <= (rlim_t)want) {
		if (rl.rlim_max <= (rlim_t)want)
			stub_die(0, "hard RLIMIT_NOFILE %llu too low for descriptor %d",
			    (unsigned long long)rl.rlim_max, want);
		rl.rlim_cur = (rlim_t)want + 1;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			stub_die(errno, "setrlimit NOFILE");
	}
	if (fd == want)
		return;
	if (fcntl(fd, F_DUPFD_CLOEXEC, want) != want)
		stub_die(errno, "placing the exec descriptor at %d", want);
	close(fd);
}

/* Open the agent binary at exactly c->exec_fd.  A script's interpreter is
 * resolved here (execveat of an O_CLOEXEC script descriptor cannot work),
 * and argv is rewritten to "interp [arg] script args...". */
static char **
open_agent(struct stub_cfg *c)
{
	static char path[PATH_MAX], ipath[PATH_MAX];
	char head[257];
	char *interp, *iarg, **nargv;
	size_t argc, k = 0;
	ssize_t n;
	int fd, rfd;

	find_in_path(c->argv[0], path, sizeof(path));
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd == -1)
		stub_die(errno, "agent %.200s", path);
	for (argc = 0; c->argv[argc] != NULL; argc++)
		;
	nargv = calloc(argc + 3, sizeof(*nargv));
	if (nargv == NULL)
		stub_die(errno, "calloc");
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	n = rfd == -1 ? 0 : read(rfd, head, sizeof(head) - 1);
	if (rfd != -1)
		close(rfd);
	head[n > 0 ? n : 0] = '\0';
	if (parse_shebang(head, &interp, &iarg)) {
		if (interp[0] != '/')
			stub_die(0, "script interpreter must be absolute: %.200s", interp);
		snprintf(ipath, sizeof(ipath), "%s", interp);
		close(fd);
		fd = open(ipath, O_PATH | O_CLOEXEC);
		if (fd == -1)
			stub_die(errno, "script interpreter %.200s", ipath);
		nargv[k++] = ipath;
		if (iarg != NULL)
			nargv[k++] = iarg;
		nargv[k++] = path;
		for (size_t i = 1; i < argc; i++)
			nargv[k++] = c->argv[i];
	} else {
		for (size_t i = 0; i < argc; i++)
			nargv[k++] = c->argv[i];
	}
	place_fd(fd, c->exec_fd);
	return nargv;
}

static void
set_rlimit(int res, const char *name, uint64_t soft, uint64_t hard)
{
	struct rlimit rl = { .rlim_cur = soft, .rlim_max = hard };

	if (setrlimit(res, &rl) == -1)
		stub_die(errno, "setrlimit %s", name);
}

static void
apply_limits(const struct stub_cfg *c)
{
	const struct sbx_limits *l = &c->lim;

	/* Never built with AddressSanitizer (see module.mk): its shadow
	 * memory could not live under these. */
	set_rlimit(RLIMIT_AS, "AS", l->mem_bytes * 4, l->mem_bytes * 4);
	set_rlimit(RLIMIT_DATA, "DATA", l->mem_bytes, l->mem_bytes);
	set_rlimit(RLIMIT_NOFILE, "NOFILE", l->nofile, l->nofile);
	set_rlimit(RLIMIT_NPROC, "NPROC", l->nproc, l->nproc);
	set_rlimit(RLIMIT_FSIZE, "FSIZE", l->fsize_bytes, l->fsize_bytes);
	set_rlimit(RLIMIT_CORE, "CORE", 0, 0);
	set_rlimit(RLIMIT_CPU, "CPU", l->cpu_secs, l->cpu_secs + 1);
	set_rlimit(RLIMIT_MEMLOCK, "MEMLOCK", 64 << 10, 64 << 10);
	set_rlimit(RLIMIT_MSGQUEUE, "MSGQUEUE", 0, 0);
	/* The stub inherits the broker's umask, 077 for its own state: the
	 * agent's files in the workspace would all have been private on the
	 * host (a build's objects 0600, a clone's directories 0700).  Nothing
	 * else of the caller is inherited either, so the agent gets the usual
	 * default, as a fresh login would. */
	umask(STUB_AGENT_UMASK);
}

/* Empty every capability set.  The agent's uid is not 0 in its user
 * namespace and no_new_privs is set, so execve() cannot give any back; the
 * locked securebits make sure of it even if that changed. */
static void
drop_capabilities_bounding(void)
{
	for (int cap = 0; cap <= 63; cap++) {
		int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

		if (in == -1 && errno == EINVAL)
			break;		/* past the kernel's last capability */
		/* Each drop is a new set of credentials: the outer stub drops
		 * the set before pid 1 and the agent exist, and they find
		 * nothing left to drop but still look. */
		if (in != 0 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == -1)
			stub_die(errno, "PR_CAPBSET_DROP %d", cap);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1)
		stub_die(errno, "PR_CAP_AMBIENT_CLEAR_ALL");
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
	    SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
	    SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
	    SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) == -1)
		stub_die(errno, "PR_SET_SECUREBITS");
}

/* Empty the permitted, effective and inheritable sets, but for keep (a
 * capability number, or -1 for none). */
static void
drop_capabilities_but(int keep)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (keep >= 0) {
		d[keep / 32].permitted = 1u << (keep % 32);
		d[keep / 32].effective = 1u << (keep % 32);
	}
	if (syscall(SYS_capset, &h, d) == -1)
		stub_die(errno, "capset");
}

static void
drop_capabilities_all(void)
{
	drop_capabilities_but(-1);
}

/* Is env entry e ("NAME=...") the variable name? */
static bool
env_is(const char *e, const char *name)
{
	size_t n = strlen(name);

	return strncmp(e, name, n) == 0 && e[n] == '=';
}

/* Drop every entry named name from env (n entries); returns the new count. */
static size_t
env_drop(char **env, size_t n, const char *name)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (!env_is(env[i], name))
			env[k++] = env[i];
	}
	return k;
}

/* The agent's environment: built from nothing (see docs/sandbox.md), then
 * the caller's --unsetenv and --setenv, in that order.  The caller chose
 * them for its own agent: they change what the agent is told, never what
 * the sandbox allows. */
static char **
agent_env(const struct stub_cfg *c)
{
	static char fdv[32], idv[16 + SBX_ID_MAX], termv[64];
	static char *env[16 + STUB_MAX_ENV];
	size_t n = 0;
	bool nobody = c->uid == 65534;

	env[n++] = "PATH=/capbroker/bin:/usr/local/bin:/usr/bin:/bin";
	env[n++] = "HOME=/tmp";
	/* The name /etc/passwd gives the uid (write_etc): scripts and tools
	 * that read $USER (paths named after it, greetings, cache keys) got
	 * an empty string. */
	env[n++] = nobody ? "USER=nobody" : "USER=agent";
	env[n++] = nobody ? "LOGNAME=nobody" : "LOGNAME=agent";
	env[n++] = "LANG=C.UTF-8";
	env[n++] = "TMPDIR=/tmp";
	if (c->pylib != NULL)
		env[n++] = "PYTHONPATH=/capbroker/python";
	if (c->have_broker_fd) {
		snprintf(fdv, sizeof(fdv), "CAPBROKER_FD=%d", SBX_AGENT_FD);
		env[n++] = fdv;
	}
	snprintf(idv, sizeof(idv), "CAPBROKER_SANDBOX=%s", c->id);
	env[n++] = idv;
	if (c->pty) {
		snprintf(termv, sizeof(termv), "TERM=xterm-256color");
		env[n++] = termv;
	}
	/* The medium tier starts only its listed programs, and no pager is
	 * among them: on a terminal, git log, git diff and man printed
	 * "fatal: cannot exec 'pager': Permission denied" before their output
	 * (cat is listed; an agent cannot page anyway). */
	if (c->tier == SBX_TIER_MEDIUM)
		env[n++] = "PAGER=cat";
	for (size_t i = 0; i < c->nunsetenv; i++)
		n = env_drop(env, n, c->unsetenv[i]);
	for (size_t i = 0; i < c->nsetenv; i++) {
		const char *name = c->setenv[2 * i], *val = c->setenv[2 * i + 1];
		size_t len = strlen(name) + strlen(val) + 2;
		char *e = malloc(len);

		if (e == NULL)
			stub_die(ENOMEM, "--setenv");
		snprintf(e, len, "%s=%s", name, val);
		n = env_drop(env, n, name);
		env[n++] = e;	/* lives until exec */
	}
	env[n] = NULL;
	return env;
}

/* The agent, pid 2.  Layers in order; seccomp last because it forbids
 * almost everything the earlier steps use. */
/* Send buf (len bytes, one message) with descriptor fd attached over
 * socket sock: the agent hands pid 1 the seccomp listener this way, and
 * pid 1 hands it to the broker with its "ready" report (--notify). */
static int
send_with_fd(int sock, const void *buf, size_t len, int fd)
{
	/* ETOOMANYREFS: the descriptors in flight of our host uid (shared by
	 * every sandbox of that uid: nobody, under a root broker) exceed our
	 * RLIMIT_NOFILE for a moment, while another agent sends a burst.  It
	 * passes: wait for it (up to 3 s) rather than fail the start. */
	for (int i = 0; i < 300; i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		if (wire_packet_send(sock, buf, len, &fd, 1, MSG_NOSIGNAL) == (ssize_t)len)
			return 0;
		if (errno != ETOOMANYREFS && errno != EINTR)
			return -1;
		nanosleep(&ts, NULL);
	}
	return -1;
}

/* Hand the seccomp listener to pid 1 over the socket notify_sock. */
static void
send_listener(int notify_sock, int listener)
{
	if (send_with_fd(notify_sock, "L", 1, listener) != 0)
		stub_die(errno, "passing the seccomp listener");
	close(listener);
	close(notify_sock);
}

/* One byte carrying exactly one descriptor, on sock: the descriptor; -1
 * when no byte came (the peer closed, or failed first); -2 for any other
 * message (its descriptors closed). */
static int
recv_one_fd(int sock)
{
	struct wire_packet pk;
	char byte;
	ssize_t n;

	do
		n = wire_packet_recv(sock, &byte, 1, 0, &pk);
	while (n == -1 && errno == EINTR);
	if (n != 1) {
		wire_packet_close(&pk);
		return -1;
	}
	if (pk.nfds != 1 || pk.ctrunc || pk.trunc) {
		wire_packet_close(&pk);
		return -2;
	}
	return pk.fds[0];
}

static int
recv_listener(int notify_sock)
{
	int fd = recv_one_fd(notify_sock);

	/* -1: the agent failed before; it reported why. */
	if (fd == -2)
		stub_die(0, "bad seccomp listener message");
	return fd;
}

static void handover_parse(struct stub_cfg *c, char *msg, size_t len);

/* Read the hand-over pid 1 forwards on go (its length, then its bytes)
 * into msg (STUB_HANDOVER_MAX + 1 bytes); its length. */
static size_t
agent_recv_handover(int go, char *msg)
{
	size_t len = 0, got = 0;
	ssize_t r;

	while (got < sizeof(len)) {
		r = read(go, (char *)&len + got, sizeof(len) - got);
		if (r <= 0 && !(r == -1 && errno == EINTR))
			stub_die(r == 0 ? 0 : errno, "hand-over from pid 1");
		got += r > 0 ? (size_t)r : 0;
	}
	if (len == 0 || len > STUB_HANDOVER_MAX)
		stub_die(0, "hand-over from pid 1: bad length");
	for (got = 0; got < len; ) {
		r = read(go, msg + got, len - got);
		if (r <= 0 && !(r == -1 && errno == EINTR))
			stub_die(r == 0 ? 0 : errno, "hand-over from pid 1");
		got += r > 0 ? (size_t)r : 0;
	}
	close(go);
	return len;
}

/*
 * The agent of a pooled sandbox, forked and locked before its task is
 * known: every layer that does not name the task (no capabilities, no new
 * privileges, the tier's seccomp filter, whose listener pid 1 holds before
 * it says "pooled") is applied while the sandbox waits, so that a hand-over
 * is the task's own steps only (its id, working directory, binary,
 * environment, rlimits and the Landlock ruleset that names the binary) and
 * the one exec pid 1 lets through.  Why the order is safe: nothing but this
 * code runs in the process until that exec, and every layer is in place
 * before it; Landlock after seccomp only needs calls the filter allows
 * every agent (landlock_*, openat, fstat: "further self-restriction is
 * always fine").  The task arrives from pid 1 on go, after pid 1 has
 * parsed and checked it; this process parses the same bytes the same way.
 */
static void __attribute__((noreturn))
agent_pooled(struct stub_cfg *c, int errpipe, int notify_sock, int go, int ll_abi)
{
	static char msg[STUB_HANDOVER_MAX + 1];
	sigset_t none;
	char **nargv, **env;
	size_t len;

	stub_stage = "agent";
	stub_errpipe = errpipe;
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) == -1)
		stub_die(errno, "sigprocmask");
	if (setsid() == -1)
		stub_die(errno, "setsid");
	drop_capabilities_bounding();
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		stub_die(errno, "PR_SET_NO_NEW_PRIVS");
	drop_capabilities_all();
	send_listener(notify_sock, stub_seccomp_apply(c));
	len = agent_recv_handover(go, msg);
	msg[len] = '\0';
	handover_parse(c, msg, len);
	if (chdir(c->chdir != NULL ? c->chdir : "/tmp") == -1)
		stub_die(errno, "--chdir %.200s", c->chdir != NULL ? c->chdir : "/tmp");
	nargv = open_agent(c);
	env = agent_env(c);
	if (close_range(SBX_AGENT_FD + (c->have_broker_fd ? 1 : 0), ~0U,
	    CLOSE_RANGE_CLOEXEC) == -1)
		stub_die(errno, "close_range");
	apply_limits(c);
	stub_landlock_apply(c, ll_abi);
	syscall(SYS_execveat, c->exec_fd, "", nargv, env, AT_EMPTY_PATH);
	stub_die(errno, "exec %.200s", nargv[0]);
}

static void __attribute__((noreturn))
agent_main(struct stub_cfg *c, int errpipe, int notify_sock, int ll_abi)
{
	sigset_t none;
	char **nargv, **env;
	int listener;

	stub_stage = "agent";
	stub_errpipe = errpipe;
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) == -1)
		stub_die(errno, "sigprocmask");
	/* A session of its own: no controlling terminal to inject into. */
	if (setsid() == -1)
		stub_die(errno, "setsid");
	/* With a pty (the broker's own, never the host terminal) the agent's
	 * session takes it as its controlling terminal, so ^C and job control
	 * work inside; TIOCSTI stays refused by the seccomp filter. */
	if (c->pty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) == -1)
		stub_die(errno, "TIOCSCTTY on the agent's pty");
	if (chdir(c->chdir != NULL ? c->chdir : "/tmp") == -1)
		stub_die(errno, "--chdir %.200s", c->chdir != NULL ? c->chdir : "/tmp");
	nargv = open_agent(c);
	env = agent_env(c);
	/* Everything but stdio and the broker socket closes at exec (the status
	 * pipe, errpipe and listener socket are needed until then). */
	if (close_range(SBX_AGENT_FD + (c->have_broker_fd ? 1 : 0), ~0U,
	    CLOSE_RANGE_CLOEXEC) == -1)
		stub_die(errno, "close_range");
	apply_limits(c);
	drop_capabilities_bounding();
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		stub_die(errno, "PR_SET_NO_NEW_PRIVS");
	stub_landlock_apply(c, ll_abi);
	drop_capabilities_all();
	listener = stub_seccomp_apply(c);
	send_listener(notify_sock, listener);
	syscall(SYS_execveat, c->exec_fd, "", nargv, env, AT_EMPTY_PATH);
	stub_die(errno, "exec %.200s", nargv[0]);
}

static void
kill_all_and_exit(int code)
{
	/* From pid 1 this reaches every other process of the namespace; our own
	 * exit then makes the kernel kill anything that raced with it. */
	kill(-1, SIGKILL);
	_exit(code);
}

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait for the broker's next message on the status socket (a pooled
 * sandbox's hand-over, a held one's "go"): true once it is there, false if
 * the waiting agent died first (SIGCHLD on sfd; it never ran agent code).
 * The outer stub's death ends the sandbox here. */
static bool
pid1_await_word(int outer_pidfd, int sfd)
{
	struct pollfd pfd[3] = {
		{ .fd = STUB_FD_STATUS, .events = POLLIN },
		{ .fd = outer_pidfd, .events = POLLIN },
		{ .fd = sfd, .events = POLLIN },
	};

	for (;;) {
		if (poll(pfd, 3, -1) == -1) {
			if (errno == EINTR)
				continue;
			stub_die(errno, "poll");
		}
		if (pfd[1].revents != 0)
			kill_all_and_exit(128 + SIGKILL);
		if (pfd[2].revents != 0)
			return false;
		if (pfd[0].revents != 0)
			return true;
	}
}

/*
 * A pooled sandbox (--pool): everything is built but the task, and its
 * agent process waits locked (agent_pooled).  pid 1 says so ("pooled ...")
 * and waits for the broker's hand-over on the status socket: one message
 * of NUL-terminated strings, the per-exec options and "--" and the
 * command, read with the same option table and checks as the command line.
 * Nothing of the sandbox has run any agent code yet, so there is nothing a
 * previous task could have left.  The broker closing the socket (the pool
 * drained), the outer stub dying or the waiting agent dying ends it.
 */
static void
pid1_await_handover(struct stub_cfg *c, int outer_pidfd, int sfd, int ll_abi, char **msgp,
    size_t *lenp)
{
	static char msg[STUB_HANDOVER_MAX + 1];
	char line[96];
	int n;
	ssize_t r;

	n = snprintf(line, sizeof(line), "pooled landlock=%d cgroup=%d\n", ll_abi,
	    c->ncgroup > 0 || c->in_cgroup ? 1 : 0);
	if (write(STUB_FD_STATUS, line, (size_t)n) != n)
		kill_all_and_exit(SBX_EXIT_SETUP);
	if (!pid1_await_word(outer_pidfd, sfd))
		kill_all_and_exit(SBX_EXIT_SETUP);
	do
		r = recv(STUB_FD_STATUS, msg, sizeof(msg), MSG_TRUNC);
	while (r == -1 && errno == EINTR);
	if (r == 0)
		kill_all_and_exit(128 + SIGKILL);	/* drained: never used */
	if (r < 0)
		stub_die(errno, "hand-over");
	if ((size_t)r >= sizeof(msg))
		stub_die(0, "hand-over too long or not NUL-terminated");
	*msgp = msg;
	*lenp = (size_t)r;
	handover_parse(c, msg, (size_t)r);
}

/*
 * A held sandbox (--hold): everything is built and the agent is locked, its
 * one exec waiting on pid 1's seccomp listener, but pid 1 lets it through
 * only on the broker's word: one "go" message on the status socket.  The
 * broker builds its own side meanwhile (`capbroker run`: state, audit log,
 * the sandbox's record and its "sandbox.start" line) and says go once that
 * is done, so no agent code runs before the sandbox is on the record.  The
 * broker closing the socket, or anything else on it, ends the sandbox
 * unstarted; so does the outer stub's or the waiting agent's death.
 */
static void
pid1_await_go(int outer_pidfd, int sfd)
{
	char msg[8];
	ssize_t r;

	if (!pid1_await_word(outer_pidfd, sfd))
		stub_die(0, "the agent process died before its start");
	do
		r = recv(STUB_FD_STATUS, msg, sizeof(msg), MSG_TRUNC);
	while (r == -1 && errno == EINTR);
	if (r == 0)
		kill_all_and_exit(SBX_EXIT_SETUP);	/* the broker gave up on it */
	if (r != 2 || memcmp(msg, "go", 2) != 0)
		stub_die(r < 0 ? errno : 0, "the broker's word to start");
}

/* Hand the waiting agent the hand-over pid 1 has checked: its length, then
 * its bytes (the agent parses them as pid 1 did). */
static void
pid1_forward_handover(int go, const char *msg, size_t len)
{
	size_t off = 0;

	while (off < sizeof(len) + len) {
		const char *p = off < sizeof(len) ? (const char *)&len + off : msg + (off - sizeof(len));
		size_t n = off < sizeof(len) ? sizeof(len) - off : len - (off - sizeof(len));
		ssize_t r = send(go, p, n, MSG_NOSIGNAL);

		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			kill_all_and_exit(SBX_EXIT_SETUP);	/* the agent is gone */
		off += (size_t)r;
	}
	close(go);
}

/* A hand-over (len bytes at msg, msg[len] writable): NUL-terminated
 * strings, the per-exec options, "--" and the command, read with the
 * command line's own option table and checks (parse_handover). */
static void
handover_parse(struct stub_cfg *c, char *msg, size_t len)
{
	static char *av[STUB_HANDOVER_ARGS + 2];
	int ac = 0;

	if (len == 0 || len > STUB_HANDOVER_MAX || msg[len - 1] != '\0')
		stub_die(0, "hand-over too long or not NUL-terminated");
	av[ac++] = (char *)"capbroker-stub";
	for (char *s = msg; s < msg + len; s += strlen(s) + 1) {
		if (ac > STUB_HANDOVER_ARGS)
			stub_die(0, "hand-over has too many strings");
		av[ac++] = s;
	}
	av[ac] = NULL;
	parse_handover(c, ac, av);
}

/* Tells the launcher the agent runs (with the seccomp listener when
 * --notify asked for it), then lets go of the status pipe and stdio. */
static void
pid1_report_ready(const struct stub_cfg *c, int ll_abi, int listener)
{
	char ready[96];

	snprintf(ready, sizeof(ready), "ready landlock=%d cgroup=%d\n", ll_abi,
	    c->ncgroup > 0 || c->in_cgroup ? 1 : 0);
	if (listener != -1) {
		/* The agent runs: a broker that does not get its listener
		 * cannot serve it, so it goes down rather than on unserved. */
		if (send_with_fd(STUB_FD_STATUS, ready, strlen(ready), listener) != 0)
			kill_all_and_exit(SBX_EXIT_SETUP);
		close(listener);
	} else {
		(void)!write(STUB_FD_STATUS, ready, strlen(ready));
	}
	/* With --mount-later the status socket stays: it is the broker's
	 * channel for trees granted while the agent runs. */
	if (!c->report_exit && !c->mount_later)
		close(STUB_FD_STATUS);
	/* The agent's stdio is the agent's: its end-of-file must reach the
	 * broker when the agent closes it, not when pid 1 exits. */
	close(STDIN_FILENO);
	close(STDOUT_FILENO);
	close(STDERR_FILENO);
}

/* "slot N DST" (args points at "N DST"): attach the broker's slot N at DST.
 * The answer goes in reply; its length. */
static int
pid1_slot_request(const char *args, char *reply, size_t len)
{
	char why[256];
	const char *dst = strchr(args, ' ');
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(args, &end, 10);
	if (dst == NULL || end != dst || end == args || errno != 0 || dst[1] != '/' ||
	    n >= stub_mount_nslots())
		return snprintf(reply, len, "fail ?: bad request");
	dst++;
	if (stub_mount_slot((size_t)n, dst, why, sizeof(why)) != 0)
		return snprintf(reply, len, "fail %s: %s", dst, why);
	return snprintf(reply, len, "ok %s", dst);
}

/* One request of the broker on the status socket (--mount-later): "mount
 * DST" with the detached mount of a tree granted while the agent runs.  The
 * broker is trusted; the request is checked all the same.  The answer is
 * "ok DST" or "fail DST: reason".  *chan becomes -1 once the broker is gone
 * (that alone ends nothing: the agent's socket says when it goes). */
static void
pid1_mount_request(int *chan)
{
	char buf[PATH_MAX + 16], reply[PATH_MAX + 320], why[256];
	struct wire_packet pk;
	ssize_t n;
	int len;

	n = wire_packet_recv(*chan, buf, sizeof(buf) - 1, MSG_DONTWAIT, &pk);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		wire_packet_close(&pk);
		close(*chan);
		*chan = -1;
		return;
	}
	buf[n] = '\0';
	if (!pk.trunc && !pk.ctrunc && pk.nfds == 0 && strlen(buf) == (size_t)n &&
	    strncmp(buf, "slot ", 5) == 0)
		len = pid1_slot_request(buf + 5, reply, sizeof(reply));
	else if (pk.trunc || pk.ctrunc || pk.nfds != 1 || strlen(buf) != (size_t)n ||
	    strncmp(buf, "mount /", 7) != 0)
		len = snprintf(reply, sizeof(reply), "fail ?: bad request");
	else if (stub_mount_late(pk.fds[0], buf + 6, why, sizeof(why)) != 0)
		len = snprintf(reply, sizeof(reply), "fail %s: %s", buf + 6, why);
	else
		len = snprintf(reply, sizeof(reply), "ok %s", buf + 6);
	wire_packet_close(&pk);
	if (len > 0)
		(void)wire_packet_send(*chan, reply, (size_t)len < sizeof(reply) ? (size_t)len :
		    sizeof(reply) - 1, NULL, 0, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* pid 1's life once the agent runs: it exits with the agent, or kills
 * everything when the wall-clock limit passes, the outer stub dies or the
 * broker closes its end; with --mount-later it attaches the broker's later
 * mounts meanwhile. */
static void
pid1_supervise(const struct stub_cfg *c, int sfd, int outer_pidfd, pid_t agent,
    uint64_t deadline)
{
	struct pollfd pfd[4];
	int st, chan = c->mount_later ? STUB_FD_STATUS : -1;

	pfd[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = outer_pidfd, .events = POLLIN };
	/* events 0: only POLLHUP/POLLERR, i.e. the broker closed its end. */
	pfd[2] = (struct pollfd){ .fd = c->have_broker_fd ? STUB_FD_BROKER : -1, .events = 0 };
	for (;;) {
		struct signalfd_siginfo si;
		uint64_t now = mono_ms();
		pid_t p;

		pfd[3] = (struct pollfd){ .fd = chan, .events = POLLIN };
		if (now >= deadline)
			kill_all_and_exit(SBX_EXIT_TIMEOUT);
		if (poll(pfd, 4, (int)(deadline - now > INT_MAX ? INT_MAX : deadline - now)) == -1 &&
		    errno != EINTR)
			kill_all_and_exit(SBX_EXIT_SETUP);
		if (pfd[1].revents != 0 || (pfd[2].revents & (POLLHUP | POLLERR)) != 0)
			kill_all_and_exit(128 + SIGKILL);
		if (chan != -1 && pfd[3].revents != 0)
			pid1_mount_request(&chan);
		while (read(sfd, &si, sizeof(si)) > 0)
			;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			if (p == agent) {
				/* --report-exit: the broker may answer now, not
				 * after the namespaces are torn down; after the
				 * kill, so that every other process of the
				 * sandbox has SIGKILL pending when it hears. */
				if (c->report_exit) {
					kill(-1, SIGKILL);
					(void)!dprintf(STUB_FD_STATUS, "exit %d\n", exit_code(st));
				}
				kill_all_and_exit(exit_code(st));
			}
		}
	}
}

/* SIGCHLD as a descriptor, for the supervisor's poll. */
static int
pid1_signalfd(void)
{
	sigset_t chld;
	int sfd;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, NULL) == -1)
		stub_die(errno, "sigprocmask");
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd == -1)
		stub_die(errno, "signalfd");
	return sfd;
}

/* Returns once the agent has exec'd its command; ends the sandbox if it
 * did not.  errfd is the read end of the agent's status pipe: EOF means
 * the exec succeeded (close-on-exec), a byte that the agent reported a
 * failure on the status pipe itself. */
static void
pid1_await_exec(int errfd, pid_t agent, bool execd)
{
	ssize_t n;
	char b;
	int st;

	do
		n = read(errfd, &b, 1);
	while (n == -1 && errno == EINTR);
	close(errfd);
	if (n == 0 && execd)
		return;
	while (waitpid(agent, &st, 0) == -1 && errno == EINTR)
		;
	if (n == 0)	/* died without a word (a crash): say so */
		stub_die(0, "the agent process died during setup (status %d)", exit_code(st));
	kill_all_and_exit(SBX_EXIT_SETUP);
}

/* Enter the network namespace the outer stub made (main) once it says it
 * is there.  Before the agent process, the listener and every socket pid 1
 * makes exist: they all come to be in it; and before forbid_namespaces
 * (stub_mount_pivot), which would refuse the outer stub's. */
static void
pid1_join_net(int netready)
{
	int ns = recv_one_fd(netready);

	if (ns < 0)
		stub_die(0, "the outer stub made no network namespace");
	close(netready);
	/* EINVAL if it is anything but a network namespace. */
	if (setns(ns, CLONE_NEWNET) == -1)
		stub_die(errno, "joining the sandbox's network namespace");
	close(ns);
}

static void
pid1_main(struct stub_cfg *c, int outer_pidfd, int netready)
{
	struct pollfd pfd[3];
	pid_t agent;
	int errpipe[2], notify[2], go[2] = { -1, -1 }, sfd, ll_abi, listener;
	bool execd;
	uint64_t deadline;

	stub_stage = "pid1";
	hide_args();
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
		stub_die(errno, "PR_SET_PDEATHSIG");
	/* getppid() is 0 across the pid namespace boundary: ask the pidfd. */
	pfd[0] = (struct pollfd){ .fd = outer_pidfd, .events = POLLIN };
	if (poll(pfd, 1, 0) != 0)
		stub_die(0, "outer stub exited");
	if (fcntl(outer_pidfd, F_SETFD, FD_CLOEXEC) == -1)
		stub_die(errno, "pidfd");

	stub_mount_setup(c);
	/* Before the pivot, which forbids new namespaces in the sandbox's
	 * user namespace: the outer stub's network namespace counts. */
	pid1_join_net(netready);
	stub_mount_pivot(c);
	stub_mount_send_fuse(c);
	ll_abi = stub_landlock_abi();

	sfd = pid1_signalfd();
	if (pipe2(errpipe, O_CLOEXEC) == -1)
		stub_die(errno, "pipe");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, notify) == -1)
		stub_die(errno, "socketpair");
	/* A pooled sandbox's agent is forked (and locked) before its task is
	 * known; the task comes to it on go. */
	if (c->pool && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) == -1)
		stub_die(errno, "socketpair");

	agent = fork();
	if (agent == -1)
		stub_die(errno, "fork");
	if (agent == 0) {
		close(errpipe[0]);
		close(sfd);
		close(outer_pidfd);
		close(notify[0]);
		if (c->pool) {
			close(go[0]);
			agent_pooled(c, errpipe[1], notify[1], go[1], ll_abi);
		}
		agent_main(c, errpipe[1], notify[1], ll_abi);
	}
	close(errpipe[1]);
	close(notify[1]);
	/* The agent process reaches its exec only through the seccomp
	 * listener: pid 1 sees the call and lets exactly that one through.
	 * With --notify the listener then goes to the broker with the
	 * "ready" report (its later notifications are the agent's connect()
	 * calls); otherwise it is closed and notified calls fail (ENOSYS).
	 * Until the broker has it, a connect() simply waits.  A pooled
	 * sandbox is "pooled" only once its agent is locked (pid 1 has the
	 * listener). */
	listener = recv_listener(notify[0]);
	close(notify[0]);
	if (c->pool) {
		char *msg;
		size_t len;

		close(go[1]);
		if (listener == -1)
			kill_all_and_exit(SBX_EXIT_SETUP);	/* it said why */
		pid1_await_handover(c, outer_pidfd, sfd, ll_abi, &msg, &len);
		pid1_forward_handover(go[0], msg, len);
		/* While the agent does its task's steps: it cannot exec (the
		 * one exec waits for pid 1, below) before the sandbox bears
		 * the task's id. */
		stub_mount_set_id(c);
	} else if (c->hold && listener != -1) {
		pid1_await_go(outer_pidfd, sfd);
	}
	deadline = mono_ms() + c->lim.wall_secs * 1000;
	execd = listener != -1 && stub_seccomp_allow_first_exec(listener, agent) == 0;
	if (listener != -1 && (!execd || !c->notify)) {
		close(listener);
		listener = -1;
	}
	pid1_await_exec(errpipe[0], agent, execd);
	/* pid 1 needs no privilege from here on, but for --mount-later:
	 * CAP_SYS_ADMIN in the sandbox's own user namespace, to attach the
	 * broker's later mounts (move_mount).  Why that is safe: the agent
	 * cannot ptrace pid 1 or open its /proc files (seccomp; pid 1 is not
	 * dumpable and holds a capability the agent lacks), cannot reach the
	 * status socket (close-on-exec before the agent's exec), and pid 1
	 * acts only on the broker's requests, on its own tmpfs
	 * (stub_mount_late). */
	drop_capabilities_bounding();
	drop_capabilities_but(c->mount_later ? CAP_SYS_ADMIN : -1);
	pid1_report_ready(c, ll_abi, listener);
	pid1_supervise(c, sfd, outer_pidfd, agent, deadline);
}
