/*
 * test_sandbox.c - unit tests of the launcher API (sandbox-stub/sandbox.h):
 * configuration checks, exit status mapping, and real sandboxes started
 * through capbroker-stub ($CB_BIN/capbroker-stub, else bin/).
 *
 * Runs as the broker would (trusted side); the agents it starts are tiny
 * system programs.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "wire/packet.h"

#include "sandbox-stub/sandbox.h"
#include "sandbox-stub/stub_int.h"
#include "tests/tap.h"

static struct sbx_config
config(enum sbx_tier tier, char **argv)
{
	struct sbx_config c;

	memset(&c, 0, sizeof(c));
	c.tier = tier;
	c.id = "unit";
	c.argv = argv;
	c.broker_fd = -1;
	return c;
}

/* Wait for the stub; returns the sandbox's exit code. */
static int
reap(struct sbx_proc *p)
{
	siginfo_t si;
	int st;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED) == -1)
		return -1;
	st = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
	sbx_proc_close(p);
	return sbx_wait_status(st);
}

static void
test_names(void)
{
	enum sbx_tier t;

	T_OK(sbx_tier_parse("low", &t) == 0 && t == SBX_TIER_LOW, "tier low parses");
	T_OK(sbx_tier_parse("high", &t) == 0 && t == SBX_TIER_HIGH, "tier high parses");
	T_ERR(sbx_tier_parse("root", &t), CB_EINVAL, "unknown tier refused");
	T_OK(sbx_tier_name((enum sbx_tier)7) == NULL, "out-of-range tier has no name");
	T_OK(strcmp(sbx_tier_name(SBX_TIER_MEDIUM), "medium") == 0, "medium's name");
}

static void
test_status(void)
{
	T_OK(sbx_wait_status(W_EXITCODE(0, 0)) == 0, "exit 0 maps to 0");
	T_OK(sbx_wait_status(W_EXITCODE(3, 0)) == 3, "exit 3 maps to 3");
	T_OK(sbx_wait_status(W_EXITCODE(124, 0)) == 124, "timeout stays 124");
	T_OK(sbx_wait_status(SIGKILL) == 137, "SIGKILL maps to 137");
	T_OK(sbx_wait_status(SIGSYS) == 128 + SIGSYS, "SIGSYS maps to 159");
}

static void
test_config_checks(void)
{
	char *argv[] = { "/bin/true", NULL };
	char *empty[] = { NULL };
	struct sbx_bind wb = { .src = "/tmp", .dst = "/data", .writable = true };
	struct sbx_config c;
	struct sbx_proc p;

	c = config(SBX_TIER_LOW, empty);
	T_ERR(sbx_spawn_start(&c, &p), CB_EINVAL, "empty argv refused");
	T_OK(p.pidfd == -1 && p.stdout_fd == -1, "failed start leaves descriptors at -1");
	sbx_proc_close(&p);
	c = config(SBX_TIER_LOW, argv);
	c.id = "a/b";
	T_ERR(sbx_spawn_start(&c, &p), CB_EINVAL, "id with a slash refused");
	c.id = "";
	T_ERR(sbx_spawn_start(&c, &p), CB_EINVAL, "empty id refused");
	c = config(SBX_TIER_LOW, argv);
	c.binds = &wb;
	c.nbinds = 1;
	T_ERR(sbx_spawn_start(&c, &p), CB_EPERM, "writable bind below the high tier refused");
	{
		int slot = STDIN_FILENO;

		c = config(SBX_TIER_LOW, argv);
		c.fuse_slots = 1;
		c.mount_later = true;
		T_ERR(sbx_spawn_start(&c, &p), CB_EPERM, "slots refused in the low tier");
		c = config(SBX_TIER_MEDIUM, argv);
		c.slot_fds = &slot;
		c.nslots = 1;
		T_ERR(sbx_spawn_start(&c, &p), CB_EPERM, "slots refused without mount_later");
		c.mount_later = true;
		c.fuse_slots = 1;
		T_ERR(sbx_spawn_start(&c, &p), CB_EINVAL, "the caller's slots and pid 1's exclude each other");
		c.fuse_slots = SBX_SLOTS_MAX + 1;
		c.nslots = 0;
		T_ERR(sbx_spawn_start(&c, &p), CB_EINVAL, "at most SBX_SLOTS_MAX slots");
	}
	c = config(SBX_TIER_LOW, argv);
	c.limits.nofile = SBX_NOFILE_MAX + 1;
	T_ERR(sbx_spawn_start(&c, &p), CB_EINVAL, "nofile above the maximum refused");
	c = config((enum sbx_tier)9, argv);
	T_ERR(sbx_spawn_start(&c, &p), CB_EINVAL, "unknown tier refused");
	sbx_proc_close(NULL);
}

