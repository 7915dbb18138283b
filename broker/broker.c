/*
 * broker.c - the broker itself: set-up (policy, state lock, state, audit
 * log, reconciliation, admin socket), the once-a-second tick, policy
 * reload, the loop, and the tear-down.
 *
 * Trust domain: broker.  Nothing here reads agent input; what it trusts
 * on disk is the state directory, which must be the broker's own (0700,
 * flock'd) and is never served to an agent (brk_path_is_state).
 */
#include "broker/core.h"
#include "broker/fs_served.h"
#include "broker/admin.h"
#include "broker/approval.h"
#include "broker/budget.h"
#include "broker/commit.h"
#include "broker/dns.h"
#include "broker/fleet.h"
#include "broker/hostaddr.h"
#include "broker/notify.h"
#include "broker/ops.h"
#include "broker/pool.h"
#include "broker/reap.h"
#include "broker/sbx.h"
#include "broker/work.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* At shutdown, how long the completions of workers woken by the
 * sandboxes' end are waited for (brk_work_drain). */
#define BRK_WORK_DRAIN_MS 1000

/* The wall clock against the monotonic one: a jump of more than
 * BRK_CLOCK_JUMP_S either way is audited (expiry is judged on the wall
 * clock, never earlier than its high-water mark: st_now). */
static void
brk_clock_check(struct brk *b)
{
	struct timespec ts;
	uint64_t wall, mono = cb_mono_ns();
	int64_t drift;

	clock_gettime(CLOCK_REALTIME, &ts);
	wall = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;

	if (b->clock_wall != 0) {
		drift = (int64_t)(wall - b->clock_wall) - (int64_t)(mono - b->clock_mono);
		if (drift > (int64_t)BRK_CLOCK_JUMP_S * 1000000000 ||
		    drift < -(int64_t)BRK_CLOCK_JUMP_S * 1000000000) {
			char detail[160];

			snprintf(detail, sizeof(detail), "the wall clock jumped %+lld s%s",
			    (long long)(drift / 1000000000), drift < 0 ?
			    "; expiry is still judged at the latest time seen" : "");
			brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "clock.jump",
			    .actor = "broker", .detail = detail });
			if (drift > 0)
				cb_ignore(st_time_persist(b->st, cb_now()));
		}
	}
	b->clock_wall = wall;
	b->clock_mono = mono;
}

static void
brk_tick(evutil_socket_t fd, short ev, void *arg)
{
	struct brk *b = arg;
	static unsigned n;

	(void)fd;
	(void)ev;
	/* Once, a second in (a short `run` never waits for it): the cgroups of
	 * brokers that died without removing them. */
	if (n == 0)
		sbx_cgroup_sweep();
	brk_pending_tick(b);
	brk_fleet_sandboxes(b);
	for (struct brk_sbx *s = b->sbx; s; s = s->next)
		if (!s->dead) {
			brk_budget_tick(s);
			brk_hosts_refresh(s);
		}
	brk_unlogged_tick(b, false);
	brk_clock_check(b);
	brk_reap_tick(b);
	/* Expiries and retired keys reach the file servers' grants. */
	brk_fss_refresh_all(b);
	brk_fs_roots_tick();
	/* Requests restored from the state after a restart have no waiter in
	 * memory: expire them on the same clock, every 10 s; and the wall
	 * clock's high-water mark is stored, so that setting the clock back,
	 * even across a restart, never revives an expired token. */
	if (++n % 10 == 0) {
		size_t k;

		cb_ignore(st_request_expire(b->st, st_now(b->st), &k));
		cb_ignore(st_time_persist(b->st, cb_now()));
	}
}

static void
brk_find_helpers(struct brk *b)
{
	char exe[BRK_PATH_MAX - 96], path[BRK_PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	struct stat st;
	char *slash;

	if (n <= 0)
		return;
	exe[n] = '\0';
	if (!(slash = strrchr(exe, '/')))
		return;
	*slash = '\0';
	snprintf(path, sizeof(path), "%s/capcall", exe);
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
		snprintf(b->capcall_path, sizeof(b->capcall_path), "%s", path);
	/* The Python client: installed under DATADIR, or in the source tree
	 * next to ./bin when run from a checkout. */
	snprintf(path, sizeof(path), "%s/python", CB_DATADIR);
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && realpath(path, b->pylib_dir))
		return;
	for (int up = 1; up <= 2; up++) {
		snprintf(path, sizeof(path), "%s/%s/client/python", exe, up == 1 ? ".." : "../..");
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && realpath(path, b->pylib_dir))
			return;
	}
	b->pylib_dir[0] = '\0';
}

