/*
 * ops_proc.c - proc.exec: run a program in a fresh sandbox of its own.
 *
 * Trust domain: broker, starting programs for a hostile agent.  Why it is
 * safe:
 *  - The program path is an absolute, checked path covered by a proc.exec
 *    capability inside the tier's ceiling.
 *  - It runs in a new low-tier sandbox (its own namespaces, seccomp,
 *    Landlock, limits), never in the agent's, and is started through the
 *    capbroker-stub exec: it inherits none of the broker's fds, memory or
 *    environment.  That sandbox may come from the warm pool (pool.c):
 *    built ahead exactly as this one would be, used for this task only,
 *    handed over after every check here.  It sees the system runtime plus read-only binds of the
 *    program's directory (outside /usr) and of the fs.read roots the
 *    presenting token names; it has no broker channel.
 *  - Input is bounded: the request's data (at most WIRE_DATA_MAX) is the
 *    program's stdin, written without blocking (the pipe is non-blocking and
 *    an event writes what did not fit at once); then stdin is closed.
 *  - Output is bounded (WIRE_OUT_MAX per stream, the rest discarded and
 *    flagged), and a wall-clock timeout kills it.  All waiting happens in
 *    events: the loop never blocks on the child.
 */
#include "broker/core.h"
#include "broker/budget.h"
#include "broker/chan.h"
#include "broker/ops.h"
#include "broker/pool.h"
#include "broker/reap.h"
#include "broker/tokens.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the protocol lets an agent send is what a sandbox can be given: a
 * command the decoder accepts never fails at the launcher (launch.c) or
 * in a pooled sandbox's hand-over (the stub) instead. */
_Static_assert(WIRE_ARGV_MAX == SBX_ARGV_MAX, "proc.exec's argv limit is the sandbox's");

#define BRK_PROC_CHUNK	16384	/* bytes read from a child's output at a time */
#define BRK_PROC_PIPE_FULL (1024 * 1024)	/* its pipe once the output kept is full */
#define BRK_PROC_PACE_MS 10	/* ... emptied this often (100 MB/s at most) */
#define BRK_PROC_TIMEOUT_S 60
#define BRK_PROC_BINDS 8
#define BRK_PROC_MAX	4		/* proc.exec children one sandbox runs at once */
#define BRK_PROC_MEM_MIN (16ULL << 20)	/* the least memory a child is started with */
#define BRK_PROC_TMP_MIN (64ULL << 10)	/* ... and the least private /tmp */

struct brk_proc {
	struct brk_proc *next;		/* in its sandbox's list */
	struct brk_sbx *s;
	uint32_t id;
	char res[CAP_STR_MAX + 1];
	uint8_t tid[CAP_ID_LEN];
	struct sbx_limits lim;		/* carved from its sandbox's budget */
	struct sbx_proc p;
	struct event *ev_status, *ev_exit, *ev_out, *ev_err, *ev_in;
	uint8_t *out, *err, *in;	/* in: stdin not yet written */
	size_t nout, nerr, nin, offin;
	size_t cout, cerr;		/* out and err grow as output comes (to WIRE_OUT_MAX) */
	bool trunc, exited, out_eof, err_eof, failed;
	bool grown_out, grown_err;	/* its pipe was grown for output thrown away */
	struct event *ev_pace_out, *ev_pace_err;	/* ... and is emptied on this timer */
	char *shown[BRK_PROC_BINDS];	/* the grant roots bound for it (not its program's directory) */
	size_t nshown;
	bool cut_off;			/* killed: a grant it was shown was lost */
	bool ready;			/* the stub said "ready": the next report is its exit */
	bool replied;			/* the reply is sent (exit report or reaped) */
	bool reaped;			/* the stub is reaped: x can go */
	int status;
};

