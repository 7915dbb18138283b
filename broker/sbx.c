/*
 * sbx.c - the sandbox life cycle: create (validate, mint the grants, spawn),
 * watch (status report, exit), close the channel, kill, free.
 *
 * Trust domain: broker.  What is created comes from an administrator
 * (capctl run, capbroker run) and is checked against the policy: every grant
 * inside the tier's ceiling or nothing starts; binds are canonicalised once
 * and opened by the launcher without following symlinks.  After the start
 * the agent is hostile: a sandbox whose channel closes is killed.
 */
#include "broker/core.h"
#include "broker/approval.h"
#include "broker/budget.h"
#include "broker/chan.h"
#include "broker/commit.h"
#include "broker/dispatch.h"
#include "broker/dns.h"
#include "broker/fs_served.h"
#include "broker/notify.h"
#include "broker/ops.h"
#include "broker/reap.h"
#include "broker/sbx.h"
#include "broker/tokens.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

struct brk_spawn;
static void brk_spawn_free(struct brk_spawn *sp);

/* A sandbox is done with its policy: free it if a reload has replaced it
 * and no other sandbox uses it. */
static void
brk_pol_release(struct brk *b, struct brk_pol *bp)
{
	if (!bp)
		return;
	if (bp->refs > 0)
		bp->refs--;
	if (bp->refs == 0 && bp != b->cur) {
		pol_free(bp->pol);
		free(bp);
	}
}

struct brk_sbx *
brk_sbx_find(struct brk *b, const char *id)
{
	for (struct brk_sbx *s = b->sbx; s; s = s->next)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

static void
brk_sbx_unlink(struct brk_sbx *s)
{
	struct brk *b = s->b;

	for (struct brk_sbx **p = &b->sbx; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			b->nsbx--;
			return;
		}
	}
}

void
brk_sbx_free(struct brk_sbx *s)
{
	brk_fss_stop(s);
	brk_sbx_unlink(s);
	brk_pending_drop_sbx(s->b, s);
	if (s->ev_read)
		event_free(s->ev_read);
	if (s->ev_write)
		event_free(s->ev_write);
	if (s->ev_rate)
		event_free(s->ev_rate);
	if (s->ev_status)
		event_free(s->ev_status);
	if (s->ev_exit)
		event_free(s->ev_exit);
	brk_chan_drop_queue(s);
	brk_budget_end(s);
	brk_notify_stop(s);
	brk_hosts_close(s);
	if (s->fd >= 0)
		close(s->fd);
	brk_held_clear(s);
	for (size_t i = 0; i < BRK_HANDLES_MAX; i++)
		if (s->handles[i].used)
			close(s->handles[i].fd);
	for (size_t i = 0; i < s->nsession; i++) {
		cap_free(s->session_caps[i]);
		free(s->session_ids[i]);
	}
	if (s->spawned)
		sbx_proc_close(&s->proc);
	brk_spawn_free(s->begun);
	pol_inst_free(s->inst);
	brk_pol_release(s->b, s->pol);
	free(s->command);
	free(s->workspace);
	free(s->setup_why);
	free(s);
}

static void
brk_sbx_grace_over(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_sbx *s = arg;

	(void)fd;
	(void)ev;
	if (s->spawned && !s->exited) {
		brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .sandbox = s->id,
		    .op = "kill", .actor = "broker", .detail = "the sandbox's channel closed" });
		sbx_kill(&s->proc);
	}
}

/* Approved elevations belong to this instance: every one the state
 * recorded against it is revoked (with what was derived from them) when
 * it ends, however many there are.  Should the state fail to write, they
 * are revoked in memory all the same, no later sandbox would honour them
 * (brk_held_add checks the instance), and the next start ends them. */
static void
brk_sbx_end_instance(struct brk_sbx *s)
{
	uint8_t (*ids)[CAP_ID_LEN] = NULL;
	size_t n = 0;
	int e;

	if (!s->instance)
		return;
	e = st_instance_end(s->b->st, s->instance, cb_now(), &ids, &n);
	for (size_t i = 0; i < n; i++)
		brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .sandbox = s->id,
		    .op = "revoke", .token_id = ids[i], .actor = "broker",
		    .detail = "elevation ends with its sandbox" });
	if (e != 0)
		brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .reason = e, .sandbox = s->id,
		    .op = "revoke", .actor = "broker",
		    .detail = "ending the sandbox's elevations could not be written; ended at the next start" });
	free(ids);
	s->instance = 0;
}

/* The channel is gone (agent closed it, or it misbehaved).  A sandbox
 * whose only channel is gone has nothing left to do: it is killed.  When
 * the agent simply exited, its end closed a moment before the stub
 * reports; a short grace lets the real exit status through. */
void
brk_sbx_close_channel(struct brk_sbx *s, const char *why)
{
	struct timeval grace = { 0, 250000 };

	if (s->dead)
		return;
	brk_sbx_hold(s);
	s->dead = true;
	brk_pending_drop_sbx(s->b, s);
	brk_proc_kill_all(s);
	brk_sbx_end_instance(s);
	event_del(s->ev_read);
	event_del(s->ev_write);
	event_del(s->ev_rate);
	brk_budget_end(s);
	if (!s->exited && !s->close_noted && strcmp(why, "agent closed its channel") != 0)
		brk_audit_done(s, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .op = "sandbox.channel-closed", .actor = "broker", .detail = why });
	if (s->spawned && !s->exited) {
		/* ev_rate is free now that reading has stopped: reuse it. */
		event_free(s->ev_rate);
		s->ev_rate = evtimer_new(s->b->base, brk_sbx_grace_over, s);
		if (!s->ev_rate || evtimer_add(s->ev_rate, &grace) != 0)
			sbx_kill(&s->proc);
	}
	brk_sbx_release(s);
}