/* The command's limits hold whatever else the configuration holds: every
 * list the launcher turns into stub options at its maximum, and a command
 * of SBX_ARGV_MAX words still runs (before, the options took their share of
 * one 1024-word table); one word or byte more is CB_ETOOBIG. */
static void
test_argv_limits(void)
{
	static char *argv[SBX_ARGV_MAX + 2];
	static char *allow[256];
	static const char *env[2 * SBX_ENV_MAX], *unenv[SBX_ENV_MAX];
	static char names[2 * SBX_ENV_MAX][16];
	static char big[SBX_ARGV_BYTES];
	char *two[] = { "/bin/true", big, NULL };
	struct sbx_config c;
	struct sbx_proc p;
	char why[256];
	int rc;

	argv[0] = "/bin/true";
	for (size_t i = 1; i < SBX_ARGV_MAX; i++)
		argv[i] = "x";
	argv[SBX_ARGV_MAX] = NULL;
	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]); i++)
		allow[i] = "/bin/true";
	for (size_t i = 0; i < SBX_ENV_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "CB_SET%zu", i);
		snprintf(names[SBX_ENV_MAX + i], sizeof(names[0]), "CB_UNSET%zu", i);
		env[2 * i] = names[i];
		env[2 * i + 1] = "v";
		unenv[i] = names[SBX_ENV_MAX + i];
	}
	T_ERR(sbx_argv_check(argv), 0, "SBX_ARGV_MAX words pass the check");
	c = config(SBX_TIER_MEDIUM, argv);
	c.exec_allow = (const char *const *)allow;
	c.nexec_allow = sizeof(allow) / sizeof(allow[0]);
	c.setenv = env;
	c.nsetenv = SBX_ENV_MAX;
	c.unsetenv = unenv;
	c.nunsetenv = SBX_ENV_MAX;
	c.chdir = "/";
	rc = sbx_spawn(&c, &p, why, sizeof(why));
	T_ERR(rc, 0, "a command of SBX_ARGV_MAX words runs beside maximal option lists (%s)", why);
	if (rc == 0)
		T_OK(reap(&p) == 0, "... and exits 0");
	argv[SBX_ARGV_MAX] = "x";
	argv[SBX_ARGV_MAX + 1] = NULL;
	T_ERR(sbx_argv_check(argv), CB_ETOOBIG, "one word more is too big");
	T_ERR(sbx_spawn_start(&c, &p), CB_ETOOBIG, "... and refused at the start");
	T_OK(p.pid == -1 && p.pidfd == -1, "... before anything is spawned");
	memset(big, 'a', sizeof(big) - 1);
	T_ERR(sbx_argv_check(two), CB_ETOOBIG, "more than SBX_ARGV_BYTES is too big");
	big[sizeof(big) - 1 - sizeof("/bin/true")] = '\0';
	T_ERR(sbx_argv_check(two), 0, "... exactly SBX_ARGV_BYTES is not");
}