struct brk_elev_scan {
	uint8_t (*ids)[CAP_ID_LEN];
	size_t n, cap;
	uint64_t now;
};

static int
brk_elev_collect(void *arg, const struct st_token *t)
{
	struct brk_elev_scan *e = arg;

	if (!t->elevated || t->revoked_at || t->exp < e->now)
		return 0;
	if (e->n == e->cap) {
		size_t nc = e->cap ? 2 * e->cap : 64;
		void *p = reallocarray(e->ids, nc, CAP_ID_LEN);

		if (!p)
			return CB_ENOMEM;
		e->ids = p;
		e->cap = nc;
	}
	memcpy(e->ids[e->n++], t->id, CAP_ID_LEN);
	return 0;
}

/* No sandbox runs when the broker starts, so no approval granted to one
 * can still belong to anyone: a crash left them valid, revoke them. */
static int
brk_revoke_stale_elevations(struct brk *b)
{
	struct brk_elev_scan e = { .now = st_now(b->st) };
	int r = st_token_list(b->st, NULL, brk_elev_collect, &e);

	for (size_t i = 0; r == 0 && i < e.n; i++) {
		size_t n;

		r = brk_revoke(b, e.ids[i], NULL, "broker",
		    "elevation of a sandbox that no longer runs (broker restart)", &n);
		if (r == CB_EREVOKED)
			r = 0;
	}
	free(e.ids);
	return r;
}

/*
 * One broker per state directory: a second one would share the signing keys,
 * the database and the audit log with the first (two writers of one hash
 * chain), and take over its admin socket.  STATE/broker.lock is flock'd for
 * the broker's whole life; the kernel drops the lock when the process dies,
 * however it dies, so a crash leaves nothing stale to clean up.  The file
 * holds the owner's pid, for the message a second broker prints.
 */
static int
brk_lock_state(struct brk *b, char *why, size_t whylen)
{
	char path[BRK_STATE_FILE_MAX], pid[32];
	ssize_t n;
	int fd;

	if (mkdir(b->state_dir, 0700) != 0 && errno != EEXIST) {
		snprintf(why, whylen, "state %s: %s", b->state_dir, strerror(errno));
		return CB_EIO;
	}
	snprintf(path, sizeof(path), "%s/broker.lock", b->state_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(why, whylen, "state %s: cannot open %s: %s", b->state_dir, path,
		    strerror(errno));
		return CB_EIO;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;

		n = e == EWOULDBLOCK ? pread(fd, pid, sizeof(pid) - 1, 0) : -1;
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		close(fd);
		if (e != EWOULDBLOCK) {
			snprintf(why, whylen, "state %s: cannot lock %s: %s", b->state_dir, path,
			    strerror(e));
			return CB_EIO;
		}
		snprintf(why, whylen, "state directory %s is in use by a running broker%s%s%s; "
		    "stop it first, or give this one another --state", b->state_dir,
		    pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
		return CB_EBUSY;
	}
	snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, strlen(pid), 0) < 0)
		(void)0;	/* the pid only names the owner in a refusal; the lock is what counts */
	b->lock_fd = fd;
	return 0;
}