void
brk_sbx_on_exit(struct brk_sbx *s, void (*fn)(struct brk_sbx *, void *), void *arg)
{
	s->on_exit = fn;
	s->on_exit_arg = arg;
}

void
brk_sbx_take_stdio(struct brk_sbx *s, int fds[3])
{
	fds[0] = s->proc.stdin_fd;
	fds[1] = s->proc.stdout_fd;
	fds[2] = s->proc.stderr_fd;
	s->proc.stdin_fd = s->proc.stdout_fd = s->proc.stderr_fd = -1;
}

int
brk_sbx_exit_code(const struct brk_sbx *s)
{
	return s->exit_code;
}

uint64_t
brk_sbx_wall(const struct brk_sbx *s)
{
	return s->wall;
}

bool
brk_sbx_ran_out(const struct brk_sbx *s)
{
	return s->exited && s->exit_code == SBX_EXIT_TIMEOUT && s->wall &&
	    cb_now() + 1 >= s->started_at + s->wall;
}

static void brk_sbx_status(evutil_socket_t fd, short ev, void *arg);

/* The sandbox is over with exit status code: its stop on the record, the
 * channel closed, the owner told. */
static void
brk_sbx_ended(struct brk_sbx *s, int code)
{
	char detail[64];

	event_del(s->ev_exit);
	event_del(s->ev_status);
	s->exited = true;
	s->exit_code = code;
	snprintf(detail, sizeof(detail), "exit %d", s->exit_code);
	brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .sandbox = s->id,
	    .op = "sandbox.stop", .actor = "broker", .detail = detail });
	brk_sbx_hold(s);
	if (s->on_exit)
		s->on_exit(s, s->on_exit_arg);
	brk_sbx_close_channel(s, "sandbox exited");
	brk_sbx_release(s);
}

static void
brk_sbx_exited(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_sbx *s = arg;
	int ws = 0;

	(void)fd;
	(void)ev;
	if (waitpid(s->proc.pid, &ws, WNOHANG) <= 0)
		return;
	/* The stub writes its report before it exits: read it now, so a
	 * setup failure seen only as an exit still has its reason.  (An
	 * exit report not read yet says what the status does.) */
	if (!s->status_read)
		brk_sbx_status(s->proc.status_fd, EV_READ, s);
	brk_sbx_ended(s, sbx_wait_status(ws));
}

/*
 * pid 1's "exit N" (report_exit): the agent was reaped and every other
 * process of the sandbox sent SIGKILL, so the sandbox is over now, not
 * once the kernel has torn its namespaces down (the outer stub's exit
 * waits for an RCU grace period of the mount namespace's).  The stub is
 * handed to the reaper (reap.c): the broker writes its stop line and
 * closes its log while the kernel does that on the other CPU, and
 * brk_free waits for it, so no sandbox process outlives its broker.  The
 * report comes from pid 1, stub code, and says what the stub's exit
 * status would; without one (killed, timed out, the socket closed) the
 * stub's exit says as before.
 */
static void
brk_sbx_exit_report(struct brk_sbx *s)
{
	int r, code;

	if ((r = sbx_exit_report(&s->proc, &code)) == CB_EBUSY)
		return;
	event_del(s->ev_status);
	if (r != 0)
		return;		/* the stub's exit says (brk_sbx_exited) */
	event_del(s->ev_exit);
	brk_reap_later(s->b, &s->proc);
	brk_sbx_ended(s, code);
}

static void
brk_sbx_status(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_sbx *s = arg;
	char why[512] = "";
	int r;

	(void)fd;
	(void)ev;
	if (s->status_read) {
		if (s->report_exit && !s->exited)
			brk_sbx_exit_report(s);
		return;
	}
	r = sbx_spawn_finish(&s->proc, why, sizeof(why));
	/* A broker that is not root: the connections of the trees pid 1
	 * mounted come before "ready", and the agent waits for them. */
	brk_fss_connections(s);
	if (r == CB_EBUSY)
		return;
	s->status_read = true;
	/* With report_exit the socket stays watched: the exit report. */
	if (r != 0 || !s->report_exit)
		event_del(s->ev_status);
	if (r != 0) {
		brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .reason = r, .sandbox = s->id,
		    .op = "sandbox.failed", .actor = "broker", .detail = why });
		if (!s->b->opts.quiet)
			fprintf(stderr, "capbroker: sandbox %s: %s\n", s->id, why);
		/* kept for whoever asked for the sandbox (run --connect) */
		s->setup_why = strdup(why);
		return;	/* the stub exits 125; brk_sbx_exited reports it */
	}
	if (s->proc.notify_fd >= 0) {
		int nfd = s->proc.notify_fd;

		s->proc.notify_fd = -1;
		if ((r = brk_notify_start(s, nfd)) != 0)
			brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .reason = r,
			    .sandbox = s->id, .op = "no-notify", .actor = "broker",
			    .detail = "the agent's connect() cannot be mediated: it fails" });
		brk_hosts_refresh(s);
	}
	brk_fss_ready(s);
	if (s->proc.report.landlock_abi == 0)
		brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .sandbox = s->id,
		    .op = "no-landlock", .actor = "broker",
		    .detail = "kernel has no Landlock: namespaces and seccomp carry the load" });
	if (!s->proc.report.cgroup)
		brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .sandbox = s->id,
		    .op = "no-cgroup", .actor = "broker",
		    .detail = "no delegated cgroup: rlimits bound memory and processes" });
}

