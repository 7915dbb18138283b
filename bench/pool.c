/*
 * pool.c - the warm pool's own figures, through the launcher API the broker
 * uses (sandbox-stub/sandbox.h), without a broker around it.
 *
 * Trust domain: none of the product's; runs on the host, like the broker
 * (as root for the cgroups to behave as in production).
 *
 *   pool handover N     N times: build one pooled low-tier sandbox, wait
 *                       until it is built, hand it /usr/bin/true; prints
 *                       pool.build (spawn to "pooled"), pool.handover
 *                       (hand-over to "ready": the agent has exec'd),
 *                       pool.handover_exit (hand-over to its exit report:
 *                       what a proc.exec reply waits for) and
 *                       pool.handover_reaped (... to the sandbox reaped)
 *                       and pool.cpu (CPU time of every process of one
 *                       sandbox: built, handed over, run and torn down)
 *   pool refill N       N pooled sandboxes spawned back to back from one
 *                       thread (as the broker's pool thread does), until
 *                       all are built: pool.refill_rate (sandboxes/s); then
 *                       drained: pool.build_cpu (CPU time of every process
 *                       of one sandbox built and ended without a task)
 *   pool memory N       N pooled sandboxes at rest: pool.mem.cgroup (memory
 *                       charged to one sandbox's cgroup, when it has one)
 *                       and pool.mem.pss (the PSS of all its processes)
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "sandbox-stub/sandbox.h"

static void
die(const char *what, const char *why)
{
	fprintf(stderr, "pool: %s: %s\n", what, why);
	exit(1);
}

static void
wait_in(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while (poll(&p, 1, -1) == -1 && errno == EINTR)
		;
}

static void
start_pooled(struct sbx_proc *p)
{
	struct sbx_config c = { .tier = SBX_TIER_LOW, .id = "pooled", .broker_fd = -1,
		.report_exit = true, .pool = true };
	char why[300];
	int r;

	if ((r = sbx_spawn_start(&c, p)) != 0) {
		sbx_start_refusal(r, why, sizeof(why));
		die("start", why);
	}
}

static void
await_pooled(struct sbx_proc *p)
{
	char why[512];
	int r;

	do
		wait_in(p->status_fd);
	while ((r = sbx_pool_finish(p, why, sizeof(why))) == CB_EBUSY);
	if (r != 0)
		die("build", why);
}

/* End a pooled sandbox as the broker's pool does (closing its status
 * socket: pid 1 ends it, the outer stub reaps pid 1, we reap the outer
 * stub), so that every process of it counts in children_cpu(); a SIGKILL
 * of the outer stub would leave pid 1 to another reaper. */
static void
drain(struct sbx_proc *p)
{
	siginfo_t si;

	if (shutdown(p->status_fd, SHUT_RDWR) != 0)
		cb_ignore(sbx_kill(p));
	waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED);
	sbx_proc_close(p);
}

/* CPU time (ns, user + system) of every child this process has reaped,
 * with theirs: a stub counts its sandbox's processes once it is reaped. */
static double
children_cpu(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_CHILDREN, &ru) != 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

static void
end(struct sbx_proc *p)
{
	siginfo_t si;

	cb_ignore(sbx_kill(p));
	waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED);
	sbx_proc_close(p);
}

static int
cmd_handover(int n)
{
	double *b = calloc((size_t)n, sizeof(double)), *h = calloc((size_t)n, sizeof(double));
	double *x = calloc((size_t)n, sizeof(double)), *y = calloc((size_t)n, sizeof(double));
	double *cpu = calloc((size_t)n, sizeof(double));
	char *argv[] = { "/usr/bin/true", NULL };

	for (int i = 0; i < n; i++) {
		struct sbx_config c = { .tier = SBX_TIER_LOW, .id = "bench-task", .argv = argv,
			.broker_fd = -1, .report_exit = true };
		struct sbx_proc p;
		char why[512];
		siginfo_t si;
		uint64_t t0 = bn_now(), t1, t2;
		double c0 = children_cpu();
		int r, st;

		start_pooled(&p);
		await_pooled(&p);
		t1 = bn_now();
		if (sbx_pool_handover(&p, &c) != 0)
			die("hand-over", "failed");
		do
			wait_in(p.status_fd);
		while ((r = sbx_spawn_finish(&p, why, sizeof(why))) == CB_EBUSY);
		if (r != 0)
			die("hand-over", why);
		t2 = bn_now();
		do
			wait_in(p.status_fd);
		while ((r = sbx_exit_report(&p, &st)) == CB_EBUSY);
		if (r != 0 || st != 0)
			die("task", "/usr/bin/true did not report exit 0");
		x[i] = (double)(bn_now() - t1);
		waitid(P_PIDFD, (id_t)p.pidfd, &si, WEXITED);
		y[i] = (double)(bn_now() - t1);
		cpu[i] = children_cpu() - c0;
		sbx_proc_close(&p);
		if (si.si_code != CLD_EXITED || si.si_status != 0)
			die("task", "/usr/bin/true did not exit 0");
		b[i] = (double)(t1 - t0);
		h[i] = (double)(t2 - t1);
	}
	bn_emit("pool.build", "ns", b, (size_t)n);
	bn_emit("pool.handover", "ns", h, (size_t)n);
	bn_emit("pool.handover_exit", "ns", x, (size_t)n);
	bn_emit("pool.handover_reaped", "ns", y, (size_t)n);
	bn_emit("pool.cpu", "ns", cpu, (size_t)n);
	return 0;
}

