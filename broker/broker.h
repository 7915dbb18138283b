/*
 * broker.h - the broker, as the capbroker program sees it: one event loop
 * that owns every sandbox's socketpair and performs each granted operation
 * after checking a token.
 *
 * Trust domain: the broker (trusted, possibly root).  Everything a sandbox
 * sends is hostile.  The loop never blocks on an agent: DNS runs in worker
 * threads, connects and child processes are events, replies that cannot be
 * sent at once are queued (bounded) rather than waited for.
 *
 * struct brk and struct brk_sbx are opaque here; their insides, and the
 * broker's own functions, are in the private headers (core.h and one per
 * concern: chan.h, dispatch.h, ops.h, tokens.h, sbx.h, approval.h,
 * admin.h, budget.h, commit.h, hostaddr.h, work.h).  docs/architecture.md
 * has the map of the files and who calls whom.
 */
#ifndef CB_BROKER_H
#define CB_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

#define BRK_NOFILE_MIN	32	/* open-files limit below which serve refuses to start */
#define BRK_NOFILE_MIN_RUN 64	/* ... and run (a sandbox of its own needs more) */

struct event_base;
struct brk;
struct brk_sbx;

enum brk_approve {
	BRK_APPROVE_ADMIN,	/* wait for capctl approve/deny */
	BRK_APPROVE_TTY,	/* ask at the launching terminal */
	BRK_APPROVE_DENY,	/* refuse every request that needs a human */
};

struct brk_opts {
	const char *state_dir;
	const char *policy_path;	/* NULL: built-in default */
	const char *admin_path;		/* NULL: STATE/admin.sock */
	enum brk_approve approve;
	bool quiet;
	bool new_audit_log;		/* start a new log although the state remembers another */
	bool has_admin_fd;		/* admin_fd: a listening socket to adopt (systemd) */
	int admin_fd;
	bool new_state;			/* start a new state database beside an existing log */
	const char *cluster;		/* --cluster CONNINFO; NULL: the policy's, if any */
	bool ephemeral;			/* `run` without --state: the state in memory only
					 * (st_open_ephemeral); state_dir holds the log */
};

/* Set up the broker: policy, state (locked: one broker per state directory,
 * CB_EBUSY naming the live one otherwise), audit log, admin socket (a stale
 * one is removed, a live one is CB_EBUSY).  On error a one-line reason is in
 * why. */
int brk_new(const struct brk_opts *o, struct brk **out, char *why, size_t whylen) CB_WARN_UNUSED;

/* brk_new in two steps (`run`, with brk_sbx_begin between them):
 * brk_new_early loads the policy and finds the helpers, nothing else (no
 * thread, no file in the state directory, no loop); brk_open does the rest
 * of brk_new.  A broker brk_open failed on still goes with brk_free. */
int brk_new_early(const struct brk_opts *o, struct brk **out, char *why,
    size_t whylen) CB_WARN_UNUSED;
int brk_open(struct brk *b, char *why, size_t whylen) CB_WARN_UNUSED;

/* Load the policy file again and make it current for new sandboxes; running
 * sandboxes keep theirs.  Audited (policy.reload, with actor), both ways.
 * No policy file, or an invalid one: the policy in force stays, CB_EINVAL
 * or the loader's code, and why says why (the loader's messages). */
int brk_reload(struct brk *b, const char *actor, char *why, size_t whylen) CB_WARN_UNUSED;
void brk_free(struct brk *b);
int brk_loop(struct brk *b);
void brk_stop(struct brk *b, int code);
/* The exit status of `serve` refused its name in the cluster (another
 * live broker holds it, docs/cluster.md): the contract's "broker could
 * not be set up" (125, SBX_EXIT_SETUP). */
#define BRK_EXIT_NAME_HELD	125

/* The loop, for the program's own events (signals, the stdio relay). */
struct event_base *brk_base(struct brk *b);
/* The admin socket's path, and whether a stale one was removed at start. */
const char *brk_admin_sock(const struct brk *b);
bool brk_admin_was_stale(const struct brk *b);
/* The code brk_stop was given. */
int brk_exit_code(const struct brk *b);
/* Called when a terminal prompt opens (open true) and closes. */
void brk_set_prompt_hook(struct brk *b, void (*fn)(void *arg, bool open), void *arg);
/* A request that waits for an administrator (approval mode admin), after
 * it is recorded and audited.  The strings are the broker's, valid for the
 * call only; cap is the agent's text (escape it before showing it). */
