/*
 * main.c - the capbroker program: run, serve, check-policy, show-policy.
 *
 * Trust domain: broker.  `run` starts a broker of its own (or asks a
 * running daemon with --connect), starts one agent in a sandbox and relays
 * the agent's stdin/stdout/stderr: pipes, or, when `run` itself is on a
 * terminal, a pseudo-terminal of the agent's own that we relay to ours (in
 * raw mode, as ssh -t does).  Either way the agent never gets the host
 * terminal.  Exit status: the agent's; 124 on --timeout; 130 when
 * interrupted; 125 when the sandbox or broker could not be set up (one line
 * on stderr); 64 (EX_USAGE) for a usage error.
 */
#include "audit/audit.h"
#include "broker/broker.h"
#include "broker/service.h"
#include "client/admin.h"
#include "policy/policy.h"
#include "sandbox-stub/sandbox.h"
#include "state/state.h"
#include "wire/wire.h"

#include <errno.h>
#include <malloc.h>
#include <event2/event.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/un.h>
#include <sysexits.h>
#include <termios.h>
#include <unistd.h>

#ifndef CB_VERSION
#define CB_VERSION "0.1"
#endif
#define EXIT_SETUP SBX_EXIT_SETUP	/* 125: no sysexits name; the contract's */
#define RUN_MAX_GRANTS 64
#define RUN_MAX_BINDS 32

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: capbroker run [OPTIONS] -- CMD [ARGS...]\n"
	    "       capbroker serve --state DIR [--policy FILE] [--socket PATH] [--new-audit-log]\n"
	    "                       [--new-state] [--cluster CONNINFO]\n"
	    "       capbroker state rebuild --state DIR\n"
	    "       capbroker check-policy FILE\n"
	    "       capbroker show-policy [FILE]\n"
	    "       capbroker --version | --help\n");
}

static void
help(void)
{
	usage(stdout);
	printf("\n"
	    "run: start CMD in a fresh sandbox, with a broker of its own (or a daemon's).\n"
	    "  --connect SOCKET      be served by a running `capbroker serve` (its admin socket)\n"
	    "  --state DIR           keep the broker's state (keys, tokens, audit log) in DIR;\n"
	    "                        default: a private temporary directory, removed at exit\n"
	    "  --policy FILE         the policy (default: the built-in one, see show-policy)\n"
	    "  --tier NAME           low, medium, high or a tier the policy adds (default: the\n"
	    "                        policy's default tier)\n"
	    "  --workspace DIR       the directory the medium tier's file ceiling covers;\n"
	    "                        named, it is granted (unless fs grants are given),\n"
	    "                        served at its path, and the agent starts there\n"
	    "                        (default: the policy's, else the current directory)\n"
	    "  --grant CAP           a token for CAP bound to this sandbox (repeatable); a grant\n"
	    "                        beyond the tier's ceiling is refused (125)\n"
	    "  --ttl SECONDS         lifetime of the --grant tokens (default: the policy's)\n"
	    "  --timeout SECONDS     stop the agent after this long (exit 124); never longer\n"
	    "                        than the tier's wall clock\n"
	    "  --ro-bind SRC[:DST]   show host path SRC read-only at DST (default: SRC)\n"
	    "  --id NAME             the sandbox id, 1-64 of A-Z a-z 0-9 . _ - (default: random)\n"
	    "  --approve tty|admin|deny\n"
	    "                        who decides elevation requests: the person at this\n"
	    "                        terminal (default when there is one; refused without one),\n"
	    "                        an administrator with capctl (default otherwise), or nobody\n"
	    "  --chdir DIR           start the agent in DIR (a path inside the sandbox;\n"
	    "                        default /tmp)\n"
	    "  --setenv NAME VALUE   set NAME in the agent's environment (repeatable)\n"
	    "  --unsetenv NAME       remove NAME from it (repeatable; applied before --setenv)\n"
	    "  --new-audit-log       start a new audit log when the old one cannot continue\n"
	    "  --new-state           start a new state database beside an existing audit log\n"
	    "  --cluster CONNINFO    (serve) share keys and revocations with other brokers\n"
	    "                        through this PostgreSQL database (docs/cluster.md)\n"
	    "serve: the daemon (admin socket DIR/admin.sock unless --socket PATH).\n"
	    "check-policy FILE: refuse what start-up would refuse; show-policy: print the\n"
	    "  effective policy.\n"
	    "exit (run): the agent's status; 124 timeout; 130 interrupted; 125 set-up failed;\n"
	    "  64 usage error.  See capbroker(1).\n");
}

/* ---- relaying the agent's stdio ------------------------------------- */

#define RELAY_BUF	65536	/* bytes of the agent's stdio moved at a time */

/* One of our outputs (stdout, stderr) as the relay writes the agent's to
 * it.  Never a blocking write on the loop: with `run`'s own broker the loop
 * is the broker's, and a reader of our output that stops reading (a pager,
 * a stopped terminal, a full pipe) would otherwise stop the broker with it
 * (its admin socket, revocations, the file server's grants, the tick).
 * What cannot be written now waits in buf while the agent's pipe is not
 * read: the back-pressure reaches the agent, not the broker. */
struct relay_sink {
	int fd;				/* ours, or a non-blocking reopening of it */
	bool own;			/* fd was opened here (closed by relay_free) */
	bool sock;			/* a socket: send(MSG_DONTWAIT) */
	struct event *ev_w;		/* fd writable again */
	char buf[RELAY_BUF];
	size_t len, off;		/* read from the agent, not yet written */
};

struct relay {
	struct event_base *base;
	int in_src, in_dst;		/* our stdin -> agent stdin */
	int out_src, err_src;		/* agent stdout/stderr -> ours */
	struct event *ev_in, *ev_in_w, *ev_out, *ev_err;
	struct relay_sink out, err;	/* ours: stdout, stderr */
	char inbuf[RELAY_BUF];
	size_t inlen, inoff;
	bool out_eof, err_eof, exited;
	int code;
	struct brk *b;			/* one-shot: stop this broker */
	bool raw;			/* our terminal is in raw mode (pty relay) */
	struct termios saved;		/* its mode before, restored at the end */
	bool prompting;			/* an approval prompt owns the terminal */
	bool saved_raw;			/* ... and raw mode is to come back after it */
};