static int
cmd_refill(int n)
{
	struct sbx_proc *p = calloc((size_t)n, sizeof(*p));
	uint64_t t0 = bn_now();
	double c0;

	for (int i = 0; i < n; i++)
		start_pooled(&p[i]);
	for (int i = 0; i < n; i++)
		await_pooled(&p[i]);
	bn_emit1("pool.refill_rate", "1/s", (double)n * 1e9 / (double)(bn_now() - t0));
	c0 = children_cpu();
	for (int i = 0; i < n; i++)
		drain(&p[i]);
	/* Spawned before c0 but reaped after it: all their CPU counts. */
	bn_emit1("pool.build_cpu", "ns", (children_cpu() - c0) / n);
	return 0;
}

/* A number from a one-line file, or -1. */
static double
read_num(const char *path)
{
	FILE *f = fopen(path, "re");
	double v = -1;

	if (f) {
		if (fscanf(f, "%lf", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* Pss in bytes of pid, from smaps_rollup; 0 if unreadable. */
static double
pss(pid_t pid)
{
	char path[64], line[256];
	double kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %lf kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* The PSS of pid and of every process below it (a pooled sandbox: the
 * outer stub, pid 1 and its waiting agent). */
static double
pss_tree(pid_t pid)
{
	char path[64], kids[512], *s, *end;
	double sum = pss(pid);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	if (!(f = fopen(path, "re")))
		return sum;
	if (fgets(kids, sizeof(kids), f))
		for (s = kids; *s; s = end) {
			long k = strtol(s, &end, 10);

			if (end == s)
				break;
			if (k > 0)
				sum += pss_tree((pid_t)k);
		}
	fclose(f);
	return sum;
}

static int
cmd_memory(int n)
{
	struct sbx_proc *p = calloc((size_t)n, sizeof(*p));
	double *cg = calloc((size_t)n, sizeof(double)), *ps = calloc((size_t)n, sizeof(double));
	size_t ncg = 0;

	for (int i = 0; i < n; i++)
		start_pooled(&p[i]);
	for (int i = 0; i < n; i++)
		await_pooled(&p[i]);
	usleep(200 * 1000);
	for (int i = 0; i < n; i++) {
		char path[400];
		double v;

		snprintf(path, sizeof(path), "%s/memory.usage_in_bytes", p[i].cgroup[0]);
		if ((v = read_num(path)) < 0) {
			snprintf(path, sizeof(path), "%s/memory.current", p[i].cgroup[0]);
			v = read_num(path);
		}
		if (p[i].cgroup[0][0] && v >= 0)
			cg[ncg++] = v;
		ps[i] = pss_tree(p[i].pid);
	}
	if (ncg)
		bn_emit("pool.mem.cgroup", "bytes", cg, ncg);
	bn_emit("pool.mem.pss", "bytes", ps, (size_t)n);
	for (int i = 0; i < n; i++)
		end(&p[i]);
	return 0;
}

int
main(int argc, char **argv)
{
	int n = argc == 3 ? atoi(argv[2]) : 0;

	signal(SIGPIPE, SIG_IGN);
	if (n > 0 && strcmp(argv[1], "handover") == 0)
		return cmd_handover(n);
	if (n > 0 && strcmp(argv[1], "refill") == 0)
		return cmd_refill(n);
	if (n > 0 && strcmp(argv[1], "memory") == 0)
		return cmd_memory(n);
	fprintf(stderr, "usage: pool handover|refill|memory N\n");
	return 64;
}