int
brk_reload(struct brk *b, const char *actor, char *why, size_t whylen)
{
	struct pol *np = NULL;
	struct brk_pol *nb = NULL, *old = b->cur;
	char *errs = NULL, detail[256];
	size_t errlen = 0;
	FILE *ef;
	int r;

	why[0] = '\0';
	if (!b->opts.policy_path) {
		snprintf(why, whylen, "no --policy file: the built-in policy stays in force");
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .decision = AUD_DENY,
		    .reason = CB_EINVAL, .op = "policy.reload", .actor = actor, .detail = why });
		return CB_EINVAL;
	}
	/* The loader's messages (file:line: what) become the reason. */
	ef = open_memstream(&errs, &errlen);
	r = pol_load(b->opts.policy_path, &np, ef ? ef : stderr);
	if (ef)
		fclose(ef);
	if (r != 0) {
		for (char *p = errs; p && *p; p++)
			if (*p == '\n' && p[1])
				*p = ';';
		if (errs && errlen && errs[strlen(errs) - 1] == '\n')
			errs[strlen(errs) - 1] = '\0';
		snprintf(why, whylen, "policy %s is not valid; keeping the policy in force: %s",
		    b->opts.policy_path, errs && errs[0] ? errs : cb_strerror(r));
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .decision = AUD_DENY,
		    .reason = r, .op = "policy.reload", .resource = b->opts.policy_path,
		    .actor = actor, .detail = why });
		goto out;
	}
	if (!(nb = calloc(1, sizeof(*nb)))) {
		pol_free(np);
		r = CB_ENOMEM;
		snprintf(why, whylen, "%s", cb_strerror(r));
		goto out;
	}
	nb->pol = np;
	nb->gen = old->gen + 1;
	b->cur = nb;
	b->pol = np;
	snprintf(detail, sizeof(detail), "policy generation %llu for new sandboxes; %u running "
	    "sandbox(es) keep generation %llu", (unsigned long long)nb->gen, old->refs,
	    (unsigned long long)old->gen);
	brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "policy.reload",
	    .resource = b->opts.policy_path, .actor = actor, .detail = detail });
	snprintf(why, whylen, "reloaded %s: %s", b->opts.policy_path, detail);
	if (old->refs == 0) {
		pol_free(old->pol);
		free(old);
	}
out:
	free(errs);
	return r;
}

/* The policy: the file's, or the built-in one; generation 1. */
static int
brk_load_policy(struct brk *b, const char *policy_path, char *why, size_t whylen)
{
	int r;

	if (policy_path) {
		if ((r = pol_load(policy_path, &b->pol, stderr)) != 0) {
			snprintf(why, whylen, "policy %s is not valid (errors above); refusing to start",
			    policy_path);
			return r;
		}
	} else if ((r = pol_default(&b->pol)) != 0) {
		snprintf(why, whylen, "built-in policy: %s", cb_strerror(r));
		return r;
	}
	if (!(b->cur = calloc(1, sizeof(*b->cur))))
		return CB_ENOMEM;
	b->cur->pol = b->pol;
	b->cur->gen = 1;
	return 0;
}

/* A state directory others may write to is not ours to trust: they could
 * swap the database, keys or log under us. */
static int
brk_state_private(const struct brk *b, char *why, size_t whylen)
{
	struct stat sd;

	if (stat(b->state_dir, &sd) == 0 && (sd.st_mode & 0022)) {
		snprintf(why, whylen, "state directory %s is writable by group or others "
		    "(mode %04o); make it 0700", b->state_dir, (unsigned)(sd.st_mode & 07777));
		return CB_EPERM;
	}
	return 0;
}

/* Open the state database.  A log without its database means the database
 * was deleted or emptied: starting afresh would mean a new signing key and
 * no revocations beside a log that records them, so only when asked
 * (--new-state). */
static int
brk_open_state(struct brk *b, bool new_state, char *why, size_t whylen)
{
	struct stat sl, sd;
	char logp[BRK_STATE_FILE_MAX], dbp[BRK_STATE_FILE_MAX], swhy[1024];
	int r;

	snprintf(logp, sizeof(logp), "%s/audit.jsonl", b->state_dir);
	snprintf(dbp, sizeof(dbp), "%s/state.db", b->state_dir);
	if (b->opts.ephemeral) {
		if ((r = st_open_ephemeral(b->state_dir, &b->st, swhy, sizeof(swhy))) != 0) {
			snprintf(why, whylen, "state in memory: %s: %s", cb_strerror(r), swhy);
			return r;
		}
		goto opened;
	}
	if (!new_state && stat(logp, &sl) == 0 && sl.st_size > 0 &&
	    (stat(dbp, &sd) != 0 || sd.st_size == 0)) {
		snprintf(why, whylen, "state database %s is missing or empty but the audit log %s "
		    "holds this state's history; refusing to start a new state (a new key, no "
		    "revocations) beside it. Restore the database, rebuild it with `capbroker state "
		    "rebuild --state %s`, or start a new state deliberately with --new-state",
		    dbp, logp, b->state_dir);
		return CB_ENOENT;
	}
	if ((r = (new_state ? st_open_new : st_open_why)(b->state_dir, &b->st, swhy,
	    sizeof(swhy))) != 0) {
		snprintf(why, whylen, "state %s: %s: %s", b->state_dir, cb_strerror(r),
		    swhy[0] ? swhy : strerror(errno));
		return r;
	}
opened:
	if (!realpath(b->state_dir, b->state_real))
		snprintf(b->state_real, sizeof(b->state_real), "%s", b->state_dir);
	return 0;
}

