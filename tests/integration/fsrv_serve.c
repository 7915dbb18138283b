/*
 * fsrv_serve.c - the test and bench harness of fsrv/: serves one directory
 * through the FUSE file server with an allow-list for authorisation, mounts
 * it with fsrv_mount_detached(), and either serves until SIGTERM or runs
 * one command against the mount.
 *
 *   fsrv-serve --root DIR --allow FILE --mount DIR [--ready FILE]
 *              [--timeout SECONDS] [--cache-data] [--passthrough] [--owner UID:GID]
 *              [--restore-identity] [--max-nodes N] [--userns] [--chroot]
 *              [--closes FILE] [--verbose] [-- CMD ARGS...]
 *
 * The allow-list: one rule a line, "CAPS PATH", CAPS letters of r (fs.read)
 * l (fs.list) w (fs.write) d (fs.delete) or "-" for nothing, PATH relative
 * to the root ("." is the root).  The longest rule containing a path
 * decides; a name on the way to a granted path may be looked up.  SIGHUP
 * re-reads the file and invalidates the kernel's caches (a revocation);
 * once the invalidations are done, the ready file holds the number of
 * loads done.
 *
 * Without a command: attaches the mount at --mount in the current mount
 * namespace (run it under `unshare -m`).  With one: a child attaches the
 * mount in a mount namespace of its own (and with --userns, a user
 * namespace of its own: the mount fd crosses into it), with --chroot makes
 * the mount its root, and runs CMD; "@cat PATH" and "@race N PATH" are
 * built-ins for a chroot that has no programs.  The exit status is the command's.
 * --closes appends a line per file closed (fsrv_cfg.on_close): "PATH READ
 * WRITTEN released", or "... at-stop" for a file still open when the
 * server stopped.
 *
 * Trust domain: test code, run as root on the host.
 */
#include "fsrv/fsrv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RULES_MAX 64

struct rule {
	unsigned caps;
	char path[512];
};

static struct rule rules[RULES_MAX];
static size_t nrules;
static unsigned long nloads;
static const char *allow_file, *ready_file, *closes_file;
static bool verbose;

static bool
within(const char *path, const char *prefix)
{
	size_t l = strlen(prefix);

	return l == 0 || (strncmp(path, prefix, l) == 0 && (path[l] == '\0' || path[l] == '/'));
}

static int
load_rules(void)
{
	FILE *f = fopen(allow_file, "r");
	char caps[16], path[512];

	if (f == NULL)
		return -1;
	nrules = 0;
	while (nrules < RULES_MAX && fscanf(f, "%15s %511s", caps, path) == 2) {
		struct rule *r = &rules[nrules++];

		r->caps = 0;
		for (const char *c = caps; *c; c++)
			r->caps |= *c == 'r' ? FSRV_CAP_READ : *c == 'l' ? FSRV_CAP_LIST :
				   *c == 'w' ? FSRV_CAP_WRITE : *c == 'd' ? FSRV_CAP_DELETE : 0;
		snprintf(r->path, sizeof(r->path), "%s", strcmp(path, ".") == 0 ? "" : path);
	}
	fclose(f);
	return 0;
}

/* Say that load number N is in force (and its invalidations done). */
static void
write_ready(void)
{
	FILE *r;

	nloads++;
	if (ready_file != NULL && (r = fopen(ready_file, "w")) != NULL) {
		fprintf(r, "%lu\n", nloads);
		fclose(r);
	}
}

static int
authz(void *arg, const struct fsrv_check *c)
{
	const struct rule *best = NULL;
	unsigned have;

	(void)arg;
	for (size_t i = 0; i < nrules; i++)
		if (within(c->path, rules[i].path) &&
		    (best == NULL || strlen(rules[i].path) > strlen(best->path)))
			best = &rules[i];
	have = best != NULL ? best->caps : 0;
	if (have != 0)
		have |= FSRV_CAP_SEE;
	for (size_t i = 0; i < nrules && !(have & FSRV_CAP_SEE); i++)
		if (rules[i].caps != 0 && within(rules[i].path, c->path))
			have |= FSRV_CAP_SEE;	/* on the way to a grant */
	if ((c->need & have) == c->need)
		return 0;
	if (verbose)
		fprintf(stderr, "fsrv-serve: deny %s %s (%s)\n", fsrv_op_name(c->op),
			c->path, fsrv_cap_name(c->need & ~have));
	return CB_ENOTCOVERED;
}

static void
on_close(void *arg, const struct fsrv_close *c)
{
	FILE *f = fopen(closes_file, "a");

	(void)arg;
	if (f == NULL)
		return;
	fprintf(f, "%s %llu %llu %s\n", c->path, (unsigned long long)c->nread,
		(unsigned long long)c->nwritten, c->at_stop ? "at-stop" : "released");
	fclose(f);
}