/* With a pty the agent's terminal does the line editing and signals: ours
 * passes every key through (raw), as ssh -t and script(1) do. */
static void
relay_tty_raw(struct relay *r, bool on)
{
	struct termios t;

	if (on && !r->raw) {
		if (tcgetattr(STDIN_FILENO, &r->saved) != 0)
			return;
		t = r->saved;
		cfmakeraw(&t);
		if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) == 0)
			r->raw = true;
	} else if (!on && r->raw) {
		cb_ignore(tcsetattr(STDIN_FILENO, TCSADRAIN, &r->saved));
		r->raw = false;
	}
}

/* Our window size onto the agent's pty (at start and on SIGWINCH). */
static void
relay_winsize(int pty)
{
	struct winsize ws;

	if (pty >= 0 && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
		cb_ignore(ioctl(pty, TIOCSWINSZ, &ws));
}

static void
write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;	/* our reader went away: drop the rest */
		p += w;
		n -= (size_t)w;
	}
}

static void
relay_maybe_done(struct relay *r)
{
	if (r->exited && r->out_eof && r->err_eof) {
		if (r->b)
			brk_stop(r->b, r->code);
		else
			event_base_loopbreak(r->base);
	}
}

/* Our output fd as a sink.  A pipe, FIFO or terminal is opened again
 * through /proc/self/fd with O_NONBLOCK: a description of our own, so the
 * flag never reaches the shell or whoever else shares ours (setting it on
 * a shared terminal breaks the shell after us).  A socket is written with
 * MSG_DONTWAIT.  A regular file (whose writes do not wait on a reader),
 * or one that cannot be opened again, is written as it is. */
static void
relay_sink_open(struct relay_sink *k, int ours)
{
	struct stat st;
	char path[32];
	int fd;

	k->fd = ours;
	if (fstat(ours, &st) != 0)
		return;
	if (S_ISSOCK(st.st_mode)) {
		k->sock = true;
		return;
	}
	if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", ours);
	if ((fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) >= 0) {
		k->fd = fd;
		k->own = true;
	}
}

/* Write what k holds; what does not go now waits for fd to be writable,
 * and the agent's pipe (its event rd) is not read meanwhile.  Nothing is
 * written while an approval prompt owns the terminal (run_prompt). */
static void
relay_sink_flush(struct relay *r, struct relay_sink *k, struct event *rd, bool eof)
{
	while (k->off < k->len && !r->prompting) {
		ssize_t w = k->sock ? send(k->fd, k->buf + k->off, k->len - k->off,
		    MSG_DONTWAIT | MSG_NOSIGNAL) : write(k->fd, k->buf + k->off, k->len - k->off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			event_del(rd);
			event_add(k->ev_w, NULL);
			return;
		}
		if (w <= 0)
			k->off = k->len;	/* our reader went away: drop the rest */
		else
			k->off += (size_t)w;
	}
	if (k->off < k->len)
		return;			/* held for the prompt */
	k->len = k->off = 0;
	event_del(k->ev_w);		/* (no system call when it was not added) */
	if (!eof && !r->prompting)
		event_add(rd, NULL);	/* (nor when rd is still added) */
}

static void
relay_pump(evutil_socket_t fd, struct relay *r, struct relay_sink *k, bool *eof, struct event *e)
{
	ssize_t n;

	n = read(fd, k->buf, sizeof(k->buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		*eof = true;
		event_del(e);
		relay_maybe_done(r);
		return;
	}
	k->len = (size_t)n;
	k->off = 0;
	relay_sink_flush(r, k, e, *eof);
}

static void
relay_out(evutil_socket_t fd, short ev, void *arg)
{
	struct relay *r = arg;

	(void)ev;
	relay_pump(fd, r, &r->out, &r->out_eof, r->ev_out);
}

static void
relay_err(evutil_socket_t fd, short ev, void *arg)
{
	struct relay *r = arg;

	(void)ev;
	relay_pump(fd, r, &r->err, &r->err_eof, r->ev_err);
}

static void
relay_out_w(evutil_socket_t fd, short ev, void *arg)
{
	struct relay *r = arg;

	(void)fd;
	(void)ev;
	relay_sink_flush(r, &r->out, r->ev_out, r->out_eof);
}

static void
relay_err_w(evutil_socket_t fd, short ev, void *arg)
{
	struct relay *r = arg;

	(void)fd;
	(void)ev;
	relay_sink_flush(r, &r->err, r->ev_err, r->err_eof);
}

static void
relay_in_close(struct relay *r)
{
	if (r->ev_in)
		event_del(r->ev_in);
	if (r->ev_in_w)
		event_del(r->ev_in_w);
	if (r->in_dst >= 0)
		close(r->in_dst);
	r->in_dst = -1;
}

/* Flush what we hold to the agent's stdin pipe without ever blocking. */
static void
relay_in_flush(struct relay *r)
{
	while (r->inoff < r->inlen) {
		ssize_t w = write(r->in_dst, r->inbuf + r->inoff, r->inlen - r->inoff);

		if (w < 0 && errno == EAGAIN) {
			event_del(r->ev_in);
			event_add(r->ev_in_w, NULL);
			return;
		}
		if (w <= 0) {
			relay_in_close(r);	/* the agent closed its stdin */
			return;
		}
		r->inoff += (size_t)w;
	}
	r->inlen = r->inoff = 0;
	event_del(r->ev_in_w);
	if (!r->prompting)
		event_add(r->ev_in, NULL);
}

static void
relay_in(evutil_socket_t fd, short ev, void *arg)
{
	struct relay *r = arg;
	ssize_t n;

	(void)ev;
	n = read(fd, r->inbuf, sizeof(r->inbuf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		relay_in_close(r);
		return;
	}
	r->inlen = (size_t)n;
	r->inoff = 0;
	relay_in_flush(r);
}

static void
relay_in_w(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	relay_in_flush(arg);
}

/* Regular files and character devices cannot be watched by epoll: copy
 * them in a thread, so the loop keeps serving the agent meanwhile. */
static void *
relay_copy_stdin(void *arg)
{
	int dst = (int)(intptr_t)arg;
	char buf[RELAY_BUF];
	ssize_t n;

	fcntl(dst, F_SETFL, 0);
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0)
		write_all(dst, buf, (size_t)n);
	close(dst);
	return NULL;
}

static int
relay_start(struct relay *r, struct event_base *base, int in_dst, int out_src, int err_src)
{
	r->base = base;
	r->in_dst = in_dst;
	r->out_src = out_src;
	r->err_src = err_src;
	fcntl(out_src, F_SETFL, O_NONBLOCK);
	r->ev_out = event_new(base, out_src, EV_READ | EV_PERSIST, relay_out, r);
	relay_sink_open(&r->out, STDOUT_FILENO);
	r->out.ev_w = event_new(base, r->out.fd, EV_WRITE | EV_PERSIST, relay_out_w, r);
	if (err_src >= 0) {
		fcntl(err_src, F_SETFL, O_NONBLOCK);
		r->ev_err = event_new(base, err_src, EV_READ | EV_PERSIST, relay_err, r);
		relay_sink_open(&r->err, STDERR_FILENO);
		r->err.ev_w = event_new(base, r->err.fd, EV_WRITE | EV_PERSIST, relay_err_w, r);
	} else {
		r->err_eof = true;
	}
	if (!r->ev_out || !r->out.ev_w || (err_src >= 0 && (!r->ev_err || !r->err.ev_w)))
		return CB_ENOMEM;
	event_add(r->ev_out, NULL);
	if (r->ev_err)
		event_add(r->ev_err, NULL);
	if (in_dst >= 0) {
		struct stat st;

		fcntl(in_dst, F_SETFL, O_NONBLOCK);
		if (fstat(STDIN_FILENO, &st) == 0 && (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)) &&
		    !isatty(STDIN_FILENO)) {
			pthread_attr_t at;
			pthread_t t;
			int e;

			pthread_attr_init(&at);
			pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			e = pthread_create(&t, &at, relay_copy_stdin, (void *)(intptr_t)in_dst);
			pthread_attr_destroy(&at);
			if (e != 0)
				return CB_EBUSY;
			r->in_dst = -1;	/* the thread owns it now */
			return 0;
		}
		r->ev_in = event_new(base, STDIN_FILENO, EV_READ | EV_PERSIST, relay_in, r);
		r->ev_in_w = event_new(base, in_dst, EV_WRITE | EV_PERSIST, relay_in_w, r);
		if (!r->ev_in || !r->ev_in_w)
			return CB_ENOMEM;
		event_add(r->ev_in, NULL);
	}
	return 0;
}