static void
brk_join_argv(char *const *argv, char **out)
{
	size_t n = 1;
	char *s;

	for (size_t i = 0; argv[i]; i++)
		n += strlen(argv[i]) + 1;
	if (n > ST_TEXT_MAX)
		n = ST_TEXT_MAX;
	if (!(s = calloc(1, n)))
		return;
	for (size_t i = 0; argv[i]; i++) {
		if (i)
			strncat(s, " ", n - strlen(s) - 1);
		strncat(s, argv[i], n - strlen(s) - 1);
	}
	*out = s;
}

/* A tier an administrator adds inherits the sandbox rules (fork, exec,
 * what it sees) of the built-in tier it extends. */
static enum sbx_tier
brk_stier(const struct pol_tier *t)
{
	enum sbx_tier st;

	return sbx_tier_parse(pol_tier_base(t), &st) == 0 ? st : SBX_TIER_LOW;
}

/*
 * A root broker's agent runs as nobody (sandbox-stub drops to it): a writable
 * bind nobody cannot write would start and then fail at the agent's first
 * write.  Say so at the start instead, with what to do.  (Running the agent
 * as the bind's owner would hand an agent that uid's whole host identity
 * for everything else it can reach: not done.)
 */
static int
brk_rw_bind_check(const struct sbx_bind *bd, char *why, size_t whylen)
{
	struct stat st;
	int fd;
	bool ok;

	if (!bd->writable || geteuid() != 0)
		return 0;
	if ((fd = cb_open_abs(bd->src, O_PATH)) < 0)
		return 0;	/* the launcher reports it as a bind source */
	if (fstat(fd, &st) != 0) {
		close(fd);
		return 0;
	}
	close(fd);
	ok = st.st_uid == SBX_ROOT_AGENT_ID ? (st.st_mode & S_IWUSR) != 0 :
	    st.st_gid == SBX_ROOT_AGENT_ID ? (st.st_mode & S_IWGRP) != 0 : (st.st_mode & S_IWOTH) != 0;
	if (ok)
		return 0;
	snprintf(why, whylen, "writable bind %s: a root broker runs the agent as nobody (uid %d), "
	    "which cannot write it (owner uid %u, mode %04o); run capbroker as its owner, make it "
	    "writable for nobody, or bind it read-only", bd->src, SBX_ROOT_AGENT_ID,
	    (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return CB_EPERM;
}

/* Split "SRC[:DST]" into a bind.  Both must be absolute. */
static int
brk_parse_bind(const char *spec, struct sbx_bind *bd, char **copy)
{
	char *c = strdup(spec), *colon;

	if (!c)
		return CB_ENOMEM;
	colon = strchr(c, ':');
	if (colon)
		*colon = '\0';
	bd->src = c;
	bd->dst = colon ? colon + 1 : c;
	bd->writable = false;
	*copy = c;
	if (bd->src[0] != '/' || bd->dst[0] != '/')
		return CB_EINVAL;
	return 0;
}

void
brk_ceiling_refusal(const struct brk_sbx *s, const char *what, char *why, size_t whylen)
{
	const struct cap *c;
	size_t o;

	/* The way forward first: the list that follows may be cut. */
	o = (size_t)snprintf(why, whylen, "%s exceeds the ceiling of tier '%s' (exceeds policy; "
	    "a policy file's ceiling_add widens the tier, or the agent may ask at run time: "
	    "capcall request); the tier allows", what, s->tier_name);
	if (!pol_inst_ceiling(s->inst, 0) && o < whylen)
		o += (size_t)snprintf(why + o, whylen - o, " nothing through the broker");
	for (size_t i = 0; (c = pol_inst_ceiling(s->inst, i)) && o < whylen; i++)
		o += (size_t)snprintf(why + o, whylen - o, "%s%s", i ? ", " : ": ", c->text);
	if (o >= whylen && whylen > 4)
		memcpy(why + whylen - 4, "...", 4);	/* too long: say it was cut */
}

/* May a new sandbox start at all?  Its durations, the number running, and
 * room for its records: a nearly full disk refuses new sandboxes while the
 * running ones keep the audit reserve, better one clear refusal now than
 * every sandbox failing when the disk is full. */
static int
brk_sbx_admit(struct brk *b, const struct brk_sbx_spec *spec, char *why, size_t whylen)
{
	struct statvfs vf;
	uint64_t avail;

	if (spec->ttl > CB_DURATION_MAX || spec->timeout > CB_DURATION_MAX) {
		snprintf(why, whylen, "ttl and timeout are at most %u seconds (366 days)", CB_DURATION_MAX);
		return CB_EINVAL;
	}
	if (b->nsbx >= BRK_SANDBOXES_MAX) {
		snprintf(why, whylen, "too many sandboxes");
		return CB_EBUSY;
	}
	if (!aud_room(b->aud)) {
		snprintf(why, whylen, "the audit log %s/audit.jsonl %s: refusing new sandboxes",
		    b->state_dir, aud_healthy(b->aud) ? "has no room left on its disk" :
		    "cannot be written");
		return CB_EAUDIT;
	}
	if (statvfs(b->state_dir, &vf) == 0) {
		avail = (uint64_t)vf.f_bavail * vf.f_frsize;
		if (avail < BRK_DISK_RESERVE) {
			snprintf(why, whylen, "the disk of the state %s has %llu KiB left, under the "
			    "%u KiB kept in reserve: refusing new sandboxes until there is room",
			    b->state_dir, (unsigned long long)(avail / 1024), BRK_DISK_RESERVE / 1024);
			return CB_EAUDIT;
		}
	}
	return 0;
}

/* A new sandbox with nothing open, under the policy current now (whatever
 * reloads follow).  NULL: out of memory. */
static struct brk_sbx *
brk_sbx_alloc(struct brk *b, uid_t owner, uint64_t now)
{
	struct brk_sbx *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->b = b;
	s->fd = -1;
	s->owner = owner;
	s->started_at = now;
	s->bucket = BRK_BURST;
	s->bucket_ns = cb_mono_ns();
	s->aud_bucket = (double)pol_audit_budget(b->pol)->burst;
	s->aud_bytes = (double)pol_audit_budget(b->pol)->bytes_burst;
	s->aud_bucket_ns = s->bucket_ns;
	s->proc.pid = -1;
	s->proc.pidfd = s->proc.stdin_fd = s->proc.stdout_fd = s->proc.stderr_fd = -1;
	s->proc.status_fd = s->proc.notify_fd = -1;
	s->pol = b->cur;
	s->pol->refs++;
	return s;
}

/* The sandbox's id: the one asked for (valid and not running), or a fresh
 * random one. */
static int
brk_sbx_name(struct brk_sbx *s, const char *id, char *why, size_t whylen)
{
	uint8_t rnd[4];
	char hex[2 * sizeof(rnd) + 1];

	if (id) {
		if (!cap_aud_valid(id, strlen(id)) || strlen(id) > SBX_ID_MAX) {
			snprintf(why, whylen, "invalid sandbox id '%s' (1-64 of A-Z a-z 0-9 . _ -)", id);
			return CB_EINVAL;
		}
		if (brk_sbx_find(s->b, id)) {
			snprintf(why, whylen, "a sandbox called '%s' is already running", id);
			return CB_EEXIST;
		}
		snprintf(s->id, sizeof(s->id), "%s", id);
		return 0;
	}
	do {
		randombytes_buf(rnd, sizeof(rnd));
		cap_hex(rnd, sizeof(rnd), hex);
		snprintf(s->id, sizeof(s->id), "sbx-%s", hex);
	} while (brk_sbx_find(s->b, s->id));
	return 0;
}

/*
 * Whose directory may be a workspace?  The workspace is the medium tier's
 * file ceiling, and the broker acts there as the directory's owner (its
 * tokens' changes, the served tree), root included.  A sandbox started by
 * root or by the broker's own user may work anywhere: they can reach
 * those files anyway.  One started over the admin socket by another
 * administrator (a uid or gid the policy names) must work in a directory
 * that administrator owns: otherwise `run --connect --workspace
 * /home/other` (or a run from /tmp) would let its agent, and the tokens
 * `capctl issue` adds inside the ceiling, read and change another user's
 * files as that user, or as root.  The medium tier checks the workspace
 * whether named or the caller's current directory; the high tier (whose
 * ceiling the policy sets to everything) only a named one, whose tokens
 * are minted by the broker; the low tier has no host files, and "/" is no
 * workspace at all (brk_sbx_place).  0, or
 * CB_EPERM with a sentence in why.
 */
static int
brk_sbx_ws_owner(const struct brk_sbx *s, const struct brk_sbx_spec *spec, char *why,
    size_t whylen)
{
	struct stat st;
	int fd;

	if (spec->owner == 0 || spec->owner == geteuid() || !spec->workspace ||
	    strcmp(s->workspace, "/") == 0 || s->stier == SBX_TIER_LOW ||
	    (s->stier == SBX_TIER_HIGH && !spec->serve_workspace))
		return 0;
	if ((fd = cb_open_abs(s->workspace, O_PATH | O_DIRECTORY)) < 0 || fstat(fd, &st) != 0) {
		snprintf(why, whylen, "workspace '%s': %s", s->workspace, strerror(errno));
		if (fd >= 0)
			close(fd);
		return CB_EINVAL;
	}
	close(fd);
	if (st.st_uid == spec->owner)
		return 0;
	snprintf(why, whylen, "workspace '%s' belongs to uid %u, not to uid %u who asked: a sandbox "
	    "started over the admin socket works in a directory its administrator owns%s",
	    s->workspace, (unsigned)st.st_uid, (unsigned)spec->owner,
	    spec->serve_workspace ? "" : " (without --workspace, the current directory)");
	return CB_EPERM;
}

/* Its tier (*tier) and workspace, and the tier's rules instantiated on
 * that workspace. */
static int
brk_sbx_place(struct brk_sbx *s, const struct brk_sbx_spec *spec, const struct pol_tier **tier,
    char *why, size_t whylen)
{
	struct brk *b = s->b;
	char cwd[PATH_MAX];
	int r;

	snprintf(s->tier_name, sizeof(s->tier_name), "%s",
	    spec->tier ? spec->tier : pol_default_tier(b->pol));
	if (!(*tier = pol_tier_get(b->pol, s->tier_name))) {
		snprintf(why, whylen, "unknown tier '%s'", s->tier_name);
		return CB_EINVAL;
	}
	s->stier = brk_stier(*tier);
	if (spec->workspace)
		snprintf(cwd, sizeof(cwd), "%s", spec->workspace);
	else if (pol_tier_workspace(*tier))
		snprintf(cwd, sizeof(cwd), "%s", pol_tier_workspace(*tier));
	else if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	if (!(s->workspace = realpath(cwd, NULL))) {
		snprintf(why, whylen, "workspace '%s': %s", cwd, strerror(errno));
		return CB_EINVAL;
	}
	if ((r = brk_sbx_ws_owner(s, spec, why, whylen)) != 0)
		return r;
	if ((r = pol_tier_instantiate(*tier, strcmp(s->workspace, "/") ? s->workspace : NULL,
		 &s->inst)) != 0) {
		snprintf(why, whylen, "workspace '%s' cannot be used: %s", s->workspace,
		    cb_strerror(r));
		return r;
	}
	return 0;
}

/* One grant, parsed (*c, the caller frees it) and inside the tier's
 * ceiling; otherwise why says which and why. */
static int
brk_sbx_grant_parse(struct brk_sbx *s, const char *grant, struct cap **c, char *why,
    size_t whylen)
{
	int r;

	if ((r = cap_parse(grant, c)) != 0) {
		snprintf(why, whylen, "grant '%s': %s", grant, cb_strerror(r));
		return r;
	}
	if (!pol_inst_within_ceiling(s->inst, *c)) {
		char what[CAP_STR_MAX + 16];

		snprintf(what, sizeof(what), "grant '%s'", (*c)->text);
		brk_ceiling_refusal(s, what, why, whylen);
		cap_free(*c);
		*c = NULL;
		return CB_EPOLICY;
	}
	return 0;
}

/* Grants: every one inside the tier's ceiling, or nothing starts.  Each is
 * minted (durable) and put in the sandbox's table. */
static int
brk_sbx_grants(struct brk_sbx *s, const struct brk_sbx_spec *spec, uint64_t now, char *why,
    size_t whylen)
{
	struct brk *b = s->b;
	uint64_t ttl = spec->ttl ? spec->ttl : pol_default_ttl(b->pol);
	int r;

	for (size_t i = 0; i < spec->ngrants; i++) {
		struct cap *c = NULL;
		char *text = NULL;
		uint8_t id[CAP_ID_LEN];
		uint32_t th;

		if ((r = brk_sbx_grant_parse(s, spec->grants[i], &c, why, whylen)) != 0)
			return r;
		r = brk_tok_mint(b, &(struct brk_mint){ .aud = s->id, .caps = &c, .ncaps = 1,
			.nbf = now, .exp = now + ttl, .by = spec->actor ? spec->actor : "broker" },
		    &text, id);
		cap_free(c);
		if (r != 0) {
			snprintf(why, whylen, "grant '%s': %s", spec->grants[i], brk_decide_why(b, r));
			return r;
		}
		r = brk_held_add(s, text, strlen(text), true, &th);
		free(text);
		if (r != 0) {
			snprintf(why, whylen, "grant '%s': %s", spec->grants[i], cb_strerror(r));
			return r;
		}
	}
	return 0;
}

/* The channel: SOCK_SEQPACKET keeps message boundaries.  Only the broker's
 * end (s->fd) is non-blocking (O_NONBLOCK lives on the file description,
 * so it is set per end, after creation); *agent_fd is the sandbox's end. */
static int
brk_sbx_channel(struct brk_sbx *s, int *agent_fd, char *why, size_t whylen)
{
	int sv[2], sz = WIRE_REPLY_MAX * BRK_SNDBUF_REPLIES, r;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(why, whylen, "socketpair: %s", strerror(errno));
		return CB_EIO;
	}
	s->fd = sv[0];
	*agent_fd = sv[1];
	/* bound, so the agent cannot name it in the host's abstract
	 * namespace (brk_unix_seal) */
	if ((r = brk_unix_seal(sv[1])) != 0) {
		snprintf(why, whylen, "the channel's address: %s", strerror(r));
		return CB_EIO;
	}
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) != 0)
		return CB_EIO;
	brk_unix_norights(sv[0]);
	if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) != 0)
		(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	return 0;
}