static void
test_run(void)
{
	char *t_true[] = { "/bin/true", NULL };
	char *t_exit[] = { "/bin/sh", "-c", "exit 7", NULL };
	char *t_cat[] = { "/bin/cat", NULL };
	char *t_missing[] = { "/no/such/agent", NULL };
	char *t_sleep[] = { "/bin/sleep", "30", NULL };
	struct sbx_bind bad = { .src = "/nonexistent-cb-src", .dst = "/x" };
	struct sbx_config c;
	struct sbx_proc p;
	char why[256], buf[64];
	int rc;

	c = config(SBX_TIER_LOW, t_true);
	rc = sbx_spawn(&c, &p, why, sizeof(why));
	T_ERR(rc, 0, "low tier starts /bin/true (%s)", why);
	if (rc == 0) {
		T_OK(p.report.landlock_abi >= 0, "ready line carries the Landlock ABI (%d)",
		    p.report.landlock_abi);
		T_OK(reap(&p) == 0, "/bin/true exits 0");
	}

	c = config(SBX_TIER_HIGH, t_exit);
	rc = sbx_spawn(&c, &p, why, sizeof(why));
	T_ERR(rc, 0, "high tier starts sh (%s)", why);
	if (rc == 0)
		T_OK(reap(&p) == 7, "agent's exit status comes back (7)");

	c = config(SBX_TIER_LOW, t_cat);
	rc = sbx_spawn(&c, &p, why, sizeof(why));
	T_ERR(rc, 0, "cat starts (%s)", why);
	if (rc == 0) {
		struct pollfd pfd = { .fd = p.stdout_fd, .events = POLLIN };
		ssize_t n;

		T_OK(write(p.stdin_fd, "hello", 5) == 5, "stdin is a pipe into the sandbox");
		close(p.stdin_fd);
		p.stdin_fd = -1;
		n = poll(&pfd, 1, 5000) == 1 ? read(p.stdout_fd, buf, sizeof(buf)) : -1;
		T_OK(n == 5 && memcmp(buf, "hello", 5) == 0, "stdout is a pipe out of it");
		T_OK(reap(&p) == 0, "cat exits 0 at EOF");
	}

	/* The agent's end-of-file reaches the broker while it still runs. */
	{
		char *t_close[] = { "/bin/sh", "-c", "exec >&- 2>&-; /bin/sleep 3", NULL };

		c = config(SBX_TIER_HIGH, t_close);
		rc = sbx_spawn(&c, &p, why, sizeof(why));
		T_ERR(rc, 0, "sh starts (%s)", why);
		if (rc == 0) {
			struct pollfd pfd[2] = { { .fd = p.stdout_fd, .events = POLLIN },
			    { .fd = p.pidfd, .events = POLLIN } };

			T_OK(poll(&pfd[0], 1, 2000) == 1 && read(p.stdout_fd, buf, sizeof(buf)) == 0,
			    "stdout EOF when the agent closes it");
			T_OK(poll(&pfd[1], 1, 0) == 0, "... while the sandbox still runs");
			T_ERR(sbx_kill(&p), 0, "sbx_kill");
			T_OK(reap(&p) == 128 + SIGKILL, "killed");
		}
	}

	c = config(SBX_TIER_LOW, t_missing);
	rc = sbx_spawn(&c, &p, why, sizeof(why));
	T_ERR(rc, CB_EINTERNAL, "a missing agent is a setup failure");
	T_OK(strstr(why, "/no/such/agent") != NULL, "reason names the agent: %s", why);

	c = config(SBX_TIER_LOW, t_true);
	c.binds = &bad;
	c.nbinds = 1;
	rc = sbx_spawn(&c, &p, why, sizeof(why));
	T_ERR(rc, CB_EINTERNAL, "an impossible bind fails closed");
	T_OK(strstr(why, "bind source") != NULL, "reason says which bind: %s", why);

	c = config(SBX_TIER_LOW, t_sleep);
	c.limits.wall_secs = 1;
	rc = sbx_spawn(&c, &p, why, sizeof(why));
	T_ERR(rc, 0, "sleep starts (%s)", why);
	if (rc == 0)
		T_OK(reap(&p) == SBX_EXIT_TIMEOUT, "wall-clock timeout is exit 124");

	c = config(SBX_TIER_LOW, t_sleep);
	rc = sbx_spawn(&c, &p, why, sizeof(why));
	T_ERR(rc, 0, "sleep starts again (%s)", why);
	if (rc == 0) {
		T_ERR(sbx_kill(&p), 0, "sbx_kill");
		T_OK(reap(&p) == 128 + SIGKILL, "killed sandbox is 137");
	}

	/* Closing the broker's end of the socketpair ends the sandbox. */
	{
		int sp[2];

		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0) {
			c = config(SBX_TIER_LOW, t_sleep);
			c.broker_fd = sp[1];
			rc = sbx_spawn(&c, &p, why, sizeof(why));
			close(sp[1]);
			T_ERR(rc, 0, "sleep with a broker socket starts (%s)", why);
			close(sp[0]);
			if (rc == 0)
				T_OK(reap(&p) == 128 + SIGKILL, "broker hang-up kills the sandbox");
		}
	}
}

/* Poll p's status socket and the agent's stdout for ms: what came (bit 1:
 * a report, bit 2: output). */
static int
held_poll(const struct sbx_proc *p, int ms)
{
	struct pollfd pfd[2] = { { .fd = p->status_fd, .events = POLLIN },
		{ .fd = p->stdout_fd, .events = POLLIN } };
	int got = 0;

	if (poll(pfd, 2, ms) > 0)
		got = (pfd[0].revents ? 1 : 0) | (pfd[1].revents ? 2 : 0);
	return got;
}