/* On the heap, not the caller's stack: three 64 KiB buffers, which an
 * initialised local (and the stack-clash probes of its frame) wrote page
 * by page before run's stub was spawned (0.2-0.3 ms); calloc's fresh
 * mapping is touched only where the agent's stdio is relayed. */
static struct relay *
relay_new(void)
{
	struct relay *r = calloc(1, sizeof(*r));

	if (r)
		r->in_dst = r->out_src = r->err_src = -1;
	return r;
}

static void
relay_free(struct relay *r)
{
	if (!r)
		return;
	if (r->ev_in)
		event_free(r->ev_in);
	if (r->ev_in_w)
		event_free(r->ev_in_w);
	if (r->ev_out)
		event_free(r->ev_out);
	if (r->ev_err)
		event_free(r->ev_err);
	for (struct relay_sink *k = &r->out; k <= &r->err; k++) {
		if (k->ev_w)
			event_free(k->ev_w);
		if (k->own)
			close(k->fd);
	}
	if (r->in_dst >= 0)
		close(r->in_dst);
	if (r->out_src >= 0)
		close(r->out_src);
	if (r->err_src >= 0)
		close(r->err_src);
	free(r);
}

/* ---- run ------------------------------------------------------------- */

struct run_opts {
	const char *connect, *state, *policy, *tier, *workspace, *id, *approve, *chdir;
	bool new_audit_log, new_state;
	const char *setenv[2 * SBX_ENV_MAX];	/* NAME, VALUE pairs */
	size_t nsetenv;
	const char *unsetenv[SBX_ENV_MAX];
	size_t nunsetenv;
	const char *grants[RUN_MAX_GRANTS];
	size_t ngrants;
	const char *binds[RUN_MAX_BINDS];
	size_t nbinds;
	uint64_t ttl, timeout;
	char **argv;
};

static int
parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return s[0] && s[0] != '-' && !*end && !errno && *v > 0 ? 0 : -1;
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/*
 * A request waits for an administrator (approval mode admin: `run` whose
 * stdin is no terminal, or --approve admin).  Said on our stderr, with the
 * command that decides it, because nothing else would say it: the agent
 * waits up to the policy's request expiry (300 s by default) and then
 * hears "no one decided in time", and a run without --state has its admin
 * socket in a temporary directory no one was told of.  The capability is
 * the agent's text, escaped.
 */
static void
run_wait(void *arg, const struct brk_wait *w)
{
	struct brk *b = arg;
	char sid[CB_ESC_SIZE(CAP_AUD_MAX)], cap[CB_ESC_SIZE(CAP_STR_MAX)];

	(void)cb_text_esc(sid, sizeof(sid), w->sandbox);
	(void)cb_text_esc(cap, sizeof(cap), w->cap);
	fprintf(stderr, "capbroker: request %llu of sandbox %s for %s waits for an administrator "
	    "(%llu s, then it is denied): capctl --socket %s approve %llu (or deny %llu); "
	    "run with --approve tty to be asked at the terminal, --approve deny to refuse at once\n",
	    (unsigned long long)w->rid, sid, cap, (unsigned long long)w->expires_in,
	    brk_admin_sock(b), (unsigned long long)w->rid, (unsigned long long)w->rid);
}

/* While the approval prompt is on the terminal, the agent's output is held
 * and our stdin is not read for it, so the answer line reaches the prompt
 * (on /dev/tty) and nothing typed for the prompt reaches the agent.  A raw
 * terminal (pty relay) is put back to its own mode for the answer. */