static void
brk_proc_free(struct brk_proc *x)
{
	for (struct brk_proc **pp = &x->s->procs; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	if (x->ev_status)
		event_free(x->ev_status);
	if (x->ev_exit)
		event_free(x->ev_exit);
	if (x->ev_out)
		event_free(x->ev_out);
	if (x->ev_err)
		event_free(x->ev_err);
	if (x->ev_in)
		event_free(x->ev_in);
	if (x->ev_pace_out)
		event_free(x->ev_pace_out);
	if (x->ev_pace_err)
		event_free(x->ev_pace_err);
	sbx_proc_close(&x->p);
	for (size_t i = 0; i < x->nshown; i++)
		free(x->shown[i]);
	free(x->in);
	free(x->out);
	free(x->err);
	if (!x->replied)
		x->s->inflight--;
	brk_sbx_release(x->s);
	free(x);
}

/* Reply once the program has exited (its sandbox's exit report, or the
 * stub reaped) and both its outputs are at end of file; x goes once the
 * stub is reaped too (its budget is held until then). */
static void
brk_proc_maybe_done(struct brk_proc *x)
{
	struct wire_reply rp = { .id = x->id };

	if (!x->exited || !x->out_eof || !x->err_eof)
		return;
	if (!x->replied && !x->s->dead) {
		rp.has_status = true;
		rp.status = x->status;
		/* Both always sent, empty ones too (a program that printed
		 * nothing has no buffer). */
		rp.out = x->out ? x->out : (const uint8_t *)"";
		rp.out_len = x->nout;
		rp.errout = x->err ? x->err : (const uint8_t *)"";
		rp.errout_len = x->nerr;
		rp.trunc = x->trunc;
		brk_reply(x->s, &rp, -1);
	}
	/* Answered: no longer in flight, nor using the sandbox's budget (its
	 * program is gone; the rest of it goes with the teardown). */
	if (!x->replied)
		x->s->inflight--;
	x->replied = true;
	if (x->reaped)
		brk_proc_free(x);
}

/* Room for want more bytes in *buf (up to WIRE_OUT_MAX in all): the
 * buffers grow as a program writes, since most write little, and two of
 * WIRE_OUT_MAX made for every proc.exec were grown and trimmed from the
 * heap at each one (two brk calls on the loop, about 20 us).  Returns how
 * many fit (fewer: out of memory). */
static size_t
brk_proc_room(uint8_t **buf, size_t n, size_t *cap, size_t want)
{
	size_t nc = *cap ? *cap : BRK_PROC_CHUNK;
	uint8_t *nb;

	if (want > WIRE_OUT_MAX - n)
		want = WIRE_OUT_MAX - n;
	if (n + want <= *cap)
		return want;
	while (nc < n + want)
		nc *= 2;
	if (nc > WIRE_OUT_MAX)
		nc = WIRE_OUT_MAX;
	if (!(nb = realloc(*buf, nc)))
		return *cap - n;
	*buf = nb;
	*cap = nc;
	return want;
}

/*
 * A stream whose WIRE_OUT_MAX bytes are kept: what else the program writes
 * is thrown away, but still drained (it must never block on its output).
 * Read 16 KiB at a time into the loop, a program writing as fast as it can
 * (`cat /dev/zero`) made the broker spend half a CPU discarding it, outside
 * any sandbox's budget (red team, fourth pass: 8 such children, 70 % of a
 * CPU).  So the pipe is grown once (the program's writes fill it, the pages
 * charged to the program) and emptied into /dev/null by splice, a megabyte
 * a wake-up and no copy.  0: drained for now, 1: end of stream, -1: no
 * splice here (the caller reads as before).
 */
static int
brk_proc_discard(int fd, bool *grown)
{
	static int null_fd = -2;
	ssize_t r;

	if (null_fd == -2)
		null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null_fd < 0)
		return -1;
	if (!*grown) {
		*grown = true;
		(void)fcntl(fd, F_SETPIPE_SZ, BRK_PROC_PIPE_FULL);
	}
	for (;;) {
		r = splice(fd, NULL, null_fd, NULL, BRK_PROC_PIPE_FULL, SPLICE_F_NONBLOCK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r < 0 && errno == EINVAL)
			return -1;
		return r <= 0 ? 1 : 0;
	}
}

static void brk_proc_pace_out(evutil_socket_t fd, short ev, void *arg);
static void brk_proc_pace_err(evutil_socket_t fd, short ev, void *arg);