/* A held sandbox (sbx_config.hold) runs no agent code until sbx_go: no
 * "ready", no output; after it both come and the agent's status is its
 * own.  Let go of without the word (the status socket closed), it ends
 * unstarted: 125, nothing printed.  Not with a pool. */
static void
test_hold(void)
{
	char *t_echo[] = { "/bin/echo", "started", NULL };
	struct sbx_config c;
	struct sbx_proc p;
	char why[256], buf[64];
	ssize_t n;
	int rc, i, named;

	c = config(SBX_TIER_LOW, NULL);
	c.pool = c.hold = true;
	T_ERR(sbx_spawn_start(&c, &p), CB_EINVAL, "hold refused with a pool");

	c = config(SBX_TIER_LOW, t_echo);
	c.hold = true;
	rc = sbx_spawn_start(&c, &p);
	T_ERR(rc, 0, "a held sandbox is spawned");
	if (rc != 0)
		return;
	T_OK(held_poll(&p, 1500) == 0, "... held: no report, no output in 1.5 s");
	T_ERR(sbx_go(&p), 0, "... told to go");
	do {
		struct pollfd pfd = { .fd = p.status_fd, .events = POLLIN };

		(void)poll(&pfd, 1, 5000);
		rc = sbx_spawn_finish(&p, why, sizeof(why));
	} while (rc == CB_EBUSY);
	T_ERR(rc, 0, "... then it reports ready (%s)", why);
	{
		struct pollfd pfd = { .fd = p.stdout_fd, .events = POLLIN };

		(void)poll(&pfd, 1, 5000);
	}
	n = read(p.stdout_fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	T_OK(strcmp(buf, "started\n") == 0, "... and its agent runs (it printed its word)");
	T_OK(reap(&p) == 0, "... and exits 0");

	rc = sbx_spawn_start(&c, &p);
	T_ERR(rc, 0, "another held sandbox is spawned");
	if (rc != 0)
		return;
	(void)held_poll(&p, 300);
	close(p.status_fd);
	p.status_fd = -1;
	{
		struct pollfd pfd = { .fd = p.stdout_fd, .events = POLLIN };

		(void)poll(&pfd, 1, 5000);
	}
	n = read(p.stdout_fd, buf, sizeof(buf));
	T_OK(n == 0, "... let go of without the word, its agent never runs (read %zd)", n);
	T_OK(reap(&p) == SBX_EXIT_SETUP, "... and it ends unstarted (125)");

	/* Told to go as its set-up fails: the stub closes with the word
	 * unread, and its reason must still be read (ECONNRESET comes first). */
	c.chdir = "/no/such";
	named = 0;
	for (i = 0; i < 20; i++) {
		if (sbx_spawn_start(&c, &p) != 0)
			break;
		cb_ignore(sbx_go(&p));
		do {
			struct pollfd pfd = { .fd = p.status_fd, .events = POLLIN };

			(void)poll(&pfd, 1, 5000);
			rc = sbx_spawn_finish(&p, why, sizeof(why));
		} while (rc == CB_EBUSY);
		named += rc == CB_EINTERNAL && strstr(why, "/no/such") != NULL;
		(void)reap(&p);
	}
	/* asserted whatever happened: a spawn that fails ends the loop early */
	T_OK(named == 20, "a held sandbox's set-up failure is named after its go (%d of 20, %d "
	    "spawned)", named, i);
}

/* The "fuse" report of a stub that mounted the trees itself (a broker that
 * is not root) comes from the sandbox's side: anything but the asked-for
 * number of /dev/fuse descriptors fails the start; the real ones come out
 * non-blocking. */
static int
fuse_report(size_t want, const int *fds, size_t nfds, struct sbx_proc *p, char *why,
    size_t whylen)
{
	int sv[2], rc;

	memset(p, 0, sizeof(*p));
	p->pidfd = p->stdin_fd = p->stdout_fd = p->stderr_fd = p->notify_fd = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0)
		return CB_EIO;
	p->status_fd = sv[0];
	p->nfuse = want;
	if (wire_packet_send(sv[1], "fuse", 4, fds, nfds, 0) != 4) {
		close(sv[1]);
		return CB_EIO;
	}
	close(sv[1]);
	rc = sbx_spawn_finish(p, why, whylen);
	return rc;
}

/* More connections than a packet carries (trees, then slots) come in
 * several "fuse" reports: taken in order until the number asked for, an
 * empty report refused. */
