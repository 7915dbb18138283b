/*
 * launch.c - a bare driver of the launcher API (sandbox-stub/sandbox.h):
 * starts one program in a sandbox, relays its stdio, answers every packet
 * the agent sends on CAPBROKER_FD with "echo:" + the packet, and exits with
 * the sandbox's status.
 *
 * The escape suite no longer uses it: every attempt runs as the agent of a
 * real `capbroker run` (run.sh).  It stays for what `capbroker run` does not
 * offer: tests/integration/20-sandbox.sh tests the launcher API itself
 * (--report: the stub's ready line and the start time docs/sandbox.md
 * quotes; --no-broker; --pty; limits and binds given directly rather than
 * through a policy).
 *
 * Trust domain: the broker's side (it is what the broker would do).
 *
 *   launch [--tier T] [--id ID] [--ro-bind SRC DST] [--bind SRC DST]
 *          [--exec-allow PATH] [--timeout S] [--cpu S] [--mem B] [--nproc N]
 *          [--nofile N] [--fsize B] [--tmp-size B] [--pty] [--no-broker]
 *          [--report] -- CMD [ARGS...]
 * --report prints the stub's "ready" facts and the start time to stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "sandbox-stub/sandbox.h"

#define MAX_BINDS 32

static uint64_t
num(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (*s == '\0' || *end != '\0') {
		fprintf(stderr, "launch: bad number %s\n", s);
		exit(2);
	}
	return v;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Copy what is readable from fd to out; false at EOF or error. */
static bool
relay(int fd, int out)
{
	char buf[16384];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n <= 0)
		return n == -1 && errno == EAGAIN;
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(out, buf + off, (size_t)(n - off));

		if (w <= 0)
			return false;
		off += w;
	}
	return true;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tier", required_argument, NULL, 't' },
		{ "id", required_argument, NULL, 'i' },
		{ "ro-bind", required_argument, NULL, 'r' },
		{ "bind", required_argument, NULL, 'w' },
		{ "exec-allow", required_argument, NULL, 'x' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "mem", required_argument, NULL, 'm' },
		{ "nproc", required_argument, NULL, 'p' },
		{ "nofile", required_argument, NULL, 'f' },
		{ "fsize", required_argument, NULL, 'F' },
		{ "tmp-size", required_argument, NULL, 's' },
		{ "pty", no_argument, NULL, 'P' },
		{ "no-broker", no_argument, NULL, 'n' },
		{ "report", no_argument, NULL, 'R' },
		{ NULL, 0, NULL, 0 },
	};
	struct sbx_bind binds[MAX_BINDS];
	const char *exec_allow[MAX_BINDS];
	struct sbx_config cfg;
	struct sbx_proc p;
	char why[512];
	int sp[2] = { -1, -1 }, o, rc;
	bool no_broker = false, report = false;
	uint64_t t0;
	siginfo_t si;

	memset(&cfg, 0, sizeof(cfg));
	cfg.id = "escape";
	cfg.binds = binds;
	cfg.exec_allow = exec_allow;
	while ((o = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (o) {
		case 't':
			if (sbx_tier_parse(optarg, &cfg.tier) != 0) {
				fprintf(stderr, "launch: bad tier\n");
				return 2;
			}
			break;
		case 'i': cfg.id = optarg; break;
		case 'r':
		case 'w':
			if (cfg.nbinds == MAX_BINDS || optind >= argc)
				return 2;
			binds[cfg.nbinds].src = optarg;
			binds[cfg.nbinds].dst = argv[optind++];
			binds[cfg.nbinds++].writable = (o == 'w');
			break;
		case 'x':
			if (cfg.nexec_allow == MAX_BINDS)
				return 2;
			exec_allow[cfg.nexec_allow++] = optarg;
			break;
		case 'T': cfg.limits.wall_secs = num(optarg); break;
		case 'c': cfg.limits.cpu_secs = num(optarg); break;
		case 'm': cfg.limits.mem_bytes = num(optarg); break;
		case 'p': cfg.limits.nproc = num(optarg); break;
		case 'f': cfg.limits.nofile = num(optarg); break;
		case 'F': cfg.limits.fsize_bytes = num(optarg); break;
		case 's': cfg.limits.tmp_bytes = num(optarg); break;
		case 'P': cfg.want_pty = true; break;
		case 'n': no_broker = true; break;
		case 'R': report = true; break;
		default:
			fprintf(stderr, "launch: usage: launch [options] -- CMD [ARGS...]\n");
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "launch: no command\n");
		return 2;
	}
	cfg.argv = &argv[optind];
	cfg.broker_fd = -1;
	if (!no_broker) {
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == -1) {
			perror("launch: socketpair");
			return 125;
		}
		cfg.broker_fd = sp[1];
	}

	t0 = now_ns();
	rc = sbx_spawn(&cfg, &p, why, sizeof(why));
	if (rc != 0) {
		fprintf(stderr, "launch: %s\n", why);
		return SBX_EXIT_SETUP;
	}
	if (report)
		fprintf(stderr, "launch: ready in %.3f ms, landlock=%d cgroup=%d\n",
		    (double)(now_ns() - t0) / 1e6, p.report.landlock_abi, p.report.cgroup);
	if (sp[1] != -1) {
		close(sp[1]);	/* the sandbox holds the agent's end now */
		sp[1] = -1;
	}

	struct pollfd pfd[5] = {
		{ .fd = STDIN_FILENO, .events = POLLIN },
		{ .fd = p.stdout_fd, .events = POLLIN },
		{ .fd = p.stderr_fd, .events = POLLIN },
		{ .fd = sp[0], .events = POLLIN },
		{ .fd = p.pidfd, .events = POLLIN },
	};
	for (;;) {
		if (poll(pfd, 5, -1) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents != 0) {
			char buf[4096];
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

			if (n <= 0 || write(p.stdin_fd, buf, (size_t)n) != n) {
				pfd[0].fd = -1;
				close(p.stdin_fd);
				p.stdin_fd = -1;
			}
		}
		if (pfd[1].revents != 0 && !relay(p.stdout_fd, STDOUT_FILENO))
			pfd[1].fd = -1;
		if (pfd[2].revents != 0 && !relay(p.stderr_fd, STDERR_FILENO))
			pfd[2].fd = -1;
		if (pfd[3].revents != 0) {
			char buf[4096 + 5];
			ssize_t n = recv(sp[0], buf + 5, sizeof(buf) - 5, MSG_DONTWAIT);

			if (n > 0) {
				memcpy(buf, "echo:", 5);
				(void)!send(sp[0], buf, (size_t)n + 5, MSG_DONTWAIT | MSG_NOSIGNAL);
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				pfd[3].fd = -1;
			}
		}
		if (pfd[4].revents != 0)
			break;
	}
	/* Drain what the agent wrote before it exited (EOF once the last
	 * process of the sandbox is gone, which follows the stub's exit). */
	for (int i = 1; i <= 2; i++) {
		struct pollfd d = { .fd = pfd[i].fd, .events = POLLIN };

		while (d.fd != -1 && poll(&d, 1, 2000) > 0 &&
		    relay(d.fd, i == 1 ? STDOUT_FILENO : STDERR_FILENO))
			;
	}
	if (waitid(P_PIDFD, (id_t)p.pidfd, &si, WEXITED) == -1) {
		perror("launch: waitid");
		return 125;
	}
	sbx_proc_close(&p);
	if (si.si_code == CLD_EXITED)
		return si.si_status;
	return 128 + si.si_status;
}