static void
run_prompt(void *arg, bool open)
{
	struct relay *r = arg;
	bool was = r->prompting;

	r->prompting = open;
	if (open && !was) {
		if (r->ev_in && r->in_dst >= 0)
			event_del(r->ev_in);
		if (r->raw) {
			relay_tty_raw(r, false);
			r->raw = false;
			r->prompting = true;
			r->saved_raw = true;
		}
	} else if (!open && was) {
		if (r->saved_raw) {
			r->saved_raw = false;
			relay_tty_raw(r, true);
		}
		if (r->ev_in && r->in_dst >= 0 && r->inlen == 0)
			event_add(r->ev_in, NULL);
	}

	/* Held output stays held (relay_sink_flush writes nothing while
	 * prompting) and is written once the prompt closes. */
	if (r->ev_out && open) {
		event_del(r->ev_out);
		event_del(r->out.ev_w);
	} else if (r->ev_out) {
		relay_sink_flush(r, &r->out, r->ev_out, r->out_eof);
	}
	if (r->ev_err && open) {
		event_del(r->ev_err);
		event_del(r->err.ev_w);
	} else if (r->ev_err) {
		relay_sink_flush(r, &r->err, r->ev_err, r->err_eof);
	}
}

static int run_signal;	/* the SIGINT or SIGTERM that stopped us, or 0 */

static void
run_exited(struct brk_sbx *s, void *arg)
{
	struct relay *r = arg;

	r->exited = true;
	r->code = brk_sbx_exit_code(s);
	if (!run_signal && brk_sbx_ran_out(s)) {
		bool was_raw = r->raw;

		relay_tty_raw(r, false);
		fprintf(stderr, "%scapbroker: the agent was stopped: it ran for its time limit of %llu s "
		    "(--timeout or the tier's wall clock)\n", was_raw ? "\n" : "",
		    (unsigned long long)brk_sbx_wall(s));
	}
	relay_maybe_done(r);
}

static void
on_signal(evutil_socket_t sig, short ev, void *arg)
{
	struct brk *b = arg;

	(void)ev;
	run_signal = (int)sig;
	/* Kill the sandboxes; we exit 128 + sig once they are gone. */
	brk_kill_all(b, sig == SIGINT ? "signal:INT" : "signal:TERM");
}

static void
on_winch(evutil_socket_t sig, short ev, void *arg)
{
	struct relay *r = arg;

	(void)sig;
	(void)ev;
	relay_winsize(r->out_src);
}

/* brk_sbx_create's refusals: a bad option value (id, tier, workspace, a
 * malformed grant or bind) is a usage error; anything else is set-up. */
static int
run_create_exit(int e)
{
	return e == CB_EINVAL || (e <= CB_ECAP_OP && e >= CB_ECAP_TOOLONG) ? EX_USAGE : EXIT_SETUP;
}

/* A throw-away state (removed at exit) need not pay for disk syncs: keep
 * it on tmpfs when there is one (about 7 ms per run).  It is private all
 * the same (mkdtemp, 0700). */
