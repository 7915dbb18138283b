/*
 * service.c - capbroker serve as a systemd service: socket activation
 * (sd_listen_fds), readiness and reload (sd_notify), journal logging
 * (sd_journal_send) besides stderr.  See service.h and docs/service.md.
 *
 * libsystemd is loaded when `serve` first needs it (dlopen), not linked:
 * with the six libraries it needs it cost every `capbroker run`, which never
 * uses it, about 1 ms of its start (docs/performance.md).
 *
 * Trust domain: broker.  Nothing here reads what an agent sends.
 */
#include "broker/service.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"

static char svc_state[4096];

/* The five calls we make, with the prototypes of the headers. */
static struct {
	__typeof__(sd_journal_send) *journal_send;
	__typeof__(sd_listen_fds) *listen_fds;
	__typeof__(sd_is_socket_unix) *is_socket_unix;
	__typeof__(sd_notify) *notify;
	__typeof__(sd_notifyf) *notifyf;
	char err[256];		/* why it could not be loaded, or "" */
} sd;
static pthread_once_t sd_once = PTHREAD_ONCE_INIT;

static void
sd_load(void)
{
	/* The soname the headers belong to; the library stays loaded. */
	void *h = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);

	if (h == NULL) {
		snprintf(sd.err, sizeof(sd.err), "libsystemd.so.0: %s", dlerror());
		return;
	}
	sd.journal_send = (__typeof__(sd.journal_send))dlsym(h, "sd_journal_send");
	sd.listen_fds = (__typeof__(sd.listen_fds))dlsym(h, "sd_listen_fds");
	sd.is_socket_unix = (__typeof__(sd.is_socket_unix))dlsym(h, "sd_is_socket_unix");
	sd.notify = (__typeof__(sd.notify))dlsym(h, "sd_notify");
	sd.notifyf = (__typeof__(sd.notifyf))dlsym(h, "sd_notifyf");
	if (!sd.journal_send || !sd.listen_fds || !sd.is_socket_unix || !sd.notify ||
	    !sd.notifyf) {
		snprintf(sd.err, sizeof(sd.err), "libsystemd.so.0 lacks a function we call");
		sd.journal_send = NULL;
		sd.listen_fds = NULL;
		sd.is_socket_unix = NULL;
		sd.notify = NULL;
		sd.notifyf = NULL;
	}
}

/* libsystemd, loaded once; false (and sd.err says why) without it. */
static bool
sd_have(void)
{
	return pthread_once(&sd_once, sd_load) == 0 && sd.notify != NULL;
}

void
brk_svc_log_state(const char *state_dir)
{
	snprintf(svc_state, sizeof(svc_state), "%s", state_dir ? state_dir : "");
}

/* Is our stderr the journal stream systemd connected (JOURNAL_STREAM is
 * "DEV:INODE" of it)?  Then the structured entry replaces the stderr line. */
static bool
stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void
brk_svc_log(int prio, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Without libsystemd the journal gets its line through stderr. */
	if (!sd_have() || !stderr_is_journal())
		fprintf(stderr, "capbroker: %s\n", msg);
	/* Without journald this fails at once (no socket): stderr had it. */
	if (sd_have())
		(void)sd.journal_send("MESSAGE=%s", msg, "PRIORITY=%d", prio,
		    "SYSLOG_IDENTIFIER=capbroker", "CAPBROKER_STATE=%s", svc_state, NULL);
}

int
brk_svc_listen_fd(int *fd, char *why, size_t whylen)
{
	int n;

	*fd = -1;
	/* Socket activation asked for and no library to take it: say so
	 * rather than bind a socket of our own beside the one we were given. */
	if (!sd_have()) {
		if (getenv("LISTEN_FDS") == NULL)
			return 0;
		snprintf(why, whylen, "socket activation: %s", sd.err);
		return CB_EINVAL;
	}
	/* unset_environment: no sandbox or helper inherits LISTEN_*; the
	 * descriptors get FD_CLOEXEC. */
	n = sd.listen_fds(1);
	if (n < 0) {
		snprintf(why, whylen, "socket activation: %s", strerror(-n));
		return CB_EINVAL;
	}
	if (n == 0)
		return 0;
	if (n != 1) {
		snprintf(why, whylen, "socket activation passed %d sockets; capbroker takes one "
		    "(ListenSequentialPacket= in capbroker.socket)", n);
		return CB_EINVAL;
	}
	if (sd.is_socket_unix(SD_LISTEN_FDS_START, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
		snprintf(why, whylen, "socket activation passed a socket that is not a listening "
		    "unix SOCK_SEQPACKET socket (use ListenSequentialPacket= in capbroker.socket)");
		return CB_EINVAL;
	}
	*fd = SD_LISTEN_FDS_START;
	return 1;
}

/* A service manager waits for our notifications: one we cannot send is said
 * on stderr (it reaches the journal), once. */
static bool
notify_possible(void)
{
	static bool said;

	if (sd_have())
		return true;
	if (getenv("NOTIFY_SOCKET") != NULL && !said) {
		fprintf(stderr, "capbroker: cannot notify the service manager: %s\n", sd.err);
		said = true;
	}
	return false;
}

void
brk_svc_ready(const char *status)
{
	if (notify_possible())
		(void)sd.notifyf(0, "READY=1\nSTATUS=%s", status);
}

void
brk_svc_reloading(void)
{
	struct timespec ts;

	/* MONOTONIC_USEC: what Type=notify-reload (systemd 253) asks for;
	 * older managers ignore it. */
	if (!notify_possible())
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	(void)sd.notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
}

void
brk_svc_stopping(void)
{
	if (notify_possible())
		(void)sd.notify(0, "STOPPING=1");
}