/* The binds of a new sandbox, and the strings they point into. */
struct brk_binds {
	struct sbx_bind *v;
	size_t n;
	char **copies;		/* one per --ro-bind: its "SRC[:DST]" split */
	size_t ncopies;
	char **realsrc;		/* one per bind: its canonical source */
};

static void
brk_binds_free(struct brk_binds *bb)
{
	for (size_t i = 0; bb->copies && i < bb->ncopies; i++)
		free(bb->copies[i]);
	for (size_t i = 0; bb->realsrc && i < bb->n; i++)
		free(bb->realsrc[i]);
	free(bb->copies);
	free(bb->realsrc);
	free(bb->v);
}

/* One --ro-bind of the caller's.  Opened with the caller's credentials
 * when the caller is not root: it may not reach through us what it could
 * not reach itself. */
static int
brk_ro_bind(const struct brk_sbx_spec *spec, const char *ro, struct sbx_bind *bd, char **copy,
    char *why, size_t whylen)
{
	const char *no;
	int r;

	if ((r = brk_parse_bind(ro, bd, copy)) != 0) {
		snprintf(why, whylen, "--ro-bind '%s': SRC and DST must be absolute", ro);
		return r;
	}
	if ((no = sbx_bind_dst_refusal(bd->dst)) != NULL) {
		snprintf(why, whylen, "--ro-bind '%s': destination %s refused: %s", ro, bd->dst, no);
		return CB_EINVAL;
	}
	/* The group is the one the caller runs as (SO_PEERCRED), not looked
	 * up: getpwuid() asks NSS, which may be a directory server across the
	 * network, and this runs on the loop. */
	if (spec->owner != 0) {
		bd->as_caller = true;
		bd->as_uid = spec->owner;
		bd->as_gid = spec->owner_gid;
	}
	return 0;
}

