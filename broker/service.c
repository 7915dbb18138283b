/*
 * service.c - capbroker serve as a systemd service: socket activation
 * (sd_listen_fds), readiness and reload (sd_notify), journal logging
 * (sd_journal_send) besides stderr.  See service.h and docs/service.md.
 *
 * Trust domain: broker.  Nothing here reads what an agent sends.
 */
#include "broker/service.h"

#include <errno.h>
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
	if (!stderr_is_journal())
		fprintf(stderr, "capbroker: %s\n", msg);
	/* Without journald this fails at once (no socket): stderr had it. */
	(void)sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", prio,
	    "SYSLOG_IDENTIFIER=capbroker", "CAPBROKER_STATE=%s", svc_state, NULL);
}

int
brk_svc_listen_fd(int *fd, char *why, size_t whylen)
{
	/* unset_environment: no sandbox or helper inherits LISTEN_*; the
	 * descriptors get FD_CLOEXEC. */
	int n = sd_listen_fds(1);

	*fd = -1;
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
	if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
		snprintf(why, whylen, "socket activation passed a socket that is not a listening "
		    "unix SOCK_SEQPACKET socket (use ListenSequentialPacket= in capbroker.socket)");
		return CB_EINVAL;
	}
	*fd = SD_LISTEN_FDS_START;
	return 1;
}

void
brk_svc_ready(const char *status)
{
	(void)sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void
brk_svc_reloading(void)
{
	struct timespec ts;

	/* MONOTONIC_USEC: what Type=notify-reload (systemd 253) asks for;
	 * older managers ignore it. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	(void)sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
}

void
brk_svc_stopping(void)
{
	(void)sd_notify(0, "STOPPING=1");
}