static void
test_fuse_split(int fuse)
{
	struct sbx_proc p;
	char why[256];
	int sv[2];

	memset(&p, 0, sizeof(p));
	p.pidfd = p.stdin_fd = p.stdout_fd = p.stderr_fd = p.notify_fd = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0)
		return;
	p.status_fd = sv[0];
	p.nfuse = 2;
	cb_ignore((int)wire_packet_send(sv[1], "fuse", 4, &fuse, 1, 0));
	cb_ignore((int)wire_packet_send(sv[1], "fuse", 4, &fuse, 1, 0));
	cb_ignore((int)wire_packet_send(sv[1], "fuse", 4, NULL, 0, 0));
	close(sv[1]);
	T_ERR(sbx_spawn_finish(&p, why, sizeof(why)), CB_EBUSY, "a first \"fuse\" report of two");
	T_ERR(sbx_spawn_finish(&p, why, sizeof(why)), CB_EBUSY, "... the second");
	T_OK(p.nfuse_got == 2 && p.fuse_fds[0] >= 0 && p.fuse_fds[1] >= 0 &&
	    p.fuse_fds[0] != p.fuse_fds[1], "... both connections are taken, in order");
	T_ERR(sbx_spawn_finish(&p, why, sizeof(why)), CB_EINTERNAL,
	    "an empty (or one more) \"fuse\" report is refused");
	sbx_proc_close(&p);
}

static void
test_fuse_report(void)
{
	struct sbx_proc p;
	char why[256];
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	int two[2] = { null, null };

	T_ERR(fuse_report(1, &null, 1, &p, why, sizeof(why)), CB_EINTERNAL,
	    "a \"fuse\" report carrying /dev/null is refused");
	T_OK(strstr(why, "not /dev/fuse") != NULL, "... saying it is not /dev/fuse (%s)", why);
	T_OK(p.nfuse_got == 0, "... and nothing is taken");
	sbx_proc_close(&p);
	T_ERR(fuse_report(1, two, 2, &p, why, sizeof(why)), CB_EINTERNAL,
	    "a \"fuse\" report with more connections than asked for is refused");
	sbx_proc_close(&p);
	T_ERR(fuse_report(0, &null, 1, &p, why, sizeof(why)), CB_EINTERNAL,
	    "a \"fuse\" report nobody asked for is not taken (a failed start)");
	sbx_proc_close(&p);
	if (fuse < 0) {
		T_OK(true, "# SKIP a real /dev/fuse is taken (cannot open /dev/fuse)");
	} else {
		T_ERR(fuse_report(1, &fuse, 1, &p, why, sizeof(why)), CB_EBUSY,
		    "a real /dev/fuse is taken, and the report is not \"ready\" yet");
		T_OK(p.nfuse_got == 1 && p.fuse_fds[0] >= 0 &&
		    (fcntl(p.fuse_fds[0], F_GETFL) & O_NONBLOCK) != 0,
		    "... made non-blocking for the caller");
		{
			/* A second "fuse" report on the same sandbox is refused. */
			int sv[2];
			struct sbx_proc q = p;

			if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0) {
				close(q.status_fd);
				q.status_fd = sv[0];
				cb_ignore((int)wire_packet_send(sv[1], "fuse", 4, &fuse, 1, 0));
				close(sv[1]);
				T_ERR(sbx_spawn_finish(&q, why, sizeof(why)), CB_EINTERNAL,
				    "a second \"fuse\" report is refused");
				p = q;
			}
		}
		sbx_proc_close(&p);
		test_fuse_split(fuse);
		close(fuse);
	}
	close(null);
}

/* Our own cgroup v2 directory (the "0::" line, under the first cgroup2
 * mount), or false where there is none. */
static bool
own_cgroup2(char *out, size_t len)
{
	char line[512], mnt[200] = "", own[256] = "";
	FILE *f = fopen("/proc/self/mounts", "re");

	if (f == NULL)
		return false;
	while (mnt[0] == '\0' && fgets(line, sizeof(line), f) != NULL) {
		char dev[64], dir[200], type[32];

		if (sscanf(line, "%63s %199s %31s", dev, dir, type) == 3 && strcmp(type, "cgroup2") == 0)
			snprintf(mnt, sizeof(mnt), "%s", dir);
	}
	fclose(f);
	if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
		return false;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(own, sizeof(own), "%.255s", strcmp(line + 3, "/") == 0 ? "" : line + 3);
		}
	}
	fclose(f);
	return mnt[0] != '\0' && snprintf(out, len, "%s%s", mnt, own) < (int)len;
}