/* The sandbox's binds: the tier's (opened with the broker's credentials),
 * then the caller's read-only ones. */
static int
brk_sbx_binds(const struct brk_sbx_spec *spec, const struct pol_tier *tier, struct brk_binds *bb,
    char *why, size_t whylen)
{
	const struct pol_bind *pbinds;
	size_t npb = pol_tier_binds(tier, &pbinds);
	int r;

	bb->v = calloc(npb + spec->nro_binds + 1, sizeof(*bb->v));
	bb->copies = calloc(spec->nro_binds + 1, sizeof(*bb->copies));
	bb->realsrc = calloc(npb + spec->nro_binds + 1, sizeof(*bb->realsrc));
	if (!bb->v || !bb->copies || !bb->realsrc)
		return CB_ENOMEM;
	for (size_t i = 0; i < npb; i++)
		bb->v[bb->n++] = (struct sbx_bind){ .src = pbinds[i].src, .dst = pbinds[i].dst,
		    .writable = pbinds[i].rw };
	for (size_t i = 0; i < spec->nro_binds; i++) {
		bb->ncopies++;
		if ((r = brk_ro_bind(spec, spec->ro_binds[i], &bb->v[bb->n], &bb->copies[i], why,
			 whylen)) != 0)
			return r;
		bb->n++;
	}
	/* Binds are chosen by administrators (the policy, --ro-bind): a
	 * symlink they name is followed here, once, and the launcher then
	 * opens the canonical path with no symlink followed (common/resolve.c),
	 * with the broker's credentials, and hands the stub the fd. */
	for (size_t i = 0; i < bb->n; i++) {
		if ((bb->realsrc[i] = realpath(bb->v[i].src, NULL)) != NULL)
			bb->v[i].src = bb->realsrc[i];
		if ((r = brk_rw_bind_check(&bb->v[i], why, whylen)) != 0)
			return r;
	}
	return 0;
}

