/*
 * fault_shim.c - LD_PRELOAD into a `capbroker serve` by
 * 93-broker-reap-nowait.sh and 88-broker-spawn-nowait.sh, to reach the
 * broker's rare failure paths after a stub is spawned and to make that stub
 * slow to die, as a process stuck in the kernel (D state) or a pid 1 slow
 * to end its sandbox would be.
 *
 * While the file $CB_FAULT_ARM exists, the next event_new() on the pidfd of
 * a process whose command line contains $CB_FAULT_MATCH fails (the file is
 * removed: once), its pid is written to $CB_FAULT_ARM.pid, and the SIGKILL
 * that the broker then sends through that pidfd is dropped: the stub lives
 * on until it ends by itself.  With CB_FAULT_CALL=pidfd_open it is the
 * launcher's pidfd_open() of such a process that fails instead (EMFILE),
 * and the SIGKILL then sent with kill() that is dropped.  With
 * CB_FAULT_CALL=dlopen, the next dlopen() of a library whose name contains
 * $CB_FAULT_MATCH writes "main" or "other" (the calling thread: the
 * broker's loop runs on its main thread) to $CB_FAULT_ARM.pid and then
 * takes $CB_FAULT_SLOW_MS milliseconds more, as a loaded host's disk and
 * relocations might.  With CB_FAULT_CALL=nss, while $CB_FAULT_ARM exists,
 * every getpwuid, getpwnam, getgrgid and getgrnam appends "main NAME" or
 * "other NAME" to $CB_FAULT_ARM.pid (a user database may be a directory
 * server: no such call may run on the loop).  Nothing else changes.  Test
 * code, never built into the product.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>

struct event;
struct event_base;
typedef struct event *(*event_new_fn)(struct event_base *, int, short,
    void (*)(int, short, void *), void *);
typedef int (*pidfd_send_signal_fn)(int, int, siginfo_t *, unsigned int);
typedef int (*pidfd_open_fn)(pid_t, unsigned int);
typedef int (*kill_fn)(pid_t, int);
typedef void *(*dlopen_fn)(const char *, int);

static int dropped_fd = -1;	/* the pidfd whose next SIGKILL is dropped */
static pid_t dropped_pid = -1;	/* the pid whose next kill(SIGKILL) is dropped */

/* The pid a pidfd refers to, or -1 (fd is no pidfd). */
static int
pidfd_pid(int fd)
{
	char path[64], line[128];
	FILE *f;
	int pid = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %d", &pid) == 1)
			break;
	fclose(f);
	return pid;
}

/* Does pid's command line contain want?  A stub's spawn returns once its
 * exec has begun, and for a moment after that its command line is not the
 * new one yet (empty, or still the broker's): asked again for a second at
 * most before the answer is no (test code: the broker waits meanwhile,
 * only while the shim is armed). */
static int
cmdline_has(int pid, const char *want)
{
	char path[64], buf[8192];

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	for (int i = 0; i < 200; i++) {
		ssize_t n;
		int fd;

		if (i > 0)
			usleep(5000);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return 0;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		for (ssize_t k = 0; k < n; k++)
			if (buf[k] == '\0')
				buf[k] = ' ';
		buf[n] = '\0';
		if (strstr(buf, want))
			return 1;
	}
	return 0;
}

/* Is the fault armed, for call? */
static int
fault_armed(const char *call)
{
	const char *arm = getenv("CB_FAULT_ARM"), *want = getenv("CB_FAULT_CALL");

	return arm && getenv("CB_FAULT_MATCH") && strcmp(want ? want : "event_new", call) == 0 &&
	    access(arm, F_OK) == 0;
}

/* It is armed: is pid one it matches?  Then disarm it (once) and say which
 * pid it hit in $CB_FAULT_ARM.pid. */