/* The launcher's clone3(CLONE_INTO_CGROUP) spawn (the v2 path; on a v1 host
 * it runs on the unified hierarchy, which has no controllers but moves
 * processes all the same): the child starts in the cgroup, with only the
 * descriptors given, an empty environment, default signals, a session. */
static void
test_spawn_into(void)
{
	char parent[300], dir[400], out[1024] = "", want[512];
	char *argv[] = { "/bin/sh", "-c", "cat /proc/self/cgroup; ls /proc/self/fd | wc -l; "
	    "env | grep -vc '^PWD='; grep -E '^Sig(Ign|Blk)' /proc/self/status; "
	    "[ \"$(cut -d' ' -f6 /proc/$$/stat)\" = $$ ] || echo nosid",
	    NULL };
	char *envp[] = { NULL };
	int pfd[2], src[4], cgdir, st;
	pid_t pid = -1;
	ssize_t n, got = 0;

	if (geteuid() != 0 || !own_cgroup2(parent, sizeof(parent))) {
		T_OK(true, "clone3 CLONE_INTO_CGROUP # SKIP not root, or no cgroup2 mount");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/test_sandbox.%d", parent, (int)getpid());
	if (mkdir(dir, 0755) != 0 || (cgdir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		T_OK(true, "clone3 CLONE_INTO_CGROUP # SKIP cannot make a cgroup here");
		rmdir(dir);
		return;
	}
	signal(SIGPIPE, SIG_IGN);	/* as the broker: the child must not inherit it */
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return;
	src[0] = fcntl(open("/dev/null", O_RDONLY | O_CLOEXEC), F_DUPFD_CLOEXEC, 256);
	src[1] = fcntl(pfd[1], F_DUPFD_CLOEXEC, 256);
	src[2] = fcntl(pfd[1], F_DUPFD_CLOEXEC, 256);
	src[3] = -1;
	T_ERR(stub_spawn_into("/bin/sh", src, 4, argv, envp, cgdir, &pid), 0, "stub_spawn_into");
	close(pfd[1]);
	close(src[1]);
	close(src[2]);
	while ((n = read(pfd[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = '\0';
	waitpid(pid, &st, 0);
	snprintf(want, sizeof(want), "0::%s\n", strstr(dir, "/test_sandbox."));
	T_OK(strstr(out, want) != NULL, "the child started in the cgroup (%s)", out);
	T_OK(strstr(out, "\n4\n0\n") != NULL, "only its three descriptors, no environment");
	T_OK(strstr(out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000") != NULL,
	    "no signal blocked or ignored (SIGPIPE was, here)");
	T_OK(strstr(out, "nosid") == NULL, "a session of its own");
	T_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "it exited 0");
	T_ERR(stub_spawn_into("/bin/sh", src, 4, argv, envp, -1, &pid), CB_EIO,
	    "no cgroup descriptor: refused");
	T_OK(rmdir(dir) == 0, "the cgroup is empty again");
	signal(SIGPIPE, SIG_DFL);
	close(src[0]);
	close(pfd[0]);
	close(cgdir);
}

/* The descriptor table, grown once (the kernel's FDSize) so that a start in
 * a threaded broker never waits for the kernel to grow it. */
static long
fd_table_size(void)
{
	char line[128];
	long n = -1;
	FILE *f = fopen("/proc/self/status", "re");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "FDSize: %ld", &n) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return n;
}

static void
test_reserve_fds(void)
{
	long before = fd_table_size();

	sbx_reserve_fds();
	T_OK(fd_table_size() >= 512, "sbx_reserve_fds grows the table past 256 and what follows "
	    "(%ld, was %ld)", fd_table_size(), before);
}

int
main(void)
{
	char stub[PATH_MAX];
	const char *bin = getenv("CB_BIN");

	/* The stub of this build, not an installed one. */
	snprintf(stub, sizeof(stub), "%s/capbroker-stub", bin != NULL ? bin : "bin");
	if (stub[0] != '/') {
		char *abs = realpath(stub, NULL);

		if (abs != NULL && strlen(abs) < sizeof(stub))
			memcpy(stub, abs, strlen(abs) + 1);
		free(abs);
	}
	setenv("CAPBROKER_STUB", stub, 1);
	test_reserve_fds();
	test_names();
	test_status();
	test_config_checks();
	test_argv_limits();
	test_run();
	test_hold();
	test_fuse_report();
	test_spawn_into();
	return t_done();
}