/* Output thrown away is emptied every BRK_PROC_PACE_MS, not at each of the
 * program's writes: its pipe holds a megabyte meanwhile (a wake-up for
 * every few kilobytes is what cost the CPU).  No timer (out of memory):
 * watched as before. */
static void
brk_proc_pause(struct brk_proc *x, struct event *ev)
{
	struct timeval tv = { 0, BRK_PROC_PACE_MS * 1000 };
	bool err = ev == x->ev_err;
	struct event **t = err ? &x->ev_pace_err : &x->ev_pace_out;

	if (!*t)
		*t = evtimer_new(x->s->b->base, err ? brk_proc_pace_err : brk_proc_pace_out, x);
	if (!*t)
		return;
	event_del(ev);
	evtimer_add(*t, &tv);
}

static void
brk_proc_read(struct brk_proc *x, int fd, uint8_t **buf, size_t *n, size_t *cap, bool *eof,
    struct event *ev)
{
	uint8_t tmp[BRK_PROC_CHUNK];
	ssize_t r;
	int d;

	if (*n >= WIRE_OUT_MAX &&
	    (d = brk_proc_discard(fd, buf == &x->err ? &x->grown_err : &x->grown_out)) >= 0) {
		x->trunc = true;
		if (d == 1) {
			*eof = true;
			event_del(ev);
		} else {
			brk_proc_pause(x, ev);
		}
		return;
	}
	for (;;) {
		r = read(fd, tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			*eof = true;
			event_del(ev);
			return;
		}
		{
			size_t take = brk_proc_room(buf, *n, cap, (size_t)r);

			if (take)
				memcpy(*buf + *n, tmp, take);
			*n += take;
			if (take < (size_t)r)
				x->trunc = true;	/* keep draining so it never blocks */
		}
	}
}

/* What its stdout (or stderr) has now. */
static void
brk_proc_drain(struct brk_proc *x, bool err)
{
	if (err)
		brk_proc_read(x, x->p.stderr_fd, &x->err, &x->nerr, &x->cerr, &x->err_eof, x->ev_err);
	else
		brk_proc_read(x, x->p.stdout_fd, &x->out, &x->nout, &x->cout, &x->out_eof, x->ev_out);
}

/* Write what stdin still has; at the end (or when the program stopped
 * reading) close it, so the program reads EOF. */
static void
brk_proc_in(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_proc *x = arg;

	(void)fd;
	(void)ev;
	while (x->offin < x->nin) {
		ssize_t n = write(x->p.stdin_fd, x->in + x->offin, x->nin - x->offin);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (x->ev_in)
				event_add(x->ev_in, NULL);
			return;
		}
		if (n <= 0)
			break;	/* EPIPE: it does not want the rest */
		x->offin += (size_t)n;
	}
	if (x->ev_in)
		event_del(x->ev_in);
	close(x->p.stdin_fd);
	x->p.stdin_fd = -1;
}

static void
brk_proc_out(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_proc *x = arg;

	(void)ev;
	brk_proc_read(x, fd, &x->out, &x->nout, &x->cout, &x->out_eof, x->ev_out);
	brk_proc_maybe_done(x);
}

static void
brk_proc_err(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_proc *x = arg;

	(void)ev;
	brk_proc_read(x, fd, &x->err, &x->nerr, &x->cerr, &x->err_eof, x->ev_err);
	brk_proc_maybe_done(x);
}

/* The pace timers (brk_proc_pause): empty the stream, then wait again. */
static void
brk_proc_pace_out(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_proc *x = arg;

	(void)fd;
	(void)ev;
	if (x->out_eof)
		return;
	brk_proc_read(x, x->p.stdout_fd, &x->out, &x->nout, &x->cout, &x->out_eof, x->ev_out);
	brk_proc_maybe_done(x);
}

static void
brk_proc_pace_err(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_proc *x = arg;

	(void)fd;
	(void)ev;
	if (x->err_eof)
		return;
	brk_proc_read(x, x->p.stderr_fd, &x->err, &x->nerr, &x->cerr, &x->err_eof, x->ev_err);
	brk_proc_maybe_done(x);
}

