/*
 * loop.c - the broker's event loop: sandbox channels, framing, per-sandbox
 * limits, the dispatch table, the reply queue, worker threads and the
 * sandbox life cycle.
 *
 * Trust domain: broker.  Every packet on a sandbox channel is hostile.  The
 * rules that keep one agent from hurting the others or the broker:
 *  - one receive buffer of WIRE_REQ_MAX + 1 bytes: a larger packet is seen
 *    truncated (MSG_TRUNC) and refused, never allocated for;
 *  - file descriptors an agent sends are closed unread;
 *  - at most BRK_BATCH packets per wakeup and a token-bucket rate per
 *    sandbox, so a flood stalls only its own channel;
 *  - replies that the agent does not read are queued up to BRK_OUTQ_MAX,
 *    then the channel is closed: the loop never waits for an agent;
 *  - a malformed packet gets an error reply and an audit line; the loop
 *    carries on with the next one.
 */
#include "broker/broker.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct brk_out {
	struct brk_out *next;
	size_t len;
	int fd;
	uint8_t data[];
};

/* ---- audit ---------------------------------------------------------- */

void
brk_audit(struct brk *b, enum aud_kind kind, enum aud_decision d, int reason,
    const char *sandbox, const char *op, const char *resource, const uint8_t *tid,
    const char *actor, const char *detail)
{
	struct aud_rec r = {
		.kind = kind, .decision = d, .reason = reason, .sandbox = sandbox,
		.op = op, .resource = resource, .token_id = tid, .actor = actor,
		.detail = detail,
	};

	if (b->aud)
		cb_ignore(aud_append(b->aud, &r));	/* health is checked before acting */
}

/* ---- replies -------------------------------------------------------- */

static void brk_sbx_close_channel(struct brk_sbx *s, const char *why);

static int
brk_send(int sock, const uint8_t *buf, size_t len, int fd)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static int
brk_queue(struct brk_sbx *s, const uint8_t *buf, size_t len, int fd)
{
	struct brk_out *o;

	if (s->noutq >= BRK_OUTQ_MAX || !(o = malloc(sizeof(*o) + len)))
		return CB_EBUSY;
	o->next = NULL;
	o->len = len;
	o->fd = fd;
	memcpy(o->data, buf, len);
	if (s->outq_tail)
		s->outq_tail->next = o;
	else
		s->outq = o;
	s->outq_tail = o;
	s->noutq++;
	event_add(s->ev_write, NULL);
	return 0;
}

void
brk_reply(struct brk_sbx *s, const struct wire_reply *r, int fd)
{
	struct brk *b = s->b;
	size_t len;
	int e;

	if (s->dead) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (wire_reply_encode(r, b->sbuf, WIRE_REPLY_MAX, &len) != 0) {
		struct wire_reply small = { .id = r->id, .err = CB_ETOOBIG };

		if (fd >= 0)
			close(fd);
		fd = -1;
		if (wire_reply_encode(&small, b->sbuf, WIRE_REPLY_MAX, &len) != 0)
			return;
	}
	if (!s->outq) {
		e = brk_send(s->fd, b->sbuf, len, fd);
		if (e == 0) {
			if (fd >= 0)
				close(fd);
			return;
		}
		if (e != -EAGAIN && e != -ENOBUFS) {
			if (fd >= 0)
				close(fd);
			brk_sbx_close_channel(s, "send failed");
			return;
		}
	}
	if (brk_queue(s, b->sbuf, len, fd) != 0) {
		if (fd >= 0)
			close(fd);
		brk_sbx_close_channel(s, "agent does not read its replies");
	}
}

static void
brk_sbx_writable(evutil_socket_t sock, short ev, void *arg)
{
	struct brk_sbx *s = arg;

	(void)sock;
	(void)ev;
	while (s->outq) {
		struct brk_out *o = s->outq;
		int e = brk_send(s->fd, o->data, o->len, o->fd);

		if (e == -EAGAIN || e == -ENOBUFS)
			return;	/* still full: EV_PERSIST keeps us waiting */
		if (o->fd >= 0)
			close(o->fd);
		s->outq = o->next;
		if (!s->outq)
			s->outq_tail = NULL;
		s->noutq--;
		free(o);
		if (e != 0) {
			brk_sbx_close_channel(s, "send failed");
			return;
		}
	}
	event_del(s->ev_write);
}

void
brk_deny(struct brk_sbx *s, const struct wire_req *q, int err, const char *resource,
    const uint8_t *tid, const char *detail)
{
	struct wire_reply r = { .id = q ? q->id : 0, .err = err };
	char reason[512];

	/* The sentence for people keeps the reason first: "not covered by
	 * the token: address 10.0.0.1". */
	if (detail) {
		snprintf(reason, sizeof(reason), "%s: %s", cb_strerror(err), detail);
		r.reason = reason;
	} else if (q && resource) {
		snprintf(reason, sizeof(reason), "%s (%s %s)", cb_strerror(err), wire_op_name(q->op),
		    resource);
		r.reason = reason;
	}
	brk_budget_deny(s, err, q ? wire_op_name(q->op) : "frame", resource, tid, detail);
	brk_reply(s, &r, -1);
}

/* ---- worker threads ------------------------------------------------- */

struct brk_job {
	void (*fn)(void *);
	void (*done)(void *);
	void *arg;
	int wfd;
};