static int
write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = -1;

	if (fd >= 0) {
		r = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;
		close(fd);
	}
	return r;
}

static int
builtin_cat(const char *path)
{
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		printf("%s\n", strerror(errno));
		return 1;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, stdout);
	if (n < 0)
		printf("%s\n", strerror(errno));
	close(fd);
	return n < 0;
}

/* The parent maps the child's uid and gid 0 to its own (mapping host
 * uid 0 needs CAP_SETFCAP in the parent namespace, which only the parent
 * has).  0 or -1. */
static int
map_ids(pid_t pid)
{
	char path[64], map[32];

	snprintf(map, sizeof(map), "0 %u 1", (unsigned)geteuid());
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	if (write_file(path, map) != 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
	if (write_file(path, "deny") != 0)
		return -1;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)getegid());
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	return write_file(path, map);
}

/* @race N PATH: read PATH N times; count what came back.  Used with the
 * mount as root while the host swaps a directory on PATH for a symlink to
 * /etc: "root:" in a read would be the host's /etc/passwd. */
static int
builtin_race(long n, const char *path)
{
	long leaks = 0, inside = 0, errors = 0;
	char buf[256];

	for (long i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t r;

		if (fd < 0) {
			errors++;
			continue;
		}
		r = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (r < 0) {
			errors++;
			continue;
		}
		buf[r] = '\0';
		if (strstr(buf, "root:") != NULL)
			leaks++;
		else if (strncmp(buf, "inside", 6) == 0)
			inside++;
	}
	printf("leaks=%ld inside=%ld errors=%ld\n", leaks, inside, errors);
	return 0;
}

/* The child: attach the mount in namespaces of its own, run the command.
 * sync[1] says "unshared" to the parent; sync2[0] waits for its maps. */
static void
child(int mnt, const char *target, bool userns, bool chrt, char **cmd, int ready, int mapped)
{
	char c = 0;

	if (unshare(CLONE_NEWNS | (userns ? CLONE_NEWUSER : 0)) != 0) {
		perror("fsrv-serve: unshare");
		_exit(125);
	}
	if (write(ready, &c, 1) != 1 || read(mapped, &c, 1) != 1 || c != 1) {
		fprintf(stderr, "fsrv-serve: id maps failed\n");
		_exit(125);
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    fsrv_mount_move(mnt, target) != 0) {
		perror("fsrv-serve: attach");
		_exit(125);
	}
	close(mnt);
	if (chrt && (chroot(target) != 0 || chdir("/") != 0)) {
		perror("fsrv-serve: chroot");
		_exit(125);
	}
	if (strcmp(cmd[0], "@race") == 0 && cmd[1] != NULL && cmd[2] != NULL) {
		int r = builtin_race(atol(cmd[1]), cmd[2]);

		fflush(stdout);
		_exit(r);
	}
	if (strcmp(cmd[0], "@cat") == 0 && cmd[1] != NULL) {
		int r = builtin_cat(cmd[1]);

		fflush(stdout);
		_exit(r);
	}
	execvp(cmd[0], cmd);
	perror("fsrv-serve: exec");
	_exit(127);
}

static void
usage(void)
{
	fprintf(stderr, "usage: fsrv-serve --root DIR --allow FILE --mount DIR [--ready FILE]\n"
			"       [--timeout S] [--cache-data] [--passthrough] [--owner UID:GID] [--restore-identity]\n"
			"       [--max-nodes N] [--userns] [--chroot] [--closes FILE] [--verbose]\n"
			"       [-- CMD ARGS...]\n");
	exit(64);
}