static void
brk_proc_exit(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_proc *x = arg;
	int ws;

	(void)fd;
	(void)ev;
	if (waitpid(x->p.pid, &ws, WNOHANG) <= 0)
		return;
	event_del(x->ev_exit);
	event_del(x->ev_status);
	x->reaped = true;
	if (!x->exited)
		x->status = sbx_wait_status(ws);
	x->exited = true;
	/* Whatever is still in the pipes arrives before EOF. */
	if (!x->out_eof)
		brk_proc_drain(x, false);
	if (!x->err_eof)
		brk_proc_drain(x, true);
	brk_proc_maybe_done(x);
}

static void
brk_proc_status(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_proc *x = arg;
	char why[512] = "";
	int r, code;

	(void)fd;
	(void)ev;
	if (x->ready) {
		/* The exit report: the answer need not wait for the teardown. */
		if ((r = sbx_exit_report(&x->p, &code)) == CB_EBUSY)
			return;
		event_del(x->ev_status);
		if (r == 0 && !x->exited) {
			x->exited = true;
			x->status = code;
			if (!x->out_eof)
				brk_proc_drain(x, false);
			if (!x->err_eof)
				brk_proc_drain(x, true);
			brk_proc_maybe_done(x);
		}
		return;
	}
	r = sbx_spawn_finish(&x->p, why, sizeof(why));
	if (r == CB_EBUSY)
		return;
	if (r == 0) {
		x->ready = true;
		return;
	}
	event_del(x->ev_status);
	if (r != 0)
		brk_audit_done(x->s, &(struct aud_rec){ .kind = AUD_ADMIN, .reason = r,
		    .op = "proc.exec.failed", .resource = x->res,
		    .token_id = x->tid, .actor = "broker", .detail = why });
}

/* Add a read-only bind of a directory or file outside what every sandbox
 * sees, if not yet listed.  The path is a capability's fixed prefix (the
 * grant's root) or the program's directory; it is probed through the one
 * resolver, from "/" with no symlink, magic link or kernel file system on
 * the way, exactly as the launcher will open it to hand the stub an fd: a
 * grant that reaches its files only through a symlink shows nothing. */
static void
brk_proc_bind(const struct brk *br, struct sbx_bind *b, struct sbx_src_id *ids, size_t *nb,
    char *store, size_t storelen, const char *dir)
{
	static const char *const seen[] = { "/usr", "/bin", "/lib", "/lib64", "/sbin", NULL };
	struct stat st;
	int fd;

	if (*nb >= BRK_PROC_BINDS || strcmp(dir, "/") == 0 || strlen(dir) >= storelen)
		return;
	/* Never show the broker's state, nor a directory that contains it. */
	if (brk_path_is_state(br, dir, true))
		return;
	for (size_t i = 0; seen[i]; i++) {
		size_t l = strlen(seen[i]);

		if (strncmp(dir, seen[i], l) == 0 && (dir[l] == '/' || dir[l] == '\0'))
			return;
	}
	for (size_t i = 0; i < *nb; i++)
		if (strcmp(b[i].src, dir) == 0)
			return;
	if ((fd = cb_open_abs(dir, O_PATH)) < 0)
		return;
	/* The stub binds it recursively (every mount beneath it): a procfs or
	 * sysfs mounted beneath (a chroot's /proc) would show the host's
	 * processes to the tool, which capcall fs.read refuses (red team,
	 * tests/integration/134-proc-exec-kernfs.sh).  Such a root is left
	 * out as one that does not resolve. */
	if (cb_kernfs_below(dir)) {
		close(fd);
		return;
	}
	if (fstat(fd, &st) != 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
		close(fd);
		return;
	}
	close(fd);
	memcpy(store, dir, strlen(dir) + 1);
	b[*nb] = (struct sbx_bind){ .src = store, .dst = store };
	ids[*nb] = (struct sbx_src_id){ st.st_dev, st.st_ino };
	(*nb)++;
}