/* What a sandbox is started with, once placed and its binds opened; kept
 * from brk_sbx_begin to brk_sbx_finish (s->begun) when the spawn waits
 * for the state. */
struct brk_spawn {
	const struct brk_sbx_spec *spec;
	const struct pol_tier *tier;
	struct brk_binds binds;
	int agent_fd;			/* the agent's end of the channel */
	uint64_t now;			/* when it was asked for */
};

static void
brk_spawn_free(struct brk_spawn *sp)
{
	if (!sp)
		return;
	if (sp->agent_fd >= 0)
		close(sp->agent_fd);
	brk_binds_free(&sp->binds);
	free(sp);
}

/* Start the agent in its sandbox: the tier's rules and limits (--timeout
 * may shorten the tier's wall clock, never lengthen it), the binds, the
 * agent's end of the channel. */
static int
brk_sbx_spawn(struct brk_sbx *s, const struct brk_spawn *sp, char *why, size_t whylen)
{
	const struct brk_sbx_spec *spec = sp->spec;
	const struct pol_tier *tier = sp->tier;
	const struct pol_limits *lim = pol_tier_limits(tier);
	struct sbx_config cfg = {
		.tier = s->stier, .id = s->id, .argv = spec->argv, .binds = sp->binds.v,
		.nbinds = sp->binds.n, .broker_fd = sp->agent_fd, .hold = true,
		.capcall_path = s->b->capcall_path[0] ? s->b->capcall_path : NULL,
		.pylib_dir = s->b->pylib_dir[0] ? s->b->pylib_dir : NULL,
		.want_pty = spec->want_pty, .chdir = spec->chdir,
		.setenv = spec->setenv, .nsetenv = spec->nsetenv,
		.unsetenv = spec->unsetenv, .nunsetenv = spec->nunsetenv,
		.mediate_connect = true,	/* notify.c */
	};
	int r;

	cfg.nexec_allow = pol_tier_exec(tier, &cfg.exec_allow);
	/* Its /etc/hosts: the names its tokens grant (hosts.c), looked up
	 * while it starts.  Without it no name resolves, which fails closed. */
	if (s->stier != SBX_TIER_LOW && brk_hosts_open(s, &cfg.hosts_dir) != 0)
		brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .reason = CB_EIO,
		    .sandbox = s->id, .op = "hosts", .actor = "broker",
		    .detail = "no /etc/hosts of granted names: host names will not resolve inside" });
	brk_hosts_refresh(s);
	brk_sbx_limits(lim, spec->timeout && spec->timeout < lim->wall ? spec->timeout : lim->wall,
	    &cfg.limits);
	s->wall = cfg.limits.wall_secs;
	/* Every tree its fs tokens cover, served (fs_served.c). */
	if ((r = brk_fss_start(s, &cfg, why, whylen)) != 0)
		return r;
	/* Served trees read the status socket after "ready" (brk_fss_ready):
	 * their sandboxes keep waiting for the stub's exit. */
	cfg.report_exit = spec->report_exit && !s->fss;
	s->report_exit = cfg.report_exit;
	r = sbx_spawn_start(&cfg, &s->proc);
	brk_fss_spawned(s);
	if (r != 0) {
		sbx_start_refusal(r, why, whylen);
		/* A stub spawned then given up on: reaped off the loop's path. */
		brk_reap_later(s->b, &s->proc);
		return r;
	}
	/* Its resolver's library loads on a worker while the sandbox is
	 * built, not on the loop at its first lookup (dns.c). */
	if (s->stier != SBX_TIER_LOW)
		brk_dns_preload(s->b);
	s->spawned = true;
	return 0;
}