static void *
brk_job_main(void *p)
{
	struct brk_job *j = p;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	j->fn(j->arg);
	/* A pointer-sized write to a pipe is atomic; the loop frees j.  It
	 * fails only when the broker is shutting down (the pipe is closed):
	 * then the completion has no one to go to. */
	if (write(j->wfd, &j, sizeof(j)) != sizeof(j))
		return NULL;
	return NULL;
}

int
brk_work(struct brk *b, void (*fn)(void *), void (*done)(void *), void *arg)
{
	struct brk_job *j = malloc(sizeof(*j));
	pthread_attr_t at;
	pthread_t t;
	int r;

	if (!j)
		return CB_ENOMEM;
	*j = (struct brk_job){ .fn = fn, .done = done, .arg = arg, .wfd = b->wake_pipe[1] };
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 256 * 1024);
	r = pthread_create(&t, &at, brk_job_main, j);
	pthread_attr_destroy(&at);
	if (r != 0) {
		free(j);
		return CB_EBUSY;
	}
	return 0;
}

static void
brk_wake(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_job *j;

	(void)ev;
	(void)arg;
	while (read(fd, &j, sizeof(j)) == sizeof(j)) {
		j->done(j->arg);
		free(j);
	}
}

/* ---- dispatch ------------------------------------------------------- */

/* ping needs no token, but one presented with it is judged like any
 * other: an agent testing a token learns at once that it is bad. */
static void
brk_op_ping(struct brk_sbx *s, const struct wire_req *q)
{
	struct wire_reply r = { .id = q->id };
	struct brk_held *h;
	int e;

	if (q->tok && (e = brk_held_present(s, q->tok, NULL, &h, NULL)) != 0) {
		brk_deny(s, q, e, "ping", NULL, NULL);
		return;
	}
	brk_reply(s, &r, -1);
}

/*
 * The single list of what an agent may ask for.  Each handler checks its
 * own token requirement (see the comment at each), because the capability
 * needed depends on the request (stat needs read or list, rename needs
 * write on both names).
 */
static const struct {
	void (*fn)(struct brk_sbx *, const struct wire_req *);
} brk_table[WIRE_OP_COUNT] = {
	[WIRE_OP_PING] = { brk_op_ping },
	[WIRE_OP_FS_READ] = { brk_op_fs },
	[WIRE_OP_FS_WRITE] = { brk_op_fs },
	[WIRE_OP_FS_LIST] = { brk_op_fs },
	[WIRE_OP_FS_STAT] = { brk_op_fs },
	[WIRE_OP_FS_MKDIR] = { brk_op_fs },
	[WIRE_OP_FS_DELETE] = { brk_op_fs },
	[WIRE_OP_FS_RENAME] = { brk_op_fs },
	[WIRE_OP_NET_CONNECT] = { brk_op_net },
	[WIRE_OP_PROC_EXEC] = { brk_op_proc },
	[WIRE_OP_REQUEST] = { brk_op_request },
	[WIRE_OP_TOKENS] = { brk_op_tokens },
	[WIRE_OP_TOKEN_ADD] = { brk_op_token_add },
	[WIRE_OP_DERIVE] = { brk_op_derive },
	[WIRE_OP_IO_READ] = { brk_op_io },
	[WIRE_OP_IO_WRITE] = { brk_op_io },
	[WIRE_OP_IO_CLOSE] = { brk_op_io },
};

static bool
brk_rate_take(struct brk_sbx *s)
{
	uint64_t now = cb_mono_ns();

	s->bucket += (double)(now - s->bucket_ns) * BRK_RATE / 1e9;
	if (s->bucket > BRK_BURST)
		s->bucket = BRK_BURST;
	s->bucket_ns = now;
	if (s->bucket < 1.0)
		return false;
	s->bucket -= 1.0;
	return true;
}

static void
brk_rate_resume(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_sbx *s = arg;

	(void)fd;
	(void)ev;
	if (!s->dead)
		event_add(s->ev_read, NULL);
}

/* A zero-length read on SOCK_SEQPACKET is either an empty packet or the
 * peer's close; POLLHUP tells them apart. */