/* What is left of a (possibly unbounded) budget after `used`. */
static uint64_t
brk_left(uint64_t budget, uint64_t used)
{
	return budget > used ? budget - used : 0;
}

/*
 * A proc.exec child is a sandbox of its own, but its resources come out of
 * its parent's budget: the parent's tier limits (memory, processes, CPU
 * time, private /tmp) are shared by all of its running children, each of
 * which gets the low tier's limits or what is left, whichever is less, and
 * at most BRK_PROC_MAX run at once.  When too little is left the request
 * is refused (busy) rather than started with less than a program needs or
 * with more than the parent was given.
 */
static int
brk_proc_budget(struct brk_sbx *s, const struct pol_limits *low, uint64_t wall,
    struct sbx_limits *out)
{
	const struct pol_limits *par = pol_tier_limits(pol_inst_tier(s->inst));
	struct sbx_limits used = { 0 };
	size_t n = 0;

	for (struct brk_proc *x = s->procs; x; x = x->next) {
		if (x->replied)
			continue;
		n++;
		used.mem_bytes += x->lim.mem_bytes;
		used.nproc += x->lim.nproc;
		used.cpu_secs += x->lim.cpu_secs;
		used.tmp_bytes += x->lim.tmp_bytes;
	}
	if (n >= BRK_PROC_MAX)
		return CB_EBUSY;
	brk_sbx_limits(low, wall, out);
	if (out->mem_bytes > brk_left(par->memory, used.mem_bytes))
		out->mem_bytes = brk_left(par->memory, used.mem_bytes);
	if (out->nproc > brk_left(par->processes, used.nproc))
		out->nproc = brk_left(par->processes, used.nproc);
	if (out->cpu_secs > brk_left(par->cpu, used.cpu_secs))
		out->cpu_secs = brk_left(par->cpu, used.cpu_secs);
	if (out->tmp_bytes > brk_left(par->tmp_size, used.tmp_bytes))
		out->tmp_bytes = brk_left(par->tmp_size, used.tmp_bytes);
	if (out->mem_bytes < BRK_PROC_MEM_MIN || out->nproc < 1 || out->cpu_secs < 1 ||
	    out->tmp_bytes < BRK_PROC_TMP_MIN)
		return CB_EBUSY;
	return 0;
}

/* What the child sees: the program's directory, and what the sandbox may
 * read through the broker anyway: for each valid held fs.read capability
 * inside the ceiling, the exact path when it has no wildcard, or R when it
 * is exactly R/ followed by a ** component.  A narrower glob such as *.txt
 * files under /data is never bound, since binding /data would show the
 * program files the agent may not read.  Returns the number of binds;
 * ids[i] is the object binds[i] names now (the pool compares it). */
/* The root capability i of h shows a proc.exec child, into dir (of
 * CAP_STR_MAX + 1 bytes): false if none (not fs.read, beyond the
 * ceiling, or a narrower glob). */
static bool
brk_proc_cap_root(const struct brk_held *h, size_t i, char *dir)
{
	const struct cap *c = h->tok->c.caps[i];
	size_t l = strlen(c->res);

	if (c->op != CAP_FS_READ || !(h->in_ceiling & (1u << i)) || l > CAP_STR_MAX)
		return false;
	if (!strchr(c->res, '*')) {
		memcpy(dir, c->res, l + 1);
		return true;
	}
	if (l > 3 && strcmp(c->res + l - 3, "/**") == 0 && !memchr(c->res, '*', l - 3)) {
		memcpy(dir, c->res, l - 3);
		dir[l - 3] = '\0';
		return true;
	}
	return false;
}

static size_t
brk_proc_visible(struct brk_sbx *s, const char *prog, struct sbx_bind *binds,
    struct sbx_src_id *ids, char (*store)[CAP_STR_MAX + 1])
{
	char dir[CAP_STR_MAX + 1], *slash;
	size_t nb = 0;