static int
run_temp_state(char *tmp, size_t len)
{
	struct stat st;

	snprintf(tmp, len, "%s/capbroker-XXXXXX",
	    stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0 ?
	    "/dev/shm" : "/tmp");
	if (!mkdtemp(tmp)) {
		fprintf(stderr, "capbroker: cannot create a state directory: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* --approve: tty when run at a terminal, else admin. */
static enum brk_approve
run_approve_mode(const char *approve)
{
	if (!approve)
		return isatty(STDIN_FILENO) ? BRK_APPROVE_TTY : BRK_APPROVE_ADMIN;
	if (strcmp(approve, "tty") == 0)
		return BRK_APPROVE_TTY;
	if (strcmp(approve, "admin") == 0)
		return BRK_APPROVE_ADMIN;
	return BRK_APPROVE_DENY;
}

/* Asked for a terminal prompt: there must be a terminal to ask at, or
 * every request would wait for no one. */
static bool
run_have_tty(void)
{
	int t = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);

	if (t < 0) {
		fprintf(stderr, "capbroker: --approve tty needs a controlling terminal (there is "
		    "none: %s); use --approve admin with `capctl watch`, or deny\n",
		    strerror(errno));
		return false;
	}
	close(t);
	return true;
}

/*
 * The broker and the sandbox: the sandbox is built while the broker opens
 * its state and log (on two cores the stub's namespaces and mounts overlap
 * them).  The policy first, then the stub spawned held before its agent,
 * then the rest of the broker, then the sandbox recorded and its agent let
 * go (brk_sbx_begin, brk_sbx_finish).  0, or the exit status, the reason
 * printed; *bp is the caller's to free either way.
 */
static int
run_start(const struct brk_opts *bo, const struct brk_sbx_spec *spec, struct brk **bp,
    struct brk_sbx **sp)
{
	char why[1024];
	int e, code = EXIT_SETUP;

	why[0] = '\0';
	*sp = NULL;
	if ((e = brk_new_early(bo, bp, why, sizeof(why))) != 0)
		goto out;
	if ((e = brk_sbx_begin(*bp, spec, sp, why, sizeof(why))) != 0) {
		code = run_create_exit(e);
		goto out;
	}
	if ((e = brk_open(*bp, why, sizeof(why))) != 0) {
		brk_sbx_discard(*sp);
		*sp = NULL;
		goto out;
	}
	/* finish frees the sandbox when it fails */
	if ((e = brk_sbx_finish(*sp, why, sizeof(why))) != 0) {
		*sp = NULL;
		code = run_create_exit(e);
		goto out;
	}
	code = 0;
out:
	if (code != 0)
		fprintf(stderr, "capbroker: %s\n", why[0] ? why : cb_strerror(e));
	return code;
}

static int
run_local(struct run_opts *o)
{
	struct brk_opts bo = { .policy_path = o->policy, .new_audit_log = o->new_audit_log,
		.new_state = o->new_state };
	struct brk_sbx_spec spec;
	struct brk *b = NULL;
	struct brk_sbx *s;
	struct relay *r = NULL;
	int stdio[3];
	struct event *sigint = NULL, *sigterm = NULL, *sigwinch = NULL;
	char tmp[64], actor[32];
	int code = EXIT_SETUP;
	/* A pty when we are on a terminal both ways: `run ... >file` keeps
	 * plain pipes (no \r\n, no terminal modes in the file). */
	bool pty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);

	if (o->state) {
		bo.state_dir = o->state;
	} else {
		if (run_temp_state(tmp, sizeof(tmp)) != 0)
			return EXIT_SETUP;
		bo.state_dir = tmp;
		bo.ephemeral = true;
	}
	bo.approve = run_approve_mode(o->approve);
	if (bo.approve == BRK_APPROVE_TTY && !run_have_tty()) {
		code = EX_USAGE;
		goto out;
	}
	snprintf(actor, sizeof(actor), "uid:%u", (unsigned)getuid());
	spec = (struct brk_sbx_spec){ .id = o->id, .tier = o->tier, .workspace = o->workspace,
		.serve_workspace = o->workspace != NULL, .argv = o->argv, .grants = o->grants, .ngrants = o->ngrants, .ttl = o->ttl,
		.timeout = o->timeout, .ro_binds = o->binds, .nro_binds = o->nbinds,
		.owner = getuid(), .owner_gid = getgid(), .actor = actor, .want_pty = pty, .chdir = o->chdir,
		.setenv = o->setenv, .nsetenv = o->nsetenv, .unsetenv = o->unsetenv,
		.nunsetenv = o->nunsetenv, .report_exit = true };
	if ((code = run_start(&bo, &spec, &b, &s)) != 0)
		goto out;
	code = EXIT_SETUP;
	/* After the spawn, as everything the stub does not need. */
	if (!(r = relay_new())) {
		fprintf(stderr, "capbroker: out of memory\n");
		goto out;
	}
	r->b = b;
	brk_sbx_on_exit(s, run_exited, r);
	brk_set_prompt_hook(b, run_prompt, r);
	if (bo.approve == BRK_APPROVE_ADMIN)
		brk_set_wait_hook(b, run_wait, b);
	/* The relay owns the agent's stdio from here: the sandbox's record
	 * may be freed before the relay reads EOF. */
	brk_sbx_take_stdio(s, stdio);
	/* The terminal is the agent's input and, while a prompt is open, the
	 * prompt's (run_prompt pauses the relay then): never both at once. */
	if (pty) {
		relay_winsize(stdio[1]);
		relay_tty_raw(r, true);
	}
	if (relay_start(r, brk_base(b), stdio[0], stdio[1], stdio[2]) != 0) {
		fprintf(stderr, "capbroker: cannot relay the agent's stdio\n");
		goto out;	/* relay_free closes them */
	}
	sigint = evsignal_new(brk_base(b), SIGINT, on_signal, b);
	sigterm = evsignal_new(brk_base(b), SIGTERM, on_signal, b);
	if (pty)
		sigwinch = evsignal_new(brk_base(b), SIGWINCH, on_winch, r);
	if (sigint)
		event_add(sigint, NULL);
	if (sigterm)
		event_add(sigterm, NULL);
	if (sigwinch)
		event_add(sigwinch, NULL);
	if (brk_loop(b) != 0) {
		fprintf(stderr, "capbroker: event loop failed\n");
		goto out;
	}
	/* Interrupted: 130 for SIGINT (128 + the signal, as shells say). */
	code = run_signal ? 128 + run_signal : brk_exit_code(b);
out:
	if (r)
		relay_tty_raw(r, false);
	if (sigint)
		event_free(sigint);
	if (sigterm)
		event_free(sigterm);
	if (sigwinch)
		event_free(sigwinch);
	relay_free(r);
	brk_free(b);
	if (!o->state)
		nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return code;
}

/* The "run" request of `run --connect`: the command and run's options
 * (cwd: room for the default workspace, which rq points to).  0, or (said
 * on stderr) CB_EINVAL or CB_ETOOBIG when a list does not fit the
 * protocol, as the daemon would answer it. */
static int
run_connect_request(const struct run_opts *o, struct cc_adm *a, struct wire_adm_req *rq, bool pty,
    char *cwd, size_t cwdlen)
{
	size_t argc = 0;

	while (o->argv[argc])
		argc++;
	if (argc > WIRE_ARGV_MAX) {
		fprintf(stderr, "capbroker: a command of at most %d words\n", WIRE_ARGV_MAX);
		return CB_EINVAL;
	}
	if (o->ngrants > WIRE_CAPS_MAX || o->nbinds > WIRE_ADM_BINDS_MAX) {
		fprintf(stderr, "capbroker: too many grants or binds\n");
		return CB_ETOOBIG;
	}
	cc_adm_begin(a, rq, WIRE_ADM_RUN);
	rq->sandbox = o->id;
	rq->tier = o->tier;
	rq->serve_workspace = o->workspace != NULL;
	/* The daemon has a working directory of its own: a relative
	 * --workspace is this run's, so it is made absolute here.  Before, the
	 * daemon resolved "." to its own directory and granted that tree. */
	if (o->workspace && (cwdlen < PATH_MAX || !realpath(o->workspace, cwd))) {
		fprintf(stderr, "capbroker: workspace '%s': %s\n", o->workspace,
		    strerror(cwdlen < PATH_MAX ? ENAMETOOLONG : errno));
		return CB_EINVAL;
	}
	rq->workspace = o->workspace ? cwd : getcwd(cwd, cwdlen);
	rq->ttl = o->ttl;
	rq->timeout = o->timeout;
	rq->chdir = o->chdir;
	rq->pty = pty;
	rq->argc = argc;
	memcpy(rq->argv, o->argv, argc * sizeof(rq->argv[0]));
	rq->ngrants = o->ngrants;
	memcpy(rq->grants, o->grants, o->ngrants * sizeof(rq->grants[0]));
	rq->nro_binds = o->nbinds;
	memcpy(rq->ro_binds, o->binds, o->nbinds * sizeof(rq->ro_binds[0]));
	rq->nsetenv = 2 * o->nsetenv;
	memcpy(rq->setenv, o->setenv, 2 * o->nsetenv * sizeof(rq->setenv[0]));
	rq->nunsetenv = o->nunsetenv;
	memcpy(rq->unsetenv, o->unsetenv, o->nunsetenv * sizeof(rq->unsetenv[0]));
	return 0;
}

/*
 * The client side of `run --connect`, through the admin client
 * (client/admin.c): ask the daemon to start the sandbox, relay the agent's
 * stdio it hands us, and exit with the status its exit event reports.
 */
static int
run_connect(struct run_opts *o)
{
	struct relay *r = NULL;
	struct cc_adm *a = NULL;
	struct event_base *base = NULL;
	struct event *sigwinch = NULL;
	struct wire_adm_req rq;
	struct wire_adm_rep rp;
	struct wire_adm_event ev;
	struct wire_msg m;
	char cwd[4096];
	int fds[3] = { -1, -1, -1 }, code = EXIT_SETUP, rc;
	bool got_pty;
	/* As run_local: a pty of the agent's own when we are on a terminal. */
	bool pty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);

	if (!(r = relay_new()) || cc_adm_new(&a) != 0 || cc_adm_connect(a, o->connect) != CC_ADM_OK)
		goto say;
	if ((rc = run_connect_request(o, a, &rq, pty, cwd, sizeof(cwd))) != 0) {
		code = run_create_exit(rc);
		goto out;
	}
	if (cc_adm_call(a, &rq, &rp, fds, 3) != CC_ADM_OK) {
		if (cc_adm_refused(a))
			code = run_create_exit(rp.err);
		goto say;
	}
	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
		fprintf(stderr, "capbroker: the broker sent no stdio\n");
		goto out;
	}
	got_pty = rp.pty;
	if (got_pty) {
		close(fds[2]);	/* the master's second copy: no stderr of its own */
		fds[2] = -1;
		relay_winsize(fds[1]);
		relay_tty_raw(r, true);
	}
	if (!(base = event_base_new()) || relay_start(r, base, fds[0], fds[1], fds[2]) != 0)
		goto out;
	if (got_pty && (sigwinch = evsignal_new(base, SIGWINCH, on_winch, r)))
		event_add(sigwinch, NULL);
	fds[0] = fds[1] = fds[2] = -1;	/* the relay's now */
	while (!r->out_eof || !r->err_eof)
		event_base_loop(base, EVLOOP_ONCE);
	/* Then the exit event: the agent's status is ours. */
	if (cc_adm_recv(a, &m, -1, NULL, NULL, 0) != CC_ADM_OK) {
		fprintf(stderr, "capbroker: lost the broker before the sandbox ended\n");
		goto out;
	}
	if (wire_adm_event_get(&m, &ev) != 0 || ev.kind != WIRE_ADM_EV_EXIT) {
		fprintf(stderr, "capbroker: the broker sent no exit status\n");
		goto out;
	}
	code = (int)ev.status;
	/* The sandbox could not be set up: say why, as a local run does. */
	if (ev.reason) {
		fputs("capbroker: ", stderr);
		cb_ignore(cb_text_fputs(ev.reason, stderr));
		fputc('\n', stderr);
	}
	goto out;