/* Open the audit log.  The state remembers the log's id and last
 * checkpoint: a log that was deleted, replaced or cut back stops the
 * broker instead of being quietly started over the evidence.
 * --new-audit-log is the deliberate way past that, and says so in the new
 * log; --new-state beside an old log starts where the log is, and the log
 * says so too. */
static int
brk_open_log(struct brk *b, const struct brk_opts *o, char *why, size_t whylen)
{
	struct aud_opts ao;
	struct aud_head head;
	char path[BRK_STATE_FILE_MAX];
	int r;

	aud_opts_default(&ao);
	switch (pol_audit_fsync(b->pol)) {
	case POL_FSYNC_ALWAYS: ao.fsync = AUD_FSYNC_ALWAYS; break;
	case POL_FSYNC_NEVER: ao.fsync = AUD_FSYNC_NEVER; break;
	default: ao.fsync = AUD_FSYNC_BATCH; break;
	}
	/* An ephemeral run's log is removed with its directory when the run
	 * ends, and a crash ends the run: syncing each batch would protect
	 * nothing (checkpoints and close still sync). */
	if (o->ephemeral && ao.fsync == AUD_FSYNC_BATCH)
		ao.fsync = AUD_FSYNC_NEVER;
	ao.sign = st_sign_audit;
	ao.sign_arg = b->st;
	ao.on_checkpoint = st_audit_checkpoint_cb;
	ao.on_checkpoint_arg = b->st;
	ao.dseq_base = st_dseq(b->st);
	snprintf(path, sizeof(path), "%s/audit.jsonl", b->state_dir);
	/* An ephemeral state remembers no log (it was made empty just now). */
	if (!o->new_audit_log && !o->ephemeral &&
	    st_get_audit_head(b->st, head.log_id, &head.seq, head.hash) == 0)
		ao.expect = &head;
	if ((r = aud_open(path, st_keyring(b->st), &ao, &b->aud)) != 0) {
		if (ao.expect && r == CB_EAUDIT)
			snprintf(why, whylen, "audit log %s is missing, replaced or cut short (the state "
			    "remembers another); refusing to start. Check it with `capctl audit verify`; "
			    "to start a new log deliberately, move it aside and use --new-audit-log", path);
		else
			snprintf(why, whylen, "audit log %s: %s (%s)", path, cb_strerror(r), strerror(errno));
		return r;
	}
	if (o->new_audit_log)
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "audit.new-log",
		    .resource = path, .actor = "broker",
		    .detail = "started with --new-audit-log" });
	if (o->new_state && st_is_new(b->st)) {
		if ((r = st_set_dseq(b->st, aud_open_dseq(b->aud))) != 0) {
			snprintf(why, whylen, "state %s: %s", b->state_dir, cb_strerror(r));
			return r;
		}
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "state.new",
		    .resource = b->state_dir, .actor = "broker",
		    .detail = "started with --new-state: a new state database beside the existing log" });
	}
	return 0;
}

/* What a previous run left: a clock set back since (audited), sandbox
 * instances a crash left open and their elevations (ended, revoked). */
static int
brk_end_previous_run(struct brk *b, char *why, size_t whylen)
{
	uint8_t (*ids)[CAP_ID_LEN] = NULL;
	size_t n = 0;
	int r;

	if (cb_now() + BRK_CLOCK_JUMP_S < st_time_hwm(b->st)) {
		char detail[BRK_DETAIL_MAX + 32];

		snprintf(detail, sizeof(detail), "the wall clock is %llu s behind the latest time this "
		    "state saw; expiry is judged at that time",
		    (unsigned long long)(st_time_hwm(b->st) - cb_now()));
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "clock.backwards",
		    .actor = "broker", .detail = detail });
	}
	cb_ignore(st_time_persist(b->st, cb_now()));
	/* An ephemeral state has no previous run: nothing to end, nothing
	 * elevated to revoke (its database was made empty by this start). */
	if (b->opts.ephemeral)
		return 0;
	r = st_instance_end_all(b->st, cb_now(), &ids, &n);
	for (size_t i = 0; i < n; i++)
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "revoke",
		    .token_id = ids[i], .actor = "broker",
		    .detail = "elevation of a sandbox that no longer runs (broker restart)" });
	free(ids);
	if (r != 0) {
		snprintf(why, whylen, "ending the sandboxes of a previous run: %s", cb_strerror(r));
		return r;
	}
	if ((r = brk_revoke_stale_elevations(b)) != 0) {
		snprintf(why, whylen, "revoking stale elevations: %s", cb_strerror(r));
		return r;
	}
	return 0;
}