	snprintf(dir, sizeof(dir), "%s", prog);
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		brk_proc_bind(s->b, binds, ids, &nb, store[nb], sizeof(store[0]), dir);
	}
	for (size_t k = 0; k < s->nheld; k++) {
		struct brk_held *hk = &s->held[k];

		if (brk_tok_check(s, hk, NULL, NULL) != 0)
			continue;
		for (size_t i = 0; i < hk->tok->c.ncaps; i++)
			if (brk_proc_cap_root(hk, i, dir))
				brk_proc_bind(s->b, binds, ids, &nb, store[nb], sizeof(store[0]), dir);
	}
	return nb;
}

/* Is root still shown by a grant s holds now (valid, inside the ceiling)? */
static bool
brk_proc_root_held(struct brk_sbx *s, const char *root)
{
	char dir[CAP_STR_MAX + 1];

	for (size_t k = 0; k < s->nheld; k++) {
		struct brk_held *hk = &s->held[k];

		if (brk_tok_check(s, hk, NULL, NULL) != 0)
			continue;
		for (size_t i = 0; i < hk->tok->c.ncaps; i++)
			if (brk_proc_cap_root(hk, i, dir) && strcmp(dir, root) == 0)
				return true;
	}
	return false;
}

/* Remember which of x's binds came from grants (all but the program's
 * directory), for brk_proc_recheck.  Out of memory: false (the caller
 * refuses the request, since a revocation could not reach the child). */
static bool
brk_proc_note_shown(struct brk_proc *x, const char *prog, const struct sbx_bind *binds, size_t nb)
{
	const char *slash = strrchr(prog, '/');
	size_t dl = slash ? (size_t)(slash - prog) : 0;

	for (size_t i = 0; i < nb; i++) {
		if (dl && strlen(binds[i].src) == dl && strncmp(binds[i].src, prog, dl) == 0)
			continue;
		if (!(x->shown[x->nshown] = strdup(binds[i].src)))
			return false;
		x->nshown++;
	}
	return true;
}

/*
 * A proc.exec child sees its grants' roots as plain binds, which no later
 * check reaches: a grant revoked or expired while it runs must end it, as
 * the same grant's loss ends every operation on the parent's served tree
 * (red team, fourth pass: the child read files written after `capctl
 * revoke` and handed them back in its output).  Called whenever grants may
 * have been lost (brk_fss_refresh_all: each revocation, and every second
 * for expiries).  What it wrote so far is still its reply.
 */
void
brk_proc_recheck(struct brk_sbx *s)
{
	for (struct brk_proc *x = s->procs; x; x = x->next) {
		if (x->replied || x->reaped || x->cut_off)
			continue;
		for (size_t i = 0; i < x->nshown; i++) {
			if (brk_proc_root_held(s, x->shown[i]))
				continue;
			x->cut_off = true;
			cb_ignore(sbx_kill(&x->p));
			brk_audit_done(s, &(struct aud_rec){ .kind = AUD_ADMIN, .reason = CB_EREVOKED,
			    .op = "proc.exec.killed", .resource = x->res, .token_id = x->tid,
			    .actor = "broker", .detail = "a grant it was shown was revoked or expired" });
			break;
		}
	}
}

/* A new child record for request q (its stdin copied: the request's
 * buffer is gone when the handler returns).  NULL: out of memory. */
static struct brk_proc *
brk_proc_new(struct brk_sbx *s, const struct wire_req *q, const struct brk_held *h,
    const struct sbx_limits *lim)
{
	struct brk_proc *x = calloc(1, sizeof(*x));

	if (!x || (q->has_data && q->data_len && !(x->in = malloc(q->data_len)))) {
		free(x);
		return NULL;
	}
	x->s = s;
	x->id = q->id;
	x->lim = *lim;
	snprintf(x->res, sizeof(x->res), "%s", q->argv[0]);
	memcpy(x->tid, h->tok->c.id, CAP_ID_LEN);
	x->p.pid = -1;
	x->p.pidfd = x->p.stdin_fd = x->p.stdout_fd = x->p.stderr_fd = x->p.status_fd = x->p.notify_fd = -1;
	if (x->in) {
		memcpy(x->in, q->data, q->data_len);
		x->nin = q->data_len;
	}
	return x;
}