static bool
brk_peer_closed(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

static void
brk_sbx_readable(evutil_socket_t sock, short ev, void *arg)
{
	struct brk_sbx *s = arg;
	struct brk *b = s->b;

	(void)ev;
	brk_sbx_hold(s);
	for (int i = 0; i < BRK_BATCH && !s->dead; i++) {
		union {
			char buf[CMSG_SPACE(16 * sizeof(int))];
			struct cmsghdr align;
		} u;
		struct iovec iov = { .iov_base = b->rbuf, .iov_len = WIRE_REQ_MAX + 1 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
		struct wire_req q;
		bool fds = false;
		ssize_t n;
		int r;
		struct timeval wait;
		char why[256];

		switch (brk_budget_check(s, &wait, why, sizeof(why))) {
		case BRK_BUDGET_OK:
			break;
		case BRK_BUDGET_WAIT:
			event_del(s->ev_read);
			evtimer_add(s->ev_rate, &wait);
			goto out;
		case BRK_BUDGET_STOP:
			brk_sbx_close_channel(s, why);
			goto out;
		}
		if (!brk_rate_take(s)) {
			struct timeval tv = { 0, 2000 };

			event_del(s->ev_read);
			evtimer_add(s->ev_rate, &tv);
			break;
		}
		n = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				brk_sbx_close_channel(s, "receive failed");
			break;
		}
		/* An agent has no business sending descriptors: close them. */
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

				for (size_t j = 0; j < k; j++) {
					int fd;

					memcpy(&fd, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
					close(fd);
				}
				fds = true;
			}
		}
		if (n == 0 && !fds && brk_peer_closed(sock)) {
			brk_sbx_close_channel(s, "agent closed its channel");
			break;
		}
		s->nreq++;
		if (fds || (m.msg_flags & MSG_CTRUNC)) {
			s->nbad++;
			s->bucket -= BRK_BAD_COST - 1;
			brk_deny(s, NULL, CB_EPROTO, NULL, NULL, "descriptors sent to the broker were closed");
			continue;
		}
		if (m.msg_flags & MSG_TRUNC) {
			s->nbad++;
			s->bucket -= BRK_BAD_COST - 1;
			brk_deny(s, NULL, CB_ETOOBIG, NULL, NULL, "packet larger than the 64 KiB limit");
			continue;
		}
		r = wire_req_decode(b->dec, b->rbuf, (size_t)n, &q);
		if (r != 0) {
			/* Malformed packets cost more of the sandbox's rate: a
			 * well-behaved agent never sends one, and each costs the
			 * broker a denial, an audit record and a reply. */
			s->nbad++;
			s->bucket -= BRK_BAD_COST - 1;
			/* A known id lets the agent match the error to its call. */
			brk_deny(s, q.id ? &q : NULL, r, NULL, NULL, NULL);
			continue;
		}
		brk_table[q.op].fn(s, &q);
	}
out:
	/* An agent that keeps sending garbage has nothing to say. */
	if (!s->dead && s->nbad > BRK_BAD_MAX)
		brk_sbx_close_channel(s, "too many malformed packets");
	brk_sbx_release(s);
}

/* ---- sandbox life cycle --------------------------------------------- */

void
brk_sbx_hold(struct brk_sbx *s)
{
	s->refs++;
}

static void brk_sbx_free(struct brk_sbx *s);

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