/* Does starting s need anything of the state?  The low tier has no
 * served tree (the trees and the writable binds' tokens come from its
 * grants) and no /etc/hosts of granted names: its stub can be built
 * before the state is open (brk_sbx_begin). */
static bool
brk_sbx_spawn_needs_state(const struct brk_sbx *s)
{
	return s->stier != SBX_TIER_LOW;
}

/* Watch the running sandbox (its channel, status report and exit) and
 * list it. */
static int
brk_sbx_watch(struct brk_sbx *s)
{
	struct brk *b = s->b;

	s->ev_read = event_new(b->base, s->fd, EV_READ | EV_PERSIST, brk_dispatch_readable, s);
	s->ev_write = event_new(b->base, s->fd, EV_WRITE | EV_PERSIST, brk_chan_writable, s);
	s->ev_rate = evtimer_new(b->base, brk_chan_rate_resume, s);
	s->ev_status = event_new(b->base, s->proc.status_fd, EV_READ | EV_PERSIST, brk_sbx_status, s);
	s->ev_exit = event_new(b->base, s->proc.pidfd, EV_READ | EV_PERSIST, brk_sbx_exited, s);
	if (!s->ev_read || !s->ev_write || !s->ev_rate || !s->ev_status || !s->ev_exit)
		return CB_ENOMEM;
	event_add(s->ev_read, NULL);
	event_add(s->ev_status, NULL);
	event_add(s->ev_exit, NULL);
	s->next = b->sbx;
	b->sbx = s;
	b->nsbx++;
	return 0;
}

/* The "sandbox.start" line, on the log's queue before the agent is let
 * go, or no start: the agent runs only once its start is on the record.
 * Not brk_audit, which counts a refused line as unlogged and goes on: the
 * admission's aud_room looks at the reserve, not at a ring that a slow
 * disk has let fill, so the append can still be refused here.  Before
 * brk_sbx_watch, so that a refusal abandons a sandbox nothing has listed. */
static int
brk_sbx_start_line(struct brk_sbx *s, const struct brk_sbx_spec *spec, char *why, size_t whylen)
{
	char detail[BRK_PATH_MAX + BRK_DETAIL_MAX];
	int r;

	if (s->b->aud == NULL)
		return 0;
	snprintf(detail, sizeof(detail), "tier %s, workspace %s, %zu grant(s)", s->tier_name,
	    s->workspace, s->nheld);
	r = aud_append(s->b->aud, &(struct aud_rec){ .kind = AUD_ADMIN, .sandbox = s->id,
	    .op = "sandbox.start", .resource = s->command,
	    .actor = spec->actor ? spec->actor : "broker", .detail = detail });
	if (r != 0)
		snprintf(why, whylen, "the audit log refused the sandbox's start line: %s",
		    cb_strerror(r));
	return r;
}

/* A sandbox that did not start: its agent (if any) killed and reaped, its
 * instance ended, everything freed. */
static void
brk_sbx_abandon(struct brk_sbx *s)
{
	if (s->spawned) {
		/* Reaped off the loop's path (reap.c): never waited for here,
		 * where every other sandbox is served. */
		cb_ignore(sbx_kill(&s->proc));
		brk_reap_later(s->b, &s->proc);
		s->exited = true;
	}
	s->dead = true;
	brk_sbx_end_instance(s);
	brk_sbx_free(s);
}

/* The grants checked against the ceiling before anything is spawned, so
 * that a refusal costs no sandbox; brk_sbx_grants parses them again and
 * mints them. */
static int
brk_sbx_grants_check(struct brk_sbx *s, const struct brk_sbx_spec *spec, char *why,
    size_t whylen)
{
	for (size_t i = 0; i < spec->ngrants; i++) {
		struct cap *c = NULL;
		int r;

		if ((r = brk_sbx_grant_parse(s, spec->grants[i], &c, why, whylen)) != 0)
			return r;
		cap_free(c);
	}
	return 0;
}