/* A record never started nor listed (its stub, if any, reaped elsewhere). */
static void
brk_proc_free_new(struct brk_proc *x)
{
	for (size_t i = 0; i < x->nshown; i++)
		free(x->shown[i]);
	free(x->in);
	free(x->out);
	free(x->err);
	free(x);
}

/* Watch the started child: status, exit, output, and its stdin while
 * there is some to write.  CB_ENOMEM: nothing is watched. */
static int
brk_proc_watch(struct brk_proc *x)
{
	struct event_base *base = x->s->b->base;

	x->ev_status = event_new(base, x->p.status_fd, EV_READ | EV_PERSIST, brk_proc_status, x);
	x->ev_exit = event_new(base, x->p.pidfd, EV_READ | EV_PERSIST, brk_proc_exit, x);
	x->ev_out = event_new(base, x->p.stdout_fd, EV_READ | EV_PERSIST, brk_proc_out, x);
	x->ev_err = event_new(base, x->p.stderr_fd, EV_READ | EV_PERSIST, brk_proc_err, x);
	if (x->nin)
		x->ev_in = event_new(base, x->p.stdin_fd, EV_WRITE, brk_proc_in, x);
	if (!x->ev_status || !x->ev_exit || !x->ev_out || !x->ev_err || (x->nin && !x->ev_in))
		return CB_ENOMEM;
	event_add(x->ev_status, NULL);
	event_add(x->ev_exit, NULL);
	event_add(x->ev_out, NULL);
	event_add(x->ev_err, NULL);
	return 0;
}

void
brk_sbx_limits(const struct pol_limits *l, uint64_t wall, struct sbx_limits *out)
{
	/* The sandbox reserves its top descriptor slots. */
	*out = (struct sbx_limits){ l->memory, l->processes,
		l->open_files < SBX_NOFILE_MAX ? l->open_files : SBX_NOFILE_MAX,
		l->file_size, l->cpu, wall, l->tmp_size };
}

/* The dispatcher checked the program's path, that a slot is free, and
 * chose the token that grants proc.exec of it.  The child runs in a
 * sandbox of the low tier, within what is left of this sandbox's budget. */
