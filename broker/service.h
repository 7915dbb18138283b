/*
 * service.h - what `capbroker serve` needs to be a systemd service: socket
 * activation, readiness and reload notification, and logging to the journal
 * besides stderr.  Part of the capbroker program only (it loads libsystemd
 * when first needed; the broker module and the in-sandbox programs never).
 *
 * Trust domain: broker.  The inputs are the environment systemd sets
 * (LISTEN_FDS, LISTEN_PID, NOTIFY_SOCKET, JOURNAL_STREAM), read by libsystemd.
 */
#ifndef CB_BROKER_SERVICE_H
#define CB_BROKER_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <syslog.h>

/* Log one line at a syslog priority (LOG_ERR, LOG_WARNING, LOG_INFO...):
 * to stderr as "capbroker: MESSAGE", and to the journal as a structured
 * entry (PRIORITY, SYSLOG_IDENTIFIER=capbroker, CAPBROKER_STATE=dir).  When
 * stderr is already connected to the journal (systemd's JOURNAL_STREAM), the
 * entry alone is written, so that no line appears twice.  Without a journal
 * (no journald running) only stderr is written. */
void brk_svc_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The state directory the log entries name (CAPBROKER_STATE=). */
void brk_svc_log_state(const char *state_dir);

/* Socket activation.  Returns 1 with *fd when systemd passed exactly one
 * listening AF_UNIX SOCK_SEQPACKET socket, 0 when it passed none (bind our
 * own), and CB_EINVAL with a reason in why when it passed something else
 * (several sockets, or one of another kind: the unit must use
 * ListenSequentialPacket=).  The LISTEN_* variables are removed either way,
 * so that no child sees them. */
int brk_svc_listen_fd(int *fd, char *why, size_t whylen);

/* Tell the service manager (sd_notify; nothing when NOTIFY_SOCKET is unset):
 * ready with a status line; reloading; ready again after a reload; stopping. */
void brk_svc_ready(const char *status);
void brk_svc_reloading(void);
void brk_svc_stopping(void);

#endif