int
main(int argc, char **argv)
{
	const char *root = NULL, *target = NULL;
	double timeout = 1.0;
	bool userns = false, chrt = false, as_owner = false;
	unsigned owner_uid = 0, owner_gid = 0;
	char **cmd = NULL;
	struct fsrv *s = NULL;
	/* This thread only serves (the child runs the command). */
	struct fsrv_cfg cfg = { .authz = authz, .keep_identity = true };
	struct fsrv_mount_opts mo = { .user_id = geteuid(), .group_id = getegid(),
				      .readahead = true };
	sigset_t ss;
	unsigned tree;
	int rootfd, dev, mnt, sfd, rc = 0, e;
	pid_t pid = -1;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			cmd = argv + i + 1;
			break;
		} else if (strcmp(argv[i], "--userns") == 0) {
			userns = true;
		} else if (strcmp(argv[i], "--chroot") == 0) {
			chrt = true;
		} else if (i + 1 < argc && strcmp(argv[i], "--owner") == 0) {
			if (sscanf(argv[++i], "%u:%u", &owner_uid, &owner_gid) != 2)
				usage();
			as_owner = true;
		} else if (i + 1 < argc && strcmp(argv[i], "--max-nodes") == 0) {
			cfg.max_nodes = (uint32_t)atol(argv[++i]);
		} else if (strcmp(argv[i], "--restore-identity") == 0) {
			cfg.keep_identity = false;
		} else if (strcmp(argv[i], "--cache-data") == 0) {
			cfg.cache_data = true;
		} else if (strcmp(argv[i], "--passthrough") == 0) {
			cfg.passthrough = true;
		} else if (strcmp(argv[i], "--verbose") == 0) {
			verbose = true;
		} else if (i + 1 < argc && strcmp(argv[i], "--root") == 0) {
			root = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--allow") == 0) {
			allow_file = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--mount") == 0) {
			target = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--ready") == 0) {
			ready_file = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--timeout") == 0) {
			timeout = atof(argv[++i]);
		} else if (i + 1 < argc && strcmp(argv[i], "--closes") == 0) {
			closes_file = argv[++i];
			cfg.on_close = on_close;
		} else {
			usage();
		}
	}
	if (root == NULL || allow_file == NULL || target == NULL || (cmd != NULL && cmd[0] == NULL))
		usage();
	cfg.entry_timeout = cfg.attr_timeout = timeout;

	sigemptyset(&ss);
	sigaddset(&ss, SIGHUP);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGCHLD);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	sfd = signalfd(-1, &ss, SFD_CLOEXEC);

	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (sfd < 0 || rootfd < 0 || dev < 0) {
		perror("fsrv-serve: open");
		return 125;
	}
	if ((e = fsrv_new(&cfg, &s)) != 0 || (e = fsrv_add_tree(s, rootfd, dev, &tree)) != 0) {
		fprintf(stderr, "fsrv-serve: %s\n", cb_strerror(e));
		return 125;
	}
	if (as_owner && (e = fsrv_tree_owner(s, tree, owner_uid, owner_gid)) != 0) {
		fprintf(stderr, "fsrv-serve: owner: %s\n", cb_strerror(e));
		return 125;
	}
	if ((e = fsrv_mount_detached(dev, &mo, &mnt)) != 0) {
		fprintf(stderr, "fsrv-serve: mount: %s: %s\n", cb_strerror(e), strerror(errno));
		return 125;
	}
	/* From here only the server's copy keeps the connection alive. */
	close(dev);
	close(rootfd);
	if (cmd != NULL) {
		int p1[2], p2[2];
		char c;

		fflush(NULL);
		if (pipe2(p1, O_CLOEXEC) != 0 || pipe2(p2, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
			perror("fsrv-serve: fork");
			return 125;
		}
		if (pid == 0) {
			sigprocmask(SIG_UNBLOCK, &ss, NULL);
			child(mnt, target, userns, chrt, cmd, p1[1], p2[0]);
		}
		c = read(p1[0], &c, 1) == 1 && (!userns || map_ids(pid) == 0);
		if (write(p2[1], &c, 1) != 1 || !c)
			perror("fsrv-serve: id maps");
		close(p1[0]), close(p1[1]), close(p2[0]), close(p2[1]);
	} else if ((e = fsrv_mount_move(mnt, target)) != 0) {
		perror("fsrv-serve: move_mount");
		return 125;
	}
	close(mnt);
	if (load_rules() != 0) {
		perror("fsrv-serve: allow-list");
		return 125;
	}
	write_ready();

	for (;;) {
		struct pollfd p[2] = { { .fd = fsrv_fd(s, tree), .events = POLLIN },
				       { .fd = sfd, .events = POLLIN } };
		struct signalfd_siginfo si;

		if (p[0].fd < 0)
			break;
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents && read(sfd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo == SIGHUP) {
				if (load_rules() != 0)
					nrules = 0;	/* fail closed */
				cb_ignore(fsrv_invalidate_all(s));
				cb_ignore(fsrv_invalidate_wait(s));
				write_ready();
			} else if (si.ssi_signo == SIGCHLD && pid > 0) {
				int st;

				if (waitpid(pid, &st, WNOHANG) == pid) {
					rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
					break;
				}
			} else if (si.ssi_signo != SIGCHLD) {
				break;
			}
		}
		if (p[0].revents) {
			e = fsrv_process(s, tree);
			if (e == CB_ECLOSED)
				break;
		}
	}
	fsrv_free(s);
	return rc;
}