void
brk_op_proc(struct brk_sbx *s, const struct wire_req *q, const struct brk_use *u)
{
	struct brk_held *h = u->h;
	struct brk_proc *x = NULL;
	struct sbx_config cfg;
	struct sbx_limits budget;
	struct sbx_bind binds[BRK_PROC_BINDS];
	struct sbx_src_id ids[BRK_PROC_BINDS];
	char store[BRK_PROC_BINDS][CAP_STR_MAX + 1];
	char *argv[WIRE_ARGV_MAX + 1];
	char id[CAP_AUD_MAX + 1];
	const struct pol_limits *lim;
	static unsigned seq;
	uint64_t timeout;
	bool pooled;
	int e;

	for (size_t i = 0; i < q->argc; i++)
		argv[i] = (char *)q->argv[i];
	argv[q->argc] = NULL;
	/* A command no sandbox can run is refused before a use is spent or
	 * a pooled sandbox taken (E2BIG: too-big).  Unreachable through the
	 * protocol today (its 64 KiB request is under SBX_ARGV_BYTES), kept
	 * so that the two can never disagree silently. */
	if ((e = sbx_argv_check(argv)) != 0) {
		brk_deny(s, q, e, q->argv[0], h->tok->c.id, e == CB_ETOOBIG ?
		    "more words or bytes than a sandbox's command may have" : NULL);
		return;
	}
	lim = pol_tier_limits(pol_tier_get(s->pol->pol, POL_TIER_LOW));
	timeout = q->timeout_ms ? ((uint64_t)q->timeout_ms + 999) / 1000 : BRK_PROC_TIMEOUT_S;
	if (timeout > lim->wall)
		timeout = lim->wall;
	/* Before a use is spent: a refusal for want of budget costs none. */
	if ((e = brk_proc_budget(s, lim, timeout, &budget)) != 0) {
		brk_deny(s, q, e, q->argv[0], h->tok->c.id,
		    "its running proc.exec children use the sandbox's budget");
		return;
	}
	if ((e = brk_tok_commit(s, h)) != 0) {
		brk_deny(s, q, e, q->argv[0], h->tok->c.id, NULL);
		return;
	}
	snprintf(id, sizeof(id), "%.50s-x%u", s->id, ++seq % 100000);
	cfg = (struct sbx_config){ .tier = SBX_TIER_LOW, .id = id, .argv = argv, .binds = binds,
		.nbinds = brk_proc_visible(s, q->argv[0], binds, ids, store), .broker_fd = -1,
		.limits = budget, .report_exit = true };
	if (!(x = brk_proc_new(s, q, h, &cfg.limits)) ||
	    !brk_proc_note_shown(x, q->argv[0], binds, cfg.nbinds)) {
		if (x)
			brk_proc_free_new(x);
		brk_deny(s, q, CB_ENOMEM, q->argv[0], h->tok->c.id, NULL);
		return;
	}
	/* A pooled sandbox built like this one would be, if there is one;
	 * else (or if its hand-over failed) a fresh one. */
	pooled = brk_pool_take(s->b, &cfg, ids, &x->p) == 0;
	if (!pooled && (e = sbx_spawn_start(&cfg, &x->p)) != 0) {
		/* A stub spawned then given up on: reaped off the loop's path. */
		brk_reap_later(s->b, &x->p);
		brk_deny(s, q, e, q->argv[0], h->tok->c.id, NULL);
		brk_proc_free_new(x);
		return;
	}
	brk_sbx_hold(s);
	s->inflight++;
	x->next = s->procs;
	s->procs = x;
	if (brk_proc_watch(x) != 0) {
		/* Cannot watch it (out of memory): killed, and reaped off the
		 * loop's path (reap.c: never waited for here). */
		cb_ignore(sbx_kill(&x->p));
		brk_reap_later(s->b, &x->p);
		brk_deny(s, q, CB_ENOMEM, q->argv[0], x->tid, NULL);
		brk_proc_free(x);
		return;
	}
	/* Without data the program reads EOF at once. */
	brk_proc_in(x->p.stdin_fd, EV_WRITE, x);
	if (pooled) {
		char detail[64];

		snprintf(detail, sizeof(detail), "pooled sandbox, stub pid %d", (int)x->p.pid);
		brk_audit_done(s, &(struct aud_rec){ .kind = AUD_ADMIN,
		    .op = "sandbox.pool.take", .resource = id, .token_id = x->tid,
		    .actor = "broker", .detail = detail });
	}
	brk_audit_done(s, &(struct aud_rec){ .kind = AUD_OP, .decision = AUD_ALLOW,
	    .op = "proc.exec", .resource = q->argv[0], .token_id = x->tid, .actor = "agent" });
}

/* Waits for each child: only brk_free calls it, once the loop no longer
 * runs (nothing is left to serve meanwhile). */
void
brk_proc_end_all(struct brk_sbx *s)
{
	while (s->procs) {
		struct brk_proc *x = s->procs;
		int ws;

		if (!x->reaped) {
			cb_ignore(sbx_kill(&x->p));
			waitpid(x->p.pid, &ws, 0);
			x->reaped = true;
		}
		brk_proc_free(x);
	}
}

/* The sandbox's channel closed: its children die with it (they are reaped
 * and freed by their exit events as usual). */
void
brk_proc_kill_all(struct brk_sbx *s)
{
	for (struct brk_proc *x = s->procs; x; x = x->next)
		if (!x->reaped)
			cb_ignore(sbx_kill(&x->p));
}

/* Here, beside the kill of its children, rather than in sbx.c: the
 * connect notifier (notify.c), below sbx.c, kills a sandbox too. */
void
brk_sbx_kill(struct brk_sbx *s, const char *actor)
{
	brk_audit(s->b, &(struct aud_rec){ .kind = AUD_ADMIN, .sandbox = s->id, .op = "kill",
	    .actor = actor });
	if (s->spawned && !s->exited)
		sbx_kill(&s->proc);
}