say:
	fprintf(stderr, "capbroker: %s\n", a ? cc_adm_why(a) : "out of memory");
out:
	if (r)
		relay_tty_raw(r, false);
	if (sigwinch)
		event_free(sigwinch);
	relay_free(r);
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (base)
		event_base_free(base);
	cc_adm_free(a);
	return code;
}

/* One option of run (c, with optarg; --setenv takes the next argument
 * too).  RUN_OPT_NEXT to read on, or the exit status. */
#define RUN_OPT_NEXT	(-1)

static int
run_opt(struct run_opts *o, int c, int argc, char **argv)
{
	switch (c) {
	case 'c': o->connect = optarg; break;
	case 's': o->state = optarg; break;
	case 'p': o->policy = optarg; break;
	case 't': o->tier = optarg; break;
	case 'w': o->workspace = optarg; break;
	case 'i': o->id = optarg; break;
	case 'N': o->new_audit_log = true; break;
	case 'Z': o->new_state = true; break;
	case 'a':
		if (strcmp(optarg, "tty") && strcmp(optarg, "admin") && strcmp(optarg, "deny")) {
			fprintf(stderr, "capbroker: --approve takes tty, admin or deny\n");
			return EX_USAGE;
		}
		o->approve = optarg;
		break;
	case 'g':
		if (o->ngrants == RUN_MAX_GRANTS) {
			fprintf(stderr, "capbroker: at most %d --grant\n", RUN_MAX_GRANTS);
			return EX_USAGE;
		}
		o->grants[o->ngrants++] = optarg;
		break;
	case 'b':
		if (o->nbinds == RUN_MAX_BINDS) {
			fprintf(stderr, "capbroker: at most %d --ro-bind\n", RUN_MAX_BINDS);
			return EX_USAGE;
		}
		o->binds[o->nbinds++] = optarg;
		break;
	case 'T':
	case 'o':
		if (parse_u64(optarg, c == 'T' ? &o->ttl : &o->timeout) != 0 ||
		    (c == 'T' ? o->ttl : o->timeout) > CB_DURATION_MAX) {
			fprintf(stderr, "capbroker: --%s needs a positive number of seconds, "
			    "at most %u (366 days)\n", c == 'T' ? "ttl" : "timeout", CB_DURATION_MAX);
			return EX_USAGE;
		}
		break;
	case 'C':
		if (optarg[0] != '/') {
			fprintf(stderr, "capbroker: --chdir needs an absolute path inside the "
			    "sandbox\n");
			return EX_USAGE;
		}
		o->chdir = optarg;
		break;
	case 'E':
		/* --setenv NAME VALUE: the value is the next argument, as
		 * in bubblewrap. */
		if (optind >= argc) {
			fprintf(stderr, "capbroker: --setenv needs NAME and VALUE\n");
			return EX_USAGE;
		}
		/* fall through */
	case 'U':
		if (!sbx_env_name_ok(optarg)) {
			fprintf(stderr, "capbroker: --%s: '%s' is not a variable name "
			    "([A-Za-z_][A-Za-z0-9_]*)\n", c == 'E' ? "setenv" : "unsetenv", optarg);
			return EX_USAGE;
		}
		if ((c == 'E' ? o->nsetenv : o->nunsetenv) == SBX_ENV_MAX) {
			fprintf(stderr, "capbroker: at most %d --%s\n", SBX_ENV_MAX,
			    c == 'E' ? "setenv" : "unsetenv");
			return EX_USAGE;
		}
		if (c == 'E') {
			o->setenv[2 * o->nsetenv] = optarg;
			o->setenv[2 * o->nsetenv + 1] = argv[optind++];
			o->nsetenv++;
		} else {
			o->unsetenv[o->nunsetenv++] = optarg;
		}
		break;
	case 'h':
		help();
		return 0;
	case 'V':
		printf("capbroker %s\n", CB_VERSION);
		return 0;
	default:
		usage(stderr);
		return EX_USAGE;
	}
	return RUN_OPT_NEXT;
}