void
brk_sbx_release(struct brk_sbx *s)
{
	if (--s->refs == 0 && s->dead && (!s->spawned || s->exited))
		brk_sbx_free(s);
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

static void
brk_sbx_free(struct brk_sbx *s)
{
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
	while (s->outq) {
		struct brk_out *o = s->outq;

		s->outq = o->next;
		if (o->fd >= 0)
			close(o->fd);
		free(o);
	}
	brk_budget_end(s);
	if (s->fd >= 0)
		close(s->fd);
	brk_held_clear(s);
	for (size_t i = 0; i < BRK_HANDLES_MAX; i++)
		if (s->handles[i].used)
			close(s->handles[i].fd);
	for (size_t i = 0; i < s->nsession; i++)
		cap_free(s->session_caps[i]);
	if (s->spawned)
		sbx_proc_close(&s->proc);
	pol_inst_free(s->inst);
	brk_pol_release(s->b, s->pol);
	free(s->command);
	free(s);
}

static void
brk_sbx_grace_over(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_sbx *s = arg;

	(void)fd;
	(void)ev;
	if (s->spawned && !s->exited) {
		brk_audit(s->b, AUD_ADMIN, AUD_NONE, 0, s->id, "kill", NULL, NULL, "broker",
		    "the sandbox's channel closed");
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
		brk_audit(s->b, AUD_ADMIN, AUD_NONE, 0, s->id, "revoke", NULL, ids[i], "broker",
		    "elevation ends with its sandbox");
	if (e != 0)
		brk_audit(s->b, AUD_ADMIN, AUD_NONE, e, s->id, "revoke", NULL, NULL, "broker",
		    "ending the sandbox's elevations could not be written; ended at the next start");
	free(ids);
	s->instance = 0;
}

/* The channel is gone (agent closed it, or it misbehaved).  A sandbox
 * whose only channel is gone has nothing left to do: it is killed.  When
 * the agent simply exited, its end closed a moment before the stub
 * reports; a short grace lets the real exit status through. */
static void
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
	if (!s->exited && strcmp(why, "agent closed its channel") != 0)
		brk_audit(s->b, AUD_ADMIN, AUD_NONE, 0, s->id, "sandbox.channel-closed", NULL, NULL,
		    "broker", why);
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
brk_sbx_kill(struct brk_sbx *s, const char *actor)
{
	brk_audit(s->b, AUD_ADMIN, AUD_NONE, 0, s->id, "kill", NULL, NULL, actor, NULL);
	if (s->spawned && !s->exited)
		sbx_kill(&s->proc);
}

static void
brk_sbx_exited(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_sbx *s = arg;
	int ws = 0;
	char detail[64];

	(void)fd;
	(void)ev;
	if (waitpid(s->proc.pid, &ws, WNOHANG) <= 0)
		return;
	event_del(s->ev_exit);
	event_del(s->ev_status);
	s->exited = true;
	s->exit_code = sbx_wait_status(ws);
	snprintf(detail, sizeof(detail), "exit %d", s->exit_code);
	brk_audit(s->b, AUD_ADMIN, AUD_NONE, 0, s->id, "sandbox.stop", NULL, NULL, "broker", detail);
	brk_sbx_hold(s);
	if (s->on_exit)
		s->on_exit(s, s->on_exit_arg);
	brk_sbx_close_channel(s, "sandbox exited");
	brk_sbx_release(s);
}

static void
brk_sbx_status(evutil_socket_t fd, short ev, void *arg)
{
	struct brk_sbx *s = arg;
	char why[512] = "";
	int r;

	(void)fd;
	(void)ev;
	r = sbx_spawn_finish(&s->proc, why, sizeof(why));
	if (r == CB_EBUSY)
		return;
	event_del(s->ev_status);
	if (r != 0) {
		brk_audit(s->b, AUD_ADMIN, AUD_NONE, r, s->id, "sandbox.failed", NULL, NULL,
		    "broker", why);
		if (!s->b->opts.quiet)
			fprintf(stderr, "capbroker: sandbox %s: %s\n", s->id, why);
		return;	/* the stub exits 125; brk_sbx_exited reports it */
	}
	if (s->proc.report.landlock_abi == 0)
		brk_audit(s->b, AUD_ADMIN, AUD_NONE, 0, s->id, "no-landlock", NULL, NULL, "broker",
		    "kernel has no Landlock: namespaces and seccomp carry the load");
	if (!s->proc.report.cgroup)
		brk_audit(s->b, AUD_ADMIN, AUD_NONE, 0, s->id, "no-cgroup", NULL, NULL, "broker",
		    "no delegated cgroup: rlimits bound memory and processes");
}

void
brk_sbx_limits(const struct pol_limits *l, uint64_t wall, struct sbx_limits *out)
{
	/* The sandbox reserves its top descriptor slots. */
	*out = (struct sbx_limits){ l->memory, l->processes,
		l->open_files < SBX_NOFILE_MAX ? l->open_files : SBX_NOFILE_MAX,
		l->file_size, l->cpu, wall, l->tmp_size };
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

	o = (size_t)snprintf(why, whylen, "%s exceeds the ceiling of tier '%s' (exceeds policy); "
	    "the tier allows", what, s->tier_name);
	if (!pol_inst_ceiling(s->inst, 0) && o < whylen)
		o += (size_t)snprintf(why + o, whylen - o, " nothing through the broker");
	for (size_t i = 0; (c = pol_inst_ceiling(s->inst, i)) && o < whylen; i++)
		o += (size_t)snprintf(why + o, whylen - o, "%s%s", i ? ", " : ": ", c->text);
	if (o >= whylen && whylen > 4)
		memcpy(why + whylen - 4, "...", 4);	/* too long: say it was cut */
}

int
brk_sbx_create(struct brk *b, const struct brk_sbx_spec *spec, struct brk_sbx **out,
    char *why, size_t whylen)
{
	struct brk_sbx *s = NULL;
	const struct pol_tier *tier;
	const struct pol_limits *lim;
	const struct pol_bind *pbinds;
	const char *const *pexec;
	struct sbx_bind *binds = NULL;
	char **bindcopies = NULL, **realsrc = NULL;
	struct sbx_config cfg;
	size_t npb, npe, nb = 0;
	int sv[2] = { -1, -1 }, r;
	uint64_t now = cb_now(), ttl;
	char cwd[4096];

	*out = NULL;
	why[0] = '\0';
	if (spec->ttl > CB_DURATION_MAX || spec->timeout > CB_DURATION_MAX) {
		snprintf(why, whylen, "ttl and timeout are at most %u seconds (366 days)", CB_DURATION_MAX);
		return CB_EINVAL;
	}
	if (b->nsbx >= BRK_SANDBOXES_MAX) {
		snprintf(why, whylen, "too many sandboxes");
		return CB_EBUSY;
	}
	/* A nearly full disk refuses new sandboxes while the running ones keep
	 * the audit reserve: better one clear refusal now than every sandbox
	 * failing when the disk is full. */
	{
		struct statvfs vf;
		uint64_t avail;

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
	}
	if (!(s = calloc(1, sizeof(*s))))
		return CB_ENOMEM;
	s->b = b;
	s->fd = -1;
	s->owner = spec->owner;
	s->started_at = now;
	s->bucket = BRK_BURST;
	s->bucket_ns = cb_mono_ns();
	s->aud_bucket = (double)pol_audit_budget(b->pol)->burst;
	s->aud_bucket_ns = s->bucket_ns;
	s->proc.pid = -1;
	s->proc.pidfd = s->proc.stdin_fd = s->proc.stdout_fd = s->proc.stderr_fd = -1;
	s->proc.status_fd = -1;
	/* It lives under the policy current now, whatever reloads follow. */
	s->pol = b->cur;
	s->pol->refs++;
	if (spec->id) {
		if (!cap_aud_valid(spec->id, strlen(spec->id)) || strlen(spec->id) > SBX_ID_MAX) {
			snprintf(why, whylen, "invalid sandbox id '%s' (1-64 of A-Z a-z 0-9 . _ -)", spec->id);
			r = CB_EINVAL;
			goto out;
		}
		if (brk_sbx_find(b, spec->id)) {
			snprintf(why, whylen, "a sandbox called '%s' is already running", spec->id);
			r = CB_EEXIST;
			goto out;
		}
		snprintf(s->id, sizeof(s->id), "%s", spec->id);
	} else {
		uint8_t rnd[4];
		char hex[9];

		do {
			randombytes_buf(rnd, sizeof(rnd));
			cap_hex(rnd, sizeof(rnd), hex);
			snprintf(s->id, sizeof(s->id), "sbx-%s", hex);
		} while (brk_sbx_find(b, s->id));
	}
	/* A durable record of this run: approvals are granted to it, not to
	 * its id, which a later sandbox may reuse. */
	if ((r = st_instance_begin(b->st, s->id, now, &s->instance)) != 0) {
		snprintf(why, whylen, "recording the sandbox in the state: %s", cb_strerror(r));
		goto out;
	}
	snprintf(s->tier_name, sizeof(s->tier_name), "%s",
	    spec->tier ? spec->tier : pol_default_tier(b->pol));
	if (!(tier = pol_tier_get(b->pol, s->tier_name))) {
		snprintf(why, whylen, "unknown tier '%s'", s->tier_name);
		r = CB_EINVAL;
		goto out;
	}
	s->stier = brk_stier(tier);
	if (spec->workspace)
		snprintf(cwd, sizeof(cwd), "%s", spec->workspace);
	else if (pol_tier_workspace(tier))
		snprintf(cwd, sizeof(cwd), "%s", pol_tier_workspace(tier));
	else if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	if (!realpath(cwd, s->workspace)) {
		snprintf(why, whylen, "workspace '%s': %s", cwd, strerror(errno));
		r = CB_EINVAL;
		goto out;
	}
	if ((r = pol_tier_instantiate(tier, strcmp(s->workspace, "/") ? s->workspace : NULL,
		 &s->inst)) != 0) {
		snprintf(why, whylen, "workspace '%s' cannot be used: %s", s->workspace,
		    cb_strerror(r));
		goto out;
	}
	brk_join_argv(spec->argv, &s->command);

	/* Grants: every one inside the tier's ceiling, or nothing starts. */
	ttl = spec->ttl ? spec->ttl : pol_default_ttl(b->pol);
	for (size_t i = 0; i < spec->ngrants; i++) {
		struct cap *c = NULL;
		char *text = NULL;
		uint8_t id[CAP_ID_LEN];
		uint32_t th;

		if ((r = cap_parse(spec->grants[i], &c)) != 0) {
			snprintf(why, whylen, "grant '%s': %s", spec->grants[i], cb_strerror(r));
			goto out;
		}
		if (!pol_inst_within_ceiling(s->inst, c)) {
			char what[CAP_STR_MAX + 16];

			snprintf(what, sizeof(what), "grant '%s'", c->text);
			brk_ceiling_refusal(s, what, why, whylen);
			cap_free(c);
			r = CB_EPOLICY;
			goto out;
		}
		r = brk_tok_mint(b, s->id, &c, 1, now, now + ttl, false, 0, NULL, false,
		    spec->actor ? spec->actor : "broker", &text, id);
		cap_free(c);
		if (r != 0) {
			snprintf(why, whylen, "grant '%s': %s", spec->grants[i], brk_decide_why(b, r));
			goto out;
		}
		r = brk_held_add(s, text, strlen(text), true, &th);
		free(text);
		if (r != 0) {
			snprintf(why, whylen, "grant '%s': %s", spec->grants[i], cb_strerror(r));
			goto out;
		}
	}

	/* The channel: SOCK_SEQPACKET keeps message boundaries.  Only the
	 * broker's end is non-blocking (O_NONBLOCK lives on the file
	 * description, so it is set per end, after creation). */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(why, whylen, "socketpair: %s", strerror(errno));
		r = CB_EIO;
		goto out;
	}
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) != 0) {
		r = CB_EIO;
		goto out;
	}
	{
		int sz = WIRE_REPLY_MAX * 8;

		if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) != 0)
			(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	}
	s->fd = sv[0];

	/* The sandbox as the tier says, plus the caller's read-only binds. */
	lim = pol_tier_limits(tier);
	npb = pol_tier_binds(tier, &pbinds);
	npe = pol_tier_exec(tier, &pexec);
	binds = calloc(npb + spec->nro_binds + 1, sizeof(*binds));
	bindcopies = calloc(spec->nro_binds + 1, sizeof(*bindcopies));
	realsrc = calloc(npb + spec->nro_binds + 1, sizeof(*realsrc));
	if (!binds || !bindcopies || !realsrc) {
		r = CB_ENOMEM;
		goto out;
	}
	/* The policy's binds are opened with the broker's credentials; a
	 * caller's --ro-bind with the caller's when the caller is not root
	 * (it may not reach through us what it could not reach itself). */
	for (size_t i = 0; i < npb; i++)
		binds[nb++] = (struct sbx_bind){ .src = pbinds[i].src, .dst = pbinds[i].dst,
		    .writable = pbinds[i].rw };
	for (size_t i = 0; i < spec->nro_binds; i++) {
		const char *no;

		if ((r = brk_parse_bind(spec->ro_binds[i], &binds[nb], &bindcopies[i])) != 0) {
			snprintf(why, whylen, "--ro-bind '%s': SRC and DST must be absolute",
			    spec->ro_binds[i]);
			goto out;
		}
		if ((no = sbx_bind_dst_refusal(binds[nb].dst)) != NULL) {
			snprintf(why, whylen, "--ro-bind '%s': destination %s refused: %s",
			    spec->ro_binds[i], binds[nb].dst, no);
			r = CB_EINVAL;
			goto out;
		}
		if (spec->owner != 0) {
			const struct passwd *pw = getpwuid(spec->owner);

			binds[nb].as_caller = true;
			binds[nb].as_uid = spec->owner;
			binds[nb].as_gid = pw ? pw->pw_gid : (gid_t)65534;	/* nogroup */
		}
		nb++;
	}
	/* Binds are chosen by administrators (the policy, --ro-bind): a
	 * symlink they name is followed here, once, and the launcher then
	 * opens the canonical path with no symlink followed (common/resolve.c),
	 * with the broker's credentials, and hands the stub the fd. */
	for (size_t i = 0; i < nb; i++) {
		if ((realsrc[i] = realpath(binds[i].src, NULL)) != NULL)
			binds[i].src = realsrc[i];
		if ((r = brk_rw_bind_check(&binds[i], why, whylen)) != 0)
			goto out;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.tier = s->stier;
	cfg.id = s->id;
	cfg.argv = spec->argv;
	cfg.binds = binds;
	cfg.nbinds = nb;
	cfg.exec_allow = pexec;
	cfg.nexec_allow = npe;
	/* --timeout may shorten the tier's wall clock, never lengthen it */
	brk_sbx_limits(lim, spec->timeout && spec->timeout < lim->wall ? spec->timeout : lim->wall,
	    &cfg.limits);
	cfg.broker_fd = sv[1];
	cfg.capcall_path = b->capcall_path[0] ? b->capcall_path : NULL;
	cfg.pylib_dir = b->pylib_dir[0] ? b->pylib_dir : NULL;
	cfg.want_pty = spec->want_pty;
	cfg.chdir = spec->chdir;
	cfg.setenv = spec->setenv;
	cfg.nsetenv = spec->nsetenv;
	cfg.unsetenv = spec->unsetenv;
	cfg.nunsetenv = spec->nunsetenv;
	s->wall = cfg.limits.wall_secs;
	if ((r = sbx_spawn_start(&cfg, &s->proc)) != 0) {
		sbx_start_refusal(r, why, whylen);
		goto out;
	}
	s->spawned = true;
	close(sv[1]);
	sv[1] = -1;

	s->ev_read = event_new(b->base, s->fd, EV_READ | EV_PERSIST, brk_sbx_readable, s);
	s->ev_write = event_new(b->base, s->fd, EV_WRITE | EV_PERSIST, brk_sbx_writable, s);
	s->ev_rate = evtimer_new(b->base, brk_rate_resume, s);
	s->ev_status = event_new(b->base, s->proc.status_fd, EV_READ | EV_PERSIST, brk_sbx_status, s);
	s->ev_exit = event_new(b->base, s->proc.pidfd, EV_READ | EV_PERSIST, brk_sbx_exited, s);
	if (!s->ev_read || !s->ev_write || !s->ev_rate || !s->ev_status || !s->ev_exit) {
		sbx_kill(&s->proc);
		r = CB_ENOMEM;
		goto out;
	}
	event_add(s->ev_read, NULL);
	event_add(s->ev_status, NULL);
	event_add(s->ev_exit, NULL);
	s->next = b->sbx;
	b->sbx = s;
	b->nsbx++;
	{
		char detail[4200 + 128];

		snprintf(detail, sizeof(detail), "tier %s, workspace %s, %zu grant(s)", s->tier_name,
		    s->workspace, s->nheld);
		brk_audit(b, AUD_ADMIN, AUD_NONE, 0, s->id, "sandbox.start", s->command, NULL,
		    spec->actor ? spec->actor : "broker", detail);
	}
	*out = s;
	s = NULL;
	r = 0;
out:
	if (sv[1] >= 0)
		close(sv[1]);
	if (s) {
		if (s->spawned) {
			int ws;

			sbx_kill(&s->proc);
			waitpid(s->proc.pid, &ws, 0);
			s->exited = true;
		}
		if (s->fd < 0 && sv[0] >= 0)
			close(sv[0]);
		s->dead = true;
		brk_sbx_end_instance(s);
		brk_sbx_free(s);
	}
	if (bindcopies)
		for (size_t i = 0; i < spec->nro_binds; i++)
			free(bindcopies[i]);
	free(bindcopies);
	if (realsrc)
		for (size_t i = 0; i < nb; i++)
			free(realsrc[i]);
	free(realsrc);
	free(binds);
	return r;
}