/*
 * The first half of a start, on the policy alone: the sandbox named,
 * placed, its grants checked, its channel and binds made, and, when its
 * start needs nothing of the state and early is set, its stub spawned,
 * held before the agent (sbx_config.hold).  The rest (admission, the
 * instance's record, the grants' tokens, the "sandbox.start" line, the
 * word to go) is brk_sbx_finish's.
 */
static int
brk_sbx_begin_at(struct brk *b, const struct brk_sbx_spec *spec, bool early, struct brk_sbx **out,
    char *why, size_t whylen)
{
	struct brk_sbx *s = NULL;
	struct brk_spawn *sp = NULL;
	uint64_t now = cb_now();
	int r = CB_ENOMEM;

	*out = NULL;
	why[0] = '\0';
	if (!(s = brk_sbx_alloc(b, spec->owner, now)) || !(sp = calloc(1, sizeof(*sp))))
		goto out;
	*sp = (struct brk_spawn){ .spec = spec, .agent_fd = -1, .now = now };
	s->begun = sp;
	if ((r = brk_sbx_name(s, spec->id, why, whylen)) != 0 ||
	    (r = brk_sbx_place(s, spec, &sp->tier, why, whylen)) != 0 ||
	    (r = brk_sbx_grants_check(s, spec, why, whylen)) != 0)
		goto out;
	brk_join_argv(spec->argv, &s->command);
	if ((r = brk_sbx_channel(s, &sp->agent_fd, why, whylen)) != 0 ||
	    (r = brk_sbx_binds(spec, sp->tier, &sp->binds, why, whylen)) != 0)
		goto out;
	if (early && !brk_sbx_spawn_needs_state(s)) {
		if ((r = brk_sbx_spawn(s, sp, why, whylen)) != 0)
			goto out;
		/* The stub has its own copies now. */
		close(sp->agent_fd);
		sp->agent_fd = -1;
		brk_binds_free(&sp->binds);
		sp->binds = (struct brk_binds){ .v = NULL };
	}
	*out = s;
	s = NULL;
out:
	if (s)
		brk_sbx_abandon(s);
	return r;
}

int
brk_sbx_begin(struct brk *b, const struct brk_sbx_spec *spec, struct brk_sbx **out,
    char *why, size_t whylen)
{
	return brk_sbx_begin_at(b, spec, true, out, why, whylen);
}

void
brk_sbx_discard(struct brk_sbx *s)
{
	/* Held before its agent: nothing of it has run.  Reaped by brk_free
	 * at the latest (reap.c). */
	if (s)
		brk_sbx_abandon(s);
}

/*
 * The second half, on a broker with its state and log open: admitted,
 * recorded (its instance), its grants minted, spawned if brk_sbx_begin
 * could not, watched, its "sandbox.start" line queued, and only then the
 * word to go: no agent code runs before all of that.
 */
int
brk_sbx_finish(struct brk_sbx *s, char *why, size_t whylen)
{
	struct brk *b = s->b;
	struct brk_spawn *sp = s->begun;
	const struct brk_sbx_spec *spec = sp->spec;
	uint64_t now = sp->now;
	int r;

	why[0] = '\0';
	if ((r = brk_sbx_admit(b, spec, why, whylen)) != 0)
		goto out;
	/* A durable record of this run: approvals are granted to it, not to
	 * its id, which a later sandbox may reuse. */
	if ((r = st_instance_begin(b->st, s->id, now, &s->instance)) != 0) {
		snprintf(why, whylen, "recording the sandbox in the state: %s", cb_strerror(r));
		goto out;
	}
	if ((r = brk_sbx_grants(s, spec, now, why, whylen)) != 0 ||
	    (r = brk_fss_workspace(s, spec->serve_workspace, &(struct brk_fss_mint){ .now = now,
		.ttl = spec->ttl ? spec->ttl : pol_default_ttl(b->pol), .actor = spec->actor },
		why, whylen)) != 0 ||
	    (!s->spawned && (r = brk_sbx_spawn(s, sp, why, whylen)) != 0) ||
	    (r = brk_sbx_start_line(s, spec, why, whylen)) != 0 ||
	    (r = brk_sbx_watch(s)) != 0)
		goto out;
	/* Recorded and on the log's queue: the agent may start.  A stub that
	 * is gone already (CB_ECLOSED) failed its set-up; its report and exit
	 * come through the events just added.  One that cannot be told is
	 * killed unstarted, and its exit is reported as any kill's. */
	if ((r = sbx_go(&s->proc)) != 0 && r != CB_ECLOSED)
		brk_sbx_kill(s, "broker: the sandbox could not be told to start");
	brk_spawn_free(sp);
	s->begun = NULL;
	return 0;
out:
	brk_sbx_abandon(s);
	return r;
}

int
brk_sbx_create(struct brk *b, const struct brk_sbx_spec *spec, struct brk_sbx **out,
    char *why, size_t whylen)
{
	struct brk_sbx *s;
	int r;

	*out = NULL;
	why[0] = '\0';
	/* The state is open already: the stub is spawned after the sandbox
	 * is recorded, as it is when its start needs the state. */
	if ((r = brk_sbx_begin_at(b, spec, false, &s, why, whylen)) != 0 ||
	    (r = brk_sbx_finish(s, why, whylen)) != 0)
		return r;
	*out = s;
	return 0;
}