static int
cmd_run(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "connect", required_argument, NULL, 'c' },
		{ "state", required_argument, NULL, 's' },
		{ "policy", required_argument, NULL, 'p' },
		{ "tier", required_argument, NULL, 't' },
		{ "workspace", required_argument, NULL, 'w' },
		{ "grant", required_argument, NULL, 'g' },
		{ "ttl", required_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, 'o' },
		{ "ro-bind", required_argument, NULL, 'b' },
		{ "id", required_argument, NULL, 'i' },
		{ "approve", required_argument, NULL, 'a' },
		{ "new-audit-log", no_argument, NULL, 'N' },
		{ "chdir", required_argument, NULL, 'C' },
		{ "setenv", required_argument, NULL, 'E' },
		{ "unsetenv", required_argument, NULL, 'U' },
		{ "new-state", no_argument, NULL, 'Z' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_opts o = { 0 };
	int c, r;

	while ((c = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
		if ((r = run_opt(&o, c, argc, argv)) != RUN_OPT_NEXT)
			return r;
	}
	if (optind >= argc) {
		fprintf(stderr, "capbroker: run needs a command after --\n");
		usage(stderr);
		return EX_USAGE;
	}
	o.argv = argv + optind;
	/* Said here, the same for both ways to run: a command no sandbox can
	 * be given is a usage error (E2BIG), not a failed set-up. */
	if (sbx_argv_check(o.argv) == CB_ETOOBIG) {
		fprintf(stderr, "capbroker: the command is too long: at most %d words and %d bytes "
		    "(docs/sandbox.md)\n", SBX_ARGV_MAX, SBX_ARGV_BYTES);
		return EX_USAGE;
	}
	return o.connect ? run_connect(&o) : run_local(&o);
}

/* ---- serve ------------------------------------------------------------- */

static void
on_stop(evutil_socket_t sig, short ev, void *arg)
{
	(void)sig;
	(void)ev;
	brk_stop(arg, 0);
}

/* SIGHUP: the policy file again, for new sandboxes; a bad one changes
 * nothing (brk_reload audits both outcomes). */
static void
on_hup(evutil_socket_t sig, short ev, void *arg)
{
	struct brk *b = arg;
	char why[2048];
	int r;

	(void)sig;
	(void)ev;
	brk_svc_reloading();
	r = brk_reload(b, "signal:HUP", why, sizeof(why));
	brk_svc_log(r == 0 ? LOG_INFO : LOG_ERR, "%s", why);
	brk_svc_ready(r == 0 ? "serving; policy reloaded" :
	    "serving; policy reload failed, the previous policy stays in force");
}

static int
cmd_serve(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "state", required_argument, NULL, 's' },
		{ "policy", required_argument, NULL, 'p' },
		{ "socket", required_argument, NULL, 'S' },
		{ "new-audit-log", no_argument, NULL, 'N' },
		{ "new-state", no_argument, NULL, 'E' },
		{ "cluster", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct brk_opts bo = { .approve = BRK_APPROVE_ADMIN };
	struct brk *b = NULL;
	struct event *e1 = NULL, *e2 = NULL, *e3 = NULL;
	char why[1024], status[4200];
	int c, lfd;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 's': bo.state_dir = optarg; break;
		case 'p': bo.policy_path = optarg; break;
		case 'S': bo.admin_path = optarg; break;
		case 'N': bo.new_audit_log = true; break;
		case 'E': bo.new_state = true; break;
		case 'C':
			if (!optarg[0]) {
				fprintf(stderr, "capbroker: --cluster needs a PostgreSQL connection string\n");
				return EX_USAGE;
			}
			bo.cluster = optarg;
			break;
		case 'h': help(); return 0;
		case 'V': printf("capbroker %s\n", CB_VERSION); return 0;
		default: usage(stderr); return EX_USAGE;
		}
	}
	if (!bo.state_dir || optind != argc) {
		fprintf(stderr, "capbroker: serve needs --state DIR\n");
		return EX_USAGE;
	}
	brk_svc_log_state(bo.state_dir);
	/* Socket activation (capbroker.socket): serve the socket systemd
	 * listens on, so clients may connect before we are up. */
	if ((c = brk_svc_listen_fd(&lfd, why, sizeof(why))) < 0) {
		brk_svc_log(LOG_ERR, "%s", why);
		return EXIT_SETUP;
	}
	if (c == 1) {
		bo.has_admin_fd = true;
		bo.admin_fd = lfd;
	}
	if (brk_new(&bo, &b, why, sizeof(why)) != 0) {
		brk_svc_log(LOG_ERR, "%s", why);
		return EXIT_SETUP;
	}
	e1 = evsignal_new(brk_base(b), SIGTERM, on_stop, b);
	e2 = evsignal_new(brk_base(b), SIGINT, on_stop, b);
	e3 = evsignal_new(brk_base(b), SIGHUP, on_hup, b);
	if (e1)
		event_add(e1, NULL);
	if (e2)
		event_add(e2, NULL);
	if (e3)
		event_add(e3, NULL);
	if (brk_admin_was_stale(b))
		brk_svc_log(LOG_NOTICE, "removed a stale admin socket %s (no broker was listening "
		    "on it)", brk_admin_sock(b));
	snprintf(status, sizeof(status), "serving; admin socket %s%s", brk_admin_sock(b),
	    bo.has_admin_fd ? " (from systemd)" : "");
	brk_svc_log(LOG_INFO, "%s", status);
	brk_svc_ready(status);
	c = brk_loop(b) == 0 ? brk_exit_code(b) : 1;
	brk_svc_stopping();
	brk_svc_log(LOG_INFO, "stopping; admin socket %s", brk_admin_sock(b));
	if (e1)
		event_free(e1);
	if (e2)
		event_free(e2);
	if (e3)
		event_free(e3);
	brk_free(b);
	return c;
}