/* The loop and what runs on it: the buffers every channel shares, the
 * worker threads' wake pipe, the tick, the host's addresses. */
static int
brk_start_loop(struct brk *b)
{
	struct timeval tv = { 1, 0 };
	int r;

	if (!(b->base = event_base_new()) || wire_dec_new(WIRE_REQ_MAX, &b->dec) != 0 ||
	    !(b->rbuf = malloc(WIRE_REQ_MAX + 1)) || !(b->sbuf = malloc(WIRE_REPLY_MAX)))
		return CB_ENOMEM;
	if ((r = brk_work_open(b)) != 0)
		return r;
	if (!(b->ev_tick = event_new(b->base, -1, EV_PERSIST, brk_tick, b)))
		return CB_ENOMEM;
	if ((r = brk_hostaddr_open(b)) != 0)
		return r;
	brk_hosts_sweep(b);
	event_add(b->ev_tick, &tv);
	return 0;
}

/* The admin socket: an inherited one (socket activation), or our own. */
static int
brk_open_admin(struct brk *b, const struct brk_opts *o, char *why, size_t whylen)
{
	char path[BRK_STATE_FILE_MAX];

	if (o->has_admin_fd)
		return brk_admin_adopt(b, o->admin_fd, why, whylen);
	if (o->admin_path)
		snprintf(path, sizeof(path), "%s", o->admin_path);
	else
		snprintf(path, sizeof(path), "%s/admin.sock", b->state_dir);
	return brk_admin_listen(b, path, why, whylen);
}

int
brk_new_early(const struct brk_opts *o, struct brk **out, char *why, size_t whylen)
{
	struct brk *b = NULL;
	int r;

	*out = NULL;
	why[0] = '\0';
	if (sodium_init() < 0) {
		snprintf(why, whylen, "libsodium failed to initialise");
		return CB_EINTERNAL;
	}
	if (!(b = calloc(1, sizeof(*b))))
		return CB_ENOMEM;
	b->opts = *o;
	b->chan_closed = brk_sbx_close_channel;
	b->tokens_changed = brk_fss_refresh;
	b->sbx_free = brk_sbx_free;
	b->request_arrived = brk_admin_notify;
	b->cl_request_arrived = brk_admin_notify_cl;
	b->admin_fd = b->tty_fd = b->lock_fd = b->spare_fd = -1;
	b->wake_pipe[0] = b->wake_pipe[1] = -1;
	signal(SIGPIPE, SIG_IGN);
	/* Before the audit writer, the first thread besides this one, starts. */
	sbx_reserve_fds();
	snprintf(b->state_dir, sizeof(b->state_dir), "%s", o->state_dir);
	if ((r = brk_load_policy(b, o->policy_path, why, whylen)) != 0)
		goto out;
	brk_find_helpers(b);
	*out = b;
	b = NULL;
out:
	if (r != 0 && !why[0])
		snprintf(why, whylen, "%s", cb_strerror(r));
	brk_free(b);
	return r;
}

int
brk_open(struct brk *b, char *why, size_t whylen)
{
	const struct brk_opts *o = &b->opts;
	int r;

	why[0] = '\0';
	if ((r = brk_state_private(b, why, whylen)) != 0 ||
	    (r = brk_lock_state(b, why, whylen)) != 0 ||
	    (r = brk_open_state(b, o->new_state, why, whylen)) != 0 ||
	    (r = brk_open_log(b, o, why, whylen)) != 0 ||
	    (r = brk_reconcile(b, why, whylen)) != 0 ||
	    (r = brk_end_previous_run(b, why, whylen)) != 0 ||
	    (r = brk_start_loop(b)) != 0 ||
	    (r = brk_fleet_open(b, why, whylen)) != 0 ||
	    (r = brk_open_admin(b, o, why, whylen)) != 0)
		goto out;
	brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "broker.start",
	    .resource = b->state_dir, .actor = "broker",
	    .detail = o->policy_path ? o->policy_path : "built-in policy" });