static int
fault_hits(int pid)
{
	const char *arm = getenv("CB_FAULT_ARM");
	char path[4200];
	FILE *f;

	if (pid <= 0 || !cmdline_has(pid, getenv("CB_FAULT_MATCH")) || unlink(arm) != 0)
		return 0;
	snprintf(path, sizeof(path), "%s.pid", arm);
	if ((f = fopen(path, "we"))) {
		fprintf(f, "%d\n", pid);
		fclose(f);
	}
	return 1;
}

struct event *
event_new(struct event_base *base, int fd, short what, void (*cb)(int, short, void *), void *arg)
{
	static event_new_fn real;

	if (!real)
		real = (event_new_fn)dlsym(RTLD_NEXT, "event_new");
	if (fd >= 0 && fault_armed("event_new") && fault_hits(pidfd_pid(fd))) {
		dropped_fd = fd;
		return NULL;
	}
	return real(base, fd, what, cb, arg);
}

int
pidfd_open(pid_t pid, unsigned int flags)
{
	static pidfd_open_fn real;

	if (!real)
		real = (pidfd_open_fn)dlsym(RTLD_NEXT, "pidfd_open");
	if (fault_armed("pidfd_open") && fault_hits(pid)) {
		dropped_pid = pid;
		errno = EMFILE;
		return -1;
	}
	return real(pid, flags);
}

int
kill(pid_t pid, int sig)
{
	static kill_fn real;

	if (!real)
		real = (kill_fn)dlsym(RTLD_NEXT, "kill");
	if (pid > 0 && pid == dropped_pid && sig == SIGKILL) {
		dropped_pid = -1;
		return 0;
	}
	return real(pid, sig);
}

int
pidfd_send_signal(int pidfd, int sig, siginfo_t *info, unsigned int flags)
{
	static pidfd_send_signal_fn real;

	if (!real)
		real = (pidfd_send_signal_fn)dlsym(RTLD_NEXT, "pidfd_send_signal");
	if (pidfd == dropped_fd && sig == SIGKILL) {
		dropped_fd = -1;
		return 0;
	}
	return real(pidfd, sig, info, flags);
}

void *
dlopen(const char *file, int flags)
{
	static dlopen_fn real;
	const char *arm = getenv("CB_FAULT_ARM"), *slow = getenv("CB_FAULT_SLOW_MS");

	if (!real)
		real = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
	if (file && fault_armed("dlopen") && strstr(file, getenv("CB_FAULT_MATCH")) &&
	    unlink(arm) == 0) {
		char path[4200];
		FILE *f;

		snprintf(path, sizeof(path), "%s.pid", arm);
		if ((f = fopen(path, "we"))) {
			fprintf(f, "%s\n", gettid() == getpid() ? "main" : "other");
			fclose(f);
		}
		if (slow)
			usleep((useconds_t)atoi(slow) * 1000);
	}
	return real(file, flags);
}

/* Record an NSS call (CB_FAULT_CALL=nss) and find the real one. */
static void *
nss_seen(const char *name)
{
	const char *arm = getenv("CB_FAULT_ARM");

	if (fault_armed("nss")) {
		char path[4200];
		FILE *f;

		snprintf(path, sizeof(path), "%s.pid", arm);
		if ((f = fopen(path, "ae"))) {
			fprintf(f, "%s %s\n", gettid() == getpid() ? "main" : "other", name);
			fclose(f);
		}
	}
	return dlsym(RTLD_NEXT, name);
}

struct passwd *
getpwuid(uid_t uid)
{
	return ((struct passwd *(*)(uid_t))nss_seen("getpwuid"))(uid);
}

struct passwd *
getpwnam(const char *name)
{
	return ((struct passwd *(*)(const char *))nss_seen("getpwnam"))(name);
}

struct group *
getgrgid(gid_t gid)
{
	return ((struct group *(*)(gid_t))nss_seen("getgrgid"))(gid);
}

struct group *
getgrnam(const char *name)
{
	return ((struct group *(*)(const char *))nss_seen("getgrnam"))(name);
}