/* ---- state rebuild -------------------------------------------------- */

/* `capbroker state rebuild --state DIR`: bring a state that fell behind its
 * audit log (its database or WAL deleted, cut or damaged) back to what the
 * log records.  The log is checked first: a damaged log rebuilds nothing. */
static int
cmd_state(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "state", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = NULL;
	struct st *st = NULL;
	struct cap_keyring *kr = NULL;
	struct aud_report rep;
	struct st_rebuild rb = { 0 };
	char path[4200], why[1024], *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f = NULL;
	int c, r, code = 1;

	if (argc < 2 || strcmp(argv[1], "rebuild") != 0) {
		fprintf(stderr, "capbroker: usage: capbroker state rebuild --state DIR\n");
		return EX_USAGE;
	}
	argc--;
	argv++;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 's': dir = optarg; break;
		case 'h': printf("usage: capbroker state rebuild --state DIR\n"); return 0;
		default: return EX_USAGE;
		}
	}
	if (!dir || optind != argc) {
		fprintf(stderr, "capbroker: state rebuild needs --state DIR\n");
		return EX_USAGE;
	}
	snprintf(path, sizeof(path), "%s/audit.jsonl", dir);
	if (access(path, R_OK) != 0) {
		fprintf(stderr, "capbroker: %s: %s: nothing to rebuild from\n", path, strerror(errno));
		return 1;
	}
	if ((r = st_open_rebuild(dir, &st, why, sizeof(why))) != 0) {
		fprintf(stderr, "capbroker: state %s: %s: %s\n", dir, cb_strerror(r), why);
		return 1;
	}
	if ((r = st_audit_keyring(st, &kr)) != 0) {
		fprintf(stderr, "capbroker: keys in %s: %s\n", dir, cb_strerror(r));
		goto out;
	}
	memset(&rep, 0, sizeof(rep));
	if ((r = aud_verify(path, kr, NULL, &rep)) != 0) {
		fprintf(stderr, "capbroker: the audit log %s is not intact (%s: %s); refusing to "
		    "rebuild from it\n", path, aud_problem_name(rep.problem), rep.what);
		goto out;
	}
	if (!(f = fopen(path, "re"))) {
		fprintf(stderr, "capbroker: %s: %s\n", path, strerror(errno));
		goto out;
	}
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] != '\n')
			break;	/* a torn last line records nothing */
		if ((r = st_rebuild_line(st, line, (size_t)n - 1, &rb)) != 0) {
			fprintf(stderr, "capbroker: state %s: %s\n", dir, cb_strerror(r));
			goto out;
		}
	}
	if ((r = st_rebuild_finish(st, &rb)) != 0) {
		fprintf(stderr, "capbroker: state %s: %s%s\n", dir, cb_strerror(r),
		    r == CB_EKEY_FORMAT ? " (no signing key with its secret is left in keys/)" : "");
		goto out;
	}
	printf("state %s rebuilt from its audit log: %zu decisions (to %llu), %zu revocation(s) "
	    "and %zu key retirement(s) applied", dir, rb.decisions, (unsigned long long)rb.dseq,
	    rb.revoked, rb.retired);
	if (rb.tokens_unknown)
		printf("; %zu token(s) issued in the log are not in the state and stay refused "
		    "(unknown-token): issue them again", rb.tokens_unknown);
	printf("\n");
	code = 0;
out:
	free(line);
	if (f)
		fclose(f);
	cap_keyring_free(kr);
	st_close(st);
	return code;
}

/* Each sandbox costs the broker a few descriptors (channel, pidfd, status
 * pipe, an admin connection): use the whole hard limit, not the soft 1024. */
static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		cb_ignore(setrlimit(RLIMIT_NOFILE, &rl));
	}
}

int
main(int argc, char **argv)
{
	/* Everything the broker creates (state, keys, database, log) is its
	 * own: nothing for group or others, whatever the caller's umask. */
	umask(077);
	raise_nofile();
	/*
	 * A fixed mmap threshold: glibc raises its threshold to the size of
	 * every mmap'd chunk freed (up to 32 MiB), after which a sandbox's
	 * big buffers (its audit queues, 576 KiB each, calloc'ed; its file
	 * server's 1 MiB request buffer) come from the heap instead, where
	 * calloc must clear them and a free rarely gives them back.  Measured:
	 * after one wave of 40 idle medium sandboxes ended, each of the next
	 * wave's cost 300 KiB of RSS instead of 145, and the broker kept the
	 * second wave's 11 MiB after it ended (docs/performance.md).  Fixed,
	 * they are mapped when made and unmapped when freed, and their
	 * untouched pages are never resident.
	 */
	cb_ignore(mallopt(M_MMAP_THRESHOLD, 128 * 1024));
	if (argc < 2) {
		usage(stderr);
		return EX_USAGE;
	}
	if (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "serve") == 0) {
		struct rlimit rl;

		/* Below this the broker fails at some step or other (state,
		 * log, socketpair, the stub); say the cause once, up front. */
		int min = argv[1][0] == 'r' ? BRK_NOFILE_MIN_RUN : BRK_NOFILE_MIN;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)min) {
			fprintf(stderr, "capbroker: the open-files limit is %llu (ulimit -n); the broker "
			    "needs at least %d\n", (unsigned long long)rl.rlim_cur, min);
			return EXIT_SETUP;
		}
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "serve") == 0)
		return cmd_serve(argc - 1, argv + 1);
	if (strcmp(argv[1], "state") == 0)
		return cmd_state(argc - 1, argv + 1);
	if (strcmp(argv[1], "check-policy") == 0)
		return pol_cmd_check(argc - 1, argv + 1);
	if (strcmp(argv[1], "show-policy") == 0)
		return pol_cmd_show(argc - 1, argv + 1);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		help();
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("capbroker %s\n", CB_VERSION);
		return 0;
	}
	fprintf(stderr, "capbroker: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EX_USAGE;
}