struct brk_wait {
	uint64_t rid;		/* what capctl approve/deny take */
	const char *sandbox;
	const char *cap;
	uint64_t expires_in;	/* seconds until it lapses (denied) */
};
void brk_set_wait_hook(struct brk *b, void (*fn)(void *arg, const struct brk_wait *w), void *arg);
/* Kill every sandbox (audited with actor). */
void brk_kill_all(struct brk *b, const char *actor);

/* ---- sandboxes (sbx.c) ---- */

struct brk_sbx_spec {
	const char *id;			/* NULL: generated */
	const char *tier;		/* NULL: policy default */
	const char *workspace;		/* NULL: current directory */
	bool serve_workspace;		/* the workspace was named: issue its tokens and
					 * serve it (medium, high; fs_served.c) */
	char *const *argv;
	const char *const *grants;
	size_t ngrants;
	uint64_t ttl;			/* grant lifetime; 0: policy default */
	uint64_t timeout;		/* wall clock; 0: tier's */
	const char *const *ro_binds;	/* SRC[:DST] */
	size_t nro_binds;
	uid_t owner;
	gid_t owner_gid;		/* ... and the group it runs as: its --ro-bind
					 * sources are opened as owner:owner_gid */
	const char *actor;		/* audit actor: "uid:N" */
	bool want_pty;			/* the agent's stdio: a pty of its own */
	const char *chdir;		/* where the agent starts (inside); NULL: /tmp */
	const char *const *setenv;	/* NAME, VALUE pairs for the agent's environment */
	size_t nsetenv;
	const char *const *unsetenv;	/* NAMEs removed from it */
	size_t nunsetenv;
	bool report_exit;		/* a sandbox without served trees is over when
					 * its pid 1 reports the agent's exit, before
					 * the teardown; its stub is reaped later, at
					 * the latest by brk_free (run's own broker) */
};

/* Create a sandbox: validate, mint grant tokens (each inside the ceiling),
 * spawn it (brk_sbx_take_stdio gives its stdio).  On error a
 * one-line reason in why and CB_EPOLICY (a grant beyond the ceiling),
 * CB_EINVAL or a spawn error. */
int brk_sbx_create(struct brk *b, const struct brk_sbx_spec *spec, struct brk_sbx **out,
    char *why, size_t whylen) CB_WARN_UNUSED;

/*
 * brk_sbx_create in two halves, for `run`, whose broker opens its state and
 * log while the sandbox is built (docs/architecture.md, "Starting a run").
 * brk_sbx_begin needs only brk_new_early: it checks spec as brk_sbx_create
 * does (the same refusals, nothing spawned for them) and, when the start
 * needs nothing of the state (the low tier), spawns the stub held before
 * its agent.  brk_sbx_finish, after brk_open: admission, the instance's
 * record, the grants' tokens, the spawn if it waited, the "sandbox.start"
 * line, and only then the word that lets the agent start.  spec must live
 * until brk_sbx_finish returns.  Either failing: the sandbox is gone
 * (killed unstarted, reaped by brk_free), why says why.  A begun sandbox
 * that will not be finished (brk_open failed) goes with brk_sbx_discard.
 */
int brk_sbx_begin(struct brk *b, const struct brk_sbx_spec *spec, struct brk_sbx **out,
    char *why, size_t whylen) CB_WARN_UNUSED;
int brk_sbx_finish(struct brk_sbx *s, char *why, size_t whylen) CB_WARN_UNUSED;
void brk_sbx_discard(struct brk_sbx *s);
void brk_sbx_kill(struct brk_sbx *s, const char *actor);
/* Call fn(s, arg) once when s's agent has exited (after the exit is
 * audited, before its channel is closed). */
void brk_sbx_on_exit(struct brk_sbx *s, void (*fn)(struct brk_sbx *, void *), void *arg);
/* Take the agent's stdio (fds[0] its stdin, [1] stdout, [2] stderr or -1):
 * the caller owns them from now on. */
void brk_sbx_take_stdio(struct brk_sbx *s, int fds[3]);
/* The agent's exit code (valid in the on_exit callback). */
int brk_sbx_exit_code(const struct brk_sbx *s);
/* Its wall-clock limit in seconds, and whether it exited because that ran
 * out (the stub's 124 at the limit; an agent that exits 124 itself, sooner,
 * did not run out). */
uint64_t brk_sbx_wall(const struct brk_sbx *s);
bool brk_sbx_ran_out(const struct brk_sbx *s);

#endif