out:
	if (r != 0 && !why[0])
		snprintf(why, whylen, "%s", cb_strerror(r));
	return r;
}

int
brk_new(const struct brk_opts *o, struct brk **out, char *why, size_t whylen)
{
	struct brk *b = NULL;
	int r;

	if ((r = brk_new_early(o, &b, why, whylen)) != 0)
		return r;
	if ((r = brk_open(b, why, whylen)) != 0) {
		brk_free(b);
		return r;
	}
	*out = b;
	return 0;
}

struct event_base *
brk_base(struct brk *b)
{
	return b->base;
}

const char *
brk_admin_sock(const struct brk *b)
{
	return b->admin_path;
}

bool
brk_admin_was_stale(const struct brk *b)
{
	return b->admin_stale;
}

int
brk_exit_code(const struct brk *b)
{
	return b->exit_code;
}

void
brk_set_prompt_hook(struct brk *b, void (*fn)(void *arg, bool open), void *arg)
{
	b->prompt_hook = fn;
	b->prompt_arg = arg;
}

void
brk_set_wait_hook(struct brk *b, void (*fn)(void *arg, const struct brk_wait *w), void *arg)
{
	b->wait_hook = fn;
	b->wait_arg = arg;
}

void
brk_kill_all(struct brk *b, const char *actor)
{
	for (struct brk_sbx *s = b->sbx; s; s = s->next)
		brk_sbx_kill(s, actor);
}

void
brk_stop(struct brk *b, int code)
{
	b->stopping = true;
	b->exit_code = code;
	event_base_loopbreak(b->base);
}

int
brk_loop(struct brk *b)
{
	if (event_base_dispatch(b->base) < 0)
		return CB_EINTERNAL;
	return 0;
}

void
brk_free(struct brk *b)
{
	if (!b)
		return;
	/* No process survives its sandbox, nor its broker. */
	for (struct brk_sbx *s = b->sbx; s; s = s->next) {
		/* Its proc.exec children too: one already answered may not be
		 * reaped yet (its exit is reported before the teardown).  The
		 * extra reference keeps s while they release theirs. */
		s->refs++;
		brk_proc_end_all(s);
		s->refs--;

		/* Waited for: the loop no longer runs (shutdown). */
		if (s->spawned && !s->exited) {
			int ws;

			sbx_kill(&s->proc);
			waitpid(s->proc.pid, &ws, 0);
			s->exited = true;
		}
		s->dead = true;
	}
	/* Their end woke the workers that waited on them (an AF_UNIX connect
	 * to a full listener of an agent's): their completions run now, so
	 * each job is freed with what it holds rather than lost with the
	 * pipe (they may free a sandbox whose last reference they held). */
	brk_work_drain(b, BRK_WORK_DRAIN_MS);
	brk_dns_end_all(b);
	while (b->sbx) {
		struct brk_sbx *s = b->sbx;

		s->refs = 0;
		brk_sbx_free(s);
	}
	/* Their file servers' last close lines, before the log closes. */
	brk_fss_end_all(b);
	brk_pool_free(b);
	brk_admin_close(b);
	brk_fleet_close(b);
	brk_hostaddr_close(b);
	brk_work_close(b);
	brk_fs_roots_drop();
	if (b->ev_tick)
		event_free(b->ev_tick);
	if (b->ev_tty)
		event_free(b->ev_tty);
	if (b->tty_fd >= 0)
		close(b->tty_fd);
	if (b->aud) {
		brk_audit(b, &(struct aud_rec){ .kind = AUD_ADMIN, .op = "broker.stop",
		    .actor = "broker" });
		/* what the log refused and has not said yet: now, or on stderr */
		brk_unlogged_tick(b, true);
		(void)aud_close(b->aud);
	}
	st_close(b->st);
	/* The stubs still ending (a sandbox over at its exit report, one
	 * given up on): waited for here, after the log and state, so that
	 * the kernel tears their namespaces down while those close; no
	 * sandbox process outlives its broker all the same. */
	brk_reap_close(b);
	/* Every sandbox is gone: only the current policy is left. */
	if (b->cur)
		free(b->cur);
	pol_free(b->pol);
	/* Last: the next broker may take the state only now. */
	if (b->lock_fd >= 0)
		close(b->lock_fd);
	wire_dec_free(b->dec);
	free(b->rbuf);
	free(b->sbuf);
	if (b->base)
		event_base_free(b->base);
	free(b);
}