/* ---- the broker ------------------------------------------------------ */

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
			brk_audit(b, AUD_ADMIN, AUD_NONE, 0, NULL, "clock.jump", NULL, NULL, "broker",
			    detail);
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
	brk_pending_tick(b);
	for (struct brk_sbx *s = b->sbx; s; s = s->next)
		if (!s->dead)
			brk_budget_tick(s);
	brk_clock_check(b);
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
	char exe[4000], path[4096];
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
	char path[4200], pid[32];
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
		(void)0;	/* the pid is for people; the lock is what counts */
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
		brk_audit(b, AUD_ADMIN, AUD_DENY, CB_EINVAL, NULL, "policy.reload", NULL, NULL,
		    actor, why);
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
		brk_audit(b, AUD_ADMIN, AUD_DENY, r, NULL, "policy.reload", b->opts.policy_path,
		    NULL, actor, why);
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
	brk_audit(b, AUD_ADMIN, AUD_NONE, 0, NULL, "policy.reload", b->opts.policy_path, NULL,
	    actor, detail);
	snprintf(why, whylen, "reloaded %s: %s", b->opts.policy_path, detail);
	if (old->refs == 0) {
		pol_free(old->pol);
		free(old);
	}
out:
	free(errs);
	return r;
}

int
brk_new(const struct brk_opts *o, struct brk **out, char *why, size_t whylen)
{
	struct brk *b = NULL;
	struct aud_opts ao;
	char path[4200];
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
	b->admin_fd = b->tty_fd = b->lock_fd = b->spare_fd = -1;
	b->wake_pipe[0] = b->wake_pipe[1] = -1;
	signal(SIGPIPE, SIG_IGN);
	if (o->policy_path) {
		if ((r = pol_load(o->policy_path, &b->pol, stderr)) != 0) {
			snprintf(why, whylen, "policy %s is not valid (errors above); refusing to start",
			    o->policy_path);
			goto out;
		}
	} else if ((r = pol_default(&b->pol)) != 0) {
		snprintf(why, whylen, "built-in policy: %s", cb_strerror(r));
		goto out;
	}
	if (!(b->cur = calloc(1, sizeof(*b->cur)))) {
		r = CB_ENOMEM;
		goto out;
	}
	b->cur->pol = b->pol;
	b->cur->gen = 1;
	snprintf(b->state_dir, sizeof(b->state_dir), "%s", o->state_dir);
	{
		struct stat sd;

		/* A state directory others may write to is not ours to trust:
		 * they could swap the database, keys or log under us. */
		if (stat(b->state_dir, &sd) == 0 && (sd.st_mode & 0022)) {
			snprintf(why, whylen, "state directory %s is writable by group or others "
			    "(mode %04o); make it 0700", b->state_dir, (unsigned)(sd.st_mode & 07777));
			r = CB_EPERM;
			goto out;
		}
	}
	if ((r = brk_lock_state(b, why, whylen)) != 0)
		goto out;
	{
		/* A log without its database: the database was deleted or emptied.
		 * Starting afresh would mean a new signing key and no revocations
		 * beside a log that records them: only when asked (--new-state). */
		struct stat sl, sd;
		char dbp[4200];

		snprintf(path, sizeof(path), "%s/audit.jsonl", b->state_dir);
		snprintf(dbp, sizeof(dbp), "%s/state.db", b->state_dir);
		if (!o->new_state && stat(path, &sl) == 0 && sl.st_size > 0 &&
		    (stat(dbp, &sd) != 0 || sd.st_size == 0)) {
			snprintf(why, whylen, "state database %s is missing or empty but the audit log %s "
			    "holds this state's history; refusing to start a new state (a new key, no "
			    "revocations) beside it. Restore the database, rebuild it with `capbroker state "
			    "rebuild --state %s`, or start a new state deliberately with --new-state",
			    dbp, path, b->state_dir);
			r = CB_ENOENT;
			goto out;
		}
	}
	{
		char swhy[1024];

		if ((r = (o->new_state ? st_open_new : st_open_why)(b->state_dir, &b->st, swhy,
		    sizeof(swhy))) != 0) {
			snprintf(why, whylen, "state %s: %s: %s", b->state_dir, cb_strerror(r),
			    swhy[0] ? swhy : strerror(errno));
			goto out;
		}
	}
	if (!realpath(b->state_dir, b->state_real))
		snprintf(b->state_real, sizeof(b->state_real), "%s", b->state_dir);
	aud_opts_default(&ao);
	switch (pol_audit_fsync(b->pol)) {
	case POL_FSYNC_ALWAYS: ao.fsync = AUD_FSYNC_ALWAYS; break;
	case POL_FSYNC_NEVER: ao.fsync = AUD_FSYNC_NEVER; break;
	default: ao.fsync = AUD_FSYNC_BATCH; break;
	}
	ao.sign = st_sign_audit;
	ao.sign_arg = b->st;
	ao.on_checkpoint = st_audit_checkpoint_cb;
	ao.on_checkpoint_arg = b->st;
	ao.dseq_base = st_dseq(b->st);
	snprintf(path, sizeof(path), "%s/audit.jsonl", b->state_dir);
	/* The state remembers the log's id and last checkpoint: a log that was
	 * deleted, replaced or cut back stops the broker instead of being
	 * quietly started over the evidence.  --new-audit-log is the
	 * deliberate way past that, and says so in the new log. */
	{
		struct aud_head head;

		if (!o->new_audit_log &&
		    st_get_audit_head(b->st, head.log_id, &head.seq, head.hash) == 0)
			ao.expect = &head;
		r = aud_open(path, st_keyring(b->st), &ao, &b->aud);
	}
	if (r != 0) {
		if (ao.expect && r == CB_EAUDIT)
			snprintf(why, whylen, "audit log %s is missing, replaced or cut short (the state "
			    "remembers another); refusing to start. Check it with `capctl audit verify`; "
			    "to start a new log deliberately, move it aside and use --new-audit-log", path);
		else
			snprintf(why, whylen, "audit log %s: %s (%s)", path, cb_strerror(r), strerror(errno));
		goto out;
	}
	if (o->new_audit_log)
		brk_audit(b, AUD_ADMIN, AUD_NONE, 0, NULL, "audit.new-log", path, NULL, "broker",
		    "started with --new-audit-log");
	if (o->new_state && st_is_new(b->st)) {
		/* deliberately a new state beside an old log: it starts where the
		 * log is, and the log says so */
		if ((r = st_set_dseq(b->st, aud_open_dseq(b->aud))) != 0) {
			snprintf(why, whylen, "state %s: %s", b->state_dir, cb_strerror(r));
			goto out;
		}
		brk_audit(b, AUD_ADMIN, AUD_NONE, 0, NULL, "state.new", b->state_dir, NULL, "broker",
		    "started with --new-state: a new state database beside the existing log");
	}
	if ((r = brk_reconcile(b, why, whylen)) != 0)
		goto out;
	if (cb_now() + BRK_CLOCK_JUMP_S < st_time_hwm(b->st)) {
		char detail[160];

		snprintf(detail, sizeof(detail), "the wall clock is %llu s behind the latest time this "
		    "state saw; expiry is judged at that time",
		    (unsigned long long)(st_time_hwm(b->st) - cb_now()));
		brk_audit(b, AUD_ADMIN, AUD_NONE, 0, NULL, "clock.backwards", NULL, NULL, "broker",
		    detail);
	}
	cb_ignore(st_time_persist(b->st, cb_now()));
	{
		uint8_t (*ids)[CAP_ID_LEN] = NULL;
		size_t n = 0;

		/* Instances a crash left open end now, and their elevations. */
		r = st_instance_end_all(b->st, cb_now(), &ids, &n);
		for (size_t i = 0; i < n; i++)
			brk_audit(b, AUD_ADMIN, AUD_NONE, 0, NULL, "revoke", NULL, ids[i], "broker",
			    "elevation of a sandbox that no longer runs (broker restart)");
		free(ids);
		if (r != 0) {
			snprintf(why, whylen, "ending the sandboxes of a previous run: %s", cb_strerror(r));
			goto out;
		}
	}
	if ((r = brk_revoke_stale_elevations(b)) != 0) {
		snprintf(why, whylen, "revoking stale elevations: %s", cb_strerror(r));
		goto out;
	}
	if (!(b->base = event_base_new()) || wire_dec_new(WIRE_REQ_MAX, &b->dec) != 0 ||
	    !(b->rbuf = malloc(WIRE_REQ_MAX + 1)) || !(b->sbuf = malloc(WIRE_REPLY_MAX))) {
		r = CB_ENOMEM;
		goto out;
	}
	if (pipe2(b->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		r = CB_EIO;
		goto out;
	}
	/* Workers must not lose a completion: their end blocks. */
	fcntl(b->wake_pipe[1], F_SETFL, 0);
	b->ev_wake = event_new(b->base, b->wake_pipe[0], EV_READ | EV_PERSIST, brk_wake, b);
	b->ev_tick = event_new(b->base, -1, EV_PERSIST, brk_tick, b);
	if (!b->ev_wake || !b->ev_tick) {
		r = CB_ENOMEM;
		goto out;
	}
	event_add(b->ev_wake, NULL);
	if ((r = brk_hostaddr_open(b)) != 0)
		goto out;
	{
		struct timeval tv = { 1, 0 };

		event_add(b->ev_tick, &tv);
	}
	brk_find_helpers(b);
	if (o->admin_path)
		snprintf(path, sizeof(path), "%s", o->admin_path);
	else
		snprintf(path, sizeof(path), "%s/admin.sock", b->state_dir);
	if (o->has_admin_fd)
		r = brk_admin_adopt(b, o->admin_fd, why, whylen);
	else
		r = brk_admin_listen(b, path, why, whylen);
	if (r != 0)
		goto out;
	brk_audit(b, AUD_ADMIN, AUD_NONE, 0, NULL, "broker.start", b->state_dir, NULL, "broker",
	    o->policy_path ? o->policy_path : "built-in policy");
	*out = b;
	b = NULL;
	r = 0;
out:
	if (r != 0 && !why[0])
		snprintf(why, whylen, "%s", cb_strerror(r));
	brk_free(b);
	return r;
}

bool
brk_path_is_state(const struct brk *b, const char *path, bool or_ancestor)
{
	size_t sl = strlen(b->state_real), pl = strlen(path);

	if (!sl)
		return false;
	/* inside (or equal) */
	if (pl >= sl && strncmp(path, b->state_real, sl) == 0 && (path[sl] == '/' || path[sl] == '\0'))
		return true;
	/* an ancestor: "/" or a proper prefix ending at a component */
	return or_ancestor && pl < sl && strncmp(b->state_real, path, pl) == 0 &&
	    (b->state_real[pl] == '/' || pl == 1);
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
	while (b->sbx) {
		struct brk_sbx *s = b->sbx;

		if (s->spawned && !s->exited) {
			int ws;

			sbx_kill(&s->proc);
			waitpid(s->proc.pid, &ws, 0);
			s->exited = true;
		}
		s->dead = true;
		s->refs = 0;
		brk_sbx_free(s);
	}
	brk_admin_close(b);
	brk_hostaddr_close(b);
	if (b->ev_wake)
		event_free(b->ev_wake);
	if (b->ev_tick)
		event_free(b->ev_tick);
	if (b->ev_tty)
		event_free(b->ev_tty);
	if (b->tty_fd >= 0)
		close(b->tty_fd);
	if (b->wake_pipe[0] >= 0)
		close(b->wake_pipe[0]);
	if (b->wake_pipe[1] >= 0)
		close(b->wake_pipe[1]);
	if (b->aud) {
		brk_audit(b, AUD_ADMIN, AUD_NONE, 0, NULL, "broker.stop", NULL, NULL, "broker", NULL);
		(void)aud_close(b->aud);
	}
	st_close(b->st);
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
