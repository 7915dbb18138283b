/*
 * stub_seccomp_load.c - the seccomp layer at run time: load the tier's
 * precompiled filter, and pid 1's half of the one-exec rule.
 *
 * Runs in capbroker-stub: stub_seccomp_apply() in the agent process as the
 * very last step before its exec; stub_seccomp_allow_first_exec() in pid 1.
 * The filters are built from stub_seccomp.c at build time (stub_genbpf.c,
 * stub_bpf.h); see stub_seccomp.c for what they allow and why.
 */
#include <errno.h>
#include <poll.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "sandbox-stub/stub_int.h"
#include "stub_bpf.h"	/* generated: stub_bpf_low, stub_bpf_medium, stub_bpf_high */

int
stub_seccomp_apply(const struct stub_cfg *c)
{
	struct sock_fprog prog;
	int fd;

	switch (c->tier) {
	case SBX_TIER_LOW:
		prog.filter = (struct sock_filter *)stub_bpf_low;
		prog.len = sizeof(stub_bpf_low) / sizeof(stub_bpf_low[0]);
		break;
	case SBX_TIER_MEDIUM:
		prog.filter = (struct sock_filter *)stub_bpf_medium;
		prog.len = sizeof(stub_bpf_medium) / sizeof(stub_bpf_medium[0]);
		break;
	case SBX_TIER_HIGH:
		prog.filter = (struct sock_filter *)stub_bpf_high;
		prog.len = sizeof(stub_bpf_high) / sizeof(stub_bpf_high[0]);
		break;
	default:
		stub_die(0, "no seccomp filter for tier %d", (int)c->tier);
	}
	if (c->exec_fd != STUB_EXEC_FD)
		stub_die(0, "exec descriptor %d is not the filter's %d", c->exec_fd, STUB_EXEC_FD);
	/* no_new_privs is set; the listener is pid 1's (one exec). */
	fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	    SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (fd < 0)
		stub_die(errno, "loading the seccomp filter");
	return fd;
}

/* Pid 1's half of the one-exec rule: answer the first notification (the
 * stub's exec of the agent) with "continue".  The caller then closes the
 * listener, or hands it to the broker (--notify), whose notifier never
 * answers "continue" (broker/notify.c).  Returns 0, or -1 if the agent
 * process went away first. */
int
stub_seccomp_allow_first_exec(int listener, pid_t agent)
{
	struct seccomp_notif_sizes sz;
	struct seccomp_notif *req = NULL;
	struct seccomp_notif_resp *resp = NULL;
	struct pollfd pfd = { .fd = listener, .events = POLLIN };
	int r, rc = -1;

	/* The kernel's structures may be larger than our headers' (newer
	 * kernels append fields): allocate what it says. */
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) == -1)
		stub_die(errno, "SECCOMP_GET_NOTIF_SIZES");
	req = calloc(1, sz.seccomp_notif > sizeof(*req) ? sz.seccomp_notif : sizeof(*req));
	resp = calloc(1, sz.seccomp_notif_resp > sizeof(*resp) ? sz.seccomp_notif_resp :
	    sizeof(*resp));
	if (req == NULL || resp == NULL)
		stub_die(ENOMEM, "seccomp notification buffers");
	while ((r = poll(&pfd, 1, -1)) == -1 && errno == EINTR)
		;
	if (r != 1 || (pfd.revents & POLLIN) == 0)
		goto out;
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) == -1)
		goto out;
	if ((pid_t)req->pid != agent || req->data.nr != SYS_execveat)
		stub_die(0, "unexpected seccomp notification (pid %d, call %d)",
		    (int)req->pid, req->data.nr);
	resp->id = req->id;
	resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp) == -1)
		goto out;
	rc = 0;
out:
	free(req);
	free(resp);
	return rc;
}
