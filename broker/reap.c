/*
 * reap.c - stubs the broker gave up on (a failure after their spawn: a
 * start that failed half-way, which sbx_spawn_start leaves to its caller,
 * an event that could not be made, a hand-over that failed), reaped
 * without blocking the loop.
 *
 * Trust domain: broker.  Why it is safe:
 *  - A stub is the broker's child: killed, it is gone only once reaped,
 *    and the loop must not wait for that.  A process in uninterruptible
 *    sleep, or a pid 1 that takes its time to end its sandbox, would keep
 *    a blocking waitpid() from returning, and with it the service of every
 *    sandbox of this broker.  Here a stub is reaped with WNOHANG only,
 *    now or at a later tick; until then its pid stays a zombie of ours
 *    (it is never reused under us) and its cgroups stay.
 *  - Only at shutdown (brk_reap_close), the loop being stopped, does the
 *    broker wait for one: no sandbox may outlive its broker.
 *  - Out of memory, a stub cannot be listed: it is killed and left a
 *    zombie until the broker exits (one pid; its cgroups are swept by the
 *    next broker, sbx_cgroup_sweep) rather than waited for.
 */
#include "broker/core.h"
#include "broker/reap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

struct brk_reap {
	struct brk_reap *next;
	struct sbx_proc p;		/* pid, pidfd and cgroups only */
};

/* Has p's stub exited (reaped now, or not our child any more)? */
static bool
brk_reap_try(struct sbx_proc *p)
{
	int ws;
	pid_t r = waitpid(p->pid, &ws, WNOHANG);

	return r == p->pid || (r < 0 && errno == ECHILD);
}

void
brk_reap_later(struct brk *b, struct sbx_proc *p)
{
	struct brk_reap *r;
	struct sbx_proc keep;

	if (p->pid <= 0) {
		sbx_proc_close(p);
		return;
	}
	/* Everything but the pid, its pidfd and the cgroups goes now: a
	 * pooled sandbox ends when its status socket closes. */
	keep = (struct sbx_proc){ .pid = p->pid, .pidfd = p->pidfd, .stdin_fd = -1,
		.stdout_fd = -1, .stderr_fd = -1, .status_fd = -1, .notify_fd = -1 };
	memcpy(keep.cgroup, p->cgroup, sizeof(keep.cgroup));
	p->pidfd = -1;
	memset(p->cgroup, 0, sizeof(p->cgroup));
	sbx_proc_close(p);
	p->pid = -1;
	if (brk_reap_try(&keep)) {
		sbx_proc_close(&keep);
		return;
	}
	if (!(r = calloc(1, sizeof(*r)))) {
		cb_ignore(sbx_kill(&keep));
		memset(keep.cgroup, 0, sizeof(keep.cgroup));
		sbx_proc_close(&keep);
		return;
	}
	r->p = keep;
	r->next = b->reaping;
	b->reaping = r;
}

void
brk_reap_tick(struct brk *b)
{
	for (struct brk_reap **pp = &b->reaping; *pp;) {
		struct brk_reap *r = *pp;

		if (!brk_reap_try(&r->p)) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		sbx_proc_close(&r->p);
		free(r);
	}
}

void
brk_reap_close(struct brk *b)
{
	struct brk_reap *r;

	while ((r = b->reaping)) {
		int ws;

		b->reaping = r->next;
		cb_ignore(sbx_kill(&r->p));
		while (waitpid(r->p.pid, &ws, 0) < 0 && errno == EINTR)
			;
		sbx_proc_close(&r->p);
		free(r);
	}
}
